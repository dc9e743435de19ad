"""The scoring span processor: the one bridge between spans and scorers.

For every ended span it either passes the span straight on to the export processor or, when a
``ScoringRule`` matches the span and the rule's trace-id sample picks its trace, holds the span,
runs the rule's scorer on a background worker, and passes on a copy of the span that carries the
``gen_ai.evaluation.result`` events once every score is in or the deadline passes. A score that
arrives after its span went out is exported on a short carrier span ``evaluation {scorer id}``,
a child of the scored span that links to it.

``on_start``/``on_end`` never block and never raise.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
import weakref
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import Event, ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, StatusCode, TraceFlags

from . import _semconv as sc
from ._limits import HourlyBudget, TokenBucket
from ._sampling import trace_sampled
from ._telemetry import Telemetry
from ._worker import CLAIMED, Admission, BackgroundWorker

logger = logging.getLogger("tracescore")

_MAX_TRACES_WITH_DOCUMENTS = 10_000
_MAX_PAYLOADS = 100_000
# Per trace: a long-lived root (a worker loop decorated as an agent) must not grow without bound.
_MAX_RETRIEVALS_PER_TRACE = 1_000
_MAX_TOOL_CALLS_PER_TRACE = 1_000
_MAX_SPANS_PER_TRACE = 10_000
_id_generator = RandomIdGenerator()


@dataclass
class Stats:
    """Counters of one configured tracescore instance since ``configure()``.

    Attributes:
        spans_exported: spans handed to the export processor (carrier spans included).
        spans_scored: spans that had at least one scoring job.
        spans_held: spans waiting for their scores right now.
        scores_attached: ``gen_ai.evaluation.result`` events on their scored span.
        scores_late: events that missed their span's deadline and went out on a carrier span.
        scores_not_scorable: events labelled ``not_scorable``.
        scoring_errors: events carrying ``error.type``.
        skipped_queue_full: scoring jobs refused because the queue was full.
        skipped_held_full: scoring jobs skipped because ``max_held_spans`` spans were held.
        skipped_rate_limited: scoring jobs skipped by a rule's ``max_per_minute``.
        skipped_budget: scoring jobs skipped by a rule's hourly judge budget.
        deadline_exports: spans exported before every score was in, by their
            ``score_timeout`` or by a ``force_flush``/``shutdown`` deadline.
        jobs_dropped: scoring jobs accepted that never finished because tracescore shut down
            (cancelled, or never started).
    """

    spans_exported: int = 0
    spans_scored: int = 0
    spans_held: int = 0
    scores_attached: int = 0
    scores_late: int = 0
    scores_not_scorable: int = 0
    scoring_errors: int = 0
    skipped_queue_full: int = 0
    skipped_held_full: int = 0
    skipped_rate_limited: int = 0
    skipped_budget: int = 0
    deadline_exports: int = 0
    jobs_dropped: int = 0


@dataclass(frozen=True)
class ScoreEvent:
    """One score as it lands on a span, handed to ``configure(on_score=...)`` callbacks.

    Attributes:
        scorer_id: e.g. ``answer-relevancy``.
        score: the value (0..scale), or None when not scorable or failed.
        label: ``pass``/``fail``/``not_scorable`` or None.
        explanation: the scorer's reason, or the error message.
        error_type: set only when scoring failed.
        trace_id: the scored span's trace id (int).
        span_id: the scored span's span id (int).
        span_name: the scored span's name.
        attributes: the event's attributes as exported.
        result: the scorer's full result object, when there is one.
    """

    scorer_id: str
    score: float | None
    label: str | None
    explanation: str
    error_type: str | None
    trace_id: int
    span_id: int
    span_name: str
    attributes: dict[str, Any]
    result: Any = None


@dataclass
class _Held:
    span: ReadableSpan
    pending: int
    events: list[Event] = field(default_factory=list)
    exported: bool = False


class _Admission(Admission):
    """A sampled span on its way from ``on_end`` to the worker's thread."""

    __slots__ = ("processor", "span", "payload", "rules", "forced", "documents", "tool_calls",
                 "ended", "exported")

    def __init__(self, processor: ScoringSpanProcessor, span: ReadableSpan, payload: Any,
                 rules: list[CompiledRule], forced: list[bool], documents: list[str] | None,
                 tool_calls: list[dict[str, Any]] | None) -> None:
        self.processor = processor
        self.span = span
        self.payload = payload
        self.rules = rules
        self.forced = forced
        self.documents = documents
        self.tool_calls = tool_calls
        self.ended = time.monotonic()  # when the span ended, for its score deadline
        # Set (to an already exported _Held) when a flush had to export the span before the
        # worker held it; its scores then go out on carrier spans.
        self.exported: _Held | None = None

    def admit(self) -> Any:
        return self.processor._hold(self)

    def drop(self) -> None:
        self.processor._drop(self)


