"""Plain data between the stages of scoring: what a scorer is asked (``ScoringRequest``) and
what it came to (``ScoreOutcome``).

No OpenTelemetry SDK type appears here: a request is built by a reader from a span made in this
process, from a span received over OTLP, or from a row of an evaluation dataset, and the engine,
the scorers' call site and the writers treat all of them alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal["agent", "retrieval", "tool", "llm"]
"""The normalised operation kinds rules select on (``ScoringRule(on=...)``)."""

KINDS: tuple[str, ...] = ("agent", "retrieval", "tool", "llm")

Status = Literal["unset", "ok", "error"]


@dataclass(frozen=True)
class ScoringRequest:
    """Everything one scorer run needs, and what a writer needs to find the scored operation.

    Attributes:
        input: the operation's input as the reader found it: a string, chat messages, or any
            JSON-like value; None when the source carried none.
        output: the operation's output, likewise. For a retrieval, the documents' contents.
        documents: the contents of the documents retrieved earlier in the same trace, in
            retrieval order (context scorers judge these); for an evaluation item, its context
            pieces as the dataset gives them (strings or documents).
        tool_calls: the tool calls made under the scored operation, in call order, each a dict
            with ``name``, ``arguments``, ``result`` and, when the tool failed, ``error``.
        ground_truth: the expected answer, when the source has one (evaluation datasets).
        extra: other named scorer inputs (rule extractors, dataset columns).
        trace_id: the trace id as an int (0 when there is no trace, as in ``run_evals``).
        span_id: the scored span's id as an int (0 when there is no span).
        parent_span_id: the parent span's id, or None for a root.
        span_name: the scored span's name.
        kind: the normalised kind, or None when the reader could not tell.
        attributes: the span's attributes (read-only).
        scope: the name of the instrumentation scope that made the span ("" when unknown).
        start_time: the span's start, ns since the epoch (0 when unknown).
        end_time: the span's end, ns since the epoch (0 when unknown).
        status: ``unset``, ``ok`` or ``error``.
        error: the operation's exception as ``"Type: message"``, when it failed.
        content_missing: why the reader found no content to score, when it found none (for
            example the instrumentation's content-capture switch is off); scorers that need the
            content then report *not scorable* with this reason.
        documents_missing: why ``documents`` is empty, when it is (no retrieval span ended
            in the trace, and how to pass context instead); context scorers that find no
            context report it.
    """

    input: Any = None
    output: Any = None
    documents: tuple[Any, ...] = ()
    tool_calls: tuple[Mapping[str, Any], ...] = ()
    ground_truth: Any = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    trace_id: int = 0
    span_id: int = 0
    parent_span_id: int | None = None
    span_name: str = ""
    kind: str | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)
    scope: str = ""
    start_time: int = 0
    end_time: int = 0
    status: Status = "unset"
    error: str | None = None
    content_missing: str | None = None
    documents_missing: str | None = None


@dataclass(frozen=True)
class ScoreOutcome:
    """What one scorer run on one request came to, as every writer receives it.

    Attributes:
        request: the request that was scored.
        scorer_id: e.g. ``answer-relevancy``.
        score: the value (0..scale), or None when not scorable or failed.
        label: ``pass``/``fail``/``not_scorable`` or None (no threshold set).
        explanation: the scorer's reason, or what went wrong.
        error_type: set only when scoring failed (``timeout``, ``rate_limited``, ...).
        judge_model: the judge's model string when a judge was called.
        attributes: the ``gen_ai.evaluation.result`` attributes, as exported.
        timestamp: when the outcome was made, ns since the epoch.
        duration: seconds the scoring job took.
        result: the scorer's full result object, when there is one.
        source: the span the request was read from, for writers that answer on it (the
            carrier span of a late score needs its resource); None for other requests.
    """

    request: ScoringRequest
    scorer_id: str
    score: float | None
    label: str | None
    explanation: str
    error_type: str | None
    judge_model: str | None
    attributes: Mapping[str, Any]
    timestamp: int
    duration: float = 0.0
    result: Any = None
    source: Any = None
