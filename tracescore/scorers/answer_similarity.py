"""Answer similarity: how closely the answer matches an expected (ground-truth) answer.

Semantics follow the Mastra evals' answer similarity scorer (semantic units
matched exact/semantic/partial/missing, with penalties for contradictions and extra
information); prompts and code are tracescore's own. Meant for CI (``run_evals``) where each
case has a ground truth.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field

from tracescore._core.errors import ConfigurationError, ScorerError
from tracescore._judge import Judge
from tracescore.scorers._base import JudgePrompt, NotScorable, Scorer, ScorerRun, check_scale
from tracescore.scorers._common import Texts
from tracescore.scorers._preset import explained, json_block, judge_scorer
from tracescore.scorers._prompt import data_block, data_blocks
from tracescore.scorers._verdicts import normalise_verdict

__all__ = ["DEFAULT_OPTIONS", "answer_similarity_score", "create_answer_similarity_scorer"]

SCORER_ID = "answer-similarity"

DEFAULT_OPTIONS: Mapping[str, Any] = {
    "require_ground_truth": True,
    "semantic_threshold": 0.8,
    "exact_match_bonus": 0.2,
    "missing_penalty": 0.15,
    "contradiction_penalty": 1.0,
    "extra_info_penalty": 0.05,
    "scale": 1.0,
}
"""The options' defaults."""

# The extra-information penalty never takes more than this off the score.
_MAX_EXTRA_INFO_PENALTY = 0.2

MatchType = Annotated[
    Literal["exact", "semantic", "partial", "missing"], BeforeValidator(normalise_verdict)
]


class SemanticUnits(BaseModel):
    """Preprocess answer: the semantic units of the answer and of the ground truth."""

    output_units: Texts = Field(description="Units of the answer, in order.")
    ground_truth_units: Texts = Field(description="Units of the expected answer, in order.")


class UnitMatch(BaseModel):
    """How one ground-truth unit is matched by the answer."""

    ground_truth_index: int = Field(description="The expected unit's index attribute (0-based).")
    output_unit: str | None = Field(
        description="The answer unit that conveys it, or null when it is missing."
    )
    match_type: MatchType = Field(description='"exact", "semantic", "partial" or "missing".')
    explanation: str = Field(description="Why, in one sentence.")


class Contradiction(BaseModel):
    """An answer unit that contradicts a ground-truth unit."""

    output_unit: str
    ground_truth_unit: str
    explanation: str


class UnitAnalysis(BaseModel):
    """Analyze answer: one match per ground-truth unit, extras and contradictions."""

    matches: list[UnitMatch]
    extra_in_output: Texts = Field(
        description="Answer units with information absent from the expected answer."
    )
    contradictions: list[Contradiction] = Field(
        description="Answer units that contradict the expected answer."
    )


_UNITS_INSTRUCTIONS = """\
You break two texts, an assistant's answer and the expected answer to the same question, into \
semantic units, so that they can be compared unit by unit.

- A semantic unit is one distinct piece of meaning: a fact, a concept, an entity with what is \
said about it, a number, a step or a recommendation.
- Keep units short and keep each text's wording where possible; replace pronouns with what \
they refer to so that every unit can be understood alone.
- Break each text on its own: do not add, correct or merge anything, and do not align the \
units of one text with the other. Greetings, filler and pure formatting are not units.
- A text that conveys nothing has no units: return an empty list for it."""

_MATCHES_INSTRUCTIONS = """\
You compare an assistant's answer with the expected answer, unit by unit.

For each expected unit, in order, find the answer unit that best conveys it and set \
match_type:
- "exact": the answer states it in the same or practically the same words;
- "semantic": the answer states the same meaning in different words;
- "partial": the answer conveys only part of it, or a vaguer or less precise version;
- "missing": the answer does not convey it (also when the answer states something \
incompatible instead).
Set output_unit to the matching answer unit (null when missing) and give a one-sentence \
explanation. Give exactly one match per expected unit, in order, with ground_truth_index set \
to the unit's index.

Then list in extra_in_output each answer unit that adds information the expected answer does \
not contain without contradicting it, and in contradictions each answer unit that contradicts \
an expected unit, with that expected unit and a one-sentence explanation. Use empty lists \
when there are none."""

_REASON_INSTRUCTIONS = """\
You explain an answer-similarity score to a developer reading it next to a test case, in two \
or three sentences. The score rewards the expected answer's units that the answer conveys \
(exact matches most, then semantic, then partial ones), and is lowered by units the answer \
misses, by contradictions (heavily) and by extra information. Say what raised or lowered the \
score, based on the analysis given. Do not repeat the formula."""


def _check_number(name: str, value: object, *, upper: float | None = None) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
        or (upper is not None and value > upper)
    ):
        where = f"in [0, {upper:g}]" if upper is not None else ">= 0"
        raise ConfigurationError(f"{name} must be a finite number {where}, got {value!r}")
    return float(value)