@dataclass
class _TraceState:
    """What one in-flight trace left for the scoring of its later spans."""

    documents: deque[tuple[int, list[str]]] = field(
        default_factory=lambda: deque(maxlen=_MAX_RETRIEVALS_PER_TRACE)
    )
    tool_calls: deque[tuple[int, int, dict[str, Any]]] = field(
        default_factory=lambda: deque(maxlen=_MAX_TOOL_CALLS_PER_TRACE)
    )
    parents: dict[int, int | None] = field(default_factory=dict)


@dataclass(frozen=True)
class CompiledRule:
    """A ``ScoringRule`` made ready for the hot path by ``configure()``."""

    scorer: Any
    kind: str | None
    predicate: Callable[[ReadableSpan], bool] | None
    sample_rate: float
    salt: str
    threshold: float | None
    extractors: dict[str, Callable[[ReadableSpan, Any], Any]]
    span_name: re.Pattern[str] | None = None
    attributes: tuple[tuple[str, Any], ...] = ()
    score_errors: bool = False
    rate_limiter: TokenBucket | None = None
    budget: HourlyBudget | None = None

    def matches(self, span: ReadableSpan, kind: str | None) -> bool:
        """Kind (or predicate), span-name pattern and attribute filters; no sampling."""
        if self.predicate is not None:
            if not self.predicate(span):
                return False
        elif kind is None or kind != self.kind:
            return False
        if self.span_name is not None and not self.span_name.fullmatch(span.name):
            return False
        if self.attributes:
            attrs = span.attributes or {}
            for key, expected in self.attributes:
                if attrs.get(key) != expected:
                    return False
        return True

    def admit(self) -> str | None:
        """None when the rule's rate limit and budget admit one more job, else the skip
        reason (``rate_limited`` or ``budget``)."""
        if self.budget is not None and not self.budget.admits():
            return "budget"
        if self.rate_limiter is not None and not self.rate_limiter.try_take():
            return "rate_limited"
        return None


