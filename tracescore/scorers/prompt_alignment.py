"""Prompt alignment: how well a response follows the user's prompt and the system prompt.

Semantics follow the Mastra evals' prompt alignment scorer, with one deliberate
difference: in ``"both"`` mode the judge rates the response against the user prompt and the
system prompt separately and the two weighted scores are combined. (Mastra's scorer rates one
set of dimensions and reuses the user-mode score as the system score, so its ``"both"`` equals
``"user"``.) Prompts and code are tracescore's own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from tracescore._core.errors import ConfigurationError
from tracescore._judge import Judge
from tracescore.scorers._base import (
    JudgePrompt,
    NotScorable,
    Scorer,
    ScoreResult,
    ScorerRun,
    check_scale,
)
from tracescore.scorers._preset import explained, json_block, judge_scorer
from tracescore.scorers._prompt import data_block
from tracescore.scorers._rounding import round_half_up
from tracescore.scorers._text import _message_text, _role, input_text, plain_text

__all__ = [
    "SYSTEM_WEIGHTS",
    "USER_WEIGHTS",
    "create_prompt_alignment_scorer",
    "split_prompts",
    "weighted_alignment",
]

SCORER_ID = "prompt-alignment"

EvaluationMode = Literal["user", "system", "both"]
_MODES: tuple[str, ...] = ("user", "system", "both")

# Dimension weights (from the Mastra evals' prompt alignment scorer).
USER_WEIGHTS: Mapping[str, float] = {
    "intent_alignment": 0.4,
    "requirements_fulfillment": 0.3,
    "completeness": 0.2,
    "response_appropriateness": 0.1,
}
SYSTEM_WEIGHTS: Mapping[str, float] = {
    "intent_alignment": 0.35,
    "requirements_fulfillment": 0.35,
    "completeness": 0.15,
    "response_appropriateness": 0.15,
}
_BOTH_USER_SHARE = 0.7
_BOTH_SYSTEM_SHARE = 0.3

# Where a system prompt may sit in an input dict (Mastra's agent run input uses
# systemMessages / taggedSystemMessages; chat APIs use system / instructions).
_SYSTEM_KEYS = (
    "system",
    "instructions",
    "system_prompt",
    "systemPrompt",
    "system_messages",
    "systemMessages",
    "tagged_system_messages",
    "taggedSystemMessages",
)
_MESSAGE_LIST_KEYS = ("input_messages", "inputMessages", "messages")
_SYSTEM_ROLES = frozenset({"system", "developer"})


Score01 = Annotated[float, Field(ge=0, le=1, description="0 (not at all) to 1 (fully).")]


class IntentAlignment(BaseModel):
    """Whether the response serves the prompt's main purpose."""

    score: Score01
    primary_intent: str = Field(description="The prompt's main purpose, in a few words.")
    is_addressed: bool
    reasoning: str


class Requirement(BaseModel):
    """One explicit or clearly implied requirement of the prompt."""

    requirement: str
    is_fulfilled: bool
    reasoning: str


class RequirementsFulfillment(BaseModel):
    """Whether the prompt's requirements are met."""

    requirements: list[Requirement]
    score: Score01


class Completeness(BaseModel):
    """Whether everything the prompt calls for is covered."""

    score: Score01
    missing_elements: list[str]
    reasoning: str


class ResponseAppropriateness(BaseModel):
    """Whether format and tone fit what the prompt asks for."""

    score: Score01
    format_alignment: bool
    tone_alignment: bool
    reasoning: str


class AlignmentDimensions(BaseModel):
    """The four dimensions, each scored 0..1, against one prompt."""

    intent_alignment: IntentAlignment
    requirements_fulfillment: RequirementsFulfillment
    completeness: Completeness
    response_appropriateness: ResponseAppropriateness


class UserAlignment(BaseModel):
    """Analyze answer in ``"user"`` mode."""

    user: AlignmentDimensions
    overall_assessment: str


