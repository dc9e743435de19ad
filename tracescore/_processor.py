"""The scoring span processor: where spans made in this process enter scoring.

For every ended span it asks the readers what the span is (``_readers``), keeps what later spans
of the trace need (``_trace_buffer``), and lets the rules pick it (``_rules``). A picked span is
held (``_held``) and its ``ScoringRequest`` goes to the engine (``_engine``) as one job per rule;
the writers (``_writers``) put each outcome on the held span, on a carrier span, in metrics and
log records. Every other span goes straight on to the export processor.

``on_start``/``on_end`` never block and never raise. On the calling thread a span no rule can
pick costs a few look-ups on its way to export; a span a rule may pick is queued with its
decorator's record and routed (read, selected, held, its jobs queued) on the loop, in end order.
A flush, shutdown, the deadline backstop and a caller past the queue's bound route what waits
on their own thread.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections import Counter, deque
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.trace import StatusCode

from . import _handoff, _loop
from . import _semconv as sc
from ._engine import Deferred, Engine, Job
from ._handoff import CallRecord
from ._held import DeadlineBackstop, Held, HeldSpans, with_events
from ._otel_compat import span_context
from ._readers import Content, Reader, attributes_of, reader_for, scope_name
from ._readers._turns import finish, no_documents_reason, route
from ._request import ScoringRequest
from ._rules import CompiledRule, Selected, select
from ._sampling import TracePicker
from ._stats import Stats
from ._trace_buffer import TraceBuffer
from ._writers.callback import CallbackWriter, ScoreEvent
from ._writers.span_event import SpanEventWriter
from ._writers.telemetry import TelemetryWriter

logger = logging.getLogger("tracescore")

# Seconds between deadline sweeps at most: many held spans share one sweep.
_SWEEP_COALESCE = 0.05
# The deadline of a shutdown that follows a flush which missed its own (a hung scorer or
# backend): enough to hand over what is held, not another full wait on the same hang.
_SHUTDOWN_AFTER_MISSED_FLUSH = 1.0
# Spans routed per hold of the routing lock, and per drain of the loop: the loop gets back to
# its jobs, and a thread waiting for the lock waits for one batch at most.
_ROUTE_BATCH = 256

__all__ = ["ScoreEvent", "ScoringSpanProcessor", "Stats"]


class _Pending(Deferred):
    """A span waiting for its jobs, which are built when the loop starts the first of them:
    everything the build needs in one object. A backlog of waiting spans is what the garbage
    collector walks, so this is the only object a waiting span adds to its held copy: its rules
    come as a tuple shared by every span the same rules picked, its content as plain fields."""

    __slots__ = ("processor", "held", "reader", "kind", "scope", "read", "input", "output",
                 "error", "missing", "tool_calls", "context", "on_error")

    def __init__(self, processor: ScoringSpanProcessor, held: Held, reader: Reader,
                 kind: str | None, scope: str, content: Content | None,
                 context: tuple[tuple[Any, ...], tuple[Any, ...], Any],
                 picked: tuple[tuple[CompiledRule, ...], tuple[bool, ...]]) -> None:
        self.rules, self.on_error = picked
        self.processor = processor
        self.held = held
        self.reader = reader
        self.kind = kind
        self.scope = scope
        self.read = content is not None
        if content is not None:
            self.input, self.output, self.error, self.missing, self.tool_calls = content
        self.context = context

    def content(self) -> Content | None:
        """What the reader read when the span was routed, or None (read it at the build)."""
        if not self.read:
            return None
        return Content(self.input, self.output, self.error, self.missing, self.tool_calls)

    def build(self) -> list[Job]:
        return self.processor._jobs(self)


class ScoringSpanProcessor(SpanProcessor):
    """Holds sampled spans until their scores are attached, then hands them downstream.

    Args:
        downstream: the processor that exports (usually a ``BatchSpanProcessor``), or None to
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
        route_on_loop: route spans that may be scored on the loop, after ``on_end`` returns
            (default); False routes them inside ``on_end``, on the thread that ends them, so
            that the counters and the queue reflect a span as soon as it ended (the scoring
            service's admission control reads them per request).
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
        route_on_loop: bool = True,
    ) -> None:
        self._downstream = downstream
        self._rules = list(rules)
        self._score_timeout = score_timeout
        self.flush_timeout = flush_timeout
        self._telemetry = telemetry
        self._stats = Stats()
        self._lock = threading.Lock()
        # An export processor that reports what the exporter accepted and what it dropped
        # (tracescore's ExportProcessor) counts spans_exported; any other counts on hand-off.
        report_to = getattr(downstream, "report_to", None)
        self._export_reports = callable(report_to)
        if report_to is not None and self._export_reports:
            report_to(self._count_export)
        self._closed = False
        self._shutdown_started = False
        self._export_call: _Call | None = None
        self._flush_missed = False  # the last force_flush ran out of time
        self._sweep_armed = False  # loop-thread only
        self._wants_tool_calls = any(r.scorer.uses_tool_calls or r.tool_results_as_context
                                     for r in self._rules)
        #: Whether any rule's sample picks a trace (by its id); the decorators ask it too.
        self.picks = TracePicker([(r.sample_rate, r.salt) for r in self._rules])
        self._score_errors = any(r.score_errors for r in self._rules)
        wants_buffer = self._wants_tool_calls or any(r.scorer.uses_context for r in self._rules)
        # Every span of a trace is routed when a rule needs what its other spans left (else
        # only traces a rule may pick). The buffer also tells a span what ended beneath it
        # (one score per model call and per agent turn), so any rule gets one.
        self._route_all = trace_buffer is not None or wants_buffer
        self._buffer = trace_buffer if trace_buffer is not None else (
            TraceBuffer() if self._rules else None)
        self._held = HeldSpans(self._export, self._stats, max_held_spans)
        self._backstop = DeadlineBackstop(self._held)
        self._span_events = SpanEventWriter(self._held, self._export, self._stats)
        chain: list[Any] = [self._span_events]
        if telemetry is not None:
            chain.append(TelemetryWriter(telemetry))
        if on_score is not None:
            chain.append(CallbackWriter(on_score))
        chain.extend(writers)
        # Spans that may be scored wait here, in end order, with their decorator's record,
        # to be routed (read, matched against the rules, held) on the loop instead of on the
        # thread that ended them. One router at a time keeps that order (a trace's documents
        # reach the buffer before its later spans ask for them); reentrant, since a flush may
        # come from code the routing runs. Past ``_max_routes`` waiting spans, the thread
        # that ends one routes them all itself.
        self._routes: deque[tuple[ReadableSpan, CallRecord | None]] = deque()
        self._routing = threading.RLock()
        self._max_routes = max(1, int(max_queue_size)) if route_on_loop else 0
        self._route_runs = 0  # routings done; the backstop tells a stalled loop by it
        self._route_runs_seen = -1
        self._picked_sets: dict[tuple[tuple[int, bool], ...],
                                tuple[tuple[CompiledRule, ...], tuple[bool, ...]]] = {}
        self._engine = Engine(chain, concurrency=max_concurrency,
                              max_queue_size=max_queue_size, job_timeout=job_timeout,
                              on_drain=self._arm_sweep, feed=self._route_on_loop,
                              feed_waiting=lambda: bool(self._routes))
        self._backstop.also = self._route_stalled
        if not self._rules and self._export_reports and downstream is not None:
            # Nothing to score: the export processor's own on_end takes every span (it never
            # raises and counts what it accepts), without a hop through this one.
            self.on_end = downstream.on_end  # type: ignore[method-assign]
        _processors.add(self)

    # -- counters ------------------------------------------------------------------------------
    @property
    def stats(self) -> Stats:
        """The live counters (``Tracescore.stats()`` hands out copies)."""
        self._stats.spans_held = len(self._held)
        if self._buffer is not None:
            self._stats.trace_buffer_evictions = sum(self._buffer.evictions.values())
        return self._stats

    def pending_jobs(self) -> int:
        """Scoring jobs accepted and not finished (for the queue-size gauge)."""
        return self._engine.pending

    def held_spans(self) -> int:
        """Spans held for their scores right now (for the held-spans gauge)."""
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
        """Export ``span`` now when no rule can pick it; else queue it, with its decorator's
        record, to be routed on the loop (``_route_waiting``). On the thread that ends the span
        this costs a look-up, an append and, when the loop is not polling, a wake-up. That
        thread routes what waits itself when the loop cannot run, when more than
        ``max_queue_size`` spans wait for a stalled loop, or always with ``route_on_loop=False``
        (it may then wait for one batch another thread routes). Never raises."""
        try:
            ctx = span_context(span)
            if ctx is not None and self._rules and not self._closed and (
                    self._route_all or self.picks(ctx.trace_id) or (
                        self._score_errors and span.status.status_code is StatusCode.ERROR)):
                # Otherwise no rule can pick this span whatever it matches (the same picks as
                # ``_rules.select``, by trace id or for a failure), and no trace context is
                # kept: it goes straight to export (most spans, at a low sample rate).
                routes = self._routes
                routes.append((span, _handoff.record_of(ctx.trace_id, ctx.span_id)))
                # The backstop routes what waits should the loop stall (the loop is shared:
                # another configuration's scorer may block it). One attribute test once it runs.
                self._backstop.ensure_started()
                if len(routes) > self._max_routes or not (
                        self._engine.polling or self._engine.wake()) or self._closed:
                    # The loop is behind, cannot run, or shutdown raced this span: route
                    # what waits here (shutdown's own pass may have gone already).
                    self._route_waiting()
                return
        except Exception:
            logger.warning("tracescore failed to schedule scoring for span %r; it is exported "
                           "unscored and the application is unaffected", span.name, exc_info=True)
        self._export(span)

    def _route_on_loop(self) -> int:
        """The engine's feed, at each drain of the loop: route the spans that waited when it
        began, one batch (``_ROUTE_BATCH``) at most. Spans that end meanwhile wait for the next
        drain, so under sustained load the loop still runs the jobs it takes between routings
        (past the bound, the threads that end spans route them). Returns how many."""
        return self._route_waiting(min(len(self._routes), _ROUTE_BATCH))

    def _route_waiting(self, most: int | None = None) -> int:
        """Route every span waiting in ``_routes`` (or the first ``most``), in end order, on
        this thread (the loop, a flush, shutdown, the backstop, or a caller past the bound).
        On the loop it routes nothing while another thread routes (it never waits for one).
        Returns how many."""
        routes = self._routes
        routed = 0
        more = True
        # The loop never waits for another router: that thread may be waiting for the loop
        # (a rule's predicate that flushes), and it routes what waits anyway.
        wait = not _loop.is_loop_thread()
        while more:
            # The lock is taken at least once: a span another thread took off the queue is
            # routed (held or exported) once this returns, so a flush does not overtake it.
            # A bounded batch per hold: a caller past the bound waits for one batch at most.
            if not self._routing.acquire(blocking=wait):
                break
            try:
                for _ in range(_ROUTE_BATCH):
                    if most is not None and routed >= most:
                        more = False
                        break
                    try:
                        span, record = routes.popleft()
                    except IndexError:
                        more = False
                        break
                    routed += 1
                    try:
                        held = (self._route(span) if record is None
                                else _handoff.reading(span, record, self._route))
                    except Exception:
                        logger.warning("tracescore failed to schedule scoring for span %r; it "
                                       "is exported unscored and the application is "
                                       "unaffected", span.name, exc_info=True)
                        held = False
                    if not held:
                        self._export(span)
            finally:
                self._routing.release()
        self._route_runs += 1
        return routed

    def _count_closed(self, span: ReadableSpan, trace_id: int, attrs: Any,
                      failed: bool) -> None:
        """A span queued before shutdown closed the processor and routed after it (it ended
        during shutdown's flush) goes out unscored: the jobs it would have had are counted as
        dropped, as shutdown counts the jobs it stops."""
        try:
            reader = reader_for(span)
            selected = select(self._rules, trace_id=trace_id, kind=reader.kind(span),
                              name=span.name, attributes=attrs, scope=scope_name(span),
                              failed=failed, span=span)
        except Exception:
            logger.debug("tracescore could not count the jobs of a span ended during "
                         "shutdown", exc_info=True)
            return
        if selected:
            self._count_dropped(Counter(choice.rule.scorer_id for choice in selected))

    def _route_stalled(self) -> None:
        """The backstop's look: route the waiting spans when the loop has not routed since the
        last look (a scorer or ``on_score`` callback blocks its thread)."""
        runs = self._route_runs
        if self._routes and runs == self._route_runs_seen:
            self._route_waiting()
        self._route_runs_seen = runs

    def _route(self, span: ReadableSpan) -> bool:
        """True when the span is held for scoring (and will be exported later). Runs where
        ``_route_waiting`` runs, with the span's decorator record announced (``_handoff``), for
        a span ``on_end`` queued: one a rule may pick (``on_end`` asked)."""
        ctx = span.context
        if ctx is None:
            return False
        failed = span.status.status_code is StatusCode.ERROR
        attrs = attributes_of(span)
        if attrs.get(sc.TRACESCORE_EVALUATION_CARRIER):
            return False
        if self._closed:
            self._count_closed(span, ctx.trace_id, attrs, failed)
            return False
        buffer = self._buffer
        reader = reader_for(span)
        # The span's kind, and whether it wraps another of its kind (``_readers._turns``).
        kind, wrapper, beneath = route(reader, span, buffer,
                                       parent_links=self._wants_tool_calls)
        scope = scope_name(span)
        selected = select(self._rules, trace_id=ctx.trace_id, kind=kind, name=span.name,
                          attributes=attrs, scope=scope, failed=failed, span=span,
                          wrapper=wrapper)
        admitted = self._admit(selected) if selected else []
        context: tuple[tuple[Any, ...], tuple[Any, ...], Any] = ((), (), beneath)
        if admitted and buffer is not None:
            # Taken now: the trace's local root may end (and the buffer forget the trace)
            # before the loop builds the request.
            context = (buffer.documents(ctx.trace_id),
                       buffer.tool_calls_under(ctx.trace_id, ctx.span_id)
                       if self._wants_tool_calls else (), beneath)
        if buffer is not None and (span.parent is None or span.parent.is_remote):
            buffer.end_trace(ctx.trace_id)  # the local root ended: nothing later needs it
        if not admitted:
            return False
        # The span waits for its scores as a plain copy (the same values in plain containers,
        # see ``with_events``): the SDK's span keeps a lock and a bounded container per list,
        # two thirds of the objects the garbage collector would walk for every waiting span,
        # and dropped here they never reach it.
        held = self._held.hold(with_events(span, ()), len(admitted),
                               time.monotonic() + self._score_timeout)
        if held is None:
            self._count_skips(admitted, "held_spans_full")
            return False
        # Only what is gone once the routing returns is read now (the decorators' full values,
        # announced for it); the request itself is built when a consumer takes the job.
        content = reader.read(span, kind) if reader.volatile else None
        if self._engine.submit(_Pending(self, held, reader, kind, scope, content, context,
                                        self._picked(admitted))):
            with self._lock:
                self._stats.spans_scored += 1
            return True
        self._count_skips(admitted, "queue_full")
        # False: a flush or shutdown exported it meanwhile (the skip still happened).
        return not self._held.unhold(held)

    def _jobs(self, pending: _Pending) -> list[Job]:
        """On the loop thread: the span's request and one job per admitted rule."""
        span = pending.held.span
        request = self._request(span, pending.reader, pending.kind, pending.scope,
                                span.attributes, pending.content(), pending.context)
        return [Job(request, rule, on_error, span)
                for rule, on_error in zip(pending.rules, pending.on_error, strict=True)]

    def _picked(self, admitted: list[Selected]) -> tuple[tuple[CompiledRule, ...],
                                                        tuple[bool, ...]]:
        """The admitted rules and their on-error flags as tuples, the same objects for every
        span the same rules picked (the rule sets seen are few: kept up to 256)."""
        key = tuple([(id(s.rule), s.on_error) for s in admitted])
        picked = self._picked_sets.get(key)
        if picked is None:
            picked = (tuple([s.rule for s in admitted]), tuple([s.on_error for s in admitted]))
            if len(self._picked_sets) < 256:
                self._picked_sets[key] = picked
        return picked

    def _admit(self, selected: list[Selected]) -> list[Selected]:
        """Apply the held-span cap, each rule's rate limit and budget (they count at the
        span's end); skips are counted."""
        if self._held.full():
            self._count_skips(selected, "held_spans_full")
            return []
        admitted = []
        for choice in selected:
            reason = choice.rule.admit()
            if reason is None:
                admitted.append(choice)
            else:
                self._count_skips([choice], reason)
        return admitted

    def _request(self, span: ReadableSpan, reader: Reader, kind: str | None, scope: str,
                 attrs: Any, content: Content | None,
                 context: tuple[tuple[Any, ...], tuple[Any, ...], Any]) -> ScoringRequest:
        ctx = span.context
        assert ctx is not None
        documents, tool_calls, beneath = context
        if content is None:
            content = reader.read(span, kind)
        content = finish(span, kind, content, beneath, reader_for)
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
            attributes=attrs,
            scope=scope,
            start_time=span.start_time or 0,
            end_time=span.end_time or 0,
            status=("error" if status is StatusCode.ERROR
                    else "ok" if status is StatusCode.OK else "unset"),
            error=content.error,
            content_missing=content.missing,
            documents_missing=None if documents else no_documents_reason(reader, span),
        )

    def _count_skips(self, selected: Sequence[Selected], reason: str) -> None:
        field = {
            "queue_full": "skipped_queue_full",
            "held_spans_full": "skipped_held_full",
            "rate_limited": "skipped_rate_limited",
            "budget": "skipped_budget",
        }[reason]
        with self._lock:
            setattr(self._stats, field, getattr(self._stats, field) + len(selected))
        if self._telemetry is not None:
            for choice in selected:
                self._telemetry.record_skip(choice.rule.scorer_id, reason)

    def _count_dropped(self, counts: Counter[str]) -> None:
        """Count scoring jobs that will never finish (tracescore shut down), by scorer id."""
        total = sum(counts.values())
        if not total:
            return
        with self._lock:
            self._stats.jobs_dropped += total
        if self._telemetry is not None:
            for scorer_id, n in counts.items():
                if n > 0:
                    self._telemetry.record_dropped(scorer_id, n)

    # -- export --------------------------------------------------------------------------------
    def _export(self, span: ReadableSpan) -> None:
        if self._downstream is None:
            return
        try:
            self._downstream.on_end(span)
            if not self._export_reports:
                with self._lock:
                    self._stats.spans_exported += 1
        except Exception:
            logger.warning("tracescore export processor failed; span %r lost", span.name,
                           exc_info=True)

    def _count_export(self, outcome: str, spans: int) -> None:
        """The export processor's report: ``spans`` accepted (``exported``) or dropped for the
        cause ``outcome``; any thread."""
        with self._lock:
            self._stats.count_export(outcome, spans)
        if self._telemetry is not None:
            self._telemetry.record_export(outcome, spans)

    # -- deadlines (on the loop thread) --------------------------------------------------------
    def _arm_sweep(self) -> None:
        if not self._sweep_armed and len(self._held):
            self._sweep_armed = True
            _loop.get_loop().call_later(self._score_timeout, self._sweep)

    def _sweep(self) -> None:
        now = time.monotonic()
        next_deadline = self._held.expire(now)
        self._sweep_armed = next_deadline is not None
        if next_deadline is not None:
            delay = max(next_deadline - now, _SWEEP_COALESCE)
            _loop.get_loop().call_later(delay, self._sweep)

    # -- lifecycle -----------------------------------------------------------------------------
    def force_flush(self, timeout_millis: float = 30_000) -> bool:
        """Wait for pending scores, export every held span, then flush the export processor,
        all within ``timeout_millis``.

        Scores get most of the deadline; the rest (a fifth, at least a quarter second when the
        deadline allows) is kept for the export, so held spans still reach the exporter when a
        scorer hangs. The export processor's flush runs on a helper thread, so a hung exporter
        or an unreachable backend cannot hold the caller past the deadline (the SDK's
        ``BatchSpanProcessor`` ignores flush deadlines).

        Returns True when every score came in and the export processor flushed in time. Spans
        whose scores are still pending at the deadline are exported with the scores they have;
        later scores go out on carrier spans.
        """
        budget = _seconds(timeout_millis)
        deadline = time.monotonic() + budget
        reserve = max(budget * 0.2, min(budget * 0.5, 0.25))
        # Spans that ended before this call and wait to be routed are routed here (held for
        # their scores or exported), or waited for while the loop routes them.
        self._route_waiting()
        if _loop.is_loop_thread():
            # Called by a scorer or an on_score callback: no job can finish while it waits.
            idle = self._engine.pending == 0
        else:
            idle = self._engine.wait_idle(max(0.0, deadline - reserve - time.monotonic()))
        remaining = self._held.release_all()
        # A span the backstop (or the loop's sweep) released is still being handed over on
        # its thread: the export processor's flush must come after it, or misses it.
        flushed = self._held.wait_handed_over(_left(deadline))
        if self._downstream is not None:
            downstream = self._downstream

            def flush() -> bool:
                left = max(0, int((deadline - time.monotonic()) * 1000))
                return bool(downstream.force_flush(left))

            flushed = self._call_before(flush, "flush", deadline) and flushed
        self._flush_missed = not (idle and flushed)
        return bool(idle and flushed and not remaining)

    def shutdown(self, timeout_millis: float | None = None) -> None:
        """Flush within ``timeout_millis`` (default: ``flush_timeout``), stop scoring, shut
        the export processor down.

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
        self.force_flush(timeout_millis)
        self._closed = True  # from now on on_end exports every span directly
        self._route_waiting()  # spans that ended during the flush: exported (closed)
        self._backstop.stop()
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

    def _after_fork_in_child(self) -> None:
        # The parent exports the spans it held and the engine's jobs did not survive fork():
        # the child forgets them (exporting them too would duplicate them).
        self._lock = threading.Lock()
        # Spans waiting to be routed are the parent's, which exports them.
        self._routes.clear()
        self._routing = threading.RLock()
        self._held.forget_all()
        self._span_events.after_fork_in_child()
        for rule in self._rules:
            rule.after_fork_in_child()
        if self._buffer is not None:
            self._buffer.after_fork_in_child()
        self._sweep_armed = False
        self._export_call = None
        self._backstop.after_fork_in_child()


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


_processors: weakref.WeakSet[ScoringSpanProcessor] = weakref.WeakSet()


def _reset_processors_after_fork() -> None:
    for processor in list(_processors):
        processor._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_processors_after_fork)
