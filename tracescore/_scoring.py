"""Turns one scoring job into a ``gen_ai.evaluation.result`` event.

Runs on the background worker. Knows the scorer interface (``arun`` and ``ScoreResult``) and the
event's attribute names; nothing else.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from opentelemetry.sdk.trace import Event, ReadableSpan

from . import _semconv as sc
from ._errors import ScoringError
from ._processor import CompiledRule, ScoreEvent, _Inputs
from ._serialize import truncate

logger = logging.getLogger("tracescore")

_MAX_EXPLANATION = 4_096


def label_for(score: float | None, threshold: float | None, higher_is_better: bool) -> str | None:
    """``pass``/``fail`` against ``threshold`` (inclusive), ``not_scorable`` for a missing
    score, None when no threshold is set."""
    if score is None:
        return sc.LABEL_NOT_SCORABLE
    if threshold is None:
        return None
    ok = score >= threshold if higher_is_better else score <= threshold
    return sc.LABEL_PASS if ok else sc.LABEL_FAIL


async def score_event(
    span: ReadableSpan,
    rule: CompiledRule,
    inputs: _Inputs,
    documents: list[str] | None,
    tool_calls: list[dict[str, Any]] | None = None,
) -> tuple[Event, ScoreEvent]:
    """Run ``rule.scorer`` on a span's inputs and build the event that reports the outcome.

    Never raises: a scorer failure becomes an event with ``error.type``.
    """
    scorer = rule.scorer
    scorer_id = str(getattr(scorer, "id", "custom"))
    attrs: dict[str, Any] = {
        sc.GEN_AI_EVALUATION_NAME: scorer_id,
        sc.TRACESCORE_SAMPLE_RATE: float(rule.sample_rate),
    }
    result: Any = None
    score: float | None = None
    label: str | None = None
    error_type: str | None = None
    try:
        kwargs: dict[str, Any] = {"input": inputs.input, "output": inputs.output}
        for name, extract in rule.extractors.items():
            kwargs[name] = extract(span, inputs)
        if getattr(scorer, "uses_context", False):
            kwargs["context"] = documents or []
        if getattr(scorer, "uses_tool_calls", False) and "tool_calls" not in kwargs:
            kwargs["tool_calls"] = tool_calls or []
        result = await scorer.arun(**kwargs)
        raw = getattr(result, "score", None)
        score = None if raw is None else float(raw)
        explanation = str(getattr(result, "reason", "") or "")
        label = label_for(score, rule.threshold, bool(getattr(scorer, "higher_is_better", True)))
        model = getattr(result, "judge_model", None)
        if model:
            attrs[sc.TRACESCORE_JUDGE_MODEL] = str(model)
    except ScoringError as exc:
        error_type = exc.error_type
        explanation = str(exc) or error_type
    except Exception as exc:
        error_type = "scorer_error"
        explanation = f"{type(exc).__name__}: {exc}"
        logger.warning("tracescore scorer %r raised; recorded as error.type=scorer_error",
                       scorer_id, exc_info=True)
    if score is not None:
        attrs[sc.GEN_AI_EVALUATION_SCORE_VALUE] = score
    if label is not None:
        attrs[sc.GEN_AI_EVALUATION_SCORE_LABEL] = label
    attrs[sc.GEN_AI_EVALUATION_EXPLANATION] = truncate(explanation, _MAX_EXPLANATION)
    if error_type is not None:
        attrs[sc.ERROR_TYPE] = error_type
    ctx = span.context
    assert ctx is not None
    event = Event(sc.GEN_AI_EVALUATION_RESULT_EVENT, attrs, timestamp=time.time_ns())
    return event, ScoreEvent(
        scorer_id=scorer_id,
        score=score,
        label=label,
        explanation=attrs[sc.GEN_AI_EVALUATION_EXPLANATION],
        error_type=error_type,
        trace_id=ctx.trace_id,
        span_id=ctx.span_id,
        span_name=span.name,
        attributes=dict(attrs),
        result=result,
    )
