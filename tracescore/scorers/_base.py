"""The scorer framework: four steps, a result, and ``create_scorer``.

A scorer runs up to four steps in order, modelled on the Mastra evals' scorer pipeline:

1. ``preprocess`` (optional): derive something from the texts, e.g. the statements of an answer;
2. ``analyze`` (optional): judge it, e.g. one verdict per statement;
3. ``generate_score`` (required): compute the score;
4. ``generate_reason`` (optional): explain the score.

Each step is a plain function (sync or async) taking a ``ScorerRun``, or a ``JudgePrompt`` that
asks the LLM judge. Any step may stop the pipeline by raising (or returning) ``NotScorable``.
Scorers are pure: texts in, ``ScoreResult`` out; they know nothing of spans.

Opt-in, a judged ``analyze`` step can also write the reason (``reason_in_analyze=``; prebuilt
factories expose it as ``reason="inline"``), saving the reason call.

Inline reason (``reason_in_analyze=``): the ``analyze`` ``JudgePrompt``'s schema gets a
``reason`` string field after its own fields and its instructions get
``INLINE_REASON_REQUEST`` (plus the scorer's own focus, when a string is given), so the
reason arrives with the verdicts and no reason call is made: one judge call fewer (3 -> 2
with a preprocess step, 2 -> 1 without), and the reason call's prompt (which re-sends the
texts and the verdicts) is saved. The score is computed exactly as before, from the same
verdicts; ``analyze_step_result`` keeps its usual shape (the reason is taken out of it and
becomes ``ScoreResult.reason``); ``generate_reason_prompt`` is ``None``.

The trade-off: the inline reason is written before the score exists, so it summarises the
verdicts instead of explaining a number. It cannot cite the final score or how the formula
weighs the verdicts (e.g. an ``unsure`` verdict counting 0.3), and the judge is told not to
guess one. A blank inline reason is invalid output and gets the usual repair retry.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import re
import string
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict

from tracescore._core.cpu import in_worker, run_cpu
from tracescore._core.errors import ConfigurationError, ScorerError, ScoringError
from tracescore._core.loop import run_blocking
from tracescore._core.redact import redact_mapping, redact_structure, redact_text
from tracescore._judge import Judge, JudgeReply, check_model_spec, resolve_judge
from tracescore._pipeline.fingerprint import fingerprint
from tracescore._pipeline.scorer import Scorer as ScorerProtocol
from tracescore.scorers._prompt import DATA_NOTICE, data_block, data_blocks
from tracescore.scorers._rounding import round_half_up
from tracescore.scorers._text import (
    context_texts,
    input_text,
    normalise_tool_calls,
    output_text,
    plain_text,
)

__all__ = [
    "INLINE_REASON_REQUEST",
    "JudgePrompt",
    "NotScorable",
    "ReasonMode",
    "ScoreResult",
    "Scorer",
    "ScorerRun",
    "check_reason_mode",
    "create_scorer",
]

Requirement: TypeAlias = Literal["input", "output", "ground_truth", "context", "tool_calls"]
_REQUIREMENTS: frozenset[str] = frozenset(
    {"input", "output", "ground_truth", "context", "tool_calls"}
)
ReasonMode: TypeAlias = Literal["step", "inline"]

# Appended to the analyze instructions in inline-reason mode. The score does not exist yet when
# the judge writes this, so the request is a summary of the verdicts, never a score.
INLINE_REASON_REQUEST = """\
In the same answer, after all the other fields, fill "reason": two or three sentences for a \
developer who reads them next to a trace, summarising your judgements above as a whole: what \
speaks for the evaluated text and what speaks against it. The score is computed from your \
judgements afterwards and you do not know it: do not state a score, a percentage or a grade."""

_STEP_LABELS = {
    "preprocess": "preprocess",
    "analyze": "analyze",
    "generate_score": "score",
    "generate_reason": "reason",
}


class SkipJudge(Exception):
    """Raised from a ``JudgePrompt``'s ``prompt`` function: skip this judge call and use
    ``result`` as the step's result, when the answer is known without asking (nothing to
    judge). Saves a call; the step result keeps its usual shape.

    Args:
        result: the step result (a dict shaped as the step's schema would answer).

    Examples:
        >>> def verdicts_prompt(run):
        ...     if not run.preprocess_result["opinions"]:
        ...         raise SkipJudge({"results": []})
        ...     return ...
    """

    def __init__(self, result: Mapping[str, Any]) -> None:
        super().__init__("judge call skipped")
        self.result = dict(result)


class NotScorable(Exception):
    """Stops a scorer: the inputs do not allow a score (empty output, no statements, ...).

    Raise it (or return it) from any step; the scorer then returns a ``ScoreResult`` with
    ``score=None``, ``not_scorable=True`` and ``reason`` set to this reason.

    Args:
        reason: why no score can be given, written for a person reading the span event.

    Examples:
        >>> def preprocess(run):
        ...     if not run.output_text.strip():
        ...         raise NotScorable("the output is empty")
        ...     return {"words": run.output_text.split()}
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ScoreResult(BaseModel):
    """What one scorer run produced.

    Attributes:
        scorer_id: the scorer's id, e.g. ``"answer-relevancy"``.
        score: 0..``scale``; ``None`` when not scorable.
        reason: the explanation of the score, or why there is none.
        not_scorable: ``True`` when the inputs did not allow a score.
        preprocess_step_result: the preprocess step's object (e.g. ``{"statements": [...]}``).
        analyze_step_result: the analyze step's object (e.g. ``{"results": [...]}``).
        preprocess_prompt: the user prompt sent to the judge for preprocess, if judged.
        analyze_prompt: the user prompt sent for analyze, if judged.
        generate_reason_prompt: the user prompt sent for the reason, if judged.
        judge_model: the judge's litellm model string, when a judge was called.
        judge_calls: completions obtained from the judge (a repair retry counts as one more; an
            answer served from the judge's cache or shared with a concurrent identical request
            counts 0, and so do its tokens and cost).
        input_tokens: judge input tokens, summed over calls.
        output_tokens: judge output tokens, summed over calls.
        cost: judge cost in USD; ``0.0`` without judge calls, ``None`` when litellm has no
            price for the model.
        scale: the scorer's scale: the maximum score.
    """

    model_config = ConfigDict(frozen=True)

    scorer_id: str
    score: float | None
    reason: str
    not_scorable: bool
    preprocess_step_result: dict[str, Any] | None = None
    analyze_step_result: dict[str, Any] | None = None
    preprocess_prompt: str | None = None
    analyze_prompt: str | None = None
    generate_reason_prompt: str | None = None
    judge_model: str | None = None
    judge_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = 0.0
    scale: float = 1.0


@dataclasses.dataclass(frozen=True)
class ScorerRun:
    """What each step sees: the raw values, their extracted texts, and earlier steps' results.

    Attributes:
        input: the raw ``input`` given to ``run()``.
        output: the raw ``output``.
        ground_truth: the raw ``ground_truth``.
        context: the context pieces as strings (from the scorer's ``context_extractor``, else
            its ``context=``, else ``run(context=...)``), or ``None``.
        extra: any other keyword arguments given to ``run()`` (``baseline_response``, ...).
        tool_calls: the tool calls made, each ``{"name", "arguments", "result"}`` (from
            ``run(tool_calls=...)``, else from assistant messages with OpenAI-style
            ``tool_calls`` in the output), or ``None`` when none were given.
        input_text: the judged question (first user message; see ``tracescore.scorers._text``).
        output_text: the judged answer (last assistant message with text, ``{"text": ...}``).
        ground_truth_text: the ground truth as text.
        scale: the scorer's scale.
        preprocess_result: the preprocess step's result, once it ran.
        analyze_result: the analyze step's result, once it ran.
        score: the score, once ``generate_score`` ran (seen by ``generate_reason``).
    """

    input: Any
    output: Any
    ground_truth: Any
    context: list[str] | None
    extra: Mapping[str, Any]
    input_text: str
    output_text: str
    ground_truth_text: str
    scale: float
    preprocess_result: dict[str, Any] | None = None
    analyze_result: dict[str, Any] | None = None
    score: float | None = None
    tool_calls: list[dict[str, Any]] | None = None


class _ScoreReply(BaseModel):
    score: float


class _ReasonReply(BaseModel):
    reason: str


@dataclasses.dataclass(frozen=True)
class JudgePrompt:
    """A step answered by the LLM judge.

    Args:
        instructions: the system prompt: the judge's task. tracescore appends a notice that
            delimited texts are data, not instructions.
        prompt: the user prompt: a function of the ``ScorerRun`` returning a string (wrap
            untrusted texts with ``data_block``/``data_blocks``), or a template string whose
            fields ``{input}``, ``{output}``, ``{ground_truth}``, ``{context}``,
            ``{preprocess_result}`` and ``{analyze_result}`` become escaped, delimited blocks and
            ``{score}``/``{scale}`` plain numbers (write literal braces as ``{{``/``}}``).
            The function may raise ``NotScorable`` to stop before any judge call.
        output_schema: a pydantic model class for the answer. Required for ``preprocess`` and
            ``analyze``; for ``generate_score`` it defaults to ``{"score": number}`` and must
            have a numeric ``score`` field; for ``generate_reason`` it defaults to
            ``{"reason": string}`` and must have a ``reason`` field.
        name: the schema name sent to the judge (``response_format.json_schema.name``);
            default ``<scorer id with underscores>_<step>``.
        validate: an optional check ``validate(parsed, run)`` beyond the schema that raises
            ``ValueError`` when the answer is unusable (e.g. one verdict per statement
            expected); the judge then gets one repair retry.

    Examples:
        >>> class Verdict(BaseModel):
        ...     polite: bool
        >>> step = JudgePrompt(
        ...     instructions="Decide whether the answer is polite.",
        ...     prompt="{output}",
        ...     output_schema=Verdict,
        ... )
    """

    instructions: str
    prompt: str | Callable[[ScorerRun], str]
    output_schema: type[BaseModel] | None = None
    name: str | None = None
    validate: Callable[[Any, ScorerRun], None] | None = None

    def render(self, run: ScorerRun) -> str:
        """Build the user prompt for ``run`` (may raise ``NotScorable``)."""
        if callable(self.prompt):
            rendered = self.prompt(run)
            if isinstance(rendered, NotScorable):
                raise rendered
            if not isinstance(rendered, str):
                raise TypeError(f"a JudgePrompt prompt must return a str, got {type(rendered)}")
            return rendered
        return _render_template(self.prompt, run)


Step: TypeAlias = "Callable[[ScorerRun], Any] | JudgePrompt"


def _render_template(template: str, run: ScorerRun) -> str:
    import json

    fields = {
        name for _, name, _, _ in string.Formatter().parse(template) if name is not None and name
    }

    def value(name: str) -> str:
        if name == "input":
            return data_block("input", run.input_text)
        if name == "output":
            return data_block("output", run.output_text)
        if name == "ground_truth":
            return data_block("ground_truth", run.ground_truth_text)
        if name == "context":
            return data_blocks("context", run.context or [])
        if name in ("preprocess_result", "analyze_result"):
            result = getattr(run, name)
            return data_block(name, json.dumps(result, ensure_ascii=False, default=str))
        if name == "score":
            return "" if run.score is None else f"{run.score:g}"
        if name == "scale":
            return f"{run.scale:g}"
        raise KeyError(
            f"unknown field {{{name}}} in JudgePrompt template; use input, output, "
            "ground_truth, context, preprocess_result, analyze_result, score or scale"
        )

    return template.format_map({name: value(name) for name in fields})


@dataclasses.dataclass
class _Accounting:
    judge: Judge | None = None
    judge_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = 0.0
    prompts: dict[str, str] = dataclasses.field(default_factory=dict)

    def add(self, reply: JudgeReply[Any]) -> None:
        self.judge_calls += reply.calls
        self.input_tokens += reply.prompt_tokens
        self.output_tokens += reply.completion_tokens
        if self.cost is not None:
            self.cost = None if reply.cost is None else self.cost + reply.cost


def _checked_definition(id: Any, model: Any, scale: Any, requires: Iterable[Requirement],  # noqa: A002
                        context_extractor: Any, run_inputs: Iterable[str]
                        ) -> tuple[tuple[Requirement, ...], tuple[str, ...]]:
    """A scorer's definition checked (``Scorer``'s arguments): ``(requires, run_inputs)`` as
    tuples. Raises ``ConfigurationError`` saying what to pass instead."""
    if not isinstance(id, str) or not re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", id):
        raise ConfigurationError(
            f"scorer id must be a lowercase name like 'answer-relevancy', got {id!r}"
        )
    check_model_spec(model)
    check_scale(scale)
    requires = tuple(requires)
    unknown = sorted(set(requires) - _REQUIREMENTS)
    if unknown:
        raise ConfigurationError(
            f"scorer {id!r}: unknown requires {unknown}; use {sorted(_REQUIREMENTS)}"
        )
    if context_extractor is not None and not callable(context_extractor):
        raise ConfigurationError(
            f"scorer {id!r}: context_extractor must be a function (input, output) -> "
            f"list of strings, got {type(context_extractor).__name__}"
        )
    run_inputs = tuple(run_inputs)
    for name in run_inputs:
        if (
            not isinstance(name, str)
            or not name.isidentifier()
            or name in ("input", "output", "ground_truth", "context", "tool_calls")
        ):
            raise ConfigurationError(
                f"scorer {id!r}: run_inputs names extra keyword arguments of run(), such "
                f"as 'baseline_response'; got {name!r}"
            )
    return requires, run_inputs


class Scorer(ScorerProtocol):
    """A scorer: runs its steps on one (input, output, ground truth, context) and scores it.

    Build one with ``create_scorer`` or a prebuilt factory such as
    ``create_answer_relevancy_scorer``; the constructor takes the same arguments as
    ``create_scorer``. It implements ``tracescore._pipeline.scorer.Scorer``, the protocol the
    scoring engine uses, explicitly (so a type checker holds the two together).

    Attributes:
        id: the scorer id, recorded as ``gen_ai.evaluation.name``.
        description: one line saying what is scored.
        uses_judge: whether any step calls the LLM judge.
        uses_context: whether the scorer judges context pieces.
        uses_tool_calls: whether the scorer judges tool calls (``"tool_calls"`` in
            ``requires``).
        requires_ground_truth: whether a ground truth is needed.
        higher_is_better: ``False`` for scores such as hallucination.
        has_own_context: the scorer got ``context=`` or ``context_extractor=`` itself.
        scale: the maximum score.
        model: the ``model=`` given (a string, a ``Judge`` or ``None`` for the default judge,
            resolved at each run so a scorer created before ``configure()`` uses its judge).
        options: the scorer's effective options (defaults merged with what was given).
        reason_in_analyze: ``True`` when the judged ``analyze`` step also writes the reason
            (the inline reason: see the module docstring).
    """

    def __init__(
        self,
        *,
        id: str,  # noqa: A002 - the public name of the option
        description: str = "",
        preprocess: Step | None = None,
        analyze: Step | None = None,
        generate_score: Step,
        generate_reason: Step | None = None,
        model: str | Judge | None = None,
        requires: Iterable[Requirement] = ("output",),
        uses_context: bool | None = None,
        context: Any = None,
        context_extractor: Callable[[Any, Any], Any] | None = None,
        higher_is_better: bool = True,
        scale: float = 1.0,
        round_score: bool | None = None,
        options: Mapping[str, Any] | None = None,
        run_inputs: Iterable[str] = (),
        reason_in_analyze: bool | str = False,
    ) -> None:
        requires, run_inputs = _checked_definition(id, model, scale, requires,
                                                   context_extractor, run_inputs)
        steps = {
            "preprocess": preprocess,
            "analyze": analyze,
            "generate_score": generate_score,
            "generate_reason": generate_reason,
        }
        for step_name, step in steps.items():
            _check_step(id, step_name, step)
        if reason_in_analyze is not False:
            steps["analyze"] = _inline_reason_step(id, analyze, generate_reason, reason_in_analyze)

        self.id: str = id
        self.description: str = description
        self.model: str | Judge | None = model
        self.uses_judge: bool = any(isinstance(s, JudgePrompt) for s in steps.values())
        self.has_own_context: bool = context is not None or context_extractor is not None
        self.uses_context: bool = (
            uses_context if uses_context is not None else "context" in requires
        ) or self.has_own_context
        self.requires_ground_truth: bool = "ground_truth" in requires
        self.uses_tool_calls: bool = "tool_calls" in requires
        self.run_inputs: tuple[str, ...] = run_inputs
        self.higher_is_better: bool = higher_is_better
        self.scale: float = float(scale)
        self.options: Mapping[str, Any] = MappingProxyType(dict(options or {}))
        self.reason_in_analyze: bool = reason_in_analyze is not False
        self._steps = steps
        self._requires = requires
        self._context = context_texts(context) if context is not None else None
        self._context_extractor = context_extractor
        self._round = self.uses_judge if round_score is None else round_score

    def __repr__(self) -> str:
        return f"Scorer(id={self.id!r}, model={self.model!r})"

    @property
    def fingerprint(self) -> str:
        """The evaluator version: 12 hex digits of a hash of the id, the steps (prompts, their
        output schemas, the code of step functions and of tracescore's helpers they call), the
        options, the scale and direction, and a context given at creation. The same in every
        process for the same scorer; another prompt, option or scoring logic gives another
        value, while comments, docstrings, layout and where a step function is defined do not
        count. Recorded on every score as
        ``tracescore.evaluator.version``; the judge model is recorded on its own
        (``tracescore.judge.model``) and is not part of it.

        Examples:
            >>> create_answer_relevancy_scorer().fingerprint  # doctest: +SKIP
            '5c1e0a9f2b7d'
        """
        cached = self.__dict__.get("_fingerprint")
        if cached is None:
            cached = fingerprint(
                self.id, self.scale, self.higher_is_better, self._requires, dict(self.options),
                self._steps, self._context, self._context_extractor, self._round,
                self.reason_in_analyze,
            )
            self.__dict__["_fingerprint"] = cached
        return cached

    def run(
        self,
        *,
        input: Any = None,  # noqa: A002 - the public name of the argument
        output: Any = None,
        ground_truth: Any = None,
        context: Any = None,
        **extra: Any,
    ) -> ScoreResult:
        """Score one case, blocking until done. Works inside and outside a running event loop.

        The scoring runs on tracescore's judge event loop thread, so calling ``run()`` from
        async code (or from a notebook) neither fails nor nests loops; prefer ``arun()`` there.
        It cannot be called from a scorer step itself (use ``await scorer.arun()`` in an
        ``async def`` step).

        Args:
            input: the question: a string, a list of chat messages (``{"role", "content"}``),
                or a dict with ``input_messages``.
            output: the answer: a string, ``{"text": ...}``, or a list of chat messages.
            ground_truth: the expected answer, for scorers that compare against one.
            context: context pieces (strings or documents with ``content``/``text``/
                ``page_content``), used when the scorer has no context of its own.
            **extra: passed to the steps as ``run.extra``.

        Returns:
            The ``ScoreResult``; ``score`` is ``None`` and ``not_scorable`` ``True`` when the
            inputs do not allow a score.

        Raises:
            ScoringError: a subclass with ``error_type`` set: ``NoJudgeConfiguredError``,
                ``JudgeTimeoutError``, ``JudgeRateLimitedError``, ``JudgeUnavailableError``,
                ``InvalidJudgeOutputError``, ``JudgeError``, or ``ScorerError`` for a failure
                in the scorer's own code (the original exception is its ``__cause__``).

        Examples:
            >>> result = scorer.run(input="What is 2+2?", output="4")  # doctest: +SKIP
            >>> result.score, result.reason  # doctest: +SKIP
        """
        if in_worker():
            # The step's worker would wait on the loop, which may need that worker for this
            # run's own steps: with every worker waiting so, nothing would ever finish.
            raise RuntimeError(
                "Scorer.run() was called from a scorer step; make the step 'async def' and use "
                "'await scorer.arun(...)' instead"
            )
        return run_blocking(
            self.arun(
                input=input, output=output, ground_truth=ground_truth, context=context, **extra
            )
        )

    async def arun(
        self,
        *,
        input: Any = None,  # noqa: A002 - the public name of the argument
        output: Any = None,
        ground_truth: Any = None,
        context: Any = None,
        **extra: Any,
    ) -> ScoreResult:
        """Score one case; the async form of ``run()``, with the same arguments and errors."""
        accounting = _Accounting()
        run: ScorerRun | None = None
        step = "prepare"
        try:
            run = self._prepare(input, output, ground_truth, context, extra)
            self._check_requirements(run)
            inline_reason = ""
            for step in ("preprocess", "analyze"):
                spec = self._steps[step]
                if spec is None:
                    continue
                result = await self._object_step(step, spec, run, accounting)
                if step == "preprocess":
                    run = dataclasses.replace(run, preprocess_result=result)
                else:
                    if self.reason_in_analyze:
                        # The step result keeps the shape the score function expects.
                        inline_reason = str(result.pop(_INLINE_REASON_FIELD)).strip()
                    run = dataclasses.replace(run, analyze_result=result)
            step = "generate_score"
            score_spec = self._steps["generate_score"]
            assert score_spec is not None  # checked at construction
            score = await self._score_step(score_spec, run, accounting)
            run = dataclasses.replace(run, score=score)
            step = "generate_reason"
            reason = inline_reason
            if self._steps["generate_reason"] is not None:
                reason = await self._reason_step(self._steps["generate_reason"], run, accounting)
        except NotScorable as stop:
            return self._result(run, accounting, score=None, reason=stop.reason, not_scorable=True)
        except ScoringError:
            raise
        except Exception as exc:
            raise ScorerError(
                f"scorer {self.id!r} failed in step {step}: {type(exc).__name__}: {exc}"
            ) from exc
        return self._result(run, accounting, score=score, reason=reason, not_scorable=False)

    # -- steps -------------------------------------------------------------------------------
    def _prepare(
        self, input: Any, output: Any, ground_truth: Any, context: Any, extra: dict[str, Any]
    ) -> ScorerRun:
        if self._context_extractor is not None:
            pieces = context_texts(self._context_extractor(input, output))
        elif self._context is not None:
            pieces = list(self._context)
        else:
            pieces = context_texts(context)
        # No credential reaches a judge or a result (tracescore._core.redact): values under secret
        # names (api_key=, a header list, a namedtuple's token field) are redacted here, where
        # the structure is still known; every rendered prompt is searched again (_ask_judge).
        input, output, ground_truth = (redact_structure(v) for v in (input, output, ground_truth))
        extra = redact_mapping(extra)
        calls = normalise_tool_calls(extra.pop("tool_calls", None), output)
        return ScorerRun(
            tool_calls=calls,
            input=input,
            output=output,
            ground_truth=ground_truth,
            context=pieces,
            extra=MappingProxyType(dict(extra)),
            input_text=input_text(input),
            output_text=output_text(output),
            ground_truth_text=plain_text(ground_truth),
            scale=self.scale,
        )

    def _check_requirements(self, run: ScorerRun) -> None:
        if "output" in self._requires and not run.output_text.strip():
            raise NotScorable("the output is empty: there is no answer to score")
        if "input" in self._requires and not run.input_text.strip():
            raise NotScorable("the input has no text (no user message): there is no question")
        if "ground_truth" in self._requires and not run.ground_truth_text.strip():
            raise NotScorable("no ground truth was given to compare the output with")
        if "tool_calls" in self._requires and run.tool_calls is None:
            raise NotScorable(
                "no tool calls were given (pass tool_calls=[...] or an output "
                "with assistant tool_calls)"
            )
        for name in self.run_inputs:
            value = run.extra.get(name)
            if value is None or (isinstance(value, str) and not value.strip()):
                raise NotScorable(
                    f"no {name} was given: pass {name}=... to run() or the scorer factory"
                )
        if "context" in self._requires and not any(p.strip() for p in run.context or []):
            raise NotScorable("the context is empty: there are no context pieces to judge")

    async def _object_step(
        self, step: str, spec: Step, run: ScorerRun, accounting: _Accounting
    ) -> dict[str, Any]:
        if isinstance(spec, JudgePrompt):
            try:
                parsed: BaseModel = await self._ask_judge(step, spec, run, accounting)
            except SkipJudge as skip:
                return skip.result
            return parsed.model_dump(mode="json")
        value = await _call(spec, run)
        if isinstance(value, BaseModel):
            return value.model_dump(mode="json")
        if isinstance(value, Mapping):
            return dict(value)
        raise TypeError(
            f"the {step} step must return a dict (step results are objects), "
            f"got {type(value).__name__}"
        )

    async def _score_step(self, spec: Step, run: ScorerRun, accounting: _Accounting) -> float:
        if isinstance(spec, JudgePrompt):
            value: Any = (await self._ask_judge("generate_score", spec, run, accounting)).score
        else:
            value = await _call(spec, run)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"generate_score must return a number, got {type(value).__name__}")
        score = float(value)
        if not math.isfinite(score):
            raise ValueError(f"generate_score returned {score}, not a finite number")
        return round_half_up(score) if self._round else score

    async def _reason_step(self, spec: Step, run: ScorerRun, accounting: _Accounting) -> str:
        if isinstance(spec, JudgePrompt):
            value: Any = (await self._ask_judge("generate_reason", spec, run, accounting)).reason
        else:
            value = await _call(spec, run)
        if not isinstance(value, str):
            raise TypeError(f"generate_reason must return a str, got {type(value).__name__}")
        return value

    async def _ask_judge(
        self, step: str, spec: JudgePrompt, run: ScorerRun, accounting: _Accounting
    ) -> Any:
        user = redact_text(spec.render(run))
        accounting.prompts[step] = user
        if accounting.judge is None:
            accounting.judge = resolve_judge(self.model)
        schema = spec.output_schema or (_ScoreReply if step == "generate_score" else _ReasonReply)
        validate = spec.validate
        reply = await accounting.judge.acomplete(
            system=f"{spec.instructions.rstrip()}\n\n{DATA_NOTICE}",
            user=user,
            schema=schema,
            name=spec.name or _default_schema_name(self.id, step),
            validate=None if validate is None else (lambda parsed: validate(parsed, run)),
        )
        accounting.add(reply)
        return reply.parsed

    def _result(
        self,
        run: ScorerRun | None,
        accounting: _Accounting,
        *,
        score: float | None,
        reason: str,
        not_scorable: bool,
    ) -> ScoreResult:
        return ScoreResult(
            scorer_id=self.id,
            score=score,
            reason=reason,
            not_scorable=not_scorable,
            preprocess_step_result=run.preprocess_result if run else None,
            analyze_step_result=run.analyze_result if run else None,
            preprocess_prompt=accounting.prompts.get("preprocess"),
            analyze_prompt=accounting.prompts.get("analyze"),
            generate_reason_prompt=accounting.prompts.get("generate_reason"),
            judge_model=accounting.judge.model if accounting.judge else None,
            judge_calls=accounting.judge_calls,
            input_tokens=accounting.input_tokens,
            output_tokens=accounting.output_tokens,
            cost=accounting.cost,
            scale=self.scale,
        )


