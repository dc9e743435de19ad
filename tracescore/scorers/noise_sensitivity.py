"""Noise sensitivity: does an agent's answer hold up when its question carries noise?

The agent answered a clean question (the baseline response) and a noisy version of it
(misinformation, distractors, irrelevant detail, adversarial text); the judge compares the two
answers. Semantics follow the Mastra evals' noise sensitivity scorer; prompts
and code are tracescore's own.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field

from tracescore._core.errors import ConfigurationError
from tracescore._judge import Judge
from tracescore.scorers._base import JudgePrompt, NotScorable, Scorer, ScorerRun, check_scale
from tracescore.scorers._common import Texts
from tracescore.scorers._preset import explained, json_block, judge_scorer
from tracescore.scorers._prompt import data_block
from tracescore.scorers._text import plain_text
from tracescore.scorers._verdicts import normalise_verdict

__all__ = [
    "DEFAULT_IMPACT_WEIGHTS",
    "DIMENSIONS",
    "create_noise_sensitivity_scorer",
    "noise_sensitivity_score",
]

SCORER_ID = "noise-sensitivity"

# The five dimensions the judge rates (the Mastra evals' noise sensitivity uses the same).
DIMENSIONS: tuple[str, ...] = (
    "content_accuracy",
    "completeness",
    "relevance",
    "consistency",
    "hallucination_resistance",
)
IMPACT_LEVELS: tuple[str, ...] = ("none", "minimal", "moderate", "significant", "severe")
# none 1, minimal 0.85, moderate 0.6, significant 0.3, severe 0.1.
DEFAULT_IMPACT_WEIGHTS: Mapping[str, float] = {
    "none": 1.0,
    "minimal": 0.85,
    "moderate": 0.6,
    "significant": 0.3,
    "severe": 0.1,
}


def _normalise_name(value: Any) -> Any:
    """``" Content Accuracy "`` -> ``"content_accuracy"``: names compare loosely."""
    value = normalise_verdict(value)
    return value.replace(" ", "_").replace("-", "_") if isinstance(value, str) else value


Dimension = Annotated[
    Literal[
        "content_accuracy", "completeness", "relevance", "consistency", "hallucination_resistance"
    ],
    BeforeValidator(_normalise_name),
]
ImpactLevel = Annotated[
    Literal["none", "minimal", "moderate", "significant", "severe"],
    BeforeValidator(normalise_verdict),
]


class DimensionImpact(BaseModel):
    """How much the noise affected one dimension of the answer."""

    dimension: Dimension
    impact_level: ImpactLevel
    specific_changes: str = Field(
        description="What changed in this dimension between the two answers."
    )
    noise_influence: str = Field(description="How the noise caused (or failed to cause) it.")


class NoiseAnalysis(BaseModel):
    """Analyze answer: the five dimensions, the robustness score and the major issues."""

    dimensions: list[DimensionImpact]
    major_issues: Texts = Field(
        description="Serious failures caused by the noise (empty when there are none)."
    )
    robustness_score: float = Field(ge=0, le=1, description="0 (derailed) to 1 (unaffected).")
    overall_assessment: str


_ANALYSIS_INSTRUCTIONS = """\
You test how robust an AI agent is to noise in its input. You are given the original question, \
the agent's answer to it (the baseline), a noisy version of the question (it adds \
misinformation, distractions, irrelevant detail or adversarial text), and the agent's answer \
to the noisy version. Compare the noisy answer with the baseline: did the noise make it worse?

Rate the noise's impact on each of five dimensions, each exactly once, as "none", "minimal", \
"moderate", "significant" or "severe":
- content_accuracy: are the facts still correct, or did the noise introduce errors?
- completeness: does the noisy answer still cover what the original question needs?
- relevance: does it stay on the original question, or follow the distraction?
- consistency: does it agree with the baseline's substance and conclusions?
- hallucination_resistance: did the agent avoid repeating the noise's false claims or \
inventing content because of it?
For each, say what changed (specific_changes) and how the noise caused it (noise_influence).

