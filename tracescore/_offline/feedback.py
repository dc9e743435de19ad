"""Human feedback on finished spans, and calibration of the judge on it.

``record_feedback`` attaches a person's verdict (a reviewer's, or an end user's thumbs) to a span
or trace that ended long ago: it goes out as a ``gen_ai.evaluation.result`` log record carrying
the judged span's trace and span ids, exactly like tracescore's own scores, with the evaluator
marked as human (``tracescore.evaluation.annotator_kind`` = ``HUMAN``, Phoenix's term for an
annotator, where tracescore's automated scores are ``LLM`` or ``CODE``); and, where Phoenix is
configured (``OutputOptions(phoenix_url=...)``), as a span annotation with ``annotator_kind``
``HUMAN``.

``calibrate_feedback`` reads such records back, from the OTLP/JSON lines file tracescore's file
exporter writes (``tracescore-logs.jsonl``), from any OTLP/JSON logs or traces file, or from
Phoenix's annotations over its REST API, and pairs each human verdict with the judge's score of
the same scorer on the same span (the automated record or annotation). The agreement of the two
is a ``CalibrationResult``, as ``tracescore calibrate`` reports for a labelled file: accuracy,
Cohen's kappa, the confusion matrix, and whether the scorer's threshold should move.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracescore._core import semconv as sc
from tracescore._core.errors import ConfigurationError
from tracescore._core.redact import MAX_NAME_LENGTH, MAX_TEXT_LENGTH, bounded_text
from tracescore._offline.calibrate import stats

__all__ = ["FeedbackRecord", "calibrate_feedback", "read_feedback", "record_feedback"]

logger = logging.getLogger("tracescore")

ANNOTATOR_KIND = sc.TRACESCORE_EVALUATION_ANNOTATOR_KIND
"""Who gave an evaluation, in Phoenix's terms: ``HUMAN`` here, ``LLM`` or ``CODE`` for scorers."""
ANNOTATOR = sc.TRACESCORE_EVALUATION_ANNOTATOR
"""An optional, low-cardinality name of the human source, e.g. ``end_user`` or ``reviewer``."""

_PASS = {"pass": True, "passed": True, "true": True, "yes": True, "good": True,
         "thumbs_up": True, "up": True, "fail": False, "failed": False, "false": False,
         "no": False, "bad": False, "thumbs_down": False, "down": False}
_MAX_ANNOTATOR = 128


# -- writing ------------------------------------------------------------------------------------


def _ids(span: Any, trace_id: Any, span_id: Any) -> tuple[int, int]:
    if span is not None:
        context = span.get_span_context() if hasattr(span, "get_span_context") else span
        try:
            return int(context.trace_id), int(context.span_id)
        except (AttributeError, TypeError, ValueError):
            raise ConfigurationError(
                f"record_feedback span= takes an OpenTelemetry Span or SpanContext, got "
                f"{type(span).__name__}") from None
    if trace_id is None:
        raise ConfigurationError(
            "record_feedback needs the judged span (span=) or its trace_id= (and span_id=)")
    return _id(trace_id, 32, "trace_id"), (0 if span_id is None else _id(span_id, 16, "span_id"))


def _id(value: Any, width: int, name: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str):
        try:
            number = int(value.strip().lower().removeprefix("0x"), 16)
        except ValueError:
            raise ConfigurationError(
                f"record_feedback {name}= is a hex string or an int, got {value!r}") from None
    else:
        raise ConfigurationError(f"record_feedback {name}= is a hex string or an int, "
                                 f"got {type(value).__name__}")
    if not 0 < number < 16 ** width:
        raise ConfigurationError(f"record_feedback {name}= {value!r} is not a valid "
                                 f"{width * 4}-bit id")
    return number


