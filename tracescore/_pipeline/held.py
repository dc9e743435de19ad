"""Spans held for their scores: each is exported exactly once.

A sampled span is held from its end until every one of its scores is attached or its deadline
passes, whichever comes first. Every path out (the last score, the deadline sweep, a flush, a
shutdown) goes through ``_release`` under one lock, which marks the span exported; whoever flips
that mark exports the span, so no span goes out twice or not at all. There is no other place a
held span can be: the thread that routes it registers it here before its jobs are queued.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util import BoundedList
from opentelemetry.trace import SpanContext, TraceFlags

from tracescore._core import loop as _loop
from tracescore._core.otel_compat import (
    attribute_dict,
    list_items,
    own_attributes,
    own_events,
    own_links,
)
from tracescore._core.stats import Stats

Key = tuple[int, int]

logger = logging.getLogger("tracescore")

# Seconds between deadline sweeps at most: many held spans share one sweep.
_SWEEP_COALESCE = 0.05


class Held:
    """One held span: its jobs still pending and the events attached so far."""

    __slots__ = ("span", "pending", "events", "attributes", "exported", "deadline", "number")

    def __init__(self, span: ReadableSpan, pending: int, deadline: float) -> None:
        self.span = span
        self.pending = pending
        # Made on the first score: a held span waiting for its scores is kept small, since a
        # backlog of them is what the garbage collector walks.
        self.events: list[Event] | None = None
        self.attributes: dict[str, Any] | None = None  # the scores as span attributes
        self.exported = False
        self.deadline = deadline
        self.number = 0  # in the order spans were held (``HeldSpans.mark``)


class HeldSpans:
    """The held spans of one scoring processor.

    Args:
        export: hands one finished span to the export processor (must not block).
        stats: the counters to keep (``deadline_exports``; ``spans_held`` is ``len()``).
        max_held: spans held at once; None for no cap.
    """

    def __init__(self, export: Callable[[ReadableSpan], None], stats: Stats,
                 max_held: int | None = None) -> None:
        self._export = export
        self._stats = stats
        self.max_held = max_held
        self._lock = threading.Lock()
        # Insertion order is end order, and every span has the same score_timeout, so the
        # oldest deadline is always at the front.
        self._spans: dict[Key, Held] = {}
        # Spans released and not yet handed to ``export`` (another thread may be doing it: a
        # flush waits for them, or the export processor flushes without them).
        self._handing = 0
        self._handed = threading.Condition(self._lock)
        self._sweep_armed = False  # loop-thread only
        self._holds = 0  # spans held so far: the next one's number

    def __len__(self) -> int:
        return len(self._spans)


    def full(self) -> bool:
        """Whether ``max_held`` spans are held (a hint: ``hold`` decides for certain)."""
        return self.max_held is not None and len(self._spans) >= self.max_held

    def hold(self, span: ReadableSpan, jobs: int, deadline: float) -> Held | None:
        """Hold ``span`` for ``jobs`` scores until ``deadline`` (monotonic seconds). None
        when ``max_held`` spans are held already (the caller exports it unscored)."""
        ctx = span.context
        assert ctx is not None
        held = Held(span, jobs, deadline)
        key = (ctx.trace_id, ctx.span_id)
        with self._lock:
            if self.max_held is not None and len(self._spans) >= self.max_held:
                return None
            # Another span with the same ids (a deterministic id generator, two providers)
            # is held: it goes out now with the scores it has, instead of being overwritten
            # here and never exported.
            previous = self._spans.get(key)
            if previous is not None and self._release(previous):
                self._stats.deadline_exports += 1
            else:
                previous = None
            held.number = self._holds
            self._holds += 1
            self._spans[key] = held
        if previous is not None:
            self._export_held(previous)
        return held

    def unhold(self, held: Held) -> bool:
        """Give ``held`` back (its jobs were refused). True when it was still held: the caller
        then exports the span itself; False when another path exported it already."""
        with self._lock:
            released = self._release(held)
            if released:  # the caller exports it, on its own thread, before it returns
                self._done_handing()
            return released

    def attach(self, key: Key, event: Event, attributes: Mapping[str, Any] | None = None) -> bool:
        """Attach one score's event (and its span ``attributes``) to the held span ``key``;
        export the span when it was the last one pending. False when the span is not held (it
        went out already): the caller sends the event on a carrier span."""
        export = False
        with self._lock:
            held = self._spans.get(key)
            if held is None or held.exported:
                return False
            if held.events is None:
                held.events = [event]
            else:
                held.events.append(event)
            if attributes:
                if held.attributes is None:
                    held.attributes = dict(attributes)
                else:
                    held.attributes.update(attributes)
            held.pending -= 1
            if held.pending <= 0:
                export = self._release(held)
        if export:
            self._export_held(held)
        return True

    def expire(self, now: float) -> float | None:
        """Export the held spans whose deadline passed. Returns the next deadline, or None
        when nothing is held. The loop's sweep calls it."""
        expired: list[Held] = []
        with self._lock:
            for held in list(self._spans.values()):
                if held.deadline > now:
                    break
                if self._release(held):
                    expired.append(held)
            self._stats.deadline_exports += len(expired)
            first = next(iter(self._spans.values()), None)
        self._export_all(expired)
        return None if first is None else first.deadline

    def arm_sweep(self, delay: float) -> None:
        """On the loop thread: sweep the expired spans in ``delay`` seconds (a span's score
        timeout), unless a sweep is armed already or nothing is held. Each sweep arms the next
        for the oldest deadline left."""
        if not self._sweep_armed and len(self._spans):
            self._sweep_armed = True
            _loop.get_loop().call_later(delay, self._sweep)

    def _sweep(self) -> None:
        now = time.monotonic()
        next_deadline = self.expire(now)
        self._sweep_armed = next_deadline is not None
        if next_deadline is not None:
            _loop.get_loop().call_later(max(next_deadline - now, _SWEEP_COALESCE), self._sweep)

    def mark(self) -> int:
        """A mark past every span held so far (for ``release_all``)."""
        with self._lock:
            return self._holds

    def release_all(self, before: int | None = None) -> int:
        """Export every held span now with the scores it has (a flush or shutdown past its
        deadline); with ``before``, only those held before that ``mark()`` (a flush leaves
        spans that ended after it began to their own scores). Returns how many went out;
        their later scores go on carrier spans."""
        with self._lock:
            released = [h for h in list(self._spans.values())
                        if (before is None or h.number < before) and self._release(h)]
            self._stats.deadline_exports += len(released)
        self._export_all(released)
        return len(released)

    def wait_handed_over(self, timeout: float) -> bool:
        """Wait until every released span was handed to the export processor (another
        thread, e.g. the loop's sweep, may be handing one over), at most ``timeout`` seconds. True
        when none is left; a flush of the export processor comes after this."""
        with self._handed:
            return self._handed.wait_for(lambda: self._handing == 0, timeout)

    def forget_all(self) -> None:
        """Forget every held span without exporting it (a child process after ``fork()``: the
        parent exports them)."""
        self._lock = threading.Lock()
        self._handed = threading.Condition(self._lock)
        self._handing = 0
        self._sweep_armed = False
        self._spans.clear()
        self._stats.spans_held = 0

    def _release(self, held: Held) -> bool:
        """Mark ``held`` exported and forget it; the caller holds the lock. True if it was
        still held, i.e. the caller now owns its export."""
        if held.exported:
            return False
        held.exported = True
        self._handing += 1
        ctx = held.span.context
        assert ctx is not None
        self._spans.pop((ctx.trace_id, ctx.span_id), None)
        return True

    def _export_all(self, spans: Sequence[Held]) -> None:
        for held in spans:
            self._export_held(held)

    def _export_held(self, held: Held) -> None:
        try:
            span = held.span
            if held.events or held.attributes:
                span = with_events(span, held.events or (), held.attributes)
            self._export(span)
        finally:
            with self._lock:
                self._done_handing()

    def _done_handing(self) -> None:
        """One released span is handed over; the caller holds the lock."""
        self._handing -= 1
        if not self._handing:
            self._handed.notify_all()


