"""How the scoring processor flushes and shuts down, within the caller's deadline.

``force_flush`` waits for the routing thread (``handoff``) and the engine's jobs, releases
every held span to export, then flushes the export processor on a helper thread, so that a
hung scorer, exporter or backend cannot hold the caller past its deadline (the SDK's
``BatchSpanProcessor`` ignores flush deadlines).
``shutdown`` does the same once, then stops the engine (counting the jobs it drops) and the
export processor. The scoring processor (``processor.ScoringSpanProcessor``) routes spans and
hands these two calls here.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.trace import SpanProcessor

from tracescore._core import loop as _loop
from tracescore._pipeline.engine import Engine
from tracescore._pipeline.handoff import Handoff
from tracescore._pipeline.held import HeldSpans

logger = logging.getLogger("tracescore")

# The deadline of a shutdown that follows a flush which missed its own (a hung scorer or
# backend): enough to hand over what is held, not another full wait on the same hang.
_SHUTDOWN_AFTER_MISSED_FLUSH = 1.0


class Lifecycle:
    """The flush and shutdown of one scoring processor.

    Args:
        engine: the processor's engine (its jobs are waited for, then stopped).
        held: the spans it holds for their scores (released to export).
        downstream: the export processor, or None.
        flush_timeout: seconds ``shutdown()`` takes when called without a deadline.
        count_dropped: called with the jobs the engine dropped at shutdown, by scorer id.
        handoff: the spans on their way to the routing thread (routed before anything else).
    """

    def __init__(self, engine: Engine, held: HeldSpans, downstream: SpanProcessor | None, *,
                 flush_timeout: float, count_dropped: Callable[[Counter[str]], None],
                 handoff: Handoff) -> None:
        self._handoff = handoff
        self._engine = engine
        self._held = held
        self._downstream = downstream
        self.flush_timeout = flush_timeout
        self._count_dropped = count_dropped
        self._lock = threading.Lock()
        self._shutdown_started = False
        self._export_call: _Call | None = None
        self._flush_missed = False  # the last force_flush ran out of time

    def force_flush(self, timeout_millis: float = 30_000) -> bool:
        """Wait for pending scores, export every held span, then flush the export processor,
        all within ``timeout_millis``.

        Scores get most of the deadline; the rest (a fifth, at least a quarter second when the
        deadline allows) is kept for the export, so held spans still reach the exporter when a
        scorer hangs. Returns True when every score came in and the export processor flushed
        in time.
        """
        budget = _seconds(timeout_millis)
        deadline = time.monotonic() + budget
        reserve = max(budget * 0.2, min(budget * 0.5, 0.25))
        if _loop.is_loop_thread():
            # Called by a scorer or an on_score callback: no job can finish while it waits.
            idle = self._handoff.wait_idle(0.0) and self._engine.pending == 0
            remaining = self._held.release_all()
        else:
            # Every span that ended before the flush is routed (held, its jobs queued) first;
            # then the flush waits for those jobs and releases those spans only: spans other
            # threads end meanwhile are left to their own scores.
            idle = self._handoff.drain(max(0.0, deadline - reserve - time.monotonic()))
            held, jobs = self._held.mark(), self._engine.mark()
            idle = self._engine.wait_idle(max(0.0, deadline - reserve - time.monotonic()),
                                          jobs) and idle
            remaining = self._held.release_all(before=held)
        # A span the loop's sweep released is still being handed over on its thread: the
        # export processor's flush must come after it, or misses it.
        flushed = self._held.wait_handed_over(_left(deadline))
        if self._downstream is not None:
            downstream = self._downstream

            def flush() -> bool:
                left = max(0, int((deadline - time.monotonic()) * 1000))
                return bool(downstream.force_flush(left))

            flushed = self._call_before(flush, "flush", deadline) and flushed
        self._flush_missed = not (idle and flushed)
        return bool(idle and flushed and not remaining)

    def shutdown(self, timeout_millis: float | None, flush: Callable[[float], bool],
                 close: Callable[[], None]) -> None:
        """Flush with ``flush`` (the processor's ``force_flush``) within ``timeout_millis``
        (default: ``flush_timeout``), call ``close`` (the processor exports every later span
        directly), stop scoring, shut the export processor down.

        Only the first call does anything: tracescore's exit hook and the SDK's
        ``TracerProvider`` (at exit) both shut processors down, and the second must not wait
        again. When the last ``force_flush`` missed its deadline (no later one succeeded), the
        deadline is at most one second: a second full wait on the same hung backend or scorer
        would get nothing more out, so ``force_flush()`` then ``shutdown()`` costs one deadline,
        not two (the exit hooks rely on this too). The export processor cannot tell whether a
        flush that returned at its deadline is still stuck, so the miss alone decides.
        """
        with self._lock:
            if self._shutdown_started:
                return
            self._shutdown_started = True
        if timeout_millis is None:
            timeout_millis = self.flush_timeout * 1000
        if self._flush_missed:
            timeout_millis = min(_seconds(timeout_millis), _SHUTDOWN_AFTER_MISSED_FLUSH) * 1000
        deadline = time.monotonic() + _seconds(timeout_millis)
        flush(timeout_millis)
        # Spans handed over during the flush are routed (their jobs queued, then waited for
        # below) before later ones go straight to export.
        self._handoff.drain(_left(deadline))
        close()
        self._handoff.stop()
        # Spans handed over between that drain and the stop (other threads end spans during a
        # shutdown): exported now, before the export processor stops.
        self._handoff.drain(_left(deadline))
        # Jobs of spans that ended during the flush (and any still running) are dropped and
        # counted; their spans are released just below.
        self._count_dropped(self._engine.shutdown(_left(deadline),
                                                  on_late_drop=self._count_dropped))
        self._held.release_all()
        self._held.wait_handed_over(_left(deadline))  # before the export processor stops
        if self._downstream is not None:
            downstream = self._downstream

            def stop() -> bool:
                downstream.shutdown()
                return True

            self._call_before(stop, "shutdown", deadline, queue=True)

    def _call_before(self, fn: Callable[[], bool], what: str, deadline: float,
                     queue: bool = False) -> bool:
        """Run ``fn`` (a flush or shutdown of the export processor) on a helper thread and wait
        for it until ``deadline``. Returns its result; False when it failed or is still running.
        One call at a time: while an earlier one is stuck in a hung exporter, a flush gives up
        at the deadline instead of piling another thread on the same lock, and the shutdown
        (``queue=True``) is queued to run once the stuck call returns."""
        previous = self._export_call
        if previous is not None and not previous.done.wait(_left(deadline)) and not queue:
            return False
        call = _Call(fn, what, after=previous)
        self._export_call = call
        try:
            threading.Thread(target=call.run, name=f"tracescore-{what}", daemon=True).start()
        except RuntimeError:  # no new threads (interpreter shutdown): run it here, unless stuck
            if previous is not None and not previous.done.is_set():
                return False
            call.run()
        return call.done.wait(_left(deadline)) and call.ok

    def after_fork_in_child(self) -> None:
        """The parent's export calls and routing thread did not survive fork(): the child
        waits for none."""
        self._lock = threading.Lock()
        self._export_call = None
        self._handoff.after_fork_in_child()


class _Call:
    """One export-processor call on a helper thread."""

    def __init__(self, fn: Callable[[], bool], what: str, after: _Call | None = None) -> None:
        self.fn = fn
        self.what = what
        self.after = after
        self.done = threading.Event()
        self.ok = False

    def run(self) -> None:
        try:
            if self.after is not None:
                self.after.done.wait()
                self.after = None
            self.ok = bool(self.fn())
        except Exception:
            logger.warning("tracescore export processor failed to %s", self.what, exc_info=True)
        finally:
            self.done.set()


def _seconds(timeout_millis: Any) -> float:
    """A deadline in milliseconds as seconds, clamped to what ``threading`` waits accept (NaN
    and negative values count as 0)."""
    try:
        seconds = float(timeout_millis) / 1000
    except (TypeError, ValueError):
        return 0.0
    return min(seconds, threading.TIMEOUT_MAX) if seconds > 0 else 0.0


def _left(deadline: float) -> float:
    """Seconds until ``deadline`` (monotonic), within what ``threading`` waits accept."""
    return min(max(0.0, deadline - time.monotonic()), threading.TIMEOUT_MAX)
