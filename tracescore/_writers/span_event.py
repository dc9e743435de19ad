"""The writer that puts each score on the span it judges, as a ``gen_ai.evaluation.result``
span event, with the score also as searchable span attributes
(``_writers.attributes``).

While the scored span is held, the event joins it and the span is exported once its last score
is in. A score that comes after its span went out (deadline, flush) is exported on a carrier
span ``evaluation {scorer id}``: a child of the scored span, in the same trace, linking to it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable

from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, TraceFlags

from tracescore._core import semconv as sc
from tracescore._core.stats import Stats
from tracescore._pipeline.held import HeldSpans
from tracescore._pipeline.request import ScoreOutcome

from .attributes import span_attributes

_ids = RandomIdGenerator()


class SpanEventWriter:
    """Attaches each outcome to its held span, or exports it on a carrier span.

    Args:
        held: the processor's held spans.
        export: hands a finished span to the export processor.
        stats: the counters to keep (scores attached, late, not scorable, errors).
    """

    def __init__(self, held: HeldSpans, export: Callable[[ReadableSpan], None],
                 stats: Stats) -> None:
        self._held = held
        self._export = export
        self._stats = stats
        self._lock = threading.Lock()

    def after_fork_in_child(self) -> None:
        """The loop thread may have held the lock at ``fork()``: take a new one."""
        self._lock = threading.Lock()

    def write(self, outcome: ScoreOutcome) -> None:
        event = Event(sc.GEN_AI_EVALUATION_RESULT_EVENT, dict(outcome.attributes),
                      timestamp=outcome.timestamp)
        request = outcome.request
        attached = self._held.attach((request.trace_id, request.span_id), event,
                                     span_attributes(outcome))
        with self._lock:
            if outcome.error_type is not None:
                self._stats.scoring_errors += 1
            elif outcome.label == sc.LABEL_NOT_SCORABLE:
                self._stats.scores_not_scorable += 1
            if attached:
                self._stats.scores_attached += 1
            else:
                self._stats.scores_late += 1
        if not attached:
            self._export(carrier(outcome, event))


def carrier(outcome: ScoreOutcome, event: Event) -> ReadableSpan:
    """The short span ``evaluation {scorer id}`` that carries a late score: a child of the
    scored span that links to it."""
    request = outcome.request
    scored = outcome.source
    trace_state = getattr(getattr(scored, "context", None), "trace_state", None)
    parent = SpanContext(
        trace_id=request.trace_id,
        span_id=request.span_id,
        is_remote=False,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
        trace_state=trace_state,
    )
    ctx = SpanContext(
        trace_id=request.trace_id,
        span_id=_ids.generate_span_id(),
        is_remote=False,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
        trace_state=trace_state,
    )
    now = time.time_ns()
    return ReadableSpan(
        name=f"evaluation {outcome.scorer_id}",
        context=ctx,
        parent=parent,
        resource=getattr(scored, "resource", None),
        attributes={
            sc.GEN_AI_OPERATION_NAME: sc.OPERATION_EVALUATION,
            # Phoenix shows an EVALUATOR span's output: the score, label and explanation.
            sc.OPENINFERENCE_SPAN_KIND: sc.OI_KIND_EVALUATOR,
            sc.OUTPUT_VALUE: json.dumps(
                {"score": outcome.score, "label": outcome.label,
                 "explanation": outcome.explanation, "error_type": outcome.error_type},
                ensure_ascii=False),
            sc.OUTPUT_MIME_TYPE: sc.MIME_JSON,
            sc.GEN_AI_EVALUATION_NAME: outcome.scorer_id,
            sc.TRACESCORE_EVALUATION_CARRIER: True,
            **span_attributes(outcome),
        },
        events=[event],
        links=[Link(parent)],
        kind=SpanKind.INTERNAL,
        instrumentation_scope=InstrumentationScope(sc.INSTRUMENTATION_SCOPE),
        start_time=now,
        end_time=now,
    )
