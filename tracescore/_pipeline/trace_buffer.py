"""What a trace's earlier spans left for the scoring of its later ones.

Context scorers judge the documents that the trace's retrieval spans returned; tool-call scorers
judge the tool calls made under the scored span. Those spans end before the span they serve, so
their documents and calls wait here, per trace, until the trace's local root ends.

Spans also leave word for their ancestors (``pass_up``): which kinds ended beneath a span, and
which model calls. A span ends after everything beneath it, so when it ends the buffer knows
whether it wraps another span of its own kind (a framework's LLM span around the client
library's, a workflow's agent span around the agent's) and which model calls made its turn.

Bounded by traces, by bytes and by items per trace. What is evicted to stay within the bounds is
counted by cause (``stats().trace_buffer_evictions``), never dropped silently: a context scorer
that then finds no documents says so in its reason.
"""

from __future__ import annotations

import itertools
import sys
import threading
from collections import Counter, OrderedDict
from collections.abc import Mapping
from typing import Any, NamedTuple

DEFAULT_MAX_TRACES = 10_000
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_ITEMS_PER_TRACE = 1_000
# Spans remembered per trace for the tool-call ancestry (parent links only: 3 ints each).
_MAX_SPANS_PER_TRACE = 10_000
# Parent links never count as bytes of their own beyond this fixed estimate.
_SPAN_LINK_BYTES = 100


class Beneath(NamedTuple):
    """What ended beneath a span of the same trace before it ended (``TraceBuffer.beneath``).

    Attributes:
        kinds: the normalised kinds of the spans that ended beneath it (children, their
            children, ...).
        first_call: the model call beneath it that started first (the innermost span of that
            call: see ``pass_up``), or None.
        last_call: the model call beneath it that ended last, or None.
        unmarked: the first span beneath it passed up as ``UNMARKED_MODEL`` (it names a model
            but no convention marks it a model call), or None: named in a reason.
    """

    kinds: frozenset[str] = frozenset()
    first_call: Any = None
    last_call: Any = None
    unmarked: Any = None


NOTHING_BENEATH = Beneath()

# The kind passed up for a span that names a model but has no convention's kind
# (``tracescore._readers._turns.names_a_model``).
UNMARKED_MODEL = "unmarked-model"


def _merge(old: Beneath | None, new: Beneath) -> Beneath:
    if old is None:
        return new
    first, last = old.first_call, old.last_call
    if new.first_call is not None and (
            first is None or (new.first_call.start_time or 0) < (first.start_time or 0)):
        first = new.first_call
    if new.last_call is not None and (
            last is None or (new.last_call.end_time or 0) >= (last.end_time or 0)):
        last = new.last_call
    return Beneath(old.kinds | new.kinds, first, last,
                   old.unmarked if old.unmarked is not None else new.unmarked)


class _Trace:
    __slots__ = ("documents", "tool_calls", "parents", "beneath", "size")

    def __init__(self) -> None:
        # (start time, contents, size) and (start time, span id, call, size): the size counted
        # when the item came in is the size taken off when it leaves, whatever happened to
        # the (user-owned, mutable) values since.
        self.documents: list[tuple[int, tuple[str, ...], int]] = []
        self.tool_calls: list[tuple[int, int, Mapping[str, Any], int]] = []
        self.parents: dict[int, int | None] = {}
        # span id -> what ended beneath that (still open) span
        self.beneath: dict[int, Beneath] = {}
        self.size = 0