def record_feedback(
    name: str,
    *,
    span: Any = None,
    trace_id: str | int | None = None,
    span_id: str | int | None = None,
    score: float | None = None,
    label: str | None = None,
    explanation: str | None = None,
    annotator: str | None = None,
) -> bool:
    """Attach a human verdict to a finished span (or trace), after the fact.

    The verdict goes out as a ``gen_ai.evaluation.result`` log record in the judged span's
    trace, with that span's id, through the log-record destination ``configure()`` set up
    (OTLP, or ``tracescore-logs.jsonl`` next to the local span file; see
    ``OutputOptions(logger_provider=...)``); and, when Phoenix is configured, as a span annotation
    with ``annotator_kind`` ``HUMAN``. Attributes: ``gen_ai.evaluation.name``,
    ``gen_ai.evaluation.score.value``, ``gen_ai.evaluation.score.label``,
    ``gen_ai.evaluation.explanation`` and ``tracescore.evaluation.annotator_kind`` =
    ``HUMAN`` (plus ``tracescore.evaluation.annotator`` when given). ``calibrate_feedback``
    and ``tracescore calibrate --feedback`` read them back.

    Delivery never raises: an unreachable backend is the exporters' business (counted and
    logged as for scores). Only a call that cannot make a record raises.

    Args:
        name: what is judged: a scorer id (``"faithfulness"``) to calibrate that scorer, or a
            name of your own (``"user_thumbs"``); cut to 256 characters.
        span: the judged span: an OpenTelemetry ``Span`` or ``SpanContext`` (keep
            ``trace.get_current_span().get_span_context()`` from inside the operation).
        trace_id: instead of ``span``: the trace id, 32 hex digits or an int.
        span_id: with ``trace_id``: the span id, 16 hex digits or an int. Without it the
            record is about the whole trace (no span id; not sent to Phoenix, whose span
            annotations need a span).
        score: the human's score, e.g. 1.0 or 0.0, or a rating.
        label: the human's verdict as a low-cardinality label: ``"pass"``/``"fail"`` (also
            ``"yes"``/``"no"``, ``"good"``/``"bad"``, ``"thumbs_up"``/``"thumbs_down"``) is
            what calibration reads first; cut to 256 characters.
        explanation: the human's comment (cut to 4,096 characters). Do not put personal
            data here: it is exported as it is (credentials excepted: every string given here
            is redacted as span attributes are, see docs/security.md).
        annotator: a low-cardinality name of the source, e.g. ``"end_user"`` or
            ``"reviewer"`` (never a person's name or address); cut to 128 characters.

    Returns:
        True when the record was handed to at least one destination (a log-record provider
        or Phoenix); False when none is configured (nothing to send it to).

    Raises:
        ConfigurationError: no span or trace id, an invalid id, an empty name, neither score
            nor label, or a score that is not a finite number.

    Examples:
        >>> @tracescore.agent
        ... def answer(question: str) -> str:
        ...     ids.append(trace.get_current_span().get_span_context())
        ...     return "..."
        >>> tracescore.record_feedback("faithfulness", span=ids[0], label="fail",
        ...                            annotator="reviewer")  # doctest: +SKIP
    """
    _check_verdict(name, score, label)
    trace_number, span_number = _ids(span, trace_id, span_id)
    attributes = _verdict_attributes(name, score, label, explanation, annotator)
    return _deliver(attributes, trace_number, span_number)


def _check_verdict(name: Any, score: Any, label: Any) -> None:
    """Raises ConfigurationError on an empty name, neither score nor label, or a score that is
    not a finite number."""
    if not isinstance(name, str) or not name.strip():
        raise ConfigurationError("record_feedback name= is the evaluation's name, e.g. a scorer "
                                 f"id; got {name!r}")
    if score is None and label in (None, ""):
        raise ConfigurationError("record_feedback needs a score= or a label=")
    if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))
                              or not math.isfinite(score)):
        raise ConfigurationError(f"record_feedback score= must be a finite number, got {score!r}")