class SystemAlignment(BaseModel):
    """Analyze answer in ``"system"`` mode."""

    system: AlignmentDimensions
    overall_assessment: str


class BothAlignment(BaseModel):
    """Analyze answer in ``"both"`` mode: the two dimension sets, judged separately."""

    user: AlignmentDimensions
    system: AlignmentDimensions
    overall_assessment: str


_ANALYSIS_SCHEMAS: dict[str, type[BaseModel]] = {
    "user": UserAlignment,
    "system": SystemAlignment,
    "both": BothAlignment,
}

_DIMENSIONS_GUIDE = """\
Rate four dimensions, each from 0 (not at all) to 1 (fully), against the prompt named:
- intent_alignment: does the response serve the prompt's main purpose? State that purpose as \
primary_intent and whether it is addressed.
- requirements_fulfillment: list the prompt's explicit or clearly implied requirements (scope, \
constraints, quantities, formats, things to include or avoid); mark each fulfilled or not; \
score the share fulfilled, weighing important ones more.
- completeness: is everything the prompt calls for covered? List what is missing.
- response_appropriateness: do the format (length, structure, style) and tone fit what the \
prompt asks for or implies?
Give each a short reasoning. Judge how well the response follows the prompt, not whether its \
facts are true."""

_ANALYSIS_INSTRUCTIONS = {
    "user": f"""\
You evaluate how well an assistant's response follows the user's prompt.

{_DIMENSIONS_GUIDE}

Answer with the dimensions under "user" and a one-paragraph overall_assessment.""",
    "system": f"""\
You evaluate how well an assistant's response complies with the system prompt its developer \
gave it: the role, behaviour rules, constraints, format and tone it sets. The user's prompt, \
when shown, is only there to understand the situation.

{_DIMENSIONS_GUIDE}
For the system prompt, intent_alignment means acting in the role and for the purpose it sets; \
requirements are its rules and constraints that apply to this response.

Answer with the dimensions under "system" and a one-paragraph overall_assessment.""",
    "both": f"""\
You evaluate how well an assistant's response follows two prompts, separately: the user's \
prompt (what the user asked for) and the system prompt its developer gave it (the role, \
behaviour rules, constraints, format and tone it sets).

{_DIMENSIONS_GUIDE}
For the system prompt, intent_alignment means acting in the role and for the purpose it sets; \
requirements are its rules and constraints that apply to this response.

Rate the four dimensions twice and independently: under "user" against the user's prompt \
only, under "system" against the system prompt only. A response can satisfy one prompt and \
not the other. Add a one-paragraph overall_assessment.""",
}

_REASON_INSTRUCTIONS = """\
You explain a prompt-alignment score to a developer reading it next to a trace, in two or \
three sentences. The score weighs four dimensions (intent, requirements, completeness, format \
and tone) of how well the response follows the user's prompt, the system prompt, or both. Say \
what raised or lowered the score, naming unmet requirements or missing elements from the \
analysis given. Do not repeat the formula."""


def weighted_alignment(dimensions: Mapping[str, Any], weights: Mapping[str, float]) -> float:
    """Weighted sum of the four dimension scores.

    Args:
        dimensions: an ``AlignmentDimensions`` dump: each dimension a dict with a ``score``
            in [0, 1].
        weights: ``USER_WEIGHTS`` or ``SYSTEM_WEIGHTS``.

    Returns:
        A float in [0, 1], not rounded.

    Examples:
        >>> dims = {name: {"score": 1.0} for name in USER_WEIGHTS}
        >>> round(weighted_alignment(dims, USER_WEIGHTS), 2)
        1.0
    """
    return sum(float(dimensions[name]["score"]) * weight for name, weight in weights.items())