class TraceBuffer:
    """Documents and tool calls per in-flight trace, bounded and with evictions counted.

    Args:
        max_traces: traces remembered at once; the oldest is evicted past it.
        max_bytes: approximate bytes of content remembered in total (strings count their
            length; other values an estimate); the oldest traces are evicted past it.
        max_items_per_trace: retrievals and tool calls remembered per trace; a long-lived
            root (a worker loop decorated as an agent) keeps its latest ones.

    Thread-safe: spans end on any thread.
    """

    def __init__(self, max_traces: int = DEFAULT_MAX_TRACES,
                 max_bytes: int = DEFAULT_MAX_BYTES,
                 max_items_per_trace: int = DEFAULT_MAX_ITEMS_PER_TRACE) -> None:
        self.max_traces = max(1, int(max_traces))
        self.max_bytes = max(1, int(max_bytes))
        self.max_items = max(1, int(max_items_per_trace))
        self._lock = threading.Lock()
        self._traces: OrderedDict[int, _Trace] = OrderedDict()
        self._bytes = 0
        self.evictions: Counter[str] = Counter()

    @property
    def size_bytes(self) -> int:
        """Approximate bytes held now."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._traces)

    # -- writing -------------------------------------------------------------------------------
    def add_documents(self, trace_id: int, start_time: int, contents: tuple[str, ...]) -> None:
        """Remember one retrieval's documents (their contents, in rank order)."""
        size = sum(len(c) for c in contents) + 64
        with self._lock:
            trace = self._trace(trace_id)
            if any(entry[1] == contents for entry in trace.documents):
                # The same documents again: a retrieval span wrapping another that reported
                # them (a framework's public method around its private one).
                return
            if len(trace.documents) >= self.max_items:
                self._shrink(trace, trace.documents.pop(0)[2])
                self.evictions["items_per_trace"] += 1
            trace.documents.append((start_time, contents, size))
            self._grow(trace, size)
            self._bound(keep=trace_id)

    def add_tool_call(self, trace_id: int, span_id: int, start_time: int,
                      call: Mapping[str, Any]) -> None:
        """Remember one tool call (``name``, ``arguments``, ``result``, maybe ``error``)."""
        size = _estimate(call)
        with self._lock:
            trace = self._trace(trace_id)
            if len(trace.tool_calls) >= self.max_items:
                self._shrink(trace, trace.tool_calls.pop(0)[3])
                self.evictions["items_per_trace"] += 1
            trace.tool_calls.append((start_time, span_id, call, size))
            self._grow(trace, size)
            self._bound(keep=trace_id)

    def add_span(self, trace_id: int, span_id: int, parent_id: int | None) -> None:
        """Remember a span's parent, so tool calls can be found under any ancestor."""
        with self._lock:
            trace = self._trace(trace_id)
            if len(trace.parents) >= _MAX_SPANS_PER_TRACE:
                del trace.parents[next(iter(trace.parents))]
                self._shrink(trace, _SPAN_LINK_BYTES)
            trace.parents[span_id] = parent_id
            self._grow(trace, _SPAN_LINK_BYTES)
            self._bound(keep=trace_id)

    def beneath(self, trace_id: int, span_id: int) -> Beneath:
        """What ended beneath a span that just ended (and is forgotten here once asked):
        ``NOTHING_BENEATH`` when nothing did. See ``pass_up``."""
        with self._lock:
            trace = self._traces.get(trace_id)
            below = trace.beneath.pop(span_id, None) if trace is not None else None
            if below is None or trace is None:
                return NOTHING_BENEATH
            self._shrink(trace, _SPAN_LINK_BYTES)
            return below

    def pass_up(self, trace_id: int, parent_id: int, kind: str | None, below: Beneath,
                span: Any = None) -> None:
        """Leave word for a span's parent: the span's kind and what ended beneath it.

        Spans end after their children, so the word reaches the parent's entry before the
        parent ends. A model call is the innermost LLM span of a nest: an ``llm`` span that
        wraps another passes the inner one up, so an agent finds the spans that carry the
        messages sent and the text received.

        Args:
            trace_id: the span's trace id.
            parent_id: its parent's span id (a remote parent's entry goes with the trace).
            kind: the span's normalised kind, or None.
            below: what ended beneath the span (``beneath``).
            span: the ended span, remembered as a model call when ``kind`` is ``llm`` and it
                wraps no other, or as ``unmarked`` when ``kind`` is ``UNMARKED_MODEL``.
        """
        if kind is None and not below.kinds:
            return
        up = below
        if kind is not None:
            up = below._replace(kinds=below.kinds | {kind})
            if kind == "llm" and "llm" not in below.kinds and span is not None:
                up = up._replace(first_call=span, last_call=span)
            elif kind == UNMARKED_MODEL and below.unmarked is None and span is not None:
                up = up._replace(unmarked=span)
        with self._lock:
            trace = self._trace(trace_id)
            old = trace.beneath.get(parent_id)
            if old is None:
                if len(trace.beneath) >= _MAX_SPANS_PER_TRACE:
                    del trace.beneath[next(iter(trace.beneath))]
                    self._shrink(trace, _SPAN_LINK_BYTES)
                    self.evictions["items_per_trace"] += 1
                self._grow(trace, _SPAN_LINK_BYTES)
            trace.beneath[parent_id] = _merge(old, up)
            self._bound(keep=trace_id)

    def end_trace(self, trace_id: int) -> None:
        """Forget a trace (its local root ended: nothing later in this process needs it)."""
        with self._lock:
            trace = self._traces.pop(trace_id, None)
            if trace is not None:
                self._bytes -= trace.size

    # -- reading -------------------------------------------------------------------------------
    def documents(self, trace_id: int) -> tuple[str, ...]:
        """The trace's retrieved documents in retrieval order (by the retrieval's start)."""
        with self._lock:
            trace = self._traces.get(trace_id)
            entries = list(trace.documents) if trace is not None else []
        entries.sort(key=lambda entry: entry[0])
        return tuple(c for _, contents, _ in entries for c in contents)

    def tool_calls_under(self, trace_id: int, span_id: int) -> tuple[Mapping[str, Any], ...]:
        """The tool calls made by ``span_id`` or its descendants, in call order."""
        with self._lock:
            trace = self._traces.get(trace_id)
            if trace is None:
                return ()
            calls = sorted(trace.tool_calls, key=lambda entry: entry[0])
            parents = dict(trace.parents)
        found = []
        for _, tool_span_id, call, _ in calls:
            node: int | None = tool_span_id
            for _ in range(256):  # depth guard against malformed trees
                if node is None or node == span_id:
                    break
                node = parents.get(node)
            if node == span_id:
                found.append(call)
        return tuple(found)

    # -- bounds (caller holds the lock) ------------------------------------------------------------
    def _trace(self, trace_id: int) -> _Trace:
        trace = self._traces.get(trace_id)
        if trace is None:
            trace = self._traces[trace_id] = _Trace()
        return trace

    def _grow(self, trace: _Trace, size: int) -> None:
        trace.size += size
        self._bytes += size

    def _shrink(self, trace: _Trace, size: int) -> None:
        trace.size -= size
        self._bytes -= size

    def _bound(self, keep: int) -> None:
        while len(self._traces) > self.max_traces:
            self._evict_oldest("traces", keep)
        while self._bytes > self.max_bytes and len(self._traces) > 1:
            if not self._evict_oldest("bytes", keep):
                break
        if self._bytes > self.max_bytes:
            self._trim(keep)

    def _trim(self, trace_id: int) -> None:
        """The trace being written alone is over ``max_bytes``: drop its oldest retrievals and
        tool calls until it fits, or only one is left (it came with the span just ended, and
        goes with the next trace or item)."""
        trace = self._traces.get(trace_id)
        if trace is None:
            return
        while self._bytes > self.max_bytes and len(trace.documents) + len(trace.tool_calls) > 1:
            if trace.documents and (not trace.tool_calls
                                    or trace.documents[0][0] <= trace.tool_calls[0][0]):
                size = trace.documents.pop(0)[2]
            else:
                size = trace.tool_calls.pop(0)[3]
            self._shrink(trace, size)
            self.evictions["bytes"] += 1

    def _evict_oldest(self, cause: str, keep: int) -> bool:
        trace_id = next(iter(self._traces))
        if trace_id == keep:
            # The trace being written is the oldest: evict the next one instead.
            self._traces.move_to_end(trace_id)
            trace_id = next(iter(self._traces))
            if trace_id == keep:
                return False
        trace = self._traces.pop(trace_id)
        self._bytes -= trace.size
        self.evictions[cause] += 1
        return True

    def after_fork_in_child(self) -> None:
        """The parent's lock may have been held at fork(): start afresh with a new one. The
        documents of traces in flight stay (the child may go on with one); the eviction counts
        are the parent's."""
        self._lock = threading.Lock()
        self.evictions.clear()


def _estimate(value: Any, depth: int = 0) -> int:
    """Approximate bytes of ``value`` without serialising it: strings by length, containers
    from a sample of their first items (so a million-item result costs a hundred looks)."""
    if isinstance(value, (str, bytes, bytearray)):
        return len(value) + 50
    if depth > 3:
        return 64
    if isinstance(value, Mapping):
        items = list(itertools.islice(value.items(), 100))
        sample = sum(_estimate(k, depth + 1) + _estimate(v, depth + 1) for k, v in items)
        return 64 + (sample * len(value) // len(items) if items else 0)
    if isinstance(value, (list, tuple, set, frozenset)):
        seq = list(itertools.islice(value, 100))
        sample = sum(_estimate(v, depth + 1) for v in seq)
        return 64 + (sample * len(value) // len(seq) if seq else 0)
    try:
        return sys.getsizeof(value)
    except Exception:
        return 64