def _verdict_attributes(name: str, score: float | None, label: str | None,
                        explanation: str | None, annotator: str | None) -> dict[str, Any]:
    """The record's attributes (``record_feedback``), every string bounded and redacted."""
    # Every string is what a person typed: redacted and bounded as tracescore writes any
    # string it was given (a 5-million-character label must not become a 10 MB record).
    attributes: dict[str, Any] = {
        sc.GEN_AI_EVALUATION_NAME: bounded_text(name.strip(), MAX_NAME_LENGTH),
        ANNOTATOR_KIND: "HUMAN"}
    if score is not None:
        attributes[sc.GEN_AI_EVALUATION_SCORE_VALUE] = float(score)
    if label not in (None, ""):
        attributes[sc.GEN_AI_EVALUATION_SCORE_LABEL] = bounded_text(label, MAX_NAME_LENGTH)
    if explanation:
        attributes[sc.GEN_AI_EVALUATION_EXPLANATION] = bounded_text(explanation,
                                                                    MAX_TEXT_LENGTH)
    if annotator:
        attributes[ANNOTATOR] = bounded_text(annotator, _MAX_ANNOTATOR)
    return attributes


def _deliver(attributes: dict[str, Any], trace_number: int, span_number: int) -> bool:
    """Hand the record to the log-record destination and to Phoenix, never raising; True when
    at least one took it."""
    sent = False
    try:
        sent = _emit_log(attributes, trace_number, span_number)
    except Exception:
        logger.warning("tracescore could not emit a feedback record", exc_info=True)
    try:
        sent = _post_phoenix(attributes, trace_number, span_number) or sent
    except Exception:
        logger.warning("tracescore could not queue a feedback annotation for Phoenix",
                       exc_info=True)
    return sent


def _destinations() -> Any:
    from tracescore._setup.config import current

    instance = current()
    return None if instance is None else getattr(instance, "destinations", None)


def _emit_log(attributes: dict[str, Any], trace_number: int, span_number: int) -> bool:
    from opentelemetry import _logs, trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    dest = _destinations()
    provider = getattr(dest, "logger_provider", None)
    if provider is None:
        provider = _logs.get_logger_provider()
        if isinstance(provider, _logs.NoOpLoggerProvider) or \
                type(provider).__name__ == "ProxyLoggerProvider":
            return False
    context = trace.set_span_in_context(NonRecordingSpan(SpanContext(
        trace_number, span_number, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))))
    provider.get_logger(sc.INSTRUMENTATION_SCOPE).emit(
        timestamp=time.time_ns(), event_name=sc.GEN_AI_EVALUATION_RESULT_EVENT,
        attributes=attributes, context=context)
    return True


def _post_phoenix(attributes: dict[str, Any], trace_number: int, span_number: int) -> bool:
    if not span_number:
        return False
    dest = _destinations()
    writers = getattr(dest, "writers", None) or []
    from tracescore._writers.phoenix import PhoenixAnnotationWriter

    phoenix = [w for w in writers if isinstance(w, PhoenixAnnotationWriter)]
    if not phoenix:
        return False
    result: dict[str, Any] = {}
    for key, field in ((sc.GEN_AI_EVALUATION_SCORE_VALUE, "score"),
                       (sc.GEN_AI_EVALUATION_SCORE_LABEL, "label"),
                       (sc.GEN_AI_EVALUATION_EXPLANATION, "explanation")):
        if key in attributes:
            result[field] = attributes[key]
    annotator = attributes.get(ANNOTATOR) or "human"
    annotation = {
        "span_id": f"{span_number:016x}",
        "name": attributes[sc.GEN_AI_EVALUATION_NAME],
        "annotator_kind": "HUMAN",
        "result": result,
        "metadata": {"trace_id": f"{trace_number:032x}", "source": "tracescore",
                     ANNOTATOR: annotator},
        # Phoenix upserts on (span, name, identifier): a human's verdict never replaces the
        # judge's score of the same name, nor another source's verdict.
        "identifier": f"tracescore-feedback:{annotator}",
    }
    for writer in phoenix:
        writer.add(annotation)
    return True


# -- reading ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FeedbackRecord:
    """One ``gen_ai.evaluation.result`` read back from a file or from Phoenix.

    Attributes:
        trace_id: the judged trace, 32 hex digits.
        span_id: the judged span, 16 hex digits ("" for a record about a whole trace).
        name: ``gen_ai.evaluation.name`` (the scorer id).
        score: the score, or None.
        label: the label, or None.
        human: True for a human's verdict (``annotator_kind`` ``HUMAN``), False for a
            scorer's.
        time: the record's time in ns since the epoch (0 when unknown); the latest human
            verdict on a span wins.
        judge_model: the judge of a scorer's record, when it says.
    """

    trace_id: str
    span_id: str
    name: str
    score: float | None
    label: str | None
    human: bool
    time: int = 0
    judge_model: str | None = None


