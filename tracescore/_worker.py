"""A background thread running an asyncio loop for scoring jobs.

Bounded: at most ``max_queue_size`` jobs are accepted at once (queued plus running) and at most
``concurrency`` run at a time, each on a task started when there is work for it. ``submit``
never blocks; it refuses a job when full, and the caller counts the skip. Whatever a job raises
(``BaseException`` included) is logged and the loop goes on. The thread starts on first use and
again after ``fork()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

logger = logging.getLogger("tracescore")

# The loop takes its inbox by polling while work comes in, so the threads that submit jobs rarely
# pay for a cross-thread wake-up (a syscall, and on a cold cache tens of microseconds of the
# decorated call). Seconds: the first poll after work; empty polls back off to the maximum; after
# _POLL_LINGER without work the loop stops polling and the next submit() wakes it. The added
# scoring latency is negligible next to a judge call.
_POLL_INTERVAL = 0.005
_POLL_MAX_INTERVAL = 0.1
_POLL_LINGER = 2.0

_workers: weakref.WeakSet[BackgroundWorker] = weakref.WeakSet()

Job = Callable[[], Awaitable[Any]]


# What Admission.admit() returns when another thread claimed the admission first (and with it
# the admission's place in the queue).
CLAIMED: Any = object()


class Admission:
    """Work handed to the loop thread to turn into a job there, off the caller's thread.

    ``admit()`` runs on the loop thread as soon as the loop takes its inbox (before any queued
    job starts) and returns the job that takes the admission's place in the queue, None (the
    place is released), or ``CLAIMED`` (another thread took the admission and its place, see
    ``requeue``/``release``). ``drop()`` runs instead when the worker stops, or fails to start,
    before the admission ran. Neither may block.
    """

    __slots__ = ()

    def admit(self) -> Any:  # pragma: no cover - interface
        raise NotImplementedError

    def drop(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError


class BackgroundWorker:
    """Runs coroutine factories on a private event loop in a daemon thread.

    Args:
        concurrency: jobs running at once (>= 1).
        max_queue_size: jobs accepted at once, queued plus running (>= 1).
        name: the thread's name.
    """

    def __init__(self, concurrency: int, max_queue_size: int, name: str = "tracescore-scoring"):
        self.concurrency = max(1, int(concurrency))
        self.max_queue_size = max(1, int(max_queue_size))
        self.name = name
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._pending = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        # Loop-thread only: jobs handed over by _drain, and the consumer tasks running them.
        self._ready: deque[Job] = deque()
        self._consumers: set[asyncio.Task[None]] = set()
        self._inbox: deque[Job | Admission] = deque()
        self._wake_scheduled = False
        self._poll_delay = _POLL_INTERVAL
        self._last_work = 0.0
        self._closed = False
        _workers.add(self)

    @property
    def pending(self) -> int:
        """Jobs accepted and not finished."""
        return self._pending

    def _ensure_started(self) -> asyncio.AbstractEventLoop:
        loop = self._loop
        if loop is not None:
            return loop
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            try:
                new_loop = asyncio.new_event_loop()
                asyncio.set_event_loop(new_loop)
            except BaseException as exc:  # e.g. out of file descriptors: tell the caller
                failure.append(exc)
                ready.set()
                return
            self._loop = new_loop
            ready.set()
            try:
                new_loop.run_forever()
            finally:
                with contextlib.suppress(Exception):
                    new_loop.run_until_complete(new_loop.shutdown_asyncgens())
                new_loop.close()

        self._thread = threading.Thread(target=run, name=self.name, daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._thread = None
            raise RuntimeError("tracescore could not start its scoring loop") from failure[0]
        assert self._loop is not None
        return self._loop

    def submit(self, job: Job | Admission) -> bool:
        """Accept ``job`` (a zero-argument coroutine function, or an ``Admission`` that becomes
        one on the loop thread) unless the worker is full or closed. Never blocks. Returns
        whether it was accepted; an accepted admission holds one place in the queue until it
        ran (its job takes that place) or was dropped.

        Jobs are handed over in batches: only the first job after the loop drained its inbox
        wakes the loop, so a burst of spans costs one cross-thread wake-up, not one each.
        """
        with self._lock:
            if self._closed or self._pending >= self.max_queue_size:
                return False
            self._pending += 1
            self._inbox.append(job)
            wake = not self._wake_scheduled
            self._wake_scheduled = True
        if wake:
            try:
                loop = self._loop or self._start_locked()
                loop.call_soon_threadsafe(self._drain)
            except Exception:
                # No loop to run them (e.g. no file descriptors left): nothing handed over since
                # the last wake-up will run. Admissions are dropped (their spans exported).
                with self._lock:
                    self._wake_scheduled = False
                    dropped = list(self._inbox)
                    self._inbox.clear()
                for item in dropped:
                    if isinstance(item, Admission):
                        try:
                            item.drop()
                        except Exception:
                            logger.debug("tracescore failed to drop a job", exc_info=True)
                    self._done()
                logger.debug("tracescore could not schedule scoring jobs", exc_info=True)
                return False
        return True

    def release(self) -> None:
        """Give back the place of an admission claimed by another thread that left no job."""
        self._done()

    def requeue(self, job: Job) -> bool:
        """Queue ``job`` in the place of an admission claimed by another thread (already
        counted in ``pending``). False when closed: then ``release()`` the place."""
        with self._lock:
            if self._closed:
                return False
            self._inbox.append(job)
            wake = not self._wake_scheduled
            self._wake_scheduled = True
        if wake:
            try:
                loop = self._loop or self._start_locked()
                loop.call_soon_threadsafe(self._drain)
            except Exception:
                with self._lock:
                    self._wake_scheduled = False
                logger.debug("tracescore could not wake its scoring loop", exc_info=True)
        return True

    def _start_locked(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            return self._ensure_started()

    def call_at_monotonic(self, when: float, callback: Callable[[], Any]) -> None:
        """Run ``callback()`` on the worker thread at ``time.monotonic()`` ``when``."""
        with self._lock:
            if self._closed:
                return
        loop = self._loop or self._start_locked()
        delay = max(0.0, when - time.monotonic())
        if threading.current_thread() is self._thread:
            loop.call_later(delay, callback)
        else:
            loop.call_soon_threadsafe(loop.call_later, delay, callback)

    def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        took = False
        added = 0
        while True:
            with self._lock:
                items = list(self._inbox)
                self._inbox.clear()
                if not items:
                    now = time.monotonic()
                    if took:
                        self._last_work = now
                        self._poll_delay = _POLL_INTERVAL
                    else:
                        self._poll_delay = min(self._poll_delay * 2, _POLL_MAX_INTERVAL)
                    # Go on polling (submit() need not wake us) until work stops coming.
                    poll = not self._closed and now - self._last_work < _POLL_LINGER
                    self._wake_scheduled = poll
                    break
            took = True
            for item in items:
                if isinstance(item, Admission):
                    job = self._admit(item)
                    if job is CLAIMED:
                        continue
                    if job is None:
                        self._done()
                        continue
                    item = job
                self._ready.append(item)
                added += 1
        if poll:
            loop.call_later(self._poll_delay, self._drain)
        # A consumer runs jobs until none is ready, so each new job needs at most one more, and
        # never more than ``concurrency`` run: a huge setting costs nothing until jobs arrive.
        for _ in range(min(self.concurrency - len(self._consumers), added)):
            self._consumers.add(loop.create_task(self._consume()))

    @staticmethod
    def _admit(admission: Admission) -> Any:
        try:
            return admission.admit()
        except BaseException:  # noqa: BLE001 - nothing may take the loop down
            logger.warning("tracescore failed to admit a scoring job; the application is "
                           "unaffected", exc_info=True)
            with contextlib.suppress(BaseException):
                admission.drop()
            return None

    async def _consume(self) -> None:
        try:
            await self._consume_ready()
        finally:
            # In the same step as the emptiness check: _drain never counts a consumer that is
            # about to leave.
            task = asyncio.current_task()
            if task is not None:
                self._consumers.discard(task)

    async def _consume_ready(self) -> None:
        while self._ready:
            job = self._ready.popleft()
            try:
                await job()
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise  # this consumer is being stopped (shutdown)
                logger.warning("tracescore scoring job raised CancelledError; the application "
                               "is unaffected", exc_info=True)
            except BaseException:  # noqa: BLE001 - a job must never take the loop down
                logger.warning("tracescore scoring job failed; the application is unaffected",
                               exc_info=True)
            finally:
                self._done()

    def _done(self) -> None:
        with self._lock:
            self._pending = max(0, self._pending - 1)
            if self._pending <= 0:
                self._idle.notify_all()

    def wait_idle(self, timeout: float | None) -> bool:
        """Block until no job is pending or ``timeout`` seconds pass. Returns True when idle."""
        deadline = None if timeout is None else time.monotonic() + _clamp(timeout)
        with self._lock:
            while self._pending > 0:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._idle.wait(None if remaining is None else _clamp(remaining))
            return True

    def shutdown(self, timeout: float | None = 5.0) -> bool:
        """Wait up to ``timeout`` seconds for pending jobs, then stop the loop. Jobs still
        running are cancelled, jobs not started are dropped. Returns True when every job
        finished. Waits for the thread itself at most a second, and never past ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + _clamp(timeout)
        idle = self.wait_idle(timeout)
        with self._lock:
            self._closed = True
            loop, thread = self._loop, self._thread
        if loop is not None and thread is not None and thread.is_alive():

            def stop() -> None:
                self._ready.clear()
                for task in asyncio.all_tasks(loop):
                    task.cancel()
                loop.stop()

            with contextlib.suppress(RuntimeError):  # the loop is already closed
                loop.call_soon_threadsafe(stop)
            left = 1.0 if deadline is None else min(1.0, max(0.0, deadline - time.monotonic()))
            thread.join(timeout=left)
        with self._lock:
            # Dropped jobs never finish: nobody must wait for them.
            dropped = [item for item in self._inbox if isinstance(item, Admission)]
            self._inbox.clear()
            self._pending = 0
            self._idle.notify_all()
        for admission in dropped:
            try:
                admission.drop()
            except Exception:
                logger.warning("tracescore failed to release a dropped scoring job",
                               exc_info=True)
        return idle

    def _after_fork_in_child(self) -> None:
        # The thread and its loop did not survive fork(); start afresh on next use.
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._pending = 0
        self._loop = None
        self._thread = None
        self._ready = deque()
        self._consumers = set()
        self._inbox = deque()
        self._wake_scheduled = False
        self._poll_delay = _POLL_INTERVAL
        self._last_work = 0.0


def _clamp(seconds: float) -> float:
    """``seconds`` within what ``threading`` waits accept (NaN counts as 0)."""
    return min(seconds, threading.TIMEOUT_MAX) if seconds > 0 else 0.0


def _reset_workers_after_fork() -> None:
    for worker in list(_workers):
        worker._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_workers_after_fork)