def answer_similarity_score(analysis: Mapping[str, Any], options: Mapping[str, Any]) -> float:
    """The answer-similarity score in [0, 1], before scale and rounding.

    Formula (from the Mastra evals' answer similarity): each ground-truth unit
    scores ``1 + exact_match_bonus`` (exact), ``semantic_threshold`` (semantic),
    ``0.5 * semantic_threshold`` (partial) or ``-missing_penalty`` (missing); base = sum /
    (units * (1 + exact_match_bonus)); minus ``contradiction_penalty`` per contradiction; minus
    ``min(extra_info_penalty * extras, 0.2)``; clamped to 0..1.

    Args:
        analysis: ``{"matches": [{"match_type", ...}], "extra_in_output": [...],
            "contradictions": [...]}`` with at least one match.
        options: the effective options (``DEFAULT_OPTIONS`` keys).

    Examples:
        >>> answer_similarity_score(
        ...     {"matches": [{"match_type": "exact"}, {"match_type": "semantic"}],
        ...      "extra_in_output": [], "contradictions": []}, DEFAULT_OPTIONS)
        0.8333333333333334
    """
    bonus = float(options["exact_match_bonus"])
    threshold = float(options["semantic_threshold"])
    weights = {
        "exact": 1.0 + bonus,
        "semantic": threshold,
        "partial": 0.5 * threshold,
        "missing": -float(options["missing_penalty"]),
    }
    matches = analysis["matches"]
    base = sum(weights[m["match_type"]] for m in matches) / (len(matches) * (1.0 + bonus))
    contradictions = len(analysis["contradictions"]) * float(options["contradiction_penalty"])
    extras = min(
        len(analysis["extra_in_output"]) * float(options["extra_info_penalty"]),
        _MAX_EXTRA_INFO_PENALTY,
    )
    return min(1.0, max(0.0, base - contradictions - extras))


def reason_prompt(run: ScorerRun) -> str:
    """The reason step's prompt: the answer, the expected answer, the analysis and the score."""
    return explained(
        run,
        data_block("answer", run.output_text),
        data_block("expected_answer", run.ground_truth_text),
        json_block("analysis", run.analyze_result),
    )


def _units_prompt_step(require_ground_truth: bool) -> Callable[[ScorerRun], str]:
    """The first step's prompt; without a ground truth an error (``require_ground_truth``)
    or not scorable."""

    def units_prompt(run: ScorerRun) -> str:
        # Checked here rather than through requires=: a missing ground truth must be an error
        # (a misconfigured eval), which requires= would turn into a quiet "not scorable".
        if not run.ground_truth_text.strip():
            if require_ground_truth:
                raise ScorerError(
                    "answer-similarity needs a ground truth: pass run(ground_truth=...) (in "
                    "run_evals, a ground_truth in each data item; online, "
                    "ScoringRule(ground_truth=...)), or create the scorer with "
                    "require_ground_truth=False to mark such runs not scorable instead"
                )
            raise NotScorable("no ground truth was given to compare the output with")
        if not run.output_text.strip():
            raise NotScorable("the output is empty: there is no answer to score")
        return (
            f"{data_block('answer', run.output_text)}\n\n"
            f"{data_block('expected_answer', run.ground_truth_text)}\n\n"
            "List the semantic units of the answer and of the expected answer above."
        )

    return units_prompt


def _matches_steps() -> tuple[
    Callable[[ScorerRun], str], Callable[[UnitAnalysis, ScorerRun], None]
]:
    """The analyze step's prompt and its check, which share the reader of the first step's units."""

    def units_of(run: ScorerRun) -> tuple[list[str], list[str]]:
        assert run.preprocess_result is not None
        return run.preprocess_result["output_units"], run.preprocess_result["ground_truth_units"]

    def matches_prompt(run: ScorerRun) -> str:
        output_units, expected_units = units_of(run)
        if not expected_units:
            raise NotScorable(
                "the judge found no semantic units in the ground truth: there is nothing to "
                "compare the output with"
            )
        return (
            f"{data_blocks('answer_unit', output_units)}\n\n"
            f"{data_blocks('expected_unit', expected_units)}\n\n"
            f"The answer has {len(output_units)} units and the expected answer "
            f"{len(expected_units)}. Answer with exactly {len(expected_units)} matches, one "
            "per expected unit, in the same order, then the extra information and the "
            "contradictions."
        )

    def check_matches(parsed: UnitAnalysis, run: ScorerRun) -> None:
        expected = len(units_of(run)[1])
        if len(parsed.matches) != expected:
            raise ValueError(
                f"expected {expected} matches, one per expected unit in order, "
                f"got {len(parsed.matches)}"
            )

    return matches_prompt, check_matches


def _score_step(options: dict[str, Any]) -> Callable[[ScorerRun], float]:
    """The score step with the effective ``options``."""

    def score(run: ScorerRun) -> float:
        assert run.analyze_result is not None
        return answer_similarity_score(run.analyze_result, options) * run.scale

    return score