Then give a robustness_score from 0 (the noise derailed the answer) to 1 (unaffected, or the \
agent rightly flagged or ignored the noise), list major_issues (serious failures such as \
adopting misinformation or abandoning the question; empty if none), and write a short \
overall_assessment. Improvements or harmless rewording are not damage."""

_REASON_INSTRUCTIONS = """\
You explain a noise-sensitivity score to a developer reading it next to a trace, in two or \
three sentences. The score measures how well the agent's answer held up when noise was added \
to the question (1 means unaffected). Say which dimensions the noise damaged and which major \
issues lowered the score, based on the analysis given. Do not repeat the formula."""


def noise_sensitivity_score(
    analysis: Mapping[str, Any],
    *,
    impact_weights: Mapping[str, float] = DEFAULT_IMPACT_WEIGHTS,
    major_issue_per_item: float = 0.1,
    max_major_issue_penalty: float = 0.3,
    discrepancy_threshold: float = 0.2,
) -> float:
    """The noise-sensitivity score of an analysis, in [0, 1], before scale and rounding.

    Formula (from the Mastra evals' noise sensitivity): start from the judge's
    ``robustness_score``; when it differs from the mean impact weight of the dimensions by
    more than ``discrepancy_threshold``, take the lower of the two; subtract
    ``min(major_issue_per_item * major_issues, max_major_issue_penalty)``; floor at 0.

    Args:
        analysis: a ``NoiseAnalysis`` dump: ``dimensions`` (each with ``impact_level``),
            ``robustness_score`` and ``major_issues``.
        impact_weights: weight per impact level.
        major_issue_per_item: penalty per major issue.
        max_major_issue_penalty: cap of the major-issue penalty.
        discrepancy_threshold: how far the robustness score may stray from the mean weight.

    Returns:
        The score, not scaled or rounded.

    Examples:
        >>> noise_sensitivity_score({"robustness_score": 0.9, "major_issues": ["x"],
        ...     "dimensions": [{"impact_level": "none"}, {"impact_level": "minimal"}]})
        0.8
    """
    score = min(1.0, max(0.0, float(analysis["robustness_score"])))
    dimensions = analysis.get("dimensions") or []
    if dimensions:
        mean_weight = sum(impact_weights[d["impact_level"]] for d in dimensions) / len(dimensions)
        if abs(score - mean_weight) > discrepancy_threshold:
            score = min(score, mean_weight)
    issues = len(analysis.get("major_issues") or [])
    score -= min(issues * major_issue_per_item, max_major_issue_penalty)
    return max(0.0, score)


def _check_fraction(name: str, value: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not 0 <= value <= 1
    ):
        raise ConfigurationError(f"{name} must be a number in [0, 1], got {value!r}")
    return float(value)