def split_prompts(value: Any) -> tuple[str, str]:
    """The user prompt and the system prompt of a scorer input.

    Args:
        value: a string (the user prompt); a list of chat messages (the first ``user``
            message's text, and the ``system``/``developer`` messages' texts joined); or a dict
            whose ``system``, ``instructions``, ``system_prompt``, ``system_messages`` or
            ``tagged_system_messages`` entries hold the system prompt (a string, messages, or
            a dict of tag to messages) and whose other entries hold the user prompt (e.g.
            ``input_messages``, whose system messages count too, or a single ``question``).

    Returns:
        ``(user_prompt, system_prompt)``; either may be ``""``.

    Examples:
        >>> split_prompts([{"role": "system", "content": "Be brief."},
        ...                {"role": "user", "content": "Hi?"}])
        ('Hi?', 'Be brief.')
    """
    if isinstance(value, Mapping) and _role(value) is None:
        system_parts: list[str] = []
        for key in _SYSTEM_KEYS:
            if key in value:
                system_parts.extend(_system_texts(value[key]))
        for key in _MESSAGE_LIST_KEYS:
            inner = value.get(key)
            if isinstance(inner, Sequence) and not isinstance(inner, (str, bytes)):
                system_parts.extend(_system_messages(inner))
        rest = {k: v for k, v in value.items() if k not in _SYSTEM_KEYS}
        user = input_text(rest) if rest else ""
        return user, _join(system_parts)
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes, bytearray)):
        return input_text(value), _join(_system_messages(value))
    if isinstance(value, Mapping):  # a single message
        role = _role(value)
        if role in _SYSTEM_ROLES:
            return "", _message_text(value).strip()
    return input_text(value), ""


def _system_messages(messages: Sequence[Any]) -> list[str]:
    return [_message_text(m) for m in messages if _role(m) in _SYSTEM_ROLES]