def create_answer_similarity_scorer(
    *,
    model: str | Judge | None = None,
    require_ground_truth: bool = True,
    semantic_threshold: float = 0.8,
    exact_match_bonus: float = 0.2,
    missing_penalty: float = 0.15,
    contradiction_penalty: float = 1.0,
    extra_info_penalty: float = 0.05,
    scale: float = 1,
) -> Scorer:
    """Score how closely an answer matches the expected (ground-truth) answer.

    Three judge calls: both texts are broken into semantic units (``preprocess_step_result``:
    ``{"output_units": [...], "ground_truth_units": [...]}``); each ground-truth unit is
    matched ``exact``/``semantic``/``partial``/``missing`` by the answer, and extra units and
    contradictions are listed (``analyze_step_result``: ``{"matches": [{"ground_truth_index",
    "output_unit", "match_type", "explanation"}], "extra_in_output": [...],
    "contradictions": [{"output_unit", "ground_truth_unit", "explanation"}]}``, one match per
    ground-truth unit, in order); then a reason is written.

    Score (from the Mastra evals' answer similarity; see
    ``answer_similarity_score``): weights exact ``1 + exact_match_bonus``, semantic
    ``semantic_threshold``, partial ``0.5 * semantic_threshold``, missing ``-missing_penalty``;
    base = sum / (units * (1 + exact_match_bonus)); minus ``contradiction_penalty`` per
    contradiction; minus ``min(extra_info_penalty * extras, 0.2)``; clamped to 0..1; times
    scale; rounded to 2 decimals half up.

    Not scorable: an empty output (no judge call), no ground truth when
    ``require_ground_truth=False`` (no judge call), or no semantic units found in the ground
    truth (after the first call).

    Args:
        model: the judge: a litellm model string, a ``tracescore.Judge``, or ``None`` for the
            configured judge (``configure(judge=...)``, else ``TRACESCORE_JUDGE_MODEL``).
        require_ground_truth: a run without a ground truth is an error (``True``, default) or
            not scorable (``False``).
        semantic_threshold: weight of a semantic match, in [0, 1] (partial: half of it).
            Default 0.8.
        exact_match_bonus: extra weight of an exact match, >= 0. Default 0.2.
        missing_penalty: subtracted per missing unit, >= 0. Default 0.15.
        contradiction_penalty: subtracted from the score per contradiction, >= 0. Default 1.0.
        extra_info_penalty: subtracted per extra unit in the answer, >= 0, at most 0.2 in all.
            Default 0.05.
        scale: maximum score, > 0. Default 1.

    Returns:
        A ``Scorer`` with id ``answer-similarity``.

    Raises:
        ConfigurationError: an option is out of range or ``model`` is invalid.
        ScorerError: from ``run()``, when the ground truth is missing and
            ``require_ground_truth`` is ``True`` (``error.type=scorer_error`` online).

    Examples:
        >>> scorer = create_answer_similarity_scorer(model="openai/gpt-4o-mini")
        >>> scorer.run(input="What is the capital of France?", output="It's Paris.",
        ...            ground_truth="Paris").score  # doctest: +SKIP
        0.67
    """
    if not isinstance(require_ground_truth, bool):
        raise ConfigurationError(
            f"require_ground_truth must be True or False, got {require_ground_truth!r}"
        )
    check_scale(scale)
    options: dict[str, Any] = {
        "require_ground_truth": require_ground_truth,
        "semantic_threshold": _check_number("semantic_threshold", semantic_threshold, upper=1),
        "exact_match_bonus": _check_number("exact_match_bonus", exact_match_bonus),
        "missing_penalty": _check_number("missing_penalty", missing_penalty),
        "contradiction_penalty": _check_number("contradiction_penalty", contradiction_penalty),
        "extra_info_penalty": _check_number("extra_info_penalty", extra_info_penalty),
        "scale": float(scale),
    }
    return _scorer(model, options)


def _scorer(model: str | Judge | None, options: dict[str, Any]) -> Scorer:
    """The answer-similarity scorer with checked ``options``."""
    require_ground_truth = options["require_ground_truth"]
    matches_prompt, check_matches = _matches_steps()
    scorer = judge_scorer(
        id=SCORER_ID,
        description="How closely the answer matches the expected answer.",
        model=model,
        # Output and ground truth are checked by the first step, in the order that makes a
        # missing ground truth an error even when the output is empty too.
        requires=(),
        scale=options["scale"],
        preprocess=JudgePrompt(
            instructions=_UNITS_INSTRUCTIONS,
            prompt=_units_prompt_step(require_ground_truth),
            output_schema=SemanticUnits,
            name="answer_similarity_units",
        ),
        analyze=JudgePrompt(
            instructions=_MATCHES_INSTRUCTIONS,
            prompt=matches_prompt,
            output_schema=UnitAnalysis,
            name="answer_similarity_matches",
            validate=check_matches,
        ),
        generate_score=_score_step(options),
        reason_instructions=_REASON_INSTRUCTIONS,
        reason_prompt=reason_prompt,
        options=options,
    )
    # A ScoringRule must then say where each span's ground truth comes from.
    scorer.requires_ground_truth = require_ground_truth
    return scorer