def create_scorer(
    *,
    id: str,  # noqa: A002 - the public name of the option
    description: str = "",
    preprocess: Step | None = None,
    analyze: Step | None = None,
    generate_score: Step,
    generate_reason: Step | None = None,
    model: str | Judge | None = None,
    requires: Iterable[Requirement] = ("output",),
    uses_context: bool | None = None,
    context: Any = None,
    context_extractor: Callable[[Any, Any], Any] | None = None,
    higher_is_better: bool = True,
    scale: float = 1.0,
    round_score: bool | None = None,
    reason_in_analyze: bool | str = False,
) -> Scorer:
    """Build a custom scorer from the four steps.

    Each step is a function of a ``ScorerRun`` (sync or ``async def``) or a ``JudgePrompt``.
    ``preprocess`` and ``analyze`` return objects (dicts or pydantic models), exposed as
    ``run.preprocess_result``/``run.analyze_result`` to later steps and on the result;
    ``generate_score`` returns the final score (already scaled); ``generate_reason`` returns
    a string. Any step may raise ``NotScorable("why")`` to stop without a score.

    Args:
        id: the scorer id, lowercase with ``-``, e.g. ``"politeness"``.
        description: one line saying what is scored.
        preprocess: optional first step.
        analyze: optional second step.
        generate_score: required; the score.
        generate_reason: optional explanation of the score.
        model: judge for ``JudgePrompt`` steps: a litellm model string, a ``Judge``, or
            ``None`` for the configured judge (``configure(judge=...)``, else
            ``TRACESCORE_JUDGE_MODEL``), resolved at each run.
        requires: which of ``"input"``, ``"output"``, ``"ground_truth"``, ``"context"`` must be
            non-empty; when one is empty the run is not scorable and no step runs. Default
            ``("output",)``.
        uses_context: mark the scorer as a context scorer (default: ``"context"`` in
            ``requires``, or ``context``/``context_extractor`` given).
        context: fixed context pieces for every run.
        context_extractor: ``(input, output) -> pieces``; wins over ``context``, which wins
            over ``run(context=...)``.
        higher_is_better: ``False`` when a lower score is better.
        scale: the maximum score, > 0 (informational: ``generate_score`` applies it).
        round_score: round the score to 2 decimals half up; default: when a judge is used.
        reason_in_analyze: ``True`` to have the judged ``analyze`` step write the reason too
            (one judge call fewer; see ``Scorer`` for the trade-off), or a string saying what
            that reason should focus on, appended to ``INLINE_REASON_REQUEST``. Needs a
            ``JudgePrompt`` ``analyze`` step whose schema has no ``reason`` field of its own,
            and no ``generate_reason``. Default ``False``.

    Returns:
        A ``Scorer``.

    Raises:
        ConfigurationError: an invalid id, scale, model, requirement or step, or
            ``reason_in_analyze`` without a judged ``analyze`` step or with ``generate_reason``.

    Examples:
        >>> scorer = create_scorer(
        ...     id="answer-length",
        ...     generate_score=lambda run: min(len(run.output_text) / 100, 1.0),
        ... )
        >>> scorer.run(output="x" * 50).score
        0.5
    """
    return Scorer(
        id=id, description=description, preprocess=preprocess, analyze=analyze,
        generate_score=generate_score, generate_reason=generate_reason, model=model,
        requires=requires, uses_context=uses_context, context=context,
        context_extractor=context_extractor, higher_is_better=higher_is_better, scale=scale,
        round_score=round_score, reason_in_analyze=reason_in_analyze,
    )