def _any_value(value: Mapping[str, Any]) -> Any:
    for key in ("stringValue", "boolValue", "intValue", "doubleValue"):
        if key in value:
            raw = value[key]
            return int(raw) if key == "intValue" else raw
    return None


def _attributes(items: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    return {a.get("key"): _any_value(a.get("value") or {}) for a in items or ()}


def _record(attrs: Mapping[str, Any], trace_id: str, span_id: str,
            when: Any) -> FeedbackRecord | None:
    name = attrs.get(sc.GEN_AI_EVALUATION_NAME)
    if not name or not trace_id:
        return None
    score = attrs.get(sc.GEN_AI_EVALUATION_SCORE_VALUE)
    label = attrs.get(sc.GEN_AI_EVALUATION_SCORE_LABEL)
    try:
        when_ns = int(when or 0)
    except (TypeError, ValueError):
        when_ns = 0
    return FeedbackRecord(
        trace_id=trace_id.lower(), span_id=("" if not span_id or set(span_id) == {"0"}
                                            else span_id.lower()),
        name=str(name), score=None if score is None else float(score),
        label=None if label is None else str(label),
        human=str(attrs.get(ANNOTATOR_KIND) or "").upper() == "HUMAN", time=when_ns,
        judge_model=attrs.get(sc.TRACESCORE_JUDGE_MODEL))


def _records_of_document(doc: Mapping[str, Any]) -> Iterator[FeedbackRecord]:
    for resource in doc.get("resourceLogs") or ():
        for scope in resource.get("scopeLogs") or ():
            for log in scope.get("logRecords") or ():
                if log.get("eventName") != sc.GEN_AI_EVALUATION_RESULT_EVENT:
                    continue
                record = _record(_attributes(log.get("attributes")), log.get("traceId", ""),
                                 log.get("spanId", ""),
                                 log.get("timeUnixNano") or log.get("observedTimeUnixNano"))
                if record is not None:
                    yield record
    for resource in doc.get("resourceSpans") or ():
        for scope in resource.get("scopeSpans") or ():
            for span in scope.get("spans") or ():
                for event in span.get("events") or ():
                    if event.get("name") != sc.GEN_AI_EVALUATION_RESULT_EVENT:
                        continue
                    attrs = _attributes(event.get("attributes"))
                    # A carrier span ("evaluation {scorer}") holds a score of its parent.
                    span_id = span.get("spanId", "")
                    if any(a.get("key") == sc.TRACESCORE_EVALUATION_CARRIER
                           for a in span.get("attributes") or ()):
                        span_id = span.get("parentSpanId", span_id)
                    record = _record(attrs, span.get("traceId", ""), span_id,
                                     event.get("timeUnixNano"))
                    if record is not None:
                        yield record


def read_feedback(path: str | os.PathLike[str]) -> list[FeedbackRecord]:
    """Every ``gen_ai.evaluation.result`` in an OTLP/JSON lines file: log records
    (``tracescore-logs.jsonl``) and span events (``tracescore-traces.jsonl``), human and not.

    Raises:
        ConfigurationError: the file cannot be read or a line is not JSON.
    """
    file = Path(path)
    out: list[FeedbackRecord] = []
    try:
        with file.open(encoding="utf-8") as fh:
            for line_no, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    doc = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ConfigurationError(
                        f"{file} line {line_no}: not OTLP/JSON ({exc.msg})") from None
                if isinstance(doc, Mapping):
                    out.extend(_records_of_document(doc))
    except OSError as exc:
        raise ConfigurationError(f"cannot read feedback file {file}: {exc}") from None
    return out


def read_phoenix_feedback(base_url: str, project: str = "default", *, limit: int = 10_000,
                          headers: Mapping[str, str] | None = None,
                          timeout: float = 30.0) -> list[FeedbackRecord]:
    """The span annotations of a Phoenix project as ``FeedbackRecord``s (HUMAN ones are
    human; LLM and CODE ones are scores), through Phoenix's REST API: the project's spans
    (``GET /v1/projects/{project}/spans``, paginated, at most ``limit``), then their
    annotations (``GET /v1/projects/{project}/span_annotations?span_ids=...``, 100 spans a
    request), read by ``tracescore._offline.phoenix.PhoenixClient``: ``timeout`` seconds for
    each whole request, a page limit, a stop on a repeated cursor and a size cap per response.

    Raises:
        ConfigurationError: Phoenix cannot be reached, answers with an error, too slowly, too
            much, in a loop or in another shape (a one-line ``PhoenixError``).
    """
    from tracescore._offline.phoenix import PhoenixClient

    client = PhoenixClient(base_url, headers=headers, timeout=timeout)
    spans: dict[str, str] = {}
    for span in client.spans(project, limit=limit):
        context = span["context"]
        spans[context["span_id"]] = context["trace_id"]
    out: list[FeedbackRecord] = []
    for a in client.span_annotations(project, spans):
        result = a.get("result") or {}
        metadata = a.get("metadata") or {}
        when = a.get("updated_at") or a.get("created_at") or ""
        span_id = str(a.get("span_id") or "")
        judge_model = metadata.get(sc.TRACESCORE_JUDGE_MODEL)
        out.append(FeedbackRecord(
            trace_id=str(metadata.get("trace_id") or spans.get(span_id, "")),
            span_id=span_id, name=str(a.get("name") or ""),
            score=None if result.get("score") is None else float(result["score"]),
            label=result.get("label"),
            human=str(a.get("annotator_kind") or "").upper() == "HUMAN",
            time=_iso_ns(when if isinstance(when, str) else ""),
            judge_model=None if judge_model is None else str(judge_model)))
    return out


def _iso_ns(text: str) -> int:
    from datetime import datetime

    try:
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1e9)
    except (TypeError, ValueError):
        return 0


