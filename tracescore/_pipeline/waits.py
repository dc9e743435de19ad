"""Where a scoring job's time goes: waiting in a judge's queue, or at the judge's server.

A job (one scorer on one request) may wait in tracescore's own queue for a judge whose calls
in flight are limited (``Judge(max_concurrency=...)``), or for the judge's first call to learn
the server's response format, and then wait for the server's answer. Neither is the scorer's
own work, and each call is bounded by its judge's ``timeout``, so the job timeout counts
neither (``tracescore._pipeline.scoring``): it cuts off a scorer that hangs in its own steps, not
one
whose slow local judge is still answering. A timeout says where the time went. The judge records
its waits here (``tracescore._judge``); the scoring call site reads them. Both meet through a
context variable set for the job's task, which the tasks it starts (the judge's shared calls)
inherit. Imports nothing of ours.
"""

from __future__ import annotations

import time
from contextvars import ContextVar


class JobWaits:
    """The judge time of one scoring job, in seconds of ``time.monotonic()``.

    Judge time is wall time while any of the job's judge calls waits in tracescore's queue or
    is at the judge's server (a scorer may make several calls at once); the job timeout does not
    count it, since each call is bounded by its judge's own ``timeout``.

    Attributes:
        queued: seconds the job's calls waited in judge queues (finished waits).
        at_server: seconds the job's calls spent at judge servers (finished calls).
    """

    __slots__ = ("_busy", "_busy_since", "_judge_time", "_queue", "_queued_since", "_queuing",
                 "_server", "_server_since", "_serving", "at_server", "queued")

    def __init__(self) -> None:
        self.queued = 0.0
        self.at_server = 0.0
        self._queuing = self._serving = self._busy = 0
        self._queued_since: float | None = None
        self._server_since: float | None = None
        self._busy_since: float | None = None
        self._judge_time = 0.0
        self._queue = ""
        self._server = ""

    def _enter(self) -> None:
        if self._busy == 0:
            self._busy_since = time.monotonic()
        self._busy += 1

    def _leave(self) -> None:
        self._busy = max(0, self._busy - 1)
        if self._busy == 0 and self._busy_since is not None:
            self._judge_time += time.monotonic() - self._busy_since
            self._busy_since = None

    def queue_started(self, where: str) -> None:
        """A call starts waiting in a judge's queue; ``where`` describes that queue."""
        if self._queuing == 0:
            self._queued_since = time.monotonic()
        self._queuing += 1
        self._queue = where
        self._enter()

    def queue_ended(self) -> None:
        """A wait that ``queue_started`` began is over."""
        self._queuing = max(0, self._queuing - 1)
        if self._queuing == 0 and self._queued_since is not None:
            self.queued += time.monotonic() - self._queued_since
            self._queued_since = None
        self._leave()

    def server_started(self, where: str) -> None:
        """A judge call is sent; ``where`` names the judge."""
        if self._serving == 0:
            self._server_since = time.monotonic()
        self._serving += 1
        self._server = where
        self._enter()

    def server_ended(self) -> None:
        """A call that ``server_started`` began is over."""
        self._serving = max(0, self._serving - 1)
        if self._serving == 0 and self._server_since is not None:
            self.at_server += time.monotonic() - self._server_since
            self._server_since = None
        self._leave()

    def judge_seconds(self) -> float:
        """Seconds of judge time so far (queued or at a server), the current stretch included."""
        now = time.monotonic()
        return self._judge_time + (now - self._busy_since if self._busy_since is not None
                                   else 0.0)

    def describe(self) -> str:
        """Where the job is now and where its time went, for a timeout's message."""
        now = time.monotonic()
        parts = []
        if self._queued_since is not None:
            parts.append(f"it was waiting in tracescore's queue for {self._queue} "
                         f"({now - self._queued_since:.0f} s so far)")
        if self._server_since is not None:
            parts.append(f"its call to {self._server} had been at the server for "
                         f"{now - self._server_since:.0f} s")
        if not parts:
            parts.append("it was running the scorer's own steps, not waiting for a judge")
        queued = self.queued + (now - self._queued_since if self._queued_since is not None
                                else 0.0)
        at_server = self.at_server + (now - self._server_since
                                      if self._server_since is not None else 0.0)
        parts.append(f"its judge calls spent {at_server:.0f} s at the server and {queued:.0f} s "
                     "queued in tracescore (neither counted)")
        return "; ".join(parts)


current: ContextVar[JobWaits | None] = ContextVar("tracescore_job_waits", default=None)
