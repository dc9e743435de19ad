"""The scorers' call site: one scorer on one ``ScoringRequest`` becomes one ``ScoreOutcome``.

Shared by the engine (online scores) and ``run_evals`` (offline), so both report failures alike.
Knows the scorer interface (``arun`` and its result) and the evaluation attribute names; nothing
of spans.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tracescore._core import semconv as sc
from tracescore._core.errors import ScoringError
from tracescore._core.redact import MAX_NAME_LENGTH, bounded_text, redact_text
from tracescore._core.serialize import truncate, utf8_safe
from tracescore._pipeline import runtime as _runtime
from tracescore._pipeline import waits as _waits
from tracescore._pipeline.fingerprint import evaluator_version
from tracescore._pipeline.input_caps import cap_kwargs
from tracescore._pipeline.request import ScoreOutcome, ScoringRequest
from tracescore._pipeline.rules import CompiledRule
from tracescore._pipeline.waits import JobWaits

logger = logging.getLogger("tracescore")

_MAX_EXPLANATION = 4_096
# How a context scorer that found no context begins its reason (scorers/_base.py).
_EMPTY_CONTEXT = "the context is empty"


def label_for(score: float | None, threshold: float | None, higher_is_better: bool) -> str | None:
    """``pass``/``fail`` against ``threshold`` (inclusive), ``not_scorable`` for a missing
    score, None when no threshold is set."""
    if score is None:
        return sc.LABEL_NOT_SCORABLE
    if threshold is None:
        return None
    ok = score >= threshold if higher_is_better else score <= threshold
    return sc.LABEL_PASS if ok else sc.LABEL_FAIL


async def score(
    request: ScoringRequest,
    rule: CompiledRule,
    *,
    job_timeout: float | None = None,
    on_error: bool = False,
    source: Any = None,
) -> ScoreOutcome:
    """Run ``rule.scorer`` on ``request`` and describe the outcome as every writer needs it.

    Args:
        request: what to score.
        rule: the rule that selected the request (scorer, threshold, extractors).
        job_timeout: seconds before the scorer is cancelled and the outcome reports
            ``error.type=timeout``; None for no limit (a scorer that blocks its thread instead
            of awaiting cannot be cancelled).
        on_error: the request was selected only because the operation failed; the outcome's
            attributes then carry ``tracescore.selected_on_error=true``.
        source: the span the request was read from, handed to the rule's user extractors
            (``(span, call_input) -> value``); None when there is none.

    Never raises (cancellation of the calling task aside): a scorer failure, ``BaseException``s
    such as ``SystemExit`` included, becomes an outcome with ``error_type``.
    """
    scorer = rule.scorer
    # The id goes on every signal (event, log record, metrics, the carrier span's name): as
    # tracescore writes any string it was given, redacted and bounded.
    scorer_id = bounded_text(str(scorer.id), MAX_NAME_LENGTH)
    started = time.monotonic()
    if request.content_missing is not None and not (
            # a model turn that only called tools: its calls are still there to judge
            scorer.uses_tool_calls and request.tool_calls):
        ran = ScorerOutcome(None, None, request.content_missing, None)
    else:
        try:
            kwargs = scorer_kwargs(request, scorer)
            if rule.tool_results_as_context and "context" in kwargs:
                kwargs["context"] = [*kwargs["context"], *tool_results(request)]
            for name, extract in rule.extractors.items():
                kwargs[name] = extract(source, request.input)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 - user extractors: SystemExit included
            ran = _failed(scorer_id, exc)
        else:
            ran = await _run_bounded(scorer_id, scorer, kwargs, job_timeout)
            if (request.documents_missing and ran.score is None and ran.error_type is None
                    and ran.explanation.startswith(_EMPTY_CONTEXT)
                    and not kwargs.get("context")):
                # "the context is empty" names the symptom; the request knows the cause
                why = _no_context_reason(request, rule)
                ran = dataclasses.replace(ran, explanation=why)
    label = None
    if ran.error_type is None:
        label = label_for(ran.score, rule.threshold, bool(scorer.higher_is_better))
    attrs = _outcome_attributes(scorer_id, ran, label, rule, request, on_error)
    return ScoreOutcome(
        request=request,
        scorer_id=scorer_id,
        score=ran.score,
        label=label,
        explanation=attrs[sc.GEN_AI_EVALUATION_EXPLANATION],
        error_type=attrs.get(sc.ERROR_TYPE),
        judge_model=ran.judge_model,
        attributes=attrs,
        timestamp=time.time_ns(),
        duration=time.monotonic() - started,
        result=ran.result,
        source=source,
    )


def _outcome_attributes(scorer_id: str, ran: ScorerOutcome, label: str | None,
                        rule: CompiledRule, request: ScoringRequest,
                        on_error: bool) -> dict[str, Any]:
    """The attributes of a score's event and log record (``evaluation_attributes``), with its
    provenance and the conversation of the judged turn."""
    attrs = evaluation_attributes(scorer_id, ran, label=label, sample_rate=rule.sample_rate)
    # Provenance (issue 12): which evaluator version judged which response.
    attrs[sc.TRACESCORE_EVALUATOR_VERSION] = evaluator_version(rule.scorer)
    response_id = request.attributes.get(sc.GEN_AI_RESPONSE_ID)
    if isinstance(response_id, str) and response_id:
        attrs[sc.GEN_AI_RESPONSE_ID] = bounded_text(response_id, MAX_NAME_LENGTH)
    # Which conversation, session and user the judged turn belongs to (issue 24): on the event
    # and the log record, so scores can be grouped per conversation (never on metrics: unbounded).
    # Whoever set them (the span's attributes, not only tracescore.conversation): redacted and
    # bounded, as the span's own are on the export path.
    for key in sc.CONVERSATION_ATTRIBUTES:
        value = request.attributes.get(key)
        if isinstance(value, str) and value:
            attrs[key] = bounded_text(value, MAX_NAME_LENGTH)
    if on_error:
        attrs[sc.TRACESCORE_SELECTED_ON_ERROR] = True
    return attrs


def _no_context_reason(request: ScoringRequest, rule: CompiledRule) -> str:
    """Why a context scorer found no context, from the request's ``documents_missing``."""
    why = request.documents_missing or ""
    if rule.tool_results_as_context:
        why = (f"{why.split('. Pass the context', 1)[0]}; and no tool call under "
               f"span {request.span_name!r} has a result to use as context "
               "(tool_results_as_context=True): its tools ran without a span of "
               "their own that records the result (execute_tool, a TOOL span), "
               "and its model calls' tool messages carry no text. Pass the context "
               "explicitly, or trace the tool with @tracescore.tool")
    return why