def check_reason_mode(reason: object) -> bool:
    """Check a prebuilt factory's ``reason=`` option; ``True`` for ``"inline"``.

    ``"step"`` (the default of every prebuilt judge scorer) writes the reason in its own judge
    call, after the score; ``"inline"`` has the analyze call write it (see ``Scorer``).

    Raises:
        ConfigurationError: ``reason`` is neither ``"step"`` nor ``"inline"``.

    Examples:
        >>> check_reason_mode("inline")
        True
    """
    if reason not in ("step", "inline"):
        raise ConfigurationError(
            f'reason must be "step" (a separate judge call after the score) or "inline" '
            f"(written in the analyze call, one call fewer), got {reason!r}"
        )
    return reason == "inline"


def check_scale(scale: object) -> None:
    """Raise ``ConfigurationError`` unless ``scale`` is a finite number > 0."""
    if (
        isinstance(scale, bool)
        or not isinstance(scale, (int, float))
        or not math.isfinite(scale)
        or scale <= 0
    ):
        raise ConfigurationError(f"scale must be a finite number > 0, got {scale!r}")


def _check_step(scorer_id: str, step_name: str, step: object) -> None:
    if step is None:
        if step_name == "generate_score":
            raise ConfigurationError(f"scorer {scorer_id!r}: generate_score is required")
        return
    if isinstance(step, JudgePrompt):
        schema = step.output_schema
        if schema is not None and not (isinstance(schema, type) and issubclass(schema, BaseModel)):
            raise ConfigurationError(
                f"scorer {scorer_id!r}: {step_name} output_schema must be a pydantic model class"
            )
        if step_name in ("preprocess", "analyze") and schema is None:
            raise ConfigurationError(
                f"scorer {scorer_id!r}: a JudgePrompt {step_name} step needs output_schema="
            )
        field = {"generate_score": "score", "generate_reason": "reason"}.get(step_name)
        if field and schema is not None and field not in schema.model_fields:
            raise ConfigurationError(
                f"scorer {scorer_id!r}: the {step_name} output_schema needs a {field!r} field"
            )
        if not (isinstance(step.prompt, str) or callable(step.prompt)):
            raise ConfigurationError(
                f"scorer {scorer_id!r}: {step_name} prompt must be a str or a function"
            )
        return
    if not callable(step):
        raise ConfigurationError(
            f"scorer {scorer_id!r}: {step_name} must be a function or a JudgePrompt, "
            f"got {type(step).__name__}"
        )


