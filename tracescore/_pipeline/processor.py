"""The scoring span processor: where ended spans become scoring work, in one place.

``_route`` is the only router. For every ended span ``on_end`` takes, on the thread that ends
it, the trace-sampling decision once (``_sampling.TracePicker``, by trace id); a span no rule
can pick goes straight to the export processor. Any other span is handed with its decorator's
record to the routing thread (``handoff``; ``route`` does the same on the caller's thread for
the service and rescoring), where it is read (by its
decorator's ``CallRecord`` when it has one, else by the first reader of the runtime's that
accepts it), noted in the trace buffer (documents, tool calls), matched against the rules once
(``_rules.select``) and admitted by their limits; a picked span is held (``_held``) and its jobs
go to the engine's one bounded queue (``_engine``), which refuses rather than blocks: a refusal
is counted and the span exported unscored. The engine runs the jobs on the loop and the writers
(``_writers``) put each outcome on the held span, on a carrier span, in metrics and log
records. ``force_flush`` and ``shutdown`` (``lifecycle``) route what was handed over, wait for
the engine, then release what is held.

``tracescore serve`` uses the same path; its trace settler may take a picked span whose scorers
need the whole trace (``defer``) and give it back with ``score_deferred`` once the trace is
complete, with the rules already selected.

``on_start``/``on_end`` never raise.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.trace import StatusCode

from tracescore._core import semconv as sc
from tracescore._core.otel_compat import ended_parts, span_context
from tracescore._core.stats import Stats
from tracescore._instrument import usage as _usage
from tracescore._pipeline.engine import Engine, Job
from tracescore._pipeline.handoff import Handoff
from tracescore._pipeline.held import HeldSpans
from tracescore._pipeline.lifecycle import Lifecycle
from tracescore._pipeline.request import ScoringRequest
from tracescore._pipeline.rules import CompiledRule, Selected, select
from tracescore._pipeline.sampling import TracePicker
from tracescore._pipeline.trace_buffer import TraceBuffer
from tracescore._readers import (
    READERS,
    Content,
    Reader,
    _turns,
    attributes_of,
    reader_for,
    scope_name,
)
from tracescore._writers.callback import CallbackWriter, ScoreEvent
from tracescore._writers.span_event import SpanEventWriter
from tracescore._writers.telemetry import TelemetryWriter

logger = logging.getLogger("tracescore")


__all__ = ["ScoreEvent", "ScoringSpanProcessor", "Stats"]

_OWN_SCOPE = sc.INSTRUMENTATION_SCOPE  # tracescore's own spans counted their usage already

# The counter of each reason a job was skipped.
_SKIP_FIELDS = {
    "queue_full": "skipped_queue_full",
    "held_spans_full": "skipped_held_full",
    "rate_limited": "skipped_rate_limited",
    "budget": "skipped_budget",
}


_LATER: Any = object()  # on_end: the trace's decision is made on the routing thread


def _unscored(span: ReadableSpan) -> None:
    logger.warning("tracescore failed to schedule scoring for span %r; it is exported unscored "
                   "and the application is unaffected", span.name, exc_info=True)


class ScoringSpanProcessor(SpanProcessor):
    """Holds sampled spans until their scores are attached, then hands them downstream.

    Args:
        downstream: the processor that exports (tracescore's ``ExportProcessor``), or None to
            export nothing.
        rules: compiled scoring rules.
        score_timeout: seconds a sampled span is held for its scores before it is exported
            anyway (later scores go out on carrier spans).
        max_concurrency: scoring jobs running at once.
        max_queue_size: scoring jobs accepted at once (queued plus running).
        job_timeout: seconds a scoring job may run before it is cancelled and reported with
            ``error.type=timeout``; None: no limit.
        flush_timeout: seconds ``shutdown()`` takes when called without a deadline, as the
            SDK's ``TracerProvider.shutdown()`` (and its exit hook) calls it.
        max_held_spans: spans held at once; None: bounded by ``max_queue_size`` only.
        on_score: optional callback receiving each ``ScoreEvent`` (exceptions are logged).
        telemetry: where score metrics, self-metrics and log records go, or None.
        trace_buffer: where documents and tool calls wait for later spans of their trace;
            default: a ``TraceBuffer`` with its default bounds, when a rule's scorer needs
            context or tool calls.
        writers: further destinations of scores, after the built-in ones.
        readers: the span readers asked in order (the runtime's; default ``READERS``).
        ending: the runtime's table of decorated calls ending now (``Runtime.ending``), where a
            span's ``CallRecord`` is found; default: none.
        defer: ``(span) -> bool``, asked for a picked span whose scorers need its trace's
            documents or tool calls: True when the caller keeps it and gives it back later
            with ``score_deferred`` (the service's trace settler); default: none.
        runtime: the runtime whose jobs these are (their input caps, default judge and judge
            telemetry: ``tracescore._pipeline.runtime.current``); default: the process's.
        count_usage: count the token usage and cost of other instrumentations' model-call
            spans in ``telemetry``'s per-agent metrics (priced from ``runtime.price_file``),
            off the caller's thread; ``configure()``'s processor does, the service's not.
    """

    def __init__(
        self,
        downstream: SpanProcessor | None,
        rules: Sequence[CompiledRule],
        *,
        score_timeout: float,
        max_concurrency: int,
        max_queue_size: int,
        job_timeout: float | None = None,
        flush_timeout: float,
        max_held_spans: int | None = None,
        on_score: Callable[[ScoreEvent], Any] | None = None,
        telemetry: Any = None,
        trace_buffer: TraceBuffer | None = None,
        writers: Sequence[Any] = (),
        readers: tuple[Reader, ...] = READERS,
        ending: dict[tuple[int, int], Any] | None = None,
        defer: Callable[[ReadableSpan], bool] | None = None,
        runtime: Any = None,
        count_usage: bool = False,
    ) -> None:
        self._downstream = downstream
        self._runtime = runtime
        self._count_usage = count_usage and telemetry is not None
        self._put = getattr(downstream, "put", None)
        self._rules = tuple(rules)
        self._score_timeout = score_timeout
        self.flush_timeout = flush_timeout
        self._telemetry = telemetry
        self._readers = readers
        self._ending: dict[tuple[int, int], Any] = ending if ending is not None else {}
        self._defer = defer
        self._stats = Stats()
        self._counts = _Counts(self._stats, telemetry)
        # An export processor that reports what the exporter accepted and what it dropped
        # (tracescore's ExportProcessor) counts spans_exported; any other counts on hand-off.
        report_to = getattr(downstream, "report_to", None)
        self._export_reports = callable(report_to)
        if report_to is not None and self._export_reports:
            report_to(self._counts.export)
        self._closed = False
        self._wants_tool_calls = any(r.scorer.uses_tool_calls or r.tool_results_as_context
                                     for r in self._rules)
        #: The trace-sampling decision of every rule, once per trace (the decorators ask too).
        self.picks = TracePicker([(r.sample_rate, r.salt) for r in self._rules])
        self._score_errors = any(r.score_errors for r in self._rules)
        wants_buffer = self._wants_tool_calls or any(r.scorer.uses_context for r in self._rules)
        # Every span of a trace is routed when a rule needs what its other spans left (else
        # only traces a rule may pick). The buffer also tells a span what ended beneath it
        # (one score per model call and per agent turn, ``_readers._turns``), so any rule
        # gets one.
        self._route_all = trace_buffer is not None or wants_buffer
        self._buffer = trace_buffer if trace_buffer is not None else (
            TraceBuffer() if self._rules else None)
        # Spans the ``defer`` hook kept, with what routing found, until ``score_deferred``.
        self._deferred: dict[tuple[int, int],
                             tuple[Reader, str | None, list[Selected], Any]] = {}
        self._held = HeldSpans(self._export, self._stats, max_held_spans)
        self._span_events = SpanEventWriter(self._held, self._export, self._stats)
        chain: list[Any] = [self._span_events]
        if telemetry is not None:
            chain.append(TelemetryWriter(telemetry))
        if on_score is not None:
            chain.append(CallbackWriter(on_score))
        chain.extend(writers)
        self._engine = Engine(chain, concurrency=max_concurrency,
                              max_queue_size=max_queue_size, job_timeout=job_timeout,
                              on_drain=self._arm_sweep, runtime=runtime)
        self._handoff = Handoff(self._route_handed)
        self._lifecycle = Lifecycle(self._engine, self._held, downstream,
                                    flush_timeout=flush_timeout,
                                    count_dropped=self._counts.dropped,
                                    handoff=self._handoff)
        _processors.add(self)

    # -- counters ------------------------------------------------------------------------------
    @property
    def rules(self) -> tuple[CompiledRule, ...]:
        """The compiled rules."""
        return self._rules

    @property
    def stats(self) -> Stats:
        """The live counters (``Tracescore.stats()`` copies them), once the spans handed to the
        routing thread are routed (it waits a second at most)."""
        self._handoff.wait_idle(1.0)
        return self._counts.live(len(self._held), self._buffer, self._downstream)

    def pending_jobs(self) -> int:
        """Scoring jobs accepted and not finished (for the queue-size gauge)."""
        return self._engine.pending

    def held_spans(self) -> int:
        """Spans held right now (for the held-spans gauge)."""
        return len(self._held)

    @property
    def trace_picks(self) -> Callable[[int], bool] | None:
        """For the decorators: whether a trace may be scored, by its id (``picks``); None when
        any trace may be (a rule scores every failure, known only when the span ends)."""
        return None if self._score_errors else self.picks

    # -- SpanProcessor -------------------------------------------------------------------------
    @property
    def starts_nothing(self) -> bool:
        """True when ``on_start`` has nothing to do (the export processor ignores it), so a
        caller may skip the call."""
        return getattr(self._downstream, "starts_nothing", self._downstream is None)

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if self._downstream is not None:
            try:
                self._downstream.on_start(span, parent_context=parent_context)
            except Exception:
                logger.debug("tracescore export processor failed in on_start", exc_info=True)

    def on_end(self, span: ReadableSpan) -> None:
        """Hand ``span`` to the routing thread (``handoff``) with what only its caller knows:
        its trace's decision, its decorator's record when a rule may pick it, or the agent of
        another instrumentation's model call (``usage.counted_on_end``; its trace is decided on
        the routing thread). There it is counted, routed and exported. Never raises."""
        try:
            if not self._closed:
                ctx, parent, scope, attrs = ended_parts(span)
                agent = _usage.NOT_COUNTED
                if self._count_usage and (scope is None or scope.name != _OWN_SCOPE):
                    agent = _usage.counted_on_end(ctx, parent, attrs)
                # A counted model call is routed anyway: its trace is decided there.
                sampled = self._may_pick(span, ctx) if agent is _usage.NOT_COUNTED else _LATER
                record = (self._ending.get((ctx.trace_id, ctx.span_id))
                          if sampled is not None and self._ending else None)
                self._handoff.put((span, ctx, sampled, record, agent))
                return
        except Exception:
            _unscored(span)
        self._export(span)

    def _route_handed(self, item: tuple[ReadableSpan, Any, Any, Any, Any]) -> None:
        """A span ``on_end`` handed over: its model call counted, then ``route``'s work."""
        span, ctx, sampled, record, agent = item
        try:
            if agent is not _usage.NOT_COUNTED:
                _usage.record_counted(span, agent, self._telemetry,
                                      getattr(self._runtime, "price_file", None))
                sampled = self._may_pick(span, ctx)
            if (sampled is not None and not self._closed
                    and self._route(span, ctx, sampled, record) != "passed"):
                return
        except Exception:
            _unscored(span)
        self._export(span)

    def route(self, span: ReadableSpan, encoded: int | None = None, *,
              forward: bool = True) -> str:
        """The one router, on the caller's thread (the service, rescoring; ``on_end`` hands
        spans to the routing thread, which does the same): export ``span`` now when no rule can
        pick it, else read it, match it against the rules and hold it for the jobs the engine
        accepted. ``encoded``: its OTLP size when the caller measured it (the service);
        ``forward=False``: the caller forwarded every span already (``forward_first``).
        Returns ``"passed"`` (exported, or to be: no job), ``"scored"`` (held for its jobs) or
        ``"deferred"`` (kept by the ``defer`` hook). Never raises."""
        try:
            ctx = span_context(span)
            sampled = self._may_pick(span, ctx)
            if sampled is not None:
                record = self._ending.get((ctx.trace_id, ctx.span_id)) if self._ending else None
                outcome = self._route(span, ctx, sampled, record)
                if outcome != "passed":
                    return outcome
        except Exception:
            _unscored(span)
        if forward:
            self._export(span, encoded)
        return "passed"

    def _may_pick(self, span: ReadableSpan, ctx: Any) -> tuple[bool, ...] | None:
        """Every rule's trace-sampling decision when one may pick ``span``; None when none can
        whatever it matches: it goes straight to export (most spans, at a low rate)."""
        if ctx is None or not self._rules or self._closed:
            return None
        sampled = self.picks.fixed or self.picks.decide(ctx.trace_id)
        if (True in sampled or self._route_all or (
                self._score_errors and span.status.status_code is StatusCode.ERROR)):
            return sampled
        return None

    def _route(self, span: ReadableSpan, ctx: Any, sampled: tuple[bool, ...],
               record: Any) -> str:
        attrs = attributes_of(span)
        if attrs.get(sc.TRACESCORE_EVALUATION_CARRIER):
            return "passed"
        # A span of tracescore's decorators is read through its call's record (full values).
        reader: Reader = record if record is not None else reader_for(span, self._readers)
        # The span's kind, and whether it wraps another of its kind (``_readers._turns``).
        kind, wrapper, beneath = _turns.route(reader, span, self._buffer,
                                              parent_links=self._wants_tool_calls)
        selected = select(self._rules, sampled, kind=kind, name=span.name, attributes=attrs,
                          scope=scope_name(span),
                          failed=span.status.status_code is StatusCode.ERROR, span=span,
                          wrapper=wrapper)
        if (selected and self._defer is not None
                and any(s.rule.scorer.uses_context or s.rule.scorer.uses_tool_calls
                        for s in selected)):
            key = (ctx.trace_id, ctx.span_id)
            self._deferred[key] = (reader, kind, selected, beneath)
            if self._defer(span):
                return "deferred"
            self._deferred.pop(key, None)
        return self._score(span, ctx, reader, kind, selected, beneath)

    def score_deferred(self, span: ReadableSpan) -> None:
        """Score a span the ``defer`` hook kept, with the rules selected when it was routed
        (its trace is complete now). Never raises."""
        try:
            ctx = span.context
            entry = self._deferred.pop((ctx.trace_id, ctx.span_id), None) if ctx else None
            if entry is not None and not self._closed:
                reader, kind, selected, beneath = entry
                if self._score(span, ctx, reader, kind, selected, beneath) != "passed":
                    return
        except Exception:
            _unscored(span)
        self._export(span)

    def _score(self, span: ReadableSpan, ctx: Any, reader: Reader, kind: str | None,
               selected: list[Selected], beneath: Any) -> str:
        """Admit, hold and queue the jobs of the ``selected`` rules; the trace buffer forgets
        the trace once its local root is routed."""
        buffer = self._buffer
        local_root = span.parent is None or span.parent.is_remote
        try:
            admitted = _admit(self._held, self._counts, selected) if selected else []
            if not admitted:
                return "passed"
            context: tuple[tuple[Any, ...], tuple[Any, ...]] = ((), ())
            if buffer is not None:
                context = (buffer.documents(ctx.trace_id),
                           buffer.tool_calls_under(ctx.trace_id, ctx.span_id)
                           if self._wants_tool_calls else ())
        finally:
            if buffer is not None and local_root:
                buffer.end_trace(ctx.trace_id)  # the local root ended: nothing later needs it
        content = _turns.finish(span, kind, reader.read(span, kind), beneath,
                                lambda other: reader_for(other, self._readers), reader)
        request = _request(span, ctx, kind, content, context,
                           None if context[0] else _turns.no_documents_reason(reader, span))
        held = self._held.hold(span, len(admitted), time.monotonic() + self._score_timeout)
        if held is None:
            self._counts.skips(admitted, "held_spans_full")
            return "passed"
        if self._engine.submit([Job(request, s.rule, s.on_error, span) for s in admitted]):
            self._counts.add("spans_scored")
            return "scored"
        self._counts.skips(admitted, "queue_full")
        # A flush or shutdown may have exported it meanwhile (the skip still happened).
        return "passed" if self._held.unhold(held) else "scored"

    # -- export --------------------------------------------------------------------------------
    def _export(self, span: ReadableSpan, encoded: int | None = None) -> None:
        if self._downstream is None:
            return
        try:
            if encoded is not None and self._put is not None:
                self._put(span, encoded)  # the export processor's on_end, size known
            else:
                self._downstream.on_end(span)
            if not self._export_reports:
                self._counts.add("spans_exported")
        except Exception:
            logger.warning("tracescore export processor failed; span %r lost", span.name,
                           exc_info=True)

    def _arm_sweep(self) -> None:
        self._held.arm_sweep(self._score_timeout)  # the engine drained: on the loop thread

    # -- lifecycle (``lifecycle.Lifecycle``) ---------------------------------------------------
    def force_flush(self, timeout_millis: float = 30_000) -> bool:
        """Wait for pending scores, export every held span, then flush the export processor,
        all within ``timeout_millis`` (``lifecycle.Lifecycle.force_flush``). Returns True when
        every score came in and the export processor flushed in time; spans whose scores are
        still pending at the deadline are exported with the scores they have (later scores go
        out on carrier spans)."""
        return self._lifecycle.force_flush(timeout_millis)

    def shutdown(self, timeout_millis: float | None = None) -> None:
        """Flush within ``timeout_millis`` (default: ``flush_timeout``), stop scoring, shut
        the export processor down; only the first call does anything
        (``lifecycle.Lifecycle.shutdown``)."""

        def close() -> None:
            self._closed = True  # from now on on_end exports every span directly

        # Through the attribute: a flush wrapped on this instance is the one shutdown runs.
        self._lifecycle.shutdown(timeout_millis, lambda ms: self.force_flush(ms), close)

    def _after_fork_in_child(self) -> None:
        # The parent exports the spans it held and the engine's jobs did not survive fork():
        # the child forgets them (exporting them too would duplicate them), and counts only
        # its own work from here.
        self._counts.lock = threading.Lock()
        self._held.forget_all()
        self._stats.clear()
        self._deferred.clear()
        self._span_events.after_fork_in_child()
        for rule in self._rules:
            rule.after_fork_in_child()
        if self._buffer is not None:
            self._buffer.after_fork_in_child()
        self._lifecycle.after_fork_in_child()


class _Counts:
    """A scoring processor's counters: its ``Stats``, changed under one lock (any thread), and
    the same counts in the telemetry's metrics when there is a telemetry."""

    def __init__(self, stats: Stats, telemetry: Any) -> None:
        self.stats = stats
        self.telemetry = telemetry
        self.lock = threading.Lock()

    def live(self, held: int, buffer: TraceBuffer | None, downstream: Any) -> Stats:
        """The stats with the gauges read now: ``held`` spans, the trace ``buffer``'s
        evictions, the export processor's spool refusals."""
        self.stats.spans_held = held
        if buffer is not None:
            self.stats.trace_buffer_evictions = sum(buffer.evictions.values())
        refused = getattr(getattr(downstream, "spool", None), "refused", None)
        if isinstance(refused, dict):
            self.stats.spool_refused = dict(refused)
        return self.stats

    def add(self, field: str, n: int = 1) -> None:
        with self.lock:
            setattr(self.stats, field, getattr(self.stats, field) + n)

    def skips(self, selected: Sequence[Selected], reason: str) -> None:
        """Jobs not run for ``reason`` (``queue_full``, ``held_spans_full``, ...)."""
        self.add(_SKIP_FIELDS[reason], len(selected))
        if self.telemetry is not None:
            for choice in selected:
                self.telemetry.record_skip(choice.rule.scorer_id, reason)

    def dropped(self, counts: Counter[str]) -> None:
        """Scoring jobs that will never finish (tracescore shut down), by scorer id."""
        total = sum(counts.values())
        if not total:
            return
        self.add("jobs_dropped", total)
        if self.telemetry is not None:
            for scorer_id, n in counts.items():
                if n > 0:
                    self.telemetry.record_dropped(scorer_id, n)

    def export(self, outcome: str, spans: int) -> None:
        """The export processor's report: ``spans`` accepted (``exported``) or dropped for the
        cause ``outcome``; any thread."""
        with self.lock:
            self.stats.count_export(outcome, spans)
        if self.telemetry is not None:
            self.telemetry.record_export(outcome, spans)


def _admit(held: HeldSpans, counts: _Counts, selected: list[Selected]) -> list[Selected]:
    """Apply the held-span cap, each rule's rate limit and budget (they count at the span's
    end); skips are counted."""
    if held.full():
        counts.skips(selected, "held_spans_full")
        return []
    admitted = []
    for choice in selected:
        reason = choice.rule.admit()
        if reason is None:
            admitted.append(choice)
        else:
            counts.skips([choice], reason)
    return admitted


def _request(span: ReadableSpan, ctx: Any, kind: str | None, content: Content,
             context: tuple[tuple[Any, ...], tuple[Any, ...]],
             documents_missing: str | None) -> ScoringRequest:
    """What the scorers of ``span`` are asked: its content, the trace's documents and tool
    calls (``context``), and where the span is."""
    documents, tool_calls = context
    if not tool_calls and content.tool_calls:
        tool_calls = content.tool_calls  # a model turn's requested calls
    status = span.status.status_code
    return ScoringRequest(
        input=content.input,
        output=content.output,
        documents=documents,
        tool_calls=tool_calls,
        trace_id=ctx.trace_id,
        span_id=ctx.span_id,
        parent_span_id=span.parent.span_id if span.parent else None,
        span_name=span.name,
        kind=kind,
        attributes=span.attributes,
        scope=scope_name(span),
        start_time=span.start_time or 0,
        end_time=span.end_time or 0,
        status=("error" if status is StatusCode.ERROR
                else "ok" if status is StatusCode.OK else "unset"),
        error=content.error,
        content_missing=content.missing,
        documents_missing=documents_missing,
    )


_processors: weakref.WeakSet[ScoringSpanProcessor] = weakref.WeakSet()


def _reset_processors_after_fork() -> None:
    for processor in list(_processors):
        processor._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_processors_after_fork)