# -- calibration --------------------------------------------------------------------------------


def human_pass(record: FeedbackRecord, label_threshold: float = 0.5) -> bool | None:
    """A human record as pass/fail: its label when it is a pass/fail word, else its score
    (pass at ``label_threshold`` or above); None when neither says."""
    if record.label is not None:
        word = record.label.strip().lower().replace(" ", "_").replace("-", "_")
        if word in _PASS:
            return _PASS[word]
    if record.score is not None:
        return record.score >= label_threshold
    return None


def calibrate_feedback(
    scorer: Any,
    *,
    feedback: Iterable[str | os.PathLike[str]] = (),
    phoenix_url: str | None = None,
    phoenix_project: str = "default",
    phoenix_timeout: float = 30.0,
    records: Iterable[FeedbackRecord] = (),
    threshold: float | None = None,
    label_threshold: float = 0.5,
    min_accuracy: float | None = None,
    min_kappa: float | None = None,
) -> Any:
    """How well a scorer's recorded scores agree with the human verdicts on the same spans.

    Pairs, per span, the latest human verdict named after the scorer (``record_feedback``) with
    the scorer's own score on that span (tracescore's ``gen_ai.evaluation.result`` record or
    Phoenix annotation); no judge is called. Spans with a verdict and no score (or the other
    way round) are left out and counted in the result's ``problems`` when nothing pairs.

    Args:
        scorer: the scorer id (``"faithfulness"``) or a scorer object (for its direction and
            scale).
        feedback: OTLP/JSON lines files: ``tracescore-logs.jsonl`` (log records) or
            ``tracescore-traces.jsonl`` (span events), or any OTLP/JSON file of them.
        phoenix_url: read Phoenix's span annotations too (HUMAN ones are the verdicts).
        phoenix_project: the Phoenix project. Default ``"default"``.
        phoenix_timeout: seconds each request to Phoenix may take in all, its whole answer
            included. Default 30.
        records: ``FeedbackRecord``s read already.
        threshold: the scorer's pass threshold (inclusive; ``<=`` when lower is better).
            Default: half the scorer's scale.
        label_threshold: a numeric human score passes at or above it. Default 0.5.
        min_accuracy: when given, a lower accuracy is a problem (``passed`` False).
        min_kappa: likewise for Cohen's kappa.

    Returns:
        A ``CalibrationResult`` (item ids are ``<trace id>/<span id>``), with
        ``threshold_advice``.

    Raises:
        ConfigurationError: an unknown scorer id, an unreadable file, Phoenix unreachable or
            misbehaving (too slow, too large, cursors in a loop, another shape).
    """
    from tracescore._offline.calibrate import CalibrationResult, _problems

    scorer_id, higher_is_better, scale = _scorer_facts(scorer)
    if threshold is None:
        threshold = scale / 2
    found = _gather(records, feedback, phoenix_url, phoenix_project, phoenix_timeout)
    humans, scores = _latest(found, scorer_id)
    items = _paired(humans, scores, label_threshold)
    pairs = [(i.score, i.human_pass) for i in items if i.score is not None]
    models = sorted({s.judge_model for s in scores.values() if s.judge_model})
    result = CalibrationResult(
        scorer_id=scorer_id, judge_model=", ".join(models) or None,
        higher_is_better=higher_is_better, threshold=float(threshold),
        at_threshold=stats.agreement(pairs, float(threshold), higher_is_better),
        best=stats.best_threshold(pairs, float(threshold), higher_is_better),
        items=items, data=", ".join([str(p) for p in feedback] + (
            [f"{phoenix_url} project {phoenix_project}"] if phoenix_url else [])),
        label_threshold=label_threshold,
    )
    result.problems = _problems(result, min_accuracy, min_kappa)
    if not items:
        result.problems = [
            f"no span has both a human verdict and a {scorer_id} score ({len(humans)} human "
            f"verdict(s), {len(scores)} score(s) found)"]
    return result


