"""``InMemoryScoreExporter``: OTel's in-memory exporter with readers for scores."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracescore._core import semconv as sc

__all__ = ["InMemoryScoreExporter", "evaluation_events", "span_as_dict"]

# One tick of the deterministic clock of ``spans_as_dicts``: a second, in nanoseconds.
_TICK_NS = 1_000_000_000


def evaluation_events(span: ReadableSpan) -> list[dict[str, Any]]:
    """The ``gen_ai.evaluation.result`` events of ``span``, each as its attributes in a dict.

    Examples:
        >>> evaluation_events(span)
        [{'gen_ai.evaluation.name': 'answer-relevancy', 'gen_ai.evaluation.score.value': 1.0,
          ...}]
    """
    return [
        dict(event.attributes or {})
        for event in span.events
        if event.name == sc.GEN_AI_EVALUATION_RESULT_EVENT
    ]


def span_as_dict(span: ReadableSpan, *, include_resource: bool = False) -> dict[str, Any]:
    """``span`` as plain data: ids as hex strings, times in ns, attribute tuples as lists.

    Keys: ``name``, ``trace_id``, ``span_id``, ``parent_span_id`` (None for a root),
    ``kind`` (e.g. ``"INTERNAL"``), ``start_time``, ``end_time``, ``status`` (``{"code":
    "UNSET"|"OK"|"ERROR", "description": str | None}``), ``attributes``, ``events``
    (``[{"name", "timestamp", "attributes"}]``), ``links`` (``[{"trace_id", "span_id",
    "attributes"}]``), and ``resource`` (its attributes) with ``include_resource``.
    """
    context = span.get_span_context()
    data: dict[str, Any] = {
        "name": span.name,
        "trace_id": _hex(context.trace_id if context else 0, 32),
        "span_id": _hex(context.span_id if context else 0, 16),
        "parent_span_id": _hex(span.parent.span_id, 16) if span.parent else None,
        "kind": span.kind.name,
        "start_time": span.start_time,
        "end_time": span.end_time,
        "status": {"code": span.status.status_code.name, "description": span.status.description},
        "attributes": _plain(span.attributes),
        "events": [
            {"name": e.name, "timestamp": e.timestamp, "attributes": _plain(e.attributes)}
            for e in span.events
        ],
        "links": [
            {
                "trace_id": _hex(link.context.trace_id, 32),
                "span_id": _hex(link.context.span_id, 16),
                "attributes": _plain(link.attributes),
            }
            for link in span.links
        ],
    }
    if include_resource:
        data["resource"] = _plain(span.resource.attributes)
    return data


def _hex(value: int, width: int) -> str:
    return format(value, f"0{width}x")


def _plain(attributes: Any) -> dict[str, Any]:
    return {
        key: list(value) if isinstance(value, tuple) else value
        for key, value in (attributes or {}).items()
    }


class InMemoryScoreExporter(InMemorySpanExporter):
    """A ``SpanExporter`` keeping finished spans in memory, with readers for their scores.

    It is an ``opentelemetry.sdk...InMemorySpanExporter`` (``get_finished_spans()``,
    ``clear()``, ``shutdown()`` behave the same), plus: the scores attached to the spans
    (``evaluation_events``, ``scores``), one span by name (``span``), and the spans as plain
    dicts for whole-span comparison (``spans_as_dicts``).

    Call ``tracescore.force_flush()`` before reading: a sampled span is exported only once
    its scores are attached (or ``score_timeout`` passed).

    Args:
        max_spans: keep only the newest this many spans (OpenTelemetry SDK 1.38 and later).
            Default: all.
        deterministic_times: have ``spans_as_dicts`` replace times by ticks of a
            deterministic clock (see there). Default False.

    Examples:
        >>> exporter = InMemoryScoreExporter()
        >>> tracescore.configure(exporter=exporter, scoring=[...])
        >>> answer("What is the capital of France?")
        >>> tracescore.force_flush()
        >>> exporter.scores()
        {'answer-relevancy': [1.0]}
    """

    def __init__(self, max_spans: int | None = None, *, deterministic_times: bool = False) -> None:
        if max_spans is None:
            super().__init__()
        else:
            super().__init__(max_spans)  # type: ignore[call-arg,unused-ignore]
        self.deterministic_times = deterministic_times

    def span(self, name: str) -> ReadableSpan:
        """The one finished span called ``name``.

        Raises:
            AssertionError: no span or more than one span has that name; the message lists
                the names there are.
        """
        spans = self.get_finished_spans()
        matching = [s for s in spans if s.name == name]
        if len(matching) != 1:
            names = sorted(s.name for s in spans)
            raise AssertionError(f"{len(matching)} spans named {name!r}; finished spans: {names}")
        return matching[0]

    def evaluation_events(self, span: ReadableSpan | None = None) -> list[dict[str, Any]]:
        """The ``gen_ai.evaluation.result`` events, each as its attributes in a dict.

        Args:
            span: read this span only. Default: every finished span, in export order (a late
                score's event sits on its ``evaluation {scorer id}`` span).
        """
        spans: Iterable[ReadableSpan] = (span,) if span is not None else self.get_finished_spans()
        return [event for s in spans for event in evaluation_events(s)]

    def scores(self, span: ReadableSpan | None = None) -> dict[str, list[float | None]]:
        """Score values by scorer id, in export order; None where a scorer could not score.

        Args:
            span: read this span only. Default: every finished span.

        Examples:
            >>> exporter.scores()
            {'answer-relevancy': [1.0, 0.5], 'toxicity': [None]}
        """
        result: dict[str, list[float | None]] = {}
        for event in self.evaluation_events(span):
            scorer_id = str(event.get(sc.GEN_AI_EVALUATION_NAME))
            value = event.get(sc.GEN_AI_EVALUATION_SCORE_VALUE)
            result.setdefault(scorer_id, []).append(
                None if value is None else float(value)
            )
        return result

    def spans_as_dicts(
        self, *, deterministic_times: bool | None = None, include_resource: bool = False
    ) -> list[dict[str, Any]]:
        """The finished spans as plain dicts (see ``span_as_dict``), ordered by start time.

        Args:
            deterministic_times: replace every time (span start and end, event timestamps)
                by the tick of a clock reading 1 s, 2 s, 3 s, ... (in ns) in the order the
                real times happened, equal times sharing a tick. Order and nesting survive;
                durations do not. Default: the exporter's ``deterministic_times``. (The
                OpenTelemetry SDK has no public clock to inject, so the times are mapped
                after the fact.) Scores are judged in the background: when one trace's score
                and a later call may race, ``tracescore.force_flush()`` between them keeps
                the order, and so the ticks, the same from run to run.
            include_resource: add each span's resource attributes. Default False.
        """
        spans = sorted(
            self.get_finished_spans(),
            key=lambda s: (s.start_time or 0, s.get_span_context().span_id),  # type: ignore[union-attr]
        )
        dicts = [span_as_dict(s, include_resource=include_resource) for s in spans]
        if self.deterministic_times if deterministic_times is None else deterministic_times:
            _tick_times(dicts)
        return dicts


def _tick_times(dicts: list[dict[str, Any]]) -> None:
    times: set[int] = set()
    for d in dicts:
        times.update(t for t in (d["start_time"], d["end_time"]) if t is not None)
        times.update(e["timestamp"] for e in d["events"] if e["timestamp"] is not None)
    tick = {t: (i + 1) * _TICK_NS for i, t in enumerate(sorted(times))}
    for d in dicts:
        for key in ("start_time", "end_time"):
            if d[key] is not None:
                d[key] = tick[d[key]]
        for event in d["events"]:
            if event["timestamp"] is not None:
                event["timestamp"] = tick[event["timestamp"]]
