"""Context precision: are the context pieces useful for the answer, and are useful ones first?

Semantics follow SCORERS.md and the Mastra evals' context precision scorer (Mean Average
Precision); prompts and code are tracescore's own.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, Field

from tracescore._errors import ConfigurationError
from tracescore._judge import Judge
from tracescore.scorers._base import (
    JudgePrompt,
    ReasonMode,
    Scorer,
    ScorerRun,
    check_reason_mode,
    check_scale,
)
from tracescore.scorers._common import Reason, check_count, context_options
from tracescore.scorers._prompt import data_block, data_blocks
from tracescore.scorers._verdicts import YesNo

__all__ = ["create_context_precision_scorer", "mean_average_precision"]

SCORER_ID = "context-precision"


class ContextVerdict(BaseModel):
    """One context piece's verdict."""

    context_index: int = Field(description="The piece's index attribute (0-based).")
    verdict: YesNo = Field(description='"yes" if the piece was useful for the answer, else "no".')
    reason: str = Field(description="Why, in one sentence.")


class ContextVerdicts(BaseModel):
    """Analyze answer: one verdict per context piece, in order."""

    verdicts: list[ContextVerdict]


_VERDICTS_INSTRUCTIONS = """\
You review the context pieces a retrieval system handed to an assistant. For each piece, \
decide whether it was useful for producing the assistant's answer to the question.

- "yes": the piece holds information the answer relies on or that backs up what the answer \
says, for this question.
- "no": the piece is off-topic, or on-topic but contributes nothing to this answer.

Judge every piece on its own merits. Give exactly one verdict per piece, in the order of the \
pieces, with context_index set to the piece's index and a one-sentence reason."""

_REASON_INSTRUCTIONS = """\
You explain a context-precision score to a developer reading it next to a trace, in two or \
three sentences. The score is a mean average precision over the context pieces in retrieval \
order: it is high when the useful pieces come first and low when useless pieces come before \
them or nothing is useful. Name which pieces (by index) were useful or not and how their \
positions affected the score, based on the verdicts given. Do not repeat the formula."""

_INLINE_REASON_FOCUS = """\
Name which pieces (by index) were useful and which were not, and whether useful pieces come \
before useless ones."""


def mean_average_precision(verdicts: Sequence[str]) -> float:
    """Mean Average Precision of relevance verdicts in retrieval order.

    Formula (SCORERS.md, from the Mastra evals' context precision): at each relevant piece at
    0-based position ``i`` add ``relevant_so_far / (i + 1)``; divide the sum by the number of
    relevant pieces. No relevant piece gives 0.

    Args:
        verdicts: ``"yes"`` (relevant) or anything else (not relevant), in order.

    Returns:
        A float in [0, 1], not rounded.

    Example:
        >>> round(mean_average_precision(["yes", "no", "yes", "no"]), 4)
        0.8333
    """
    relevant = 0
    total = 0.0
    for position, verdict in enumerate(verdicts):
        if verdict == "yes":
            relevant += 1
            total += relevant / (position + 1)
    return total / relevant if relevant else 0.0