def _gather(records: Iterable[FeedbackRecord], feedback: Iterable[str | os.PathLike[str]],
            phoenix_url: str | None, phoenix_project: str,
            phoenix_timeout: float) -> list[FeedbackRecord]:
    """Every record given, read from the files, then fetched from Phoenix (when its URL is
    given)."""
    found = list(records)
    for path in feedback:
        found.extend(read_feedback(path))
    if phoenix_url:
        found.extend(read_phoenix_feedback(phoenix_url, phoenix_project,
                                           timeout=phoenix_timeout))
    return found


def _latest(found: Iterable[FeedbackRecord], scorer_id: str) -> tuple[
        dict[tuple[str, str], FeedbackRecord], dict[tuple[str, str], FeedbackRecord]]:
    """``(humans, scores)``: per ``(trace id, span id)`` the latest human verdict and the latest
    automated score named ``scorer_id`` (records without a span id are left out)."""
    humans: dict[tuple[str, str], FeedbackRecord] = {}
    scores: dict[tuple[str, str], FeedbackRecord] = {}
    for r in found:
        if r.name != scorer_id or not r.span_id:
            continue
        key = (r.trace_id, r.span_id)
        target = humans if r.human else scores
        if (r.human or r.score is not None) and (
                key not in target or r.time >= target[key].time):
            target[key] = r
    return humans, scores


def _paired(humans: Mapping[tuple[str, str], FeedbackRecord],
            scores: Mapping[tuple[str, str], FeedbackRecord], label_threshold: float) -> list[Any]:
    """An ``ItemOutcome`` per span with both a pass/fail human verdict and a score, in the
    order the verdicts came."""
    from tracescore._offline.calibrate import ItemOutcome

    items = []
    for key, human in humans.items():
        verdict = human_pass(human, label_threshold)
        judged = scores.get(key)
        if verdict is None or judged is None or judged.score is None:
            continue
        items.append(ItemOutcome(id=f"{key[0]}/{key[1]}", human_pass=verdict, status="scored",
                                 score=judged.score))
    return items


def _scorer_facts(scorer: Any) -> tuple[str, bool, float]:
    if isinstance(scorer, str):
        from tracescore.scorers._registry import build

        scorer = build(scorer, "openai/unused")  # built for its facts, never run
    return (str(scorer.id), bool(getattr(scorer, "higher_is_better", True)),
            float(getattr(scorer, "scale", 1.0) or 1.0))
