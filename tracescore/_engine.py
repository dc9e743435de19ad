"""The scoring engine: one bounded queue of jobs, run on the one tracescore loop.

A job is one scorer on one ``ScoringRequest``. ``submit()`` never blocks: it takes places for all
of a request's jobs at once or refuses them (the caller counts the skip). Jobs run as tasks on
the process's tracescore loop (``_loop``), at most ``concurrency`` at a time, each cut off after
``job_timeout``; every finished job's ``ScoreOutcome`` goes to each writer in turn. The engine
knows nothing of spans: where an outcome lands is the writers' business.

The shape follows the OpenTelemetry SDK's ``BatchSpanProcessor``: a deque guarded by a lock,
drained by one consumer thread (here the loop), a condition to wait for idleness. While work
comes in, the loop polls the deque (every 5 ms after work, backing off to 100 ms, stopping 2 s
after the last job) so that a submitting thread rarely pays for a cross-thread wake-up, which on
a cold cache costs the decorated call tens of microseconds.
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

from . import _loop
from ._request import ScoringRequest
from ._rules import CompiledRule

logger = logging.getLogger("tracescore")

_POLL_INTERVAL = 0.005
_POLL_MAX_INTERVAL = 0.1
_POLL_LINGER = 2.0

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


class Deferred:
    """Jobs to be built on the loop thread, off the submitting thread, when a consumer takes
    the first of them: a subclass sets ``rules`` and implements ``build`` (the span
    processor's holds all a waiting span needs in one object, since every object a waiting
    span keeps is one more for the garbage collector to walk; built jobs and requests would add
    three per waiting span).

    Attributes:
        rules: the rules whose jobs ``build`` makes, one place each in the queue (they name
            the jobs counted as dropped if the engine stops before building them).
    """

    __slots__ = ("rules",)
    rules: Sequence[CompiledRule]

    def build(self) -> Sequence[Job]:
        """The jobs, one per rule, in order; called once on the loop thread."""
        raise NotImplementedError("Deferred.build")


def _scorer_ids(item: Job | Deferred) -> list[str]:
    if isinstance(item, Deferred):
        return [rule.scorer_id for rule in item.rules]
    return [item.rule.scorer_id]


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
        feed: called on the loop thread at every drain, before the queue is read: it may
            ``submit()`` work of its own (the span processor routes the spans that ended since,
            see ``ScoringSpanProcessor.on_end``) and returns how many items it took, which
            keep the loop polling as jobs do.
        feed_waiting: whether ``feed`` has items waiting; asked before the loop stops polling,
            so that an item added as it stops is not left behind (its producer calls ``wake()``
            when it sees the loop not polling).
    """

    def __init__(self, writers: Sequence[Any], *, concurrency: int, max_queue_size: int,
                 job_timeout: float | None = None,
                 on_drain: Callable[[], None] | None = None,
                 feed: Callable[[], int] | None = None,
                 feed_waiting: Callable[[], bool] | None = None) -> None:
        self.writers = list(writers)
        self.concurrency = max(1, int(concurrency))
        self.max_queue_size = max(1, int(max_queue_size))
        self.job_timeout = job_timeout
        self._on_drain = on_drain
        self._feed = feed
        self._feed_waiting = feed_waiting
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._inbox: deque[Job | Deferred] = deque()
        self._pending = 0
        self._polling = False
        self._closed = False
        # Loop-thread only.
        self._ready: deque[Job | Deferred] = deque()
        self._consumers: set[asyncio.Task[None]] = set()
        self._running: dict[asyncio.Task[None], Job] = {}
        self._poll_delay = _POLL_INTERVAL
        self._last_work = 0.0
        self._score: Any = None
        _engines.add(self)

    @property
    def pending(self) -> int:
        """Jobs accepted and not finished."""
        return self._pending

    @property
    def polling(self) -> bool:
        """Whether the loop reads the queue and the feed by itself now (no ``wake()`` needed).
        Read without the lock: a producer that adds to the feed and then sees False calls
        ``wake()``, and the loop asks ``feed_waiting`` after it stops polling."""
        return self._polling

    def wake(self) -> bool:
        """Make the loop drain (and so run the feed) soon, unless it polls already. Never
        blocks. False when there is no loop to wake (closed, or none can run): the caller
        then does the feed's work itself."""
        with self._lock:
            if self._closed:
                return False
            if self._polling:
                return True
            self._polling = True
        try:
            _loop.get_loop().call_soon_threadsafe(self._drain)
        except Exception:
            with self._lock:
                self._polling = False
            logger.debug("tracescore could not wake its scoring loop", exc_info=True)
            return False
        return True

    def submit(self, jobs: Sequence[Job] | Deferred) -> bool:
        """Accept all of ``jobs`` (or of the jobs a ``Deferred`` will build) or none. Never
        blocks. False when closed or when they do not fit in the queue."""
        places = len(jobs.rules) if isinstance(jobs, Deferred) else len(jobs)
        if not places:
            return True
        with self._lock:
            if self._closed or self._pending + places > self.max_queue_size:
                return False
            self._pending += places
            if isinstance(jobs, Deferred):
                self._inbox.append(jobs)
            else:
                self._inbox.extend(jobs)
            wake = not self._polling
            self._polling = True
        if wake:
            try:
                _loop.get_loop().call_soon_threadsafe(self._drain)
            except Exception:
                # No loop (no file descriptors left, or the interpreter is exiting): take the
                # jobs back, so the caller exports the span unscored and counts the skip.
                with self._lock:
                    self._polling = False
                    for item in ([jobs] if isinstance(jobs, Deferred) else jobs):
                        with contextlib.suppress(ValueError):
                            self._inbox.remove(item)
                    self._pending -= places
                    self._idle.notify_all()
                logger.debug("tracescore could not schedule scoring jobs", exc_info=True)
                return False
        return True

    def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        fed = 0
        if self._feed is not None:
            try:
                fed = self._feed()
            except Exception:
                logger.warning("tracescore: routing ended spans failed", exc_info=True)
        with self._lock:
            taken = list(self._inbox)
            self._inbox.clear()
            now = time.monotonic()
            if taken or fed:
                self._last_work = now
                self._poll_delay = _POLL_INTERVAL
            else:
                self._poll_delay = min(self._poll_delay * 2, _POLL_MAX_INTERVAL)
            # Go on polling (submit() need not wake us) until work stops coming.
            self._polling = not self._closed and now - self._last_work < _POLL_LINGER
            if (not self._polling and not self._closed and self._feed_waiting is not None
                    and self._feed_waiting()):
                # An item came in after the feed ran, and its producer saw us polling.
                self._polling = True
                self._poll_delay = _POLL_INTERVAL
            poll = self._polling
        if not taken:
            self._next_drain(loop, poll)
            return
        if self._on_drain is not None:
            try:
                self._on_drain()
            except Exception:
                logger.warning("tracescore: a scoring hook failed", exc_info=True)
        added = 0
        for item in taken:
            # A Deferred waits as it is: its jobs are built when a consumer takes it.
            self._ready.append(item)
            added += len(item.rules) if isinstance(item, Deferred) else 1
        # A consumer runs jobs until none is ready, so each new job needs at most one more.
        for _ in range(min(self.concurrency - len(self._consumers), added)):
            self._consumers.add(loop.create_task(self._consume()))
        self._next_drain(loop, poll)

    def _next_drain(self, loop: asyncio.AbstractEventLoop, poll: bool) -> None:
        """Schedule the next poll: at once when the feed left items (it takes a batch at a
        time) and no job waits to start, else a poll interval later (jobs first: under
        sustained load the loop keeps running jobs between batches)."""
        if not poll:
            return
        if not self._ready and self._feed_waiting is not None and self._feed_waiting():
            loop.call_soon(self._drain)
        else:
            loop.call_later(self._poll_delay, self._drain)

    def _build(self, deferred: Deferred) -> list[Job]:
        """The jobs of ``deferred``; places it reserved and did not use are given back."""
        try:
            jobs = list(deferred.build())[:len(deferred.rules)]
        except Exception:
            logger.warning("tracescore could not prepare a scoring request; the span is "
                           "exported at its deadline and the application is unaffected",
                           exc_info=True)
            jobs = []
        for _ in range(len(deferred.rules) - len(jobs)):
            self._done()
        return jobs

    async def _consume(self) -> None:
        task = asyncio.current_task()
        assert task is not None
        try:
            while self._ready:
                item = self._ready.popleft()
                if isinstance(item, Deferred):
                    jobs = self._build(item)
                    if not jobs:
                        continue
                    job = jobs[0]
                    # The rest go first in line, in order: one span's jobs stay together.
                    self._ready.extendleft(reversed(jobs[1:]))
                else:
                    job = item
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
                self._done()
        finally:
            self._consumers.discard(task)

    async def _run(self, job: Job) -> None:
        score = self._score
        if score is None:
            # Imported on first use: keeps the scoring code off `import tracescore`.
            from ._scoring import score as score

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

    def _done(self) -> None:
        with self._lock:
            self._pending = max(0, self._pending - 1)
            if self._pending == 0:
                self._idle.notify_all()

    def wait_idle(self, timeout: float | None) -> bool:
        """Block until no job is pending or ``timeout`` seconds pass. True when idle."""
        deadline = None if timeout is None else time.monotonic() + _clamp(timeout)
        with self._lock:
            while self._pending > 0:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._idle.wait(None if remaining is None else _clamp(remaining))
            return True

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
            dropped = Counter(i for item in self._inbox for i in _scorer_ids(item))
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
        dropped = Counter(i for item in self._ready for i in _scorer_ids(item))
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
        self._polling = False
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