def create_context_precision_scorer(
    *,
    model: str | Judge | None = None,
    context: Sequence[Any] | None = None,
    context_extractor: Callable[[Any, Any], Sequence[Any]] | None = None,
    scale: float = 1,
    reason: ReasonMode = "step",
) -> Scorer:
    """Score whether the context pieces were useful for the answer, rewarding useful ones first.

    Two judge calls: each context piece, in order, is judged useful (``yes``) or not (``no``)
    for producing the output given the input (``analyze_step_result``:
    ``{"verdicts": [{"context_index", "verdict", "reason"}]}``, one per piece, in order); then a
    reason is written (one call with ``reason="inline"``).

    Score: ``mean_average_precision(verdicts) * scale``, rounded to 2 decimals half up; the
    seed's example ``[yes, no, yes, no]`` gives (1 + 2/3) / 2 = 0.83.

    Context: ``context_extractor(input, output)`` wins over ``context=``, which wins over
    ``run(context=...)``; in a ``ScoringRule`` without either, the documents of the trace's
    retrieval spans. Pieces are strings or documents with ``content``/``text``/``page_content``.

    Not scorable (no judge call): empty context, an empty output, or no question.

    Args:
        model: the judge: a litellm model string, a ``tracescore.Judge``, or ``None`` for the
            configured judge (``configure(judge=...)``, else ``TRACESCORE_JUDGE_MODEL``).
        context: fixed context pieces, in retrieval order.
        context_extractor: ``(input, output) -> pieces``, called at each run.
        scale: maximum score, > 0. Default 1.
        reason: ``"step"`` (default): the reason is written in a second call that sees the
            score; ``"inline"``: the verdicts call also writes it, before the score is known,
            as a summary of the verdicts (one call; same score; see ``Scorer``).

    Returns:
        A ``Scorer`` with id ``context-precision``.

    Raises:
        ConfigurationError: ``context`` is not a list, ``context_extractor`` is not callable,
            ``scale`` is out of range or ``model`` is invalid.

    Example:
        >>> scorer = create_context_precision_scorer(
        ...     model="openai/gpt-4o-mini",
        ...     context=["Photosynthesis turns light into chemical energy.", "Cats sleep a lot."],
        ... )
        >>> scorer.run(input="How does photosynthesis work?",
        ...            output="Plants turn light into energy.").score  # doctest: +SKIP
        1.0
    """
    check_scale(scale)
    inline_reason = check_reason_mode(reason)
    if context is not None and (
        isinstance(context, (str, bytes)) or not isinstance(context, Sequence)
    ):
        raise ConfigurationError(
            f"context must be a list of strings or documents, got {type(context).__name__}"
        )

    def verdicts_prompt(run: ScorerRun) -> str:
        pieces = run.context or []
        return (
            f"{data_block('question', run.input_text)}\n\n"
            f"{data_block('answer', run.output_text)}\n\n"
            f"{data_blocks('context', pieces)}\n\n"
            f"Judge each of the {len(pieces)} context pieces above. Answer with exactly "
            f"{len(pieces)} verdicts, in the same order."
        )

    def check_verdicts(parsed: ContextVerdicts, run: ScorerRun) -> None:
        check_count(parsed.verdicts, len(run.context or []), "verdicts", "context piece")

    def score(run: ScorerRun) -> float:
        assert run.analyze_result is not None
        verdicts = [v["verdict"] for v in run.analyze_result["verdicts"]]
        return mean_average_precision(verdicts) * run.scale

    def reason_prompt(run: ScorerRun) -> str:
        assert run.analyze_result is not None
        verdicts = json.dumps(run.analyze_result["verdicts"], ensure_ascii=False, indent=1)
        return (
            f"{data_block('question', run.input_text)}\n\n"
            f"{data_block('answer', run.output_text)}\n\n"
            f"{data_block('verdicts', verdicts)}\n\n"
            f"Score: {run.score:g} out of {run.scale:g}. Explain this score."
        )

    return Scorer(
        id=SCORER_ID,
        description="Whether the context pieces were useful for the answer, useful ones first.",
        model=model,
        requires=("input", "output", "context"),
        uses_context=True,
        context=context,
        context_extractor=context_extractor,
        scale=scale,
        analyze=JudgePrompt(
            instructions=_VERDICTS_INSTRUCTIONS,
            prompt=verdicts_prompt,
            output_schema=ContextVerdicts,
            name="context_precision_verdicts",
            validate=check_verdicts,
        ),
        generate_score=score,
        generate_reason=None
        if inline_reason
        else JudgePrompt(
            instructions=_REASON_INSTRUCTIONS,
            prompt=reason_prompt,
            output_schema=Reason,
            name="context_precision_reason",
        ),
        reason_in_analyze=_INLINE_REASON_FOCUS if inline_reason else False,
        options=context_options(context, context_extractor, scale),
    )
