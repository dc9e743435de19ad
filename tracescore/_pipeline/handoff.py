"""Ended spans handed from the threads that end them to one routing thread, in end order.

The scoring processor's ``on_end`` does on the calling thread only what must happen there (the
trace's sampling decision, a look-up once per trace; the decorator's record; the note of a
counted model call) and appends the span here; the ``tracescore-route`` thread counts, reads,
matches, holds and exports it (``processor.ScoringSpanProcessor._route_handed``), as the SDK's
``BatchSpanProcessor`` hands spans to its export thread. The thread is woken once per batch:
by the first span after it went idle, after which it lets spans gather for ``GATHER``
seconds, or earlier when ``WAKE_AT`` wait; so a stream of spans costs one wake-up per batch,
not one per span. A flush routes what still waits on its own thread (``drain``).
Past ``max_waiting`` spans the caller routes the span itself (``work`` on its own thread)
instead of letting the queue grow.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("tracescore")

# Spans waiting for the routing thread at most; past it the calling thread routes its span.
MAX_WAITING = 8_192
# Spans waiting that wake the routing thread while it lets a batch gather.
WAKE_AT = 512
# Seconds the routing thread lets a batch gather after its first span (the latency it adds
# before a span is scored or exported; the SDK's BatchSpanProcessor waits up to 5 s).
GATHER = 0.05
# Seconds a flush waits at least for the batch the routing thread is on (routing never waits
# on anything, so a batch takes milliseconds) before it routes what is left itself.
_BATCH_WAIT = 1.0


class Handoff:
    """A queue of ended spans and the one thread that works through it.

    Args:
        work: called on the routing thread with each item, in the order they were put; must
            not raise (exceptions are logged).
        max_waiting: items waiting at most before ``put`` runs ``work`` on the caller's thread.
    """

    def __init__(self, work: Callable[[Any], None], max_waiting: int = MAX_WAITING) -> None:
        self._work = work
        self.max_waiting = max_waiting
        self._init_state()

    def _init_state(self) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._items: deque[Any] = deque()
        # Items appended to the queue so far, and those of them worked on (by the thread or a
        # flush, in order): a flush waits for the mark it took, not for the queue to empty,
        # which under a steady stream of spans never happens.
        self._queued = 0
        self._worked = 0
        self._waiting = False  # the thread waits for a first item (it must be woken)
        self._gathering = False  # the thread lets a batch gather (woken at WAKE_AT items)
        self._hurry = False  # someone waits for the queue to empty: no gathering
        self._busy = False  # the thread works on items taken off the queue
        self._draining = False  # a flush works on them on its own thread (``drain``)
        self._drainer: int | None = None  # that thread's id
        self._stopped = False
        self._thread: threading.Thread | None = None

    def put(self, item: Any) -> None:
        """Hand ``item`` to the routing thread (or, past ``max_waiting``, work on it here)."""
        with self._lock:
            if self._stopped or len(self._items) >= self.max_waiting:
                inline = True
            else:
                inline = False
                self._items.append(item)
                self._queued += 1
                if self._thread is None:
                    inline = not self._start()
                elif self._waiting or (self._gathering and len(self._items) >= WAKE_AT):
                    self._waiting = self._gathering = False
                    self._changed.notify_all()
        if inline:
            self._call(item)

    def _start(self) -> bool:
        """Start the routing thread (holding ``_lock``, with the first item queued); False,
        the item taken back, when the thread cannot start (at interpreter shutdown, or at the
        process's thread limit): the caller works on it then."""
        thread = threading.Thread(target=self._run, name="tracescore-route", daemon=True)
        try:
            thread.start()
        except RuntimeError:
            self._items.pop()
            self._queued -= 1
            return False
        self._thread = thread
        return True

    def wait_idle(self, timeout: float) -> bool:
        """Wait until every item put before this call was worked on, at most ``timeout``
        seconds (items put meanwhile are not waited for). True when none is left (at once on
        the routing thread itself, and inside a flush's work on its own thread)."""
        if self._working_here():
            return not self._items
        deadline = time.monotonic() + timeout
        with self._changed:
            mark = self._queued
            while self._worked < mark:
                self._hurry_up()
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(min(left, threading.TIMEOUT_MAX))
        return True

    def drain(self, timeout: float) -> bool:
        """Make sure every item put before this call is worked on (a flush: what ended
        before it is routed whatever the routing thread is doing): when the routing thread is
        on a batch, wait for it to work through them (at most ``timeout`` seconds, at least
        ``_BATCH_WAIT``); when it is not, work on the waiting items on the calling thread.
        True when none put before the call was left unworked."""
        if self._working_here():
            return not self._items
        deadline = time.monotonic() + max(timeout, _BATCH_WAIT)
        with self._changed:
            mark = self._queued
            while self._worked < mark:
                if not (self._busy or self._draining):
                    break
                self._hurry_up()
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(min(left, threading.TIMEOUT_MAX))
            else:
                return True
            items = list(self._items)
            self._items.clear()
            self._draining = True
            self._drainer = threading.get_ident()
        try:
            for item in items:
                self._call(item)
        finally:
            with self._changed:
                self._draining = False
                self._drainer = None
                self._worked += len(items)
                self._changed.notify_all()
        return True

    def _working_here(self) -> bool:
        """Whether the caller is the thread working on items now (the routing thread, or a
        flush's): it must not wait for itself (a reader asking ``stats()``)."""
        return (threading.current_thread() is self._thread
                or self._drainer == threading.get_ident())

    def _hurry_up(self) -> None:
        """Holding ``_lock``: a thread letting a batch gather takes it now (someone waits)."""
        if self._items and self._gathering:
            self._hurry = True
            self._gathering = False
            self._changed.notify_all()

    def stop(self) -> None:
        """Let the routing thread end once the queue is empty; later items are worked on by
        their callers."""
        with self._lock:
            self._stopped = True
            self._changed.notify_all()

    def after_fork_in_child(self) -> None:
        """The parent's items and thread did not survive fork(): the child starts empty."""
        stopped = self._stopped
        self._init_state()
        self._stopped = stopped

    def _run(self) -> None:
        done = 0  # items of the last batch, counted as worked with the lock held
        while True:
            with self._lock:
                if done:
                    self._worked += done
                    done = 0
                    self._changed.notify_all()  # wait_idle, drain
                while not self._items or self._draining:
                    self._busy = False
                    self._changed.notify_all()  # wait_idle, drain
                    if self._stopped and not self._items:
                        self._thread = None
                        return
                    self._waiting = True
                    self._changed.wait()
                self._waiting = False
                if len(self._items) < WAKE_AT and not (self._stopped or self._hurry):
                    self._gathering = True
                    self._changed.wait(GATHER)
                    self._gathering = False
                    if not self._items or self._draining:
                        continue  # a flush took them meanwhile
                self._hurry = False
                self._busy = True
                items = list(self._items)
                self._items.clear()
            for item in items:
                self._call(item)
            done = len(items)

    def _call(self, item: Any) -> None:
        try:
            self._work(item)
        except Exception:
            logger.warning("tracescore failed to route an ended span; the application is "
                           "unaffected", exc_info=True)
