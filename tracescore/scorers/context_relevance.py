"""Context relevance: how relevant the retrieved context is, and how well the answer used it.

Semantics follow the Mastra evals' context relevance scorer (weighted relevance
levels minus usage and missing-context penalties); prompts and code are tracescore's own.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field

from tracescore._core.errors import ConfigurationError
from tracescore._judge import Judge
from tracescore.scorers._base import JudgePrompt, Scorer, ScorerRun, check_scale
from tracescore.scorers._claims import check_context_option
from tracescore.scorers._common import Texts, check_count
from tracescore.scorers._preset import explained, json_block, judge_scorer
from tracescore.scorers._prompt import data_block, data_blocks
from tracescore.scorers._verdicts import normalise_verdict

__all__ = ["DEFAULT_PENALTIES", "RELEVANCE_WEIGHTS", "create_context_relevance_scorer"]

SCORER_ID = "context-relevance"

RELEVANCE_WEIGHTS: Mapping[str, float] = {"high": 1.0, "medium": 0.7, "low": 0.3, "none": 0.0}
"""Weight of each relevance level."""

DEFAULT_PENALTIES: Mapping[str, float] = {
    "unused_high_relevance_context": 0.1,
    "missing_context_per_item": 0.15,
    "max_missing_context_penalty": 0.5,
}
"""The ``penalties=`` defaults; a partial ``penalties`` dict is merged with these."""

RelevanceLevel = Annotated[
    Literal["high", "medium", "low", "none"], BeforeValidator(normalise_verdict)
]


class ContextEvaluation(BaseModel):
    """One context piece's evaluation."""

    context_index: int = Field(description="The piece's index attribute (0-based).")
    relevance_level: RelevanceLevel = Field(
        description='"high", "medium", "low" or "none": relevance to the question.'
    )
    was_used: bool = Field(description="Whether the answer used information from the piece.")
    reasoning: str = Field(description="Why, in one sentence.")


class ContextEvaluations(BaseModel):
    """Analyze answer: one evaluation per piece, in order, and what context was missing."""

    evaluations: list[ContextEvaluation]
    missing_context: Texts = Field(
        default_factory=list,
        description="Information the question needed that no context piece provides.",
    )


_EVALUATIONS_INSTRUCTIONS = """\
You assess the context pieces a retrieval system handed to an assistant: how relevant each \
piece is to the question, and whether the assistant's answer made use of it.

For each piece:
- relevance_level: "high" when it answers the question or holds information essential to it; \
"medium" when it gives useful supporting information that is not essential; "low" when it is \
on the question's topic but of little help; "none" when it is unrelated to the question.
- was_used: true when the answer relies on or repeats information from this piece, else false.
- reasoning: one sentence.

Then list in missing_context each piece of information the question needed that no context \
piece provides (for example a fact the answer lacks, or had to supply without support); an \
empty list when nothing important was missing. Judge every piece on its own merits. Give \
exactly one evaluation per piece, in the order of the pieces, with context_index set to the \
piece's index."""

_REASON_INSTRUCTIONS = """\
You explain a context-relevance score to a developer reading it next to a trace, in two or \
three sentences. The score weighs each context piece by its relevance to the question (high, \
medium, low, none), minus penalties for highly relevant pieces the answer did not use and for \
information the question needed that no piece provided. Say what raised or lowered the score, \
naming pieces by index, based on the evaluations given. Do not repeat the formula."""


def _check_penalties(penalties: object) -> dict[str, float]:
    if penalties is None:
        return dict(DEFAULT_PENALTIES)
    if not isinstance(penalties, Mapping):
        raise ConfigurationError(
            "penalties must be a dict with any of "
            f"{', '.join(DEFAULT_PENALTIES)}, got {type(penalties).__name__}"
        )
    unknown = sorted(str(k) for k in penalties if k not in DEFAULT_PENALTIES)
    if unknown:
        raise ConfigurationError(
            f"unknown penalties {unknown}; use any of {', '.join(DEFAULT_PENALTIES)}"
        )
    merged = dict(DEFAULT_PENALTIES)
    for name, value in penalties.items():
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value < 0
        ):
            raise ConfigurationError(
                f"penalties[{name!r}] must be a finite number >= 0, got {value!r}"
            )
        merged[name] = float(value)
    return merged


def context_relevance_score(
    evaluations: Sequence[Mapping[str, Any]],
    missing: int,
    penalties: Mapping[str, float] = DEFAULT_PENALTIES,
) -> float:
    """The context-relevance score in [0, 1], before scale and rounding.

    Formula (from the Mastra evals' context relevance): the mean relevance weight
    over the pieces (high 1, medium 0.7, low 0.3, none 0), minus
    ``unused_high_relevance_context`` per high piece the answer did not use, minus
    ``min(missing_context_per_item * missing, max_missing_context_penalty)``, floored at 0.

    Args:
        evaluations: one ``{"relevance_level", "was_used", ...}`` per piece (at least one).
        missing: how many pieces of needed information no context piece provided.
        penalties: the penalties, all keys of ``DEFAULT_PENALTIES``.

    Examples:
        >>> context_relevance_score(
        ...     [{"relevance_level": "high", "was_used": False},
        ...      {"relevance_level": "low", "was_used": False}], missing=1)
        0.4
    """
    base = sum(RELEVANCE_WEIGHTS[e["relevance_level"]] for e in evaluations) / len(evaluations)
    unused_high = sum(
        1 for e in evaluations if e["relevance_level"] == "high" and not e["was_used"]
    )
    usage_penalty = penalties["unused_high_relevance_context"] * unused_high
    missing_penalty = min(
        penalties["missing_context_per_item"] * missing, penalties["max_missing_context_penalty"]
    )
    return max(0.0, base - usage_penalty - missing_penalty)