class ScoringSpanProcessor(SpanProcessor):
    """Holds sampled spans until their scores are attached, then hands them downstream.

    Args:
        downstream: the processor that exports (usually a ``BatchSpanProcessor``), or None to
            export nothing.
        rules: compiled scoring rules.
        worker: the background worker that runs scoring jobs.
        score_timeout: seconds a span is held for its scores before it is exported anyway.
        on_score: optional callback receiving each ``ScoreEvent`` (exceptions are logged).
        flush_timeout: seconds ``shutdown()`` takes when called without a deadline, as the
            SDK's ``TracerProvider.shutdown()`` (and its exit hook) calls it. Default 30.
        max_held_spans: spans held (or on their way to the worker) at once; None: no cap.
        telemetry: where score metrics, self-metrics and log records go.
        job_timeout: seconds a scoring job may run before it is cancelled and reported with
            ``error.type=timeout``; None: no limit.
    """

    def __init__(
        self,
        downstream: SpanProcessor | None,
        rules: Sequence[CompiledRule],
        worker: BackgroundWorker,
        *,
        score_timeout: float,
        on_score: Callable[[ScoreEvent], Any] | None = None,
        flush_timeout: float = 30.0,
        max_held_spans: int | None = None,
        telemetry: Telemetry | None = None,
        job_timeout: float | None = None,
    ) -> None:
        self._downstream = downstream
        self._job_timeout = job_timeout
        self._max_held = max_held_spans
        self._telemetry = telemetry
        self.flush_timeout = flush_timeout
        self._rules = list(rules)
        self._worker = worker
        self._score_timeout = score_timeout
        self._on_score = on_score
        self._lock = threading.Lock()
        self._held: dict[tuple[int, int], _Held] = {}
        self._payloads: dict[tuple[int, int], Any] = {}
        self._traces: OrderedDict[int, _TraceState] = OrderedDict()
        self._collect_documents = any(getattr(r.scorer, "uses_context", False) for r in rules)
        self._collect_tool_calls = any(
            getattr(r.scorer, "uses_tool_calls", False) for r in rules
        )
        self._deadlines: deque[tuple[float, tuple[int, int]]] = deque()
        self._sweep_armed = False
        self._transit: set[_Admission] = set()  # sampled spans on their way to the worker
        self._unfinished: Counter[str] = Counter()  # scoring jobs made and not finished, by id
        self._closed = False
        self._shutdown_started = False
        self._export_call: _Call | None = None
        self.stats = Stats()
        _processors.add(self)

    # -- the decorators' side door --------------------------------------------------------------
    def put_payload(self, span: Any, payload: Any) -> None:
        """Keep a decorated call's full input/output until its span ends (called right before
        ``span.end()``)."""
        if not self._rules:
            return
        ctx = span.get_span_context()
        if len(self._payloads) >= _MAX_PAYLOADS:
            # Spans that never reach on_end (ended on another provider) must not pile up.
            self._payloads.clear()
        self._payloads[(ctx.trace_id, ctx.span_id)] = payload

    # -- SpanProcessor -------------------------------------------------------------------------
    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if self._downstream is not None:
            try:
                self._downstream.on_start(span, parent_context=parent_context)
            except Exception:
                logger.debug("tracescore export processor failed in on_start", exc_info=True)

    def on_end(self, span: ReadableSpan) -> None:
        try:
            if self._route(span):
                return
        except Exception:
            logger.warning("tracescore failed to schedule scoring for span %r; it is exported "
                           "unscored and the application is unaffected", span.name, exc_info=True)
            if self._release_failed(span):
                return
        self._export(span)

    def _release_failed(self, span: ReadableSpan) -> bool:
        """After ``_route`` failed: if it had already held ``span``, export it now (once) and
        return True; jobs that still finish report on carrier spans."""
        ctx = span.context
        if ctx is None:
            return False
        with self._lock:
            held = self._held.get((ctx.trace_id, ctx.span_id))
            if held is None or held.span is not span:
                return False
            released = self._release(held)
        if released:
            self._export_held(held)
        return True

    def _route(self, span: ReadableSpan) -> bool:
        """Return True when the span is held for scoring (and will be exported later)."""
        ctx = span.context
        if ctx is None or not self._rules or self._closed:
            return False
        key = (ctx.trace_id, ctx.span_id)
        payload = self._payloads.pop(key, None)
        attrs = span.attributes or {}
        if attrs.get(sc.TRACESCORE_EVALUATION_CARRIER):
            return False
        # The payload knows the kind even when the attribute was pushed out of a full span.
        kind = payload.kind if payload is not None else attrs.get(sc.TRACESCORE_SPAN_KIND)
        if self._collect_documents or self._collect_tool_calls:
            self._remember(span, kind, payload)
        is_local_root = span.parent is None or span.parent.is_remote
        failed = span.status.status_code is StatusCode.ERROR
        kind_name = kind if isinstance(kind, str) else None
        selected: list[tuple[CompiledRule, bool]] = []
        for r in self._rules:
            if not r.matches(span, kind_name):
                continue
            if trace_sampled(ctx.trace_id, r.sample_rate, r.salt):
                selected.append((r, False))
            elif r.score_errors and failed:
                selected.append((r, True))
        matched: list[CompiledRule] = []
        forced: list[bool] = []
        held_full = False
        if selected and self._max_held is not None:
            with self._lock:  # spans on their way to the worker count as held
                held_full = len(self._held) + len(self._transit) >= self._max_held
        for r, by_error in selected:
            # Rate limits and budgets count at the span's end.
            reason = "held_spans_full" if held_full else r.admit()
            if reason is None:
                matched.append(r)
                forced.append(by_error)
            else:
                self._count_skip(r, reason)
        documents = (
            self._trace_documents(ctx.trace_id) if matched and self._collect_documents else None
        )
        tool_calls = (
            self._tool_calls_under(ctx.trace_id, ctx.span_id)
            if matched and self._collect_tool_calls else None
        )
        if is_local_root and (self._collect_documents or self._collect_tool_calls):
            with self._lock:
                self._traces.pop(ctx.trace_id, None)
        if not matched:
            return False
        # Everything else (holding the span, building its jobs, arming its deadline) happens on
        # the worker's thread: this thread is the application's, and every line here is paid
        # by the decorated call, cold caches and all.
        admission = _Admission(self, span, payload, matched, forced, documents, tool_calls)
        with self._lock:
            # The cap counts spans on their way to the worker; checked again here, in the same
            # lock section that reserves the place, so racing threads cannot pass it.
            if self._max_held is not None and len(self._held) + len(self._transit) >= \
                    self._max_held:
                held_full = True
            else:
                self._transit.add(admission)
                self.stats.spans_held = len(self._held) + len(self._transit)
        if held_full:
            for rule in matched:
                self._count_skip(rule, "held_spans_full")
            return False
        if self._worker.submit(admission):
            return True
        if not self._claim(admission):
            return True  # the worker dropped it on its way out: exported already
        for rule in matched:
            self._count_skip(rule, "queue_full")
        return False

    def _finished(self, scorer_id: str) -> None:
        with self._lock:
            if self._unfinished[scorer_id] > 0:
                self._unfinished[scorer_id] -= 1

    def _count_dropped(self, counts: Counter[str]) -> None:
        """Count scoring jobs that will never finish (tracescore shut down), by scorer id."""
        total = sum(counts.values())
        if not total:
            return
        with self._lock:
            self.stats.jobs_dropped += total
        if self._telemetry is not None:
            for scorer_id, n in counts.items():
                if n > 0:
                    self._telemetry.record_dropped(scorer_id, n)

    def _claim(self, admission: _Admission) -> bool:
        """Take ``admission`` out of transit; False when another thread already did."""
        with self._lock:
            if admission not in self._transit:
                return False
            self._transit.discard(admission)
            self.stats.spans_held = len(self._held) + len(self._transit)
            return True

    def _hold(self, admission: _Admission) -> Any:
        """Hold ``admission``'s span and return its first scoring job (the others are
        submitted), None when the span was exported instead, or ``CLAIMED`` when another thread
        (a flush, a shutdown) took the admission first.

        Whoever claims an admission owns its place in the worker's queue: the worker's loop
        (its usual caller) runs the job in it or releases it on None."""
        span = admission.span
        ctx = span.context
        assert ctx is not None
        key = (ctx.trace_id, ctx.span_id)
        rules = admission.rules
        with self._lock:
            # Out of transit and into _held in one step: a flush or shutdown sees the span in
            # one place or the other, never in neither.
            if admission not in self._transit:
                return CLAIMED
            self._transit.discard(admission)
            held = admission.exported  # a flush past its deadline exported the span already
            closed = self._closed and held is None
            if held is None:
                held = _Held(span=span, pending=len(rules))
                if not closed:
                    self._held[key] = held
                else:
                    self.stats.deadline_exports += 1
            if not closed:
                self.stats.spans_scored += 1
            self.stats.spans_held = len(self._held) + len(self._transit)
        if closed:
            self._export(span)
            return None
        inputs = _scoring_inputs(span, admission.payload)
        jobs = [
            _make_job(self, held, rule, inputs, admission.documents, admission.tool_calls, forced)
            for rule, forced in zip(rules, admission.forced, strict=True)
        ]
        with self._lock:
            self._unfinished.update(_scorer_id(rule) for rule in rules)
        for rule, job in zip(rules[1:], jobs[1:], strict=True):
            if not self._worker.submit(job):
                self._count_skip(rule, "queue_full")
                self._finished(_scorer_id(rule))
                self._settle(held, None)
        # The deadline runs from the span's end, not from now.
        deadline = admission.ended + self._score_timeout
        with self._lock:
            arm = False
            if key in self._held:
                # Deadlines arrive (nearly) in order, one timeout for all: a FIFO will do.
                self._deadlines.append((deadline, key))
                arm = not self._sweep_armed
                self._sweep_armed = self._sweep_armed or arm
        if arm:
            self._arm(deadline)
        return jobs[0]

    def _drop(self, admission: _Admission) -> None:
        """The worker stopped before ``admission`` ran, or failed to run it: export its span
        now, unless another thread claimed it (or a flush exported it already)."""
        if not self._claim(admission):
            return
        self._count_dropped(Counter(_scorer_id(rule) for rule in admission.rules))
        if admission.exported is not None:
            return
        with self._lock:
            self.stats.deadline_exports += 1
        self._export(admission.span)

    def _claim_in_transit(self, deadline: float) -> bool:
        """For a flush: hold, on this thread, every span still on its way to the worker, until
        ``deadline``; past it, export the rest unscored. Returns True when all were held."""
        with self._lock:
            pending = list(self._transit)
        done = 0
        while done < len(pending) and time.monotonic() < deadline:
            job = self._hold(pending[done])
            done += 1
            if job is CLAIMED:
                continue
            # This thread claimed it, so it owns the admission's place in the queue.
            if job is None or not self._worker.requeue(job):
                self._worker.release()
        if done == len(pending):
            return True
        # No time left to hold the rest here: export them now, in one lock section, and leave
        # their scoring to the worker (the scores then go out on carrier spans), as for a held
        # span.
        late: list[_Admission] = []
        with self._lock:
            for admission in pending[done:]:
                if admission in self._transit and admission.exported is None:
                    admission.exported = _Held(span=admission.span,
                                               pending=len(admission.rules), exported=True)
                    late.append(admission)
            self.stats.deadline_exports += len(late)
        for admission in late:
            self._export(admission.span)
        return False

    def _arm(self, when: float) -> None:
        try:
            self._worker.call_at_monotonic(when, self._sweep)
        except Exception:
            # Not armed: the next held span tries again; force_flush exports these anyway.
            with self._lock:
                self._sweep_armed = False
            logger.debug("tracescore could not arm the score deadline", exc_info=True)

    def _remember(self, span: ReadableSpan, kind: Any, payload: Any) -> None:
        """Keep what later spans of the same trace may be scored against: retrieved documents
        (context scorers) and tool calls with the span tree above them (tool scorers)."""
        ctx = span.context
        assert ctx is not None
        with self._lock:
            state = self._traces.get(ctx.trace_id)
            if state is None:
                state = self._traces[ctx.trace_id] = _TraceState()
                while len(self._traces) > _MAX_TRACES_WITH_DOCUMENTS:
                    self._traces.popitem(last=False)
            if self._collect_tool_calls:
                state.parents[ctx.span_id] = span.parent.span_id if span.parent else None
                if len(state.parents) > _MAX_SPANS_PER_TRACE:
                    del state.parents[next(iter(state.parents))]
            if payload is None:
                return
            if kind == "retrieval" and self._collect_documents and payload.documents is not None:
                state.documents.append(
                    (span.start_time or 0, [d.content for d in payload.documents])
                )
            elif kind == "tool" and self._collect_tool_calls:
                attrs = span.attributes or {}
                call = {
                    "name": str(attrs.get(sc.GEN_AI_TOOL_NAME, span.name)),
                    "arguments": payload.arguments,
                    "result": payload.output,
                }
                if payload.error is not None:
                    call["error"] = f"{type(payload.error).__name__}: {payload.error}"
                state.tool_calls.append((span.start_time or 0, ctx.span_id, call))

    def _trace_documents(self, trace_id: int) -> list[str]:
        with self._lock:
            state = self._traces.get(trace_id)
            entry = list(state.documents) if state is not None else []
        entry.sort(key=lambda item: item[0])
        return [c for _, contents in entry for c in contents]

    def _tool_calls_under(self, trace_id: int, span_id: int) -> list[dict[str, Any]]:
        """Tool calls made by descendants of ``span_id`` (tool spans under it), in call order."""
        with self._lock:
            state = self._traces.get(trace_id)
            if state is None:
                return []
            calls = sorted(state.tool_calls, key=lambda item: item[0])
            parents = dict(state.parents)
        found = []
        for _, tool_span_id, call in calls:
            node: int | None = parents.get(tool_span_id)
            for _ in range(256):  # depth guard against malformed trees
                if node is None or node == span_id:
                    break
                node = parents.get(node)
            if node == span_id or tool_span_id == span_id:
                found.append(call)
        return found

    def _count_skip(self, rule: CompiledRule, reason: str) -> None:
        with self._lock:
            if reason == "queue_full":
                self.stats.skipped_queue_full += 1
            elif reason == "held_spans_full":
                self.stats.skipped_held_full += 1
            elif reason == "rate_limited":
                self.stats.skipped_rate_limited += 1
            elif reason == "budget":
                self.stats.skipped_budget += 1
        if self._telemetry is not None:
            self._telemetry.record_skip(str(getattr(rule.scorer, "id", "custom")), reason)

    def pending_jobs(self) -> int:
        """Scoring jobs accepted and not finished (for the queue-size gauge)."""
        return self._worker.pending

    def held_spans(self) -> int:
        """Spans held for their scores right now, those on their way to the worker included
        (for the held-spans gauge)."""
        return len(self._held) + len(self._transit)

    # -- results -------------------------------------------------------------------------------
    def _settle(self, held: _Held, event: Event | None, score: ScoreEvent | None = None,
                duration: float = 0.0) -> None:
        """Attach one job's event (None for a skipped job); export when the last one is in."""
        late = False
        export = False
        with self._lock:
            if held.exported:
                late = event is not None
            else:
                if event is not None:
                    held.events.append(event)
                held.pending -= 1
                if held.pending <= 0:
                    export = self._release(held)
            if event is not None:
                attrs = event.attributes or {}
                if sc.ERROR_TYPE in attrs:
                    self.stats.scoring_errors += 1
                elif attrs.get(sc.GEN_AI_EVALUATION_SCORE_LABEL) == sc.LABEL_NOT_SCORABLE:
                    self.stats.scores_not_scorable += 1
                if late:
                    self.stats.scores_late += 1
                else:
                    self.stats.scores_attached += 1
        if export:
            self._export_held(held)
        if late and event is not None:
            self._export(self._carrier(held.span, event))
        if score is not None and self._telemetry is not None:
            self._telemetry.record_score(score, duration)
        if score is not None and self._on_score is not None:
            try:
                self._on_score(score)
            except BaseException:  # noqa: BLE001 - user code on our thread: nothing may escape
                logger.warning("tracescore on_score callback raised", exc_info=True)

    def _release(self, held: _Held) -> bool:
        """Mark ``held`` exported and forget it; caller holds the lock. True if it was held."""
        if held.exported:
            return False
        held.exported = True
        ctx = held.span.context
        assert ctx is not None
        self._held.pop((ctx.trace_id, ctx.span_id), None)
        self.stats.spans_held = len(self._held) + len(self._transit)
        return True

    def _sweep(self) -> None:
        """Export the held spans whose deadline passed; re-arm for the next deadline."""
        now = time.monotonic()
        expired: list[_Held] = []
        with self._lock:
            while self._deadlines and self._deadlines[0][0] <= now:
                _, key = self._deadlines.popleft()
                held = self._held.get(key)
                if held is not None and self._release(held):
                    self.stats.deadline_exports += 1
                    expired.append(held)
            next_deadline = self._deadlines[0][0] if self._deadlines else None
            self._sweep_armed = next_deadline is not None
        for held in expired:
            self._export_held(held)
        if next_deadline is not None:
            # Coalesce: one sweep per 50 ms at most, however many spans are held.
            self._arm(max(next_deadline, now + 0.05))

    def _export_held(self, held: _Held) -> None:
        span = held.span
        if held.events:
            span = _with_events(span, held.events)
        self._export(span)

    def _export(self, span: ReadableSpan) -> None:
        if self._downstream is None:
            return
        try:
            self._downstream.on_end(span)
            with self._lock:
                self.stats.spans_exported += 1
        except Exception:
            logger.warning("tracescore export processor failed; span %r lost", span.name,
                           exc_info=True)

    def _carrier(self, scored: ReadableSpan, event: Event) -> ReadableSpan:
        parent = scored.context
        assert parent is not None
        ctx = SpanContext(
            trace_id=parent.trace_id,
            span_id=_id_generator.generate_span_id(),
            is_remote=False,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
            trace_state=parent.trace_state,
        )
        name = str((event.attributes or {}).get(sc.GEN_AI_EVALUATION_NAME, "score"))
        now = time.time_ns()
        return ReadableSpan(
            name=f"evaluation {name}",
            context=ctx,
            parent=parent,
            resource=scored.resource,
            attributes={
                sc.OPENINFERENCE_SPAN_KIND: sc.OI_KIND_EVALUATOR,
                sc.GEN_AI_EVALUATION_NAME: name,
                sc.TRACESCORE_EVALUATION_CARRIER: True,
            },
            events=[event],
            links=[Link(parent)],
            kind=SpanKind.INTERNAL,
            instrumentation_scope=InstrumentationScope(sc.INSTRUMENTATION_SCOPE),
            start_time=now,
            end_time=now,
        )

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
        try:
            # Spans still on their way to the worker count as held: hold them now.
            all_held = self._claim_in_transit(deadline - reserve)
        except Exception:
            all_held = False
            logger.warning("tracescore failed to hold spans in transit", exc_info=True)
        idle = self._worker.wait_idle(max(0.0, deadline - reserve - time.monotonic()))
        with self._lock:
            remaining = [h for h in list(self._held.values()) if self._release(h)]
            self.stats.deadline_exports += len(remaining)
        for held in remaining:
            self._export_held(held)
        flushed = True
        if self._downstream is not None:
            downstream = self._downstream

            def flush() -> bool:
                left = max(0, int((deadline - time.monotonic()) * 1000))
                return bool(downstream.force_flush(left))

            flushed = self._call_before(flush, "flush", deadline)
        return bool(all_held and idle and flushed and not remaining)

    def shutdown(self, timeout_millis: float | None = None) -> None:
        """Flush within ``timeout_millis`` (default: ``flush_timeout``), stop the worker, shut
        the export processor down.

        Only the first call does anything: tracescore's exit hook and the SDK's
        ``TracerProvider`` (at exit) both shut processors down, and the second must not wait
        again.
        """
        with self._lock:
            if self._shutdown_started:
                return
            self._shutdown_started = True
        if timeout_millis is None:
            timeout_millis = self.flush_timeout * 1000
        budget = _seconds(timeout_millis)
        deadline = time.monotonic() + budget
        self.force_flush(timeout_millis)
        with self._lock:
            # Closed, and every span in transit claimed here, in one step: a racing hold then
            # finds its span claimed and leaves it alone.
            self._closed = True
            claimed = len(self._transit)
            never_held = Counter(_scorer_id(r) for a in self._transit for r in a.rules)
            leftovers = [a for a in self._transit if a.exported is None]
            self._transit.clear()
            self.stats.deadline_exports += len(leftovers)
            self.stats.spans_held = len(self._held)
        for _ in range(claimed):
            self._worker.release()  # their places in the queue are ours now: give them back
        self._count_dropped(never_held)
        for admission in leftovers:
            self._export(admission.span)
        self._worker.shutdown(_left(deadline))
        with self._lock:
            remaining = [h for h in list(self._held.values()) if self._release(h)]
            self.stats.deadline_exports += len(remaining)
            unfinished = +self._unfinished  # cancelled or never started: dropped
            self._unfinished.clear()
        self._count_dropped(unfinished)
        for held in remaining:
            self._export_held(held)
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
        # The parent exports the spans it held and the worker's jobs did not survive fork():
        # the child forgets them (exporting them too would duplicate them) and re-arms afresh.
        self._lock = threading.Lock()
        self._held.clear()
        self._transit.clear()
        self._unfinished.clear()
        self._deadlines.clear()
        self._sweep_armed = False
        self._export_call = None
        self.stats.spans_held = 0


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