def tool_results(request: ScoringRequest) -> list[str]:
    """The results of the tool calls of ``request`` as context pieces, in call order: those
    of the tool spans beneath the scored span, then the ``role="tool"`` messages of its input
    (a model call's view of the tools it called). Failed calls and empty results give none, and
    neither does a result that is the judged answer itself (an agent that answers through a
    tool, smolagents' ``final_answer``): an answer is no evidence for itself."""
    pieces: list[str] = []
    answer = request.output.strip() if isinstance(request.output, str) else None
    for call in request.tool_calls:
        result = call.get("result")
        if result is not None and not call.get("error"):
            text = _result_text(result)
            if text.strip() and text.strip() != answer:
                pieces.append(text)
    if isinstance(request.input, (list, tuple)):
        for message in request.input:
            if isinstance(message, Mapping) and message.get("role") == "tool":
                text = message.get("content")
                if isinstance(text, str) and text.strip() and text not in pieces:
                    pieces.append(text)
    return pieces


# Fields of a function-response envelope besides its value (Gemini's FunctionResponse, as
# Google ADK records a tool's result: {"id", "name", "response": {"result": ...}}).
_ENVELOPE_FIELDS = frozenset({"id", "name", "type", "call_id", "tool_call_id"})


def _result_text(result: Any, depth: int = 0) -> str:
    """A tool's result as the text it returned: a function-response envelope
    (``{"id", "name", "response": ...}``) or a one-field ``{"result": ...}`` wrapper is
    unwrapped, also from its JSON; any other value is its JSON."""
    value = result
    if isinstance(result, str):
        if not result.startswith("{") or depth > 3:
            return result
        try:
            value = json.loads(result)
        except ValueError:
            return result
    if isinstance(value, Mapping) and depth <= 3:
        keys = set(value) - _ENVELOPE_FIELDS
        if keys == {"response"} or (keys == {"result"} and len(value) == 1):
            return _result_text(value[next(iter(keys))], depth + 1)
    if isinstance(result, str):
        return result
    return value if isinstance(value, str) else json.dumps(value, default=str)


