"""Where a scoring job's time goes: waiting in a judge's queue, or at the judge's server.

A job (one scorer on one request) may wait in tracescore's own queue for a judge whose calls
in flight are limited (``Judge(max_concurrency=...)``), or for the judge's first call to learn
the server's response format. That wait is not the scorer's work, so the job timeout does not
count it (``tracescore._scoring``), and a timeout says where the time went. The judge records
its waits here (``tracescore._judge``); the scoring call site reads them. Both meet through a
context variable set for the job's task, which the tasks it starts (the judge's shared calls)
inherit. Imports nothing of ours.
"""

from __future__ import annotations

import time
from contextvars import ContextVar


class JobWaits:
    """The waits of one scoring job, in seconds of ``time.monotonic()``.

    Attributes:
        queued: seconds spent waiting in judge queues, finished waits only.
        at_server: seconds judge calls spent at their servers, finished calls only.
    """

    __slots__ = ("_queue", "_queued_since", "_queuing", "_server", "_server_since", "at_server",
                 "queued")

    def __init__(self) -> None:
        self.queued = 0.0
        self.at_server = 0.0
        self._queued_since: float | None = None
        self._queuing = 0  # waits in progress: a scorer may make several calls at once
        self._queue = ""
        self._server_since: float | None = None
        self._server = ""

    def queue_started(self, where: str) -> None:
        """A wait in a judge's queue begins; ``where`` describes that queue. The job counts as
        queued while any of its calls waits."""
        if self._queuing == 0:
            self._queued_since = time.monotonic()
        self._queuing += 1
        self._queue = where

    def queue_ended(self) -> None:
        """A wait that ``queue_started`` began is over."""
        self._queuing = max(0, self._queuing - 1)
        if self._queuing == 0 and self._queued_since is not None:
            self.queued += time.monotonic() - self._queued_since
            self._queued_since = None

    def server_started(self, where: str) -> None:
        """A judge call is sent; ``where`` names the judge."""
        self._server_since = time.monotonic()
        self._server = where

    def server_ended(self) -> None:
        """The call that ``server_started`` began is over."""
        if self._server_since is not None:
            self.at_server += time.monotonic() - self._server_since
            self._server_since = None

    def queued_seconds(self) -> float:
        """Seconds spent in judge queues so far, the current wait included."""
        now = time.monotonic()
        return self.queued + (now - self._queued_since if self._queued_since is not None else 0.0)

    def describe(self) -> str:
        """Where the job is now and where its time went, for a timeout's message."""
        now = time.monotonic()
        parts = []
        if self._queued_since is not None:
            parts.append(f"it was waiting in tracescore's queue for {self._queue} "
                         f"({now - self._queued_since:.0f} s so far)")
        elif self._server_since is not None:
            parts.append(f"its call to {self._server} had been at the server for "
                         f"{now - self._server_since:.0f} s")
        at_server = self.at_server + (now - self._server_since
                                      if self._server_since is not None else 0.0)
        parts.append(f"judge calls spent {at_server:.0f} s at the server and "
                     f"{self.queued_seconds():.0f} s queued in tracescore (not counted)")
        return "; ".join(parts)


current: ContextVar[JobWaits | None] = ContextVar("tracescore_job_waits", default=None)