def _system_texts(value: Any) -> list[str]:
    """Texts of a system-prompt entry: a string, messages (any role), or tag -> messages."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        if _role(value) is not None:
            return [_message_text(value)]
        return [text for inner in value.values() for text in _system_texts(inner)]
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        return [text for item in value for text in _system_texts(item)]
    if _role(value) is not None:
        return [_message_text(value)]
    return [plain_text(value)]


def _join(parts: list[str]) -> str:
    return "\n\n".join(p.strip() for p in parts if p and p.strip())


def create_prompt_alignment_scorer(
    *,
    model: str | Judge | None = None,
    evaluation_mode: EvaluationMode = "both",
    system_prompt: str | None = None,
    scale: float = 1,
) -> Scorer:
    """Score how well a response follows the user's prompt, the system prompt, or both.

    Two judge calls. The judge rates four dimensions from 0 to 1: intent alignment,
    requirements fulfilment, completeness, and response appropriateness (format and tone)
    (``analyze_step_result``: ``{"user": dims, "overall_assessment"}`` in ``"user"`` mode,
    ``{"system": dims, ...}`` in ``"system"`` mode, both sets in ``"both"`` mode; ``dims`` has
    ``intent_alignment``, ``requirements_fulfillment``, ``completeness`` and
    ``response_appropriateness``, each with a ``score`` and its details); then a reason is
    written.

    Score (from the Mastra evals' prompt alignment):
    ``"user"``: ``0.4 * intent + 0.3 * requirements + 0.2 * completeness + 0.1 *
    appropriateness`` on the user set; ``"system"``: weights 0.35, 0.35, 0.15, 0.15 on the
    system set; ``"both"``: ``0.7 * user + 0.3 * system``, each from its own set (Mastra's
    both-mode reuses the user score for the system part; here the system prompt is really
    judged). Times ``scale``, rounded to 2 decimals half up.

    The system prompt is ``run(system_prompt=...)``, else the factory's ``system_prompt=``, else
    what the input carries (see ``split_prompts``: system/developer messages, or an input dict
    with ``system``/``instructions``). The user prompt is the input's first user message.

    ``"both"`` without a system prompt (an ordinary chat) falls back to ``"user"`` mode: the
    score is the user-mode score and the reason starts by saying so.

    Not scorable (no judge call): an empty output; no user prompt in ``"user"`` or ``"both"``
    mode; no system prompt in ``"system"`` mode.

    Args:
        model: the judge: a litellm model string, a ``tracescore.Judge``, or ``None`` for the
            configured judge (``configure(judge=...)``, else ``TRACESCORE_JUDGE_MODEL``).
        evaluation_mode: ``"user"``, ``"system"`` or ``"both"`` (user mode when a run has no
            system prompt). Default ``"both"``.
        system_prompt: a fixed system prompt, for agents whose input does not carry it.
        scale: maximum score, > 0. Default 1.

    Returns:
        A ``Scorer`` with id ``prompt-alignment``.

    Raises:
        ConfigurationError: an option is invalid or ``model`` is invalid.

    Examples:
        >>> scorer = create_prompt_alignment_scorer(model="openai/gpt-4o-mini")
        >>> scorer.run(input=[{"role": "system", "content": "Answer in one sentence."},
        ...                   {"role": "user", "content": "What is DNS?"}],
        ...            output="DNS maps names to IP addresses.").score  # doctest: +SKIP
        1.0
    """
    if evaluation_mode not in _MODES:
        raise ConfigurationError(
            f"evaluation_mode must be 'user', 'system' or 'both', got {evaluation_mode!r}"
        )
    if system_prompt is not None and not isinstance(system_prompt, str):
        raise ConfigurationError(
            f"system_prompt must be a string or None, got {type(system_prompt).__name__}"
        )
    check_scale(scale)
    options = {"evaluation_mode": evaluation_mode, "system_prompt": system_prompt, "scale": scale}
    if evaluation_mode != "both":
        return _preset(evaluation_mode, model, system_prompt, scale, options)
    return _preset(
        "both",
        model,
        system_prompt,
        scale,
        options,
        scorer_class=_BothModeScorer,
        user_mode=_preset("user", model, system_prompt, scale, options),
        system_prompt=system_prompt,
    )


_NO_SYSTEM_PROMPT_NOTE = (
    "No system prompt was found, so the response was judged against the user prompt only "
    "(as evaluation_mode='user')."
)


def _prompts_of(
    value: Any, run_system_prompt: Any, fixed_system_prompt: str | None
) -> tuple[str, str]:
    """The user and system prompts of a run: ``run(system_prompt=...)`` wins over the
    factory's ``system_prompt=``, which wins over what the input carries."""
    user, system = split_prompts(value)
    if run_system_prompt is not None and plain_text(run_system_prompt).strip():
        system = plain_text(run_system_prompt).strip()
    elif fixed_system_prompt is not None and fixed_system_prompt.strip():
        system = fixed_system_prompt.strip()
    return user, system


class _BothModeScorer(Scorer):
    """The ``"both"`` mode scorer, which falls back to user mode when there is no system prompt.

    ``"both"`` is the default, and most chats carry no system prompt: without the fallback the
    default scorer would never score an ordinary chat. The fallback is a user-mode scorer of its
    own (its instructions and answer schema differ), chosen per run; the reason says so.
    """

    def __init__(self, *, user_mode: Scorer, system_prompt: str | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._user_mode = user_mode
        self._system_prompt = system_prompt

    async def arun(
        self,
        *,
        input: Any = None,  # noqa: A002 - the public name of the argument
        output: Any = None,
        ground_truth: Any = None,
        context: Any = None,
        **extra: Any,
    ) -> ScoreResult:
        """Score one case in ``"both"`` mode, or in user mode when there is no system prompt."""
        arguments = {
            "input": input,
            "output": output,
            "ground_truth": ground_truth,
            "context": context,
            **extra,
        }
        try:
            user, system = _prompts_of(input, extra.get("system_prompt"), self._system_prompt)
        except Exception:
            # An input the prompts cannot be read from: the regular run reports it as a
            # ScorerError, with the step it failed in.
            return await super().arun(**arguments)
        if system.strip() or not user.strip():
            return await super().arun(**arguments)
        result = await self._user_mode.arun(**arguments)
        if result.not_scorable:
            return result
        return result.model_copy(update={"reason": f"{_NO_SYSTEM_PROMPT_NOTE} {result.reason}"})


def _steps(mode: str, system_prompt: str | None) -> tuple[
    Callable[[ScorerRun], str], Callable[[ScorerRun], float], Callable[[ScorerRun], str]
]:
    """The analysis prompt, the score and the reason prompt of one evaluation mode."""

    def analysis_prompt(run: ScorerRun) -> str:
        user, system = _prompts_of(run.input, run.extra.get("system_prompt"), system_prompt)
        if mode in ("user", "both") and not user.strip():
            raise NotScorable(
                f"the input has no user prompt (no user message): evaluation_mode={mode!r} "
                "judges the response against it"
            )
        # "both" never gets here without a system prompt: it falls back to user mode.
        if mode == "system" and not system.strip():
            raise NotScorable(
                f"no system prompt was found: evaluation_mode={mode!r} needs one (a system "
                "message in the input, an input dict with 'system' or 'instructions', or "
                "system_prompt=...)"
            )
        parts = []
        if mode != "user":
            parts.append(data_block("system_prompt", system))
        if user.strip():
            parts.append(data_block("user_prompt", user))
        parts.append(data_block("response", run.output_text))
        task = {
            "user": "Rate how well the response follows the user prompt.",
            "system": "Rate how well the response complies with the system prompt.",
            "both": 'Rate how well the response follows the user prompt (under "user") and, '
            'separately, the system prompt (under "system").',
        }[mode]
        parts.append(task)
        return "\n\n".join(parts)

    def score(run: ScorerRun) -> float:
        assert run.analyze_result is not None
        analysis = run.analyze_result
        if mode == "user":
            value = weighted_alignment(analysis["user"], USER_WEIGHTS)
        elif mode == "system":
            value = weighted_alignment(analysis["system"], SYSTEM_WEIGHTS)
        else:
            value = _BOTH_USER_SHARE * weighted_alignment(
                analysis["user"], USER_WEIGHTS
            ) + _BOTH_SYSTEM_SHARE * weighted_alignment(analysis["system"], SYSTEM_WEIGHTS)
        return value * run.scale

    def reason_prompt(run: ScorerRun) -> str:
        assert run.analyze_result is not None
        analysis = run.analyze_result
        parts = []
        for key, weights in (("user", USER_WEIGHTS), ("system", SYSTEM_WEIGHTS)):
            if key in analysis:
                sub = round_half_up(weighted_alignment(analysis[key], weights))
                parts.append(f"{key} prompt: {sub:g}")
        user, _ = _prompts_of(run.input, run.extra.get("system_prompt"), system_prompt)
        question = [data_block("user_prompt", user)] if user.strip() else []
        return explained(
            run,
            *question,
            json_block("analysis", analysis),
            lead=f"Evaluation mode: {mode}. Weighted alignment with the {'; '.join(parts)} "
            "(0 to 1). ",
        )

    return analysis_prompt, score, reason_prompt


def _preset(
    mode: str,
    model: str | Judge | None,
    system_prompt: str | None,
    scale: float,
    options: Mapping[str, Any],
    /,
    **extra: Any,
) -> Scorer:
    """The scorer for one evaluation mode (``extra``: ``judge_scorer``'s further arguments)."""
    analysis_prompt, score, reason_prompt = _steps(mode, system_prompt)
    return judge_scorer(
        id=SCORER_ID,
        description="How well the response follows the user's prompt and the system prompt.",
        model=model,
        requires=("output",),
        scale=scale,
        analyze=JudgePrompt(
            instructions=_ANALYSIS_INSTRUCTIONS[mode],
            prompt=analysis_prompt,
            output_schema=_ANALYSIS_SCHEMAS[mode],
            name="prompt_alignment_analysis",
        ),
        generate_score=score,
        reason_instructions=_REASON_INSTRUCTIONS,
        reason_prompt=reason_prompt,
        options={
            "evaluation_mode": options["evaluation_mode"],
            "system_prompt": options["system_prompt"],
            "scale": float(options["scale"]),
        },
        **extra,
    )