def scorer_kwargs(request: ScoringRequest, scorer: Any) -> dict[str, Any]:
    """The keyword arguments of ``scorer.arun`` for ``request``: input and output, the trace's
    documents for context scorers, the tool calls for tool-call scorers, the ground truth and
    any other named inputs the request carries."""
    kwargs: dict[str, Any] = {"input": request.input, "output": request.output}
    if scorer.uses_context:
        kwargs["context"] = list(request.documents)
    if scorer.uses_tool_calls:
        kwargs["tool_calls"] = [dict(call) for call in request.tool_calls]
    if request.ground_truth is not None:
        kwargs["ground_truth"] = request.ground_truth
    kwargs.update(request.extra)
    return kwargs


async def _run_bounded(scorer_id: str, scorer: Any, kwargs: dict[str, Any],
                       job_timeout: float | None) -> ScorerOutcome:
    waits = JobWaits()
    try:
        if job_timeout is None:
            return await run_scorer(scorer, kwargs)
        ran: ScorerOutcome = await _with_timeout(_contained(scorer_id, scorer, kwargs),
                                                 job_timeout, waits)
        return ran
    except asyncio.TimeoutError:
        if _cancelled():
            raise
        return ScorerOutcome(
            None, None,
            f"the scorer ran longer than the job timeout ({job_timeout:g} s) and was "
            f"cancelled: {waits.describe()}; raise configure(limits=LimitsOptions("
            "job_timeout=...)) (TRACESCORE_JOB_TIMEOUT) for a scorer this slow", "timeout",
        )
    except BaseException as exc:  # noqa: BLE001 - on the loop nothing may escape
        if _cancelled():
            raise
        return _failed(scorer_id, exc)


@dataclass(frozen=True)
class ScorerOutcome:
    """What one scorer run came to, errors included (``run_scorer`` never raises).

    Attributes:
        result: the scorer's result object (a ``ScoreResult``), or None when it failed.
        score: the score as a float, or None (not scorable, or failed).
        explanation: the scorer's reason, or what went wrong.
        error_type: None, or the low-cardinality ``error.type`` of the failure.
        judge_model: the judge's model string when a judge was called.
    """

    result: Any
    score: float | None
    explanation: str
    error_type: str | None
    judge_model: str | None = None


def _failed(scorer_id: str, exc: BaseException) -> ScorerOutcome:
    try:
        text = str(exc)
    except Exception:
        text = ""
    if isinstance(exc, ScoringError):
        return ScorerOutcome(None, None, text or exc.error_type, exc.error_type)
    logger.warning("tracescore scorer %r raised; recorded as error.type=scorer_error",
                   scorer_id, exc_info=exc)
    return ScorerOutcome(None, None, f"{type(exc).__name__}: {text}", "scorer_error")


async def _with_timeout(coro: Any, seconds: float, waits: JobWaits | None = None) -> Any:
    """Run ``coro`` in its own task and return its result; after ``seconds``, cancel the task
    and raise ``asyncio.TimeoutError`` without waiting for it, so a scorer that ignores
    cancellation still gives its place back. Cancelling the caller cancels the task too.

    Judge time (recorded in ``waits``, which the task sees as ``_waits.current``: calls
    queued for a judge or at its server, each bounded by the judge's own timeout) does not
    count: the deadline moves on by that much."""
    token = _waits.current.set(waits)
    try:
        task = asyncio.ensure_future(coro)
    finally:
        _waits.current.reset(token)
    started = time.monotonic()
    deadline = started + seconds
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=max(0.0, deadline - time.monotonic()))
            if task in done or waits is None:
                break
            moved = started + seconds + waits.judge_seconds()
            if moved <= time.monotonic():
                break
            deadline = moved
    except asyncio.CancelledError:
        task.cancel()
        raise
    if task in done:
        return task.result()
    task.cancel()
    task.add_done_callback(_forget)
    raise asyncio.TimeoutError