_INLINE_REASON_FIELD = "reason"


def _inline_reason_step(
    scorer_id: str, analyze: Step | None, generate_reason: Step | None, request: object
) -> JudgePrompt:
    """The ``analyze`` JudgePrompt extended to write the reason as well."""
    if not (request is True or (isinstance(request, str) and request.strip())):
        raise ConfigurationError(
            f"scorer {scorer_id!r}: reason_in_analyze must be False, True or a non-empty "
            f"string saying what the reason should focus on, got {request!r}"
        )
    if not isinstance(analyze, JudgePrompt) or analyze.output_schema is None:
        raise ConfigurationError(
            f"scorer {scorer_id!r}: reason_in_analyze needs an analyze step that is a "
            "JudgePrompt with an output_schema (the judge writes the reason in that call)"
        )
    if generate_reason is not None:
        raise ConfigurationError(
            f"scorer {scorer_id!r}: reason_in_analyze replaces generate_reason; pass one of them"
        )
    base = analyze.output_schema
    if _INLINE_REASON_FIELD in base.model_fields:
        raise ConfigurationError(
            f"scorer {scorer_id!r}: the analyze output_schema {base.__name__} already has a "
            f"{_INLINE_REASON_FIELD!r} field; rename it to use reason_in_analyze"
        )
    from pydantic import Field, create_model

    # A subclass, so that the scorer's own validate() and field access keep working; the new
    # field comes last so that the judge writes its verdicts before summarising them.
    schema: type[BaseModel] = create_model(
        f"{base.__name__}WithReason",
        __base__=base,
        reason=(
            str,
            Field(description="Two or three sentences summarising the judgements above."),
        ),
    )
    instructions = f"{analyze.instructions.rstrip()}\n\n{INLINE_REASON_REQUEST}"
    if isinstance(request, str):
        instructions += f" {request.strip()}"
    validate = analyze.validate

    def check(parsed: Any, run: ScorerRun) -> None:
        if validate is not None:
            validate(parsed, run)
        if not getattr(parsed, _INLINE_REASON_FIELD).strip():
            raise ValueError(
                'the "reason" field is empty: summarise the judgements in two or three sentences'
            )

    return dataclasses.replace(
        analyze, instructions=instructions, output_schema=schema, validate=check
    )