def _with_events(span: ReadableSpan, extra: list[Event]) -> ReadableSpan:
    """A copy of ``span`` with ``extra`` events appended, built with the public constructor."""
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=span.attributes,
        events=tuple(span.events) + tuple(extra),
        links=span.links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


@dataclass(frozen=True)
class _Inputs:
    input: Any
    output: Any
    error: BaseException | None


def _scoring_inputs(span: ReadableSpan, payload: Any) -> _Inputs:
    if payload is not None:
        output = payload.output
        if getattr(payload, "kind", None) == "retrieval" and payload.documents is not None:
            output = [d.content for d in payload.documents]
        return _Inputs(payload.input, output, payload.error)
    # A span tracescore did not make (another instrumentation matched a predicate rule): read
    # what the span carries, which may be truncated.
    attrs = span.attributes or {}
    return _Inputs(attrs.get(sc.INPUT_VALUE), attrs.get(sc.OUTPUT_VALUE), None)


_score_event: Any = None


def _scorer_id(rule: CompiledRule) -> str:
    return str(getattr(rule.scorer, "id", "custom"))


def _make_job(
    processor: ScoringSpanProcessor,
    held: _Held,
    rule: CompiledRule,
    inputs: _Inputs,
    documents: list[str] | None,
    tool_calls: list[dict[str, Any]] | None,
    on_error: bool = False,
) -> Callable[[], Any]:
    global _score_event
    if _score_event is None:
        # Imported on first use: keeps the scoring code off `import tracescore`.
        from ._scoring import score_event as loaded

        _score_event = loaded
    score_event = _score_event
    scorer_id = _scorer_id(rule)

    async def job() -> None:
        started = time.monotonic()
        try:
            event, score = await score_event(held.span, rule, inputs, documents, tool_calls,
                                             processor._job_timeout)
            if on_error:
                attrs = dict(event.attributes or {})
                attrs[sc.TRACESCORE_SELECTED_ON_ERROR] = True
                event = Event(event.name, attrs, timestamp=event.timestamp)
            if rule.budget is not None and score.result is not None:
                result = score.result
                rule.budget.spend(
                    (getattr(result, "input_tokens", 0) or 0)
                    + (getattr(result, "output_tokens", 0) or 0),
                    getattr(result, "cost", None),
                )
        except BaseException:
            # score_event reports scorer failures as events; this is cancellation at shutdown
            # or a bug: the span must not wait for a result that will never come. The job stays
            # unfinished: shutdown counts it as dropped.
            processor._settle(held, None)
            raise
        processor._finished(scorer_id)
        processor._settle(held, event, score, time.monotonic() - started)

    return job
