"""The scoring engine: one bounded queue of jobs, run on the one tracescore loop.

A job is one scorer on one ``ScoringRequest``. ``submit()`` never blocks: it takes places for all
of a request's jobs at once or refuses them (the caller counts the skip). Jobs run as tasks on
the process's tracescore loop (``_loop``), at most ``concurrency`` at a time, each cut off after
``job_timeout``; every finished job's ``ScoreOutcome`` goes to each writer in turn. The engine
knows nothing of spans: where an outcome lands is the writers' business.

The shape follows the OpenTelemetry SDK's ``BatchSpanProcessor``: a deque guarded by a lock,
drained by one consumer (here the loop), a condition to wait for idleness. Nothing polls: the
first ``submit()`` after a drain schedules the next one (``call_soon_threadsafe``), and jobs
submitted before it runs ride along.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import threading
import time
import weakref
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tracescore._core import loop as _loop
from tracescore._pipeline import runtime as _runtime
from tracescore._pipeline.request import ScoringRequest
from tracescore._pipeline.rules import CompiledRule

logger = logging.getLogger("tracescore")

_engines: weakref.WeakSet[Engine] = weakref.WeakSet()


@dataclass(frozen=True)
class Job:
    """One scorer on one request.

    Attributes:
        request: what is scored.
        rule: the rule that selected it (scorer, threshold, extractors, budget).
        on_error: selected only because the operation failed (``score_errors``).
        source: the span the request was read from, for the rule's user extractors; None when
            there is none.
    """

    request: ScoringRequest
    rule: CompiledRule
    on_error: bool = False
    source: Any = None


def _scorer_ids(job: Job) -> list[str]:
    return [job.rule.scorer_id]


class Engine:
    """Runs scoring jobs in the background and hands their outcomes to writers.

    Args:
        writers: objects with ``write(outcome)``, called on the loop thread in order; each
            must not block. A writer that raises is logged and the others still run.
        concurrency: jobs running at once (>= 1).
        max_queue_size: jobs accepted at once, queued plus running (>= 1).
        job_timeout: seconds a job may run before it is cancelled and reported with
            ``error.type=timeout``; None for no limit.
        on_drain: called on the loop thread each time the loop takes new jobs (the span
            processor arms its deadline sweep there, off the caller's thread).
        runtime: the runtime the jobs run for: their scorers and judge read its input caps,
            default judge and telemetry (``tracescore._pipeline.runtime.current``); None: the
            process's.
    """

    def __init__(self, writers: Sequence[Any], *, concurrency: int, max_queue_size: int,
                 job_timeout: float | None = None,
                 on_drain: Callable[[], None] | None = None, runtime: Any = None) -> None:
        self.writers = list(writers)
        self.runtime = runtime
        self.concurrency = max(1, int(concurrency))
        self.max_queue_size = max(1, int(max_queue_size))
        self.job_timeout = job_timeout
        self._on_drain = on_drain
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._inbox: deque[tuple[int, Job]] = deque()  # (sequence number, job)
        self._pending = 0
        # Jobs accepted so far, and the sequence numbers of those not finished, in the order
        # they were accepted: a flush waits for the jobs accepted before its mark, not for the
        # queue to be empty, which under a steady stream of spans it never is.
        self._accepted = 0
        self._open: dict[int, None] = {}
        self._mark_waiters = 0
        self._scheduled = False  # a drain is scheduled on the loop
        self._closed = False
        # Loop-thread only.
        self._ready: deque[tuple[int, Job]] = deque()
        self._consumers: set[asyncio.Task[None]] = set()
        self._running: dict[asyncio.Task[None], Job] = {}
        self._score: Any = None
        _engines.add(self)

    @property
    def pending(self) -> int:
        """Jobs accepted and not finished."""
        return self._pending

    def submit(self, jobs: Sequence[Job]) -> bool:
        """Accept all of ``jobs`` or none. Never blocks. False when closed, when they do not fit
        in the queue, or when no loop can run them (the caller counts the skip)."""
        places = len(jobs)
        if not places:
            return True
        with self._lock:
            if self._closed or self._pending + places > self.max_queue_size:
                return False
            self._pending += places
            first = self._accepted
            self._accepted += places
            numbered = list(zip(range(first, first + places), jobs, strict=True))
            self._open.update(dict.fromkeys(range(first, first + places)))
            self._inbox.extend(numbered)
            wake = not self._scheduled
            self._scheduled = True
        if wake:
            try:
                _loop.get_loop().call_soon_threadsafe(self._drain)
            except Exception:
                # No loop (no file descriptors left, or the interpreter is exiting): take the
                # jobs back, so the caller exports the span unscored and counts the skip.
                with self._lock:
                    self._scheduled = False
                    for item in numbered:
                        with contextlib.suppress(ValueError):
                            self._inbox.remove(item)
                        self._open.pop(item[0], None)
                    self._pending -= places
                    self._idle.notify_all()
                logger.debug("tracescore could not schedule scoring jobs", exc_info=True)
                return False
        return True

    def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            taken = list(self._inbox)
            self._inbox.clear()
            self._scheduled = False
        if not taken:
            return
        if self._on_drain is not None:
            try:
                self._on_drain()
            except Exception:
                logger.warning("tracescore: a scoring hook failed", exc_info=True)
        self._ready.extend(taken)
        # A consumer runs jobs until none is ready, so each new job needs at most one more.
        for _ in range(min(self.concurrency - len(self._consumers), len(taken))):
            self._consumers.add(loop.create_task(self._consume()))

    async def _consume(self) -> None:
        task = asyncio.current_task()
        assert task is not None
        _runtime.run_jobs_for(self.runtime)  # this task's context only
        try:
            while self._ready:
                number, job = self._ready.popleft()
                self._running[task] = job
                try:
                    await self._run(job)
                except asyncio.CancelledError:
                    if task.cancelling():
                        raise  # shutdown: the job is dropped, and counted there
                    logger.warning("tracescore scoring job raised CancelledError; the "
                                   "application is unaffected", exc_info=True)
                except BaseException:  # noqa: BLE001 - a job must never take the loop down
                    logger.warning("tracescore scoring job failed; the application is "
                                   "unaffected", exc_info=True)
                self._running.pop(task, None)
                self._done(number)
        finally:
            self._consumers.discard(task)

    async def _run(self, job: Job) -> None:
        score = self._score
        if score is None:
            # Imported on first use: keeps the scoring code off `import tracescore`.
            from tracescore._pipeline.scoring import score as score

            self._score = score
        outcome = await score(job.request, job.rule, job_timeout=self.job_timeout,
                              on_error=job.on_error, source=job.source)
        job.rule.spend(outcome.result)
        for writer in self.writers:
            try:
                writer.write(outcome)
            except Exception:
                logger.warning("tracescore could not write a score with %s; the application "
                               "is unaffected", type(writer).__name__, exc_info=True)

    def _done(self, number: int) -> None:
        with self._lock:
            self._pending = max(0, self._pending - 1)
            self._open.pop(number, None)
            if self._pending == 0 or self._mark_waiters:
                self._idle.notify_all()

    def mark(self) -> int:
        """A mark past every job accepted so far (for ``wait_idle``)."""
        with self._lock:
            return self._accepted

    def wait_idle(self, timeout: float | None, mark: int | None = None) -> bool:
        """Block until no job is pending (with ``mark``: until every job accepted before the
        ``mark()`` it took has finished) or ``timeout`` seconds pass. True when done."""
        deadline = None if timeout is None else time.monotonic() + _clamp(timeout)
        with self._lock:
            self._mark_waiters += mark is not None
            try:
                while (self._pending > 0 if mark is None
                       else next(iter(self._open), mark) < mark):
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return False
                    self._idle.wait(None if remaining is None else _clamp(remaining))
                return True
            finally:
                self._mark_waiters -= mark is not None

    def shutdown(self, timeout: float | None,
                 on_late_drop: Callable[[Counter[str]], None] | None = None) -> Counter[str]:
        """Wait up to ``timeout`` seconds for pending jobs, then refuse new ones, cancel those
        running and drop those queued. Returns the jobs that never finished, by scorer id.

        When the loop cannot stop its jobs before the deadline (a scorer blocks it), they are
        stopped once it can, and ``on_late_drop`` gets their count then. On the loop's own
        thread (a scorer or an ``on_score`` callback shutting down) it does not wait for jobs:
        they could only finish once it returns."""
        deadline = None if timeout is None else time.monotonic() + _clamp(timeout)
        on_loop = _loop.is_loop_thread()
        if not on_loop:
            self.wait_idle(timeout)
        with self._lock:
            self._closed = True
            dropped = Counter(i for _, job in self._inbox for i in _scorer_ids(job))
            self._inbox.clear()
        if on_loop:
            dropped += self._stop_jobs()
        else:
            try:
                future = asyncio.run_coroutine_threadsafe(self._astop(), _loop.get_loop())
            except Exception:
                logger.debug("tracescore could not stop its scoring jobs", exc_info=True)
            else:
                left = 1.0 if deadline is None else max(0.0, deadline - time.monotonic())
                try:
                    dropped += future.result(timeout=min(left, 1.0))
                except Exception:
                    logger.debug("tracescore could not stop its scoring jobs in time",
                                 exc_info=True)
                    if on_late_drop is not None:
                        future.add_done_callback(functools.partial(_late_drop, on_late_drop))
        with self._lock:
            self._pending = 0
            self._open.clear()
            self._idle.notify_all()
        return dropped

    async def _astop(self) -> Counter[str]:
        dropped = self._stop_jobs()
        consumers = list(self._consumers)
        if consumers:
            # A scorer that swallows cancellation is abandoned here, not waited for.
            await asyncio.wait(consumers, timeout=0.5)
        return dropped

    def _stop_jobs(self) -> Counter[str]:
        # The task calling this (a job whose scorer or writer shuts down) finishes its job:
        # it is neither cancelled nor counted as dropped.
        current = asyncio.current_task()
        dropped = Counter(i for _, job in self._ready for i in _scorer_ids(job))
        dropped.update(job.rule.scorer_id for task, job in self._running.items()
                       if task is not current)
        self._ready.clear()
        self._running.clear()
        for task in list(self._consumers):
            if task is not current:
                task.cancel()
        return dropped

    def _after_fork_in_child(self) -> None:
        # The loop's thread did not survive fork(); the parent runs the jobs it accepted.
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._inbox = deque()
        self._pending = 0
        self._accepted = 0
        self._open = {}
        self._mark_waiters = 0
        self._scheduled = False
        self._ready = deque()
        self._consumers = set()
        self._running = {}


def _late_drop(report: Callable[[Counter[str]], None], future: Any) -> None:
    """Report the jobs a late ``_astop`` dropped (see ``Engine.shutdown``)."""
    if future.cancelled() or future.exception() is not None:
        return
    try:
        report(future.result())
    except Exception:
        logger.debug("tracescore could not count dropped scoring jobs", exc_info=True)


def _clamp(seconds: float) -> float:
    """``seconds`` within what ``threading`` waits accept (NaN counts as 0)."""
    return min(seconds, threading.TIMEOUT_MAX) if seconds > 0 else 0.0


def _reset_engines_after_fork() -> None:
    for engine in list(_engines):
        engine._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_engines_after_fork)