def _default_schema_name(scorer_id: str, step: str) -> str:
    base = re.sub(r"[^A-Za-z0-9_-]", "_", scorer_id.replace("-", "_"))
    return f"{base}_{_STEP_LABELS[step]}"[:64]


# A prebuilt scorer's synchronous step on texts up to this many characters in all runs on the
# loop itself: its work is bounded by the text (about a millisecond at most here, for
# completeness), while a hop to the worker pool costs more than the step and, when the
# application's threads keep the GIL busy, waits a switch interval (5 ms) for each thread it
# crosses.
INLINE_STEP_MAX_CHARS = 1_000
_OWN_STEPS = __name__.rpartition(".")[0] + "."


def _runs_inline(step: Callable[[ScorerRun], Any], run: ScorerRun) -> bool:
    """Whether ``step`` may run on the loop: one of tracescore's own scorer steps (a user's
    step may block on anything) on short texts."""
    module = getattr(step, "__module__", None)  # None for a function made by eval/exec
    if not isinstance(module, str) or not module.startswith(_OWN_STEPS):
        return False
    size = len(run.input_text) + len(run.output_text) + len(run.ground_truth_text)
    if run.context:
        size += sum(len(piece) for piece in run.context)
    if run.extra:  # the scorer's named inputs (a reference tone, a baseline response)
        size += sum(len(v) for v in run.extra.values() if isinstance(v, str))
    return size <= INLINE_STEP_MAX_CHARS


async def _call(step: Callable[[ScorerRun], Any], run: ScorerRun) -> Any:
    if inspect.iscoroutinefunction(step):
        value = await step(run)
    elif _runs_inline(step, run):
        value = step(run)
    else:
        # A synchronous step may be CPU-bound (a heuristic scorer on a long text, a user's
        # step): run it in tracescore's small worker pool, so the loop that serves every other
        # scoring job and judge call keeps answering meanwhile.
        value = await run_cpu(step, run)
    if inspect.isawaitable(value):
        value = await value
    if isinstance(value, NotScorable):
        raise value
    return value