def with_events(span: ReadableSpan, extra: Sequence[Event],
                extra_attributes: Mapping[str, Any] | None = None) -> ReadableSpan:
    """A copy of ``span`` with ``extra`` events appended and ``extra_attributes`` added (the
    scores as searchable attributes), built with the public constructor, keeping the counts of
    attributes, events and links the SDK dropped for its limits.

    The span's values were checked when the SDK recorded them, so the copy takes them as they
    are: plain containers, or the SDK's bounded ones only where a dropped count must be kept
    (the constructor reads the counts from them). This runs for every span held for scoring:
    the SDK's containers are read directly where the span has them (its properties copy them
    through Python-level views), and the copy's span context shares one ``TraceFlags`` object
    per value (the SDK makes one per span: one object fewer for the garbage collector to walk
    per waiting span)."""
    attributes: Any = own_attributes(span)
    inner = attribute_dict(attributes)
    merged = inner.copy() if inner is not None else dict(span.attributes or {})
    dropped_attributes = getattr(attributes, "dropped", None)
    if dropped_attributes is None:  # not the SDK's container: the span says (a subclass may)
        dropped_attributes = getattr(span, "dropped_attributes", 0)
    if extra_attributes:
        merged.update(extra_attributes)
    attributes = merged
    if dropped_attributes:
        attributes = BoundedAttributes(maxlen=None, attributes=merged, immutable=True)
        attributes.dropped = dropped_attributes
    events = _plain_list(own_events(span), span, "events", tuple(extra))
    links = _plain_list(own_links(span), span, "links", ())
    return ReadableSpan(
        name=span.name,
        context=_shared_flags(span.context),
        parent=span.parent,
        resource=span.resource,
        attributes=attributes,
        events=events,
        links=links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


_FLAGS: dict[int, TraceFlags] = {}


def _shared_flags(context: SpanContext | None) -> SpanContext | None:
    """``context`` with a ``TraceFlags`` shared by every copy with the same flags."""
    if context is None:
        return None
    flags = context.trace_flags
    shared = _FLAGS.get(flags)
    if shared is None:
        shared = _FLAGS.setdefault(int(flags), TraceFlags(flags))
    if shared is flags:
        return context
    return SpanContext(context.trace_id, context.span_id, context.is_remote, shared,
                       context.trace_state)


def _plain_list(own: Any, span: ReadableSpan, name: str, extra: tuple[Any, ...]) -> Any:
    """The span's events or links (its own ``BoundedList`` read at C speed, else the public
    property) plus ``extra``: a tuple, or a ``BoundedList`` keeping the SDK's dropped count."""
    items = list_items(own)
    if items is None:
        items = tuple(getattr(span, name))
    if extra:
        items += extra
    dropped = getattr(own, "dropped", None)
    if dropped is None:  # not the SDK's container: the span says (a subclass may)
        dropped = getattr(span, f"dropped_{name}", 0)
    if not dropped:
        return items
    bounded: BoundedList[Any] = BoundedList(None)
    bounded.extend(items)
    bounded.dropped = dropped
    return bounded


def key_of(span: Any) -> Key:
    """``(trace_id, span_id)`` of a span."""
    ctx = span.context
    return (ctx.trace_id, ctx.span_id)
