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

_POLL_INTERVAL = 0.005  # seconds; the added scoring latency is negligible next to a judge call

_workers: weakref.WeakSet[BackgroundWorker] = weakref.WeakSet()


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
        self._ready: deque[Callable[[], Awaitable[Any]]] = deque()
        self._consumers: set[asyncio.Task[None]] = set()
        self._inbox: deque[Callable[[], Awaitable[Any]]] = deque()
        self._wake_scheduled = False
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

    def submit(self, job: Callable[[], Awaitable[Any]]) -> bool:
        """Accept ``job`` (a zero-argument coroutine function) unless the worker is full or
        closed. Never blocks. Returns whether it was accepted.

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
                with self._lock:
                    self._wake_scheduled = False
                    dropped = len(self._inbox)
                    self._inbox.clear()
                for _ in range(dropped):
                    self._done()
                logger.debug("tracescore could not schedule scoring jobs", exc_info=True)
                return False
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
        with self._lock:
            jobs = list(self._inbox)
            self._inbox.clear()
            # While jobs keep coming, poll the inbox every few milliseconds instead of being
            # woken per job: a wake-up is a syscall and a GIL hand-off on the caller's thread.
            # When a poll finds nothing, the next submit() wakes the loop again.
            self._wake_scheduled = bool(jobs)
        self._ready.extend(jobs)
        loop = asyncio.get_running_loop()
        if jobs:
            loop.call_later(_POLL_INTERVAL, self._drain)
        # A consumer runs jobs until none is ready, so each new job needs at most one more, and
        # never more than ``concurrency`` run: a huge setting costs nothing until jobs arrive.
        for _ in range(min(self.concurrency - len(self._consumers), len(jobs))):
            self._consumers.add(loop.create_task(self._consume()))

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
            self._inbox.clear()
            self._pending = 0
            self._idle.notify_all()
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


def _clamp(seconds: float) -> float:
    """``seconds`` within what ``threading`` waits accept (NaN counts as 0)."""
    return min(seconds, threading.TIMEOUT_MAX) if seconds > 0 else 0.0


def _reset_workers_after_fork() -> None:
    for worker in list(_workers):
        worker._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_workers_after_fork)