async def _contained(scorer_id: str, scorer: Any, kwargs: dict[str, Any]) -> ScorerOutcome:
    """``run_scorer`` for a task of its own: a ``SystemExit`` or ``KeyboardInterrupt`` the
    scorer raises becomes a failed outcome here, where asyncio would re-raise it out of the
    event loop and stop every job."""
    try:
        return await run_scorer(scorer, kwargs)
    except (asyncio.CancelledError, GeneratorExit):
        raise  # cancelled, or closed with the loop (an abandoned job at shutdown)
    except BaseException as exc:  # noqa: BLE001 - see above
        return _failed(scorer_id, exc)


def _forget(task: asyncio.Future[Any]) -> None:
    """Collect an abandoned task's outcome, so asyncio does not log it as never retrieved."""
    if not task.cancelled():
        task.exception()


def _cancelled() -> bool:
    """Whether the running task is being cancelled (as opposed to a scorer leaking a
    ``CancelledError`` of its own, e.g. from an inner timeout)."""
    try:
        task = asyncio.current_task()
    except RuntimeError:
        return False
    return task is not None and task.cancelling() > 0


async def run_scorer(scorer: Any, kwargs: dict[str, Any]) -> ScorerOutcome:
    """Await ``scorer.arun(**kwargs)`` and classify the outcome; never raises (cancellation
    aside). Shared by the span processor and ``run_evals`` so both report failures alike: a
    ``ScoringError`` keeps its ``error_type``, anything else (a score that is not a finite
    number, a ``CancelledError`` the scorer leaked while its task was not cancelled) is
    ``scorer_error``.

    The scorer is given ``kwargs`` bounded by ``tracescore._pipeline.input_caps`` (characters per
    value, documents per request, characters per document) with the caps of the runtime the job
    runs for (``runtime.current()``); what was cut is appended to the explanation."""
    kwargs, cuts = cap_kwargs(kwargs, _runtime.current().caps)
    outcome = await _run_scorer(scorer, kwargs)
    if not cuts:
        return outcome
    note = f"[Scored on cut inputs: {'; '.join(cuts)}.]"
    kept = truncate(outcome.explanation, max(_MAX_EXPLANATION - len(note) - 1, 0))
    explanation = f"{kept} {note}" if kept else note
    return dataclasses.replace(outcome, explanation=explanation)


async def _run_scorer(scorer: Any, kwargs: dict[str, Any]) -> ScorerOutcome:
    scorer_id = bounded_text(getattr(scorer, "id", "custom"), MAX_NAME_LENGTH)
    try:
        result = await scorer.arun(**kwargs)
        raw = getattr(result, "score", None)
        score = None if raw is None else float(raw)
        if score is not None and not math.isfinite(score):
            raise ValueError(f"the scorer returned a score that is not a finite number: {raw!r}")
        explanation = str(getattr(result, "reason", "") or "")
        model = getattr(result, "judge_model", None)
    except asyncio.CancelledError as exc:
        if _cancelled():
            raise
        return _failed(scorer_id, exc)
    except Exception as exc:
        return _failed(scorer_id, exc)
    return ScorerOutcome(result, score, explanation, None, str(model) if model else None)


def evaluation_attributes(
    scorer_id: str, outcome: ScorerOutcome, *, label: str | None, sample_rate: float
) -> dict[str, Any]:
    """The attributes of one ``gen_ai.evaluation.result`` event, the same for
    online scores and ``run_evals``."""
    attrs: dict[str, Any] = {
        sc.GEN_AI_EVALUATION_NAME: scorer_id,
        sc.TRACESCORE_SAMPLE_RATE: float(sample_rate),
    }
    if outcome.judge_model:
        attrs[sc.TRACESCORE_JUDGE_MODEL] = bounded_text(outcome.judge_model, MAX_NAME_LENGTH)
    if outcome.score is not None:
        attrs[sc.GEN_AI_EVALUATION_SCORE_VALUE] = outcome.score
    if label is not None:
        attrs[sc.GEN_AI_EVALUATION_SCORE_LABEL] = label
    # A reason may quote what the judge read, an error body or a user's exception: every writer
    # (span event, log record, callback, run_evals reports) takes it from here, redacted.
    attrs[sc.GEN_AI_EVALUATION_EXPLANATION] = utf8_safe(
        truncate(redact_text(outcome.explanation[: _MAX_EXPLANATION + 512]), _MAX_EXPLANATION)
    )
    if outcome.error_type is not None:
        # A ScoringError's error_type may be a user's string.
        attrs[sc.ERROR_TYPE] = bounded_text(outcome.error_type, MAX_NAME_LENGTH)
    return attrs