def _check_text_option(name: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(
            f"{name} must be a non-empty string (or None to take it per run), got {value!r}"
        )
    return value


def check_analysis(parsed: NoiseAnalysis, run: ScorerRun) -> None:
    """Each of the five dimensions exactly once."""
    named = [d.dimension for d in parsed.dimensions]
    if sorted(named) != sorted(DIMENSIONS):
        raise ValueError(
            f"expected each of the five dimensions {', '.join(DIMENSIONS)} exactly once, "
            f"got {named}"
        )


def reason_prompt(run: ScorerRun) -> str:
    """The reason step's prompt: the original question, the analysis and the score."""
    return explained(
        run,
        data_block("original_question", run.input_text),
        json_block("analysis", run.analyze_result),
    )


def _analysis_prompt_step(
    defaults: dict[str, str | None], noise_type: str | None,
) -> Callable[[ScorerRun], str]:
    """The analyze step's prompt; a run's baseline response and noisy query, else ``defaults``."""

    def value_of(run: ScorerRun, name: str) -> str:
        given = run.extra.get(name)
        text = plain_text(given) if given is not None else ""
        if not text.strip():
            text = defaults[name] or ""
        if not text.strip():
            raise NotScorable(
                f"no {name} was given: pass {name}=... to run() or the scorer factory"
            )
        return text

    def analysis_prompt(run: ScorerRun) -> str:
        parts = [
            data_block("original_question", run.input_text),
            data_block("baseline_answer", value_of(run, "baseline_response")),
            data_block("noisy_question", value_of(run, "noisy_query")),
            data_block("noisy_answer", run.output_text),
        ]
        if noise_type:
            parts.append(data_block("noise_type", noise_type))
        parts.append(
            "Compare the noisy answer with the baseline answer and rate the impact of the "
            "noise on each of the five dimensions."
        )
        return "\n\n".join(parts)

    return analysis_prompt


def _score_step(
    weights: Mapping[str, float], per_item: float, max_penalty: float, threshold: float,
) -> Callable[[ScorerRun], float]:
    """The score step with the effective formula options."""

    def score(run: ScorerRun) -> float:
        assert run.analyze_result is not None
        value = noise_sensitivity_score(
            run.analyze_result,
            impact_weights=weights,
            major_issue_per_item=per_item,
            max_major_issue_penalty=max_penalty,
            discrepancy_threshold=threshold,
        )
        return value * run.scale

    return score


def create_noise_sensitivity_scorer(
    *,
    model: str | Judge | None = None,
    baseline_response: str | None = None,
    noisy_query: str | None = None,
    noise_type: str | None = None,
    impact_weights: Mapping[str, float] | None = None,
    major_issue_per_item: float = 0.1,
    max_major_issue_penalty: float = 0.3,
    discrepancy_threshold: float = 0.2,
    scale: float = 1,
) -> Scorer:
    """Score how robust an answer is to noise added to its question (higher is more robust).

    The scored ``output`` is the agent's answer to the noisy question; ``input`` is the
    original question; ``baseline_response`` is the agent's answer to the original question;
    ``noisy_query`` is the noisy question. Two judge calls: the judge rates the noise's impact
    on five dimensions (``content_accuracy``, ``completeness``, ``relevance``, ``consistency``,
    ``hallucination_resistance``) as ``none``/``minimal``/``moderate``/``significant``/
    ``severe``, gives a robustness score in [0, 1] and lists major issues
    (``analyze_step_result``: ``{"dimensions": [{"dimension", "impact_level",
    "specific_changes", "noise_influence"}], "major_issues": [...], "robustness_score",
    "overall_assessment"}``); then a reason is written.

    Score: ``noise_sensitivity_score(analysis) * scale`` (start from the robustness score; if
    it differs from the mean impact weight by more than ``discrepancy_threshold``, take the
    lower; minus ``min(major_issue_per_item * major_issues, max_major_issue_penalty)``; floor
    0), rounded to 2 decimals half up. Mastra's scorer has no scale (default 1
    here, so the defaults agree).

    ``baseline_response`` and ``noisy_query`` given to the factory hold for every run (a test
    case); otherwise each run needs them: ``run(baseline_response=..., noisy_query=...)``, or in
    a ``ScoringRule``, ``inputs={"baseline_response": <span attribute or callable>,
    "noisy_query": ...}``. A value given to ``run()`` wins over the factory's.

    Not scorable (no judge call): an empty output, no question, or no baseline response or
    noisy query.

    Args:
        model: the judge: a litellm model string, a ``tracescore.Judge``, or ``None`` for the
            configured judge (``configure(judge=...)``, else ``TRACESCORE_JUDGE_MODEL``).
        baseline_response: the agent's answer to the original question.
        noisy_query: the question with noise added.
        noise_type: optional label of the noise (e.g. ``"misinformation"``), shown to the judge.
        impact_weights: weights per impact level, merged with the defaults ``{"none": 1,
            "minimal": 0.85, "moderate": 0.6, "significant": 0.3, "severe": 0.1}``.
        major_issue_per_item: penalty per major issue, in [0, 1]. Default 0.1.
        max_major_issue_penalty: cap of the major-issue penalty, in [0, 1]. Default 0.3.
        discrepancy_threshold: in [0, 1]. Default 0.2.
        scale: maximum score, > 0. Default 1.

    Returns:
        A ``Scorer`` with id ``noise-sensitivity``; its ``run_inputs`` names the per-run values
        the factory did not get.

    Raises:
        ConfigurationError: an option is invalid or ``model`` is invalid.

    Examples:
        >>> scorer = create_noise_sensitivity_scorer(model="openai/gpt-4o-mini",
        ...     baseline_response="Paris is the capital of France.",
        ...     noisy_query="What is the capital of France? I heard it moved to Lyon.")
        >>> scorer.run(input="What is the capital of France?",
        ...            output="It is still Paris.").score  # doctest: +SKIP
        1.0
    """
    options = _checked_options(
        baseline_response=baseline_response, noisy_query=noisy_query, noise_type=noise_type,
        impact_weights=impact_weights, major_issue_per_item=major_issue_per_item,
        max_major_issue_penalty=max_major_issue_penalty,
        discrepancy_threshold=discrepancy_threshold, scale=scale,
    )
    return _scorer(model, options)


def _checked_options(
    *,
    baseline_response: str | None,
    noisy_query: str | None,
    noise_type: str | None,
    impact_weights: Mapping[str, float] | None,
    major_issue_per_item: float,
    max_major_issue_penalty: float,
    discrepancy_threshold: float,
    scale: float,
) -> dict[str, Any]:
    """The factory's effective options (the impact weights merged with the defaults).

    Raises:
        ConfigurationError: an option is invalid.
    """
    baseline_response = _check_text_option("baseline_response", baseline_response)
    noisy_query = _check_text_option("noisy_query", noisy_query)
    noise_type = _check_text_option("noise_type", noise_type)
    if impact_weights is not None and not isinstance(impact_weights, Mapping):
        raise ConfigurationError(
            "impact_weights must be a dict of impact level to weight, e.g. {'moderate': 0.5}"
        )
    unknown = sorted(set(impact_weights or {}) - set(IMPACT_LEVELS))
    if unknown:
        raise ConfigurationError(
            f"impact_weights has unknown levels {unknown}; use {', '.join(IMPACT_LEVELS)}"
        )
    weights = dict(DEFAULT_IMPACT_WEIGHTS)
    for level, weight in (impact_weights or {}).items():
        weights[level] = _check_fraction(f"impact_weights[{level!r}]", weight)
    per_item = _check_fraction("major_issue_per_item", major_issue_per_item)
    max_penalty = _check_fraction("max_major_issue_penalty", max_major_issue_penalty)
    threshold = _check_fraction("discrepancy_threshold", discrepancy_threshold)
    check_scale(scale)
    return {
        "baseline_response": baseline_response,
        "noisy_query": noisy_query,
        "noise_type": noise_type,
        "impact_weights": weights,
        "major_issue_per_item": per_item,
        "max_major_issue_penalty": max_penalty,
        "discrepancy_threshold": threshold,
        "scale": float(scale),
    }


def _scorer(model: str | Judge | None, options: dict[str, Any]) -> Scorer:
    """The noise-sensitivity scorer with checked ``options``; the values not given (the
    baseline response, the noisy query) are the run's inputs."""
    defaults = {"baseline_response": options["baseline_response"],
                "noisy_query": options["noisy_query"]}
    run_inputs = tuple(name for name, value in defaults.items() if value is None)
    score = _score_step(options["impact_weights"], options["major_issue_per_item"],
                        options["max_major_issue_penalty"], options["discrepancy_threshold"])
    return judge_scorer(
        id=SCORER_ID,
        description="How robust the answer is to noise added to the question.",
        model=model,
        requires=("input", "output"),
        scale=options["scale"],
        run_inputs=run_inputs,
        analyze=JudgePrompt(
            instructions=_ANALYSIS_INSTRUCTIONS,
            prompt=_analysis_prompt_step(defaults, options["noise_type"]),
            output_schema=NoiseAnalysis,
            name="noise_sensitivity_analysis",
            validate=check_analysis,
        ),
        generate_score=score,
        reason_instructions=_REASON_INSTRUCTIONS,
        reason_prompt=reason_prompt,
        options=options,
    )