def evaluations_prompt(run: ScorerRun) -> str:
    """The analyze step's prompt: the question, the answer and the numbered context pieces."""
    pieces = run.context or []
    return (
        f"{data_block('question', run.input_text)}\n\n"
        f"{data_block('answer', run.output_text)}\n\n"
        f"{data_blocks('context', pieces)}\n\n"
        f"Evaluate each of the {len(pieces)} context pieces above. Answer with exactly "
        f"{len(pieces)} evaluations, in the same order, and the missing context."
    )


def check_evaluations(parsed: ContextEvaluations, run: ScorerRun) -> None:
    """One evaluation per context piece."""
    check_count(parsed.evaluations, len(run.context or []), "evaluations", "context piece")


def reason_prompt(run: ScorerRun) -> str:
    """The reason step's prompt: the question, the answer, the evaluations and the score."""
    return explained(
        run,
        data_block("question", run.input_text),
        data_block("answer", run.output_text),
        json_block("evaluations", run.analyze_result),
    )


def _score_step(merged: Mapping[str, float]) -> Callable[[ScorerRun], float]:
    """The score step, with the effective penalties ``merged``."""

    def score(run: ScorerRun) -> float:
        assert run.analyze_result is not None
        return (
            context_relevance_score(
                run.analyze_result["evaluations"],
                len(run.analyze_result["missing_context"]),
                merged,
            )
            * run.scale
        )

    return score


def create_context_relevance_scorer(
    *,
    model: str | Judge | None = None,
    context: Sequence[Any] | None = None,
    context_extractor: Callable[[Any, Any], Sequence[Any]] | None = None,
    penalties: Mapping[str, float] | None = None,
    scale: float = 1,
) -> Scorer:
    """Score how relevant the context pieces are to the question and how well the answer used them.

    Two judge calls: each context piece is given a relevance level ``high``/``medium``/``low``/
    ``none``, whether the answer used it, and a reasoning, plus a list of information the
    question needed that no piece provides (``analyze_step_result``:
    ``{"evaluations": [{"context_index", "relevance_level", "was_used", "reasoning"}],
    "missing_context": [...]}``, one evaluation per piece, in order); then a reason is written.

    Score (from the Mastra evals' context relevance; see
    ``context_relevance_score``): mean weight (high 1, medium 0.7, low 0.3, none 0) minus
    ``unused_high_relevance_context`` (0.1) per high piece not used, minus
    ``min(missing_context_per_item (0.15) * missing, max_missing_context_penalty (0.5))``,
    floored at 0, times scale, rounded to 2 decimals half up.

    Context: ``context_extractor(input, output)`` wins over ``context=``, which wins over
    ``run(context=...)``; in a ``ScoringRule`` without either, the documents of the trace's
    retrieval spans, in retrieval order.

    Not scorable (no judge call): empty context (Mastra scores it 1.0; a perfect score for no
    context would hide a broken retriever), an empty output, or no question.

    Args:
        model: the judge: a litellm model string, a ``tracescore.Judge``, or ``None`` for the
            configured judge (``configure(judge=...)``, else ``TRACESCORE_JUDGE_MODEL``).
        context: fixed context pieces for every run.
        context_extractor: ``(input, output) -> pieces``, called at each run.
        penalties: any of ``unused_high_relevance_context`` (default 0.1),
            ``missing_context_per_item`` (0.15), ``max_missing_context_penalty`` (0.5), each a
            number >= 0; merged with the defaults.
        scale: maximum score, > 0. Default 1.

    Returns:
        A ``Scorer`` with id ``context-relevance``.

    Raises:
        ConfigurationError: an unknown or out-of-range penalty, ``context`` not a list,
            ``context_extractor`` not callable, ``scale`` out of range, or an invalid ``model``.

    Examples:
        >>> scorer = create_context_relevance_scorer(
        ...     model="openai/gpt-4o-mini", penalties={"missing_context_per_item": 0.2})
        >>> scorer.run(input="Capital of France?", output="Paris.",
        ...            context=["Paris is the capital of France."]).score  # doctest: +SKIP
        1.0
    """
    check_scale(scale)
    check_context_option(context)
    merged = _check_penalties(penalties)
    return judge_scorer(
        id=SCORER_ID,
        description="How relevant the context pieces are to the question and how well the "
        "answer used them.",
        model=model, requires=("input", "output", "context"), uses_context=True,
        context=context, context_extractor=context_extractor, scale=scale,
        analyze=JudgePrompt(
            instructions=_EVALUATIONS_INSTRUCTIONS,
            prompt=evaluations_prompt,
            output_schema=ContextEvaluations,
            name="context_relevance_evaluations",
            validate=check_evaluations,
        ),
        generate_score=_score_step(merged),
        reason_instructions=_REASON_INSTRUCTIONS,
        reason_prompt=reason_prompt,
        options={"context": None if context is None else list(context),
                 "context_extractor": context_extractor, "penalties": merged,
                 "scale": float(scale)},
    )
