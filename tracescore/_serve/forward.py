"""``mode: forward_first``: every span goes downstream as it arrives; its scores follow.

In this mode the service hands each received span to the export processor before it answers
the request, and answers only once the export processor has settled it (sent, or written to
the retry spool), so a replica killed after answering loses no span. The scoring processor
still reads, holds and scores its own copy of a scored span; when that copy is released (its
scores are in, or ``score_timeout`` passed) this processor, the scoring processor's downstream,
forwards only the scores: one carrier span ``evaluation {scorer id}`` per
``gen_ai.evaluation.result`` event, a child of the scored span in its trace, linking to it, with
the event and the score's searchable attributes (the carrier spans of late scores in the hold
mode). The score log records go out as in the hold mode. A crash loses at most the scores in
flight.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, TraceFlags

from tracescore._core import semconv as sc

from .._writers.attributes import attribute_key

_ids = RandomIdGenerator()


def score_carrier(scored: ReadableSpan, event: Any) -> ReadableSpan:
    """The carrier span of one ``gen_ai.evaluation.result`` event of ``scored``.

    Args:
        scored: the released held copy of the scored span (its events hold the scores).
        event: one of its score events.
    """
    ctx = scored.context
    assert ctx is not None
    attrs = dict(event.attributes or {})
    scorer_id = str(attrs.get(sc.GEN_AI_EVALUATION_NAME, "score"))
    key = attribute_key(scorer_id)
    prefixes = (sc.TRACESCORE_SCORE_PREFIX + key, sc.TRACESCORE_LABEL_PREFIX + key,
                sc.TRACESCORE_SCORE_ERROR_PREFIX + key)
    searchable = {k: v for k, v in (scored.attributes or {}).items() if k in prefixes}
    parent = SpanContext(ctx.trace_id, ctx.span_id, is_remote=False,
                         trace_flags=TraceFlags(TraceFlags.SAMPLED),
                         trace_state=ctx.trace_state)
    own = SpanContext(ctx.trace_id, _ids.generate_span_id(), is_remote=False,
                      trace_flags=TraceFlags(TraceFlags.SAMPLED), trace_state=ctx.trace_state)
    output = {"score": attrs.get(sc.GEN_AI_EVALUATION_SCORE_VALUE),
              "label": attrs.get(sc.GEN_AI_EVALUATION_SCORE_LABEL),
              "explanation": attrs.get(sc.GEN_AI_EVALUATION_EXPLANATION),
              "error_type": attrs.get(sc.ERROR_TYPE)}
    stamp = event.timestamp
    return ReadableSpan(
        name=f"evaluation {scorer_id}",
        context=own,
        parent=parent,
        resource=scored.resource,
        attributes={
            sc.GEN_AI_OPERATION_NAME: sc.OPERATION_EVALUATION,
            sc.OPENINFERENCE_SPAN_KIND: sc.OI_KIND_EVALUATOR,
            sc.OUTPUT_VALUE: json.dumps(output, ensure_ascii=False),
            sc.OUTPUT_MIME_TYPE: sc.MIME_JSON,
            sc.GEN_AI_EVALUATION_NAME: scorer_id,
            sc.TRACESCORE_EVALUATION_CARRIER: True,
            **searchable,
        },
        events=[event],
        links=[Link(parent)],
        kind=SpanKind.INTERNAL,
        instrumentation_scope=InstrumentationScope(sc.INSTRUMENTATION_SCOPE),
        start_time=stamp,
        end_time=stamp,
    )


class ScoresOnly(SpanProcessor):
    """The scoring processor's downstream in ``forward_first`` mode: carrier spans pass;
    a released scored span is turned into the carrier spans of its scores.

    Args:
        export: the service's ``ExportProcessor``.
    """

    starts_nothing = True

    def __init__(self, export: Any) -> None:
        self._export = export
        self._lock = threading.Lock()
        #: Scores sent on carrier spans made here.
        self.carried = 0

    def report_to(self, report: Any) -> None:
        """The export processor's counts go to ``report`` (the scoring processor's)."""
        self._export.report_to(report)

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        attrs = span.attributes or {}
        if attrs.get(sc.TRACESCORE_EVALUATION_CARRIER):
            self._export.on_end(span)
            return
        carried = 0
        for event in span.events:
            if event.name == sc.GEN_AI_EVALUATION_RESULT_EVENT:
                self._export.on_end(score_carrier(span, event))
                carried += 1
        if carried:
            with self._lock:
                self.carried += carried

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return bool(self._export.force_flush(timeout_millis))

    def shutdown(self, timeout_millis: float = 30_000) -> None:
        self._export.shutdown(timeout_millis)
