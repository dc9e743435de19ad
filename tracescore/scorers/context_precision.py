"""Context precision: are the context pieces useful for the answer, and are useful ones first?

Semantics follow the Mastra evals' context precision scorer (Mean Average
Precision); prompts and code are tracescore's own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import Field

from tracescore._judge import Judge
from tracescore.scorers._base import (
    JudgePrompt,
    ReasonMode,
    Scorer,
    ScorerRun,
    check_reason_mode,
    check_scale,
)
from tracescore.scorers._claims import check_context_option
from tracescore.scorers._common import check_count, context_options
from tracescore.scorers._preset import explained, json_block, judge_scorer, verdicts_schema
from tracescore.scorers._prompt import data_block, data_blocks
from tracescore.scorers._verdicts import YesNo

__all__ = [
    "check_context_indices",
    "create_context_precision_scorer",
    "in_context_order",
    "mean_average_precision",
]

SCORER_ID = "context-precision"


ContextVerdicts = verdicts_schema(
    "ContextVerdicts",
    "ContextVerdict",
    items="verdicts",
    item_doc="One context piece's verdict.",
    list_doc="Analyze answer: one verdict per context piece, in order.",
    context_index=(int, Field(description="The piece's index attribute (0-based).")),
    verdict=(YesNo, Field(description='"yes" if the piece was useful for the answer, else "no".')),
    reason=(str, Field(description="Why, in one sentence.")),
)


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

    Formula (from the Mastra evals' context precision): at each relevant piece at
    0-based position ``i`` add ``relevant_so_far / (i + 1)``; divide the sum by the number of
    relevant pieces. No relevant piece gives 0.

    Args:
        verdicts: ``"yes"`` (relevant) or anything else (not relevant), in order.

    Returns:
        A float in [0, 1], not rounded.

    Examples:
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


def check_context_indices(indices: Sequence[int], pieces: int) -> None:
    """A validator's check, after the count check: the verdicts' ``context_index`` values are
    ``0 .. pieces - 1``, each exactly once (in any order).

    MAP depends on the position of each verdict, so a verdict must say which piece it is about:
    the verdicts are scored in ``context_index`` order, not in the order the judge wrote them.
    A duplicate, missing or out-of-range index makes that order undefined.

    Args:
        indices: the ``context_index`` of each verdict, in the order received.
        pieces: the number of context pieces judged.

    Raises:
        ValueError: an index is out of range or appears twice (the judge is then asked once
            more, with the schema in the prompt, before ``InvalidJudgeOutputError``).

    Examples:
        >>> check_context_indices([2, 0, 1], 3)
    """
    seen: set[int] = set()
    for index in indices:
        if not 0 <= index < pieces:
            raise ValueError(
                f"context_index {index} is out of range: the {pieces} context pieces have "
                f"indices 0 to {pieces - 1}; give one verdict per piece"
            )
        if index in seen:
            raise ValueError(
                f"context_index {index} appears twice: give exactly one verdict per context "
                f"piece, with indices 0 to {pieces - 1}"
            )
        seen.add(index)
    # No missing-index check: after the count check, in range and no duplicate imply it.


def in_context_order(verdicts: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The verdicts sorted by ``context_index`` (checked by ``check_context_indices``).

    The judge is asked for the verdicts in order but may not give them so; Mastra's scorer
    sorts by ``context_index`` as well before computing MAP.

    Examples:
        >>> [v["context_index"] for v in in_context_order([{"context_index": 1},
        ...                                                {"context_index": 0}])]
        [0, 1]
    """
    return sorted(verdicts, key=lambda verdict: int(verdict["context_index"]))


def verdicts_prompt(run: ScorerRun) -> str:
    """The analyze step's prompt: the question, the answer and the numbered context pieces."""
    pieces = run.context or []
    return (
        f"{data_block('question', run.input_text)}\n\n"
        f"{data_block('answer', run.output_text)}\n\n"
        f"{data_blocks('context', pieces)}\n\n"
        f"Judge each of the {len(pieces)} context pieces above. Answer with exactly "
        f"{len(pieces)} verdicts, in the same order."
    )


def check_verdicts(parsed: Any, run: ScorerRun) -> None:
    """One verdict per context piece, each piece's index once."""
    pieces = len(run.context or [])
    check_count(parsed.verdicts, pieces, "verdicts", "context piece")
    check_context_indices([v.context_index for v in parsed.verdicts], pieces)


def score(run: ScorerRun) -> float:
    """The mean average precision of the verdicts in context order, times the scale."""
    assert run.analyze_result is not None
    verdicts = [v["verdict"] for v in in_context_order(run.analyze_result["verdicts"])]
    return mean_average_precision(verdicts) * run.scale


def reason_prompt(run: ScorerRun) -> str:
    """The reason step's prompt: the question, the answer, the verdicts and the score."""
    assert run.analyze_result is not None
    return explained(
        run,
        data_block("question", run.input_text),
        data_block("answer", run.output_text),
        json_block("verdicts", in_context_order(run.analyze_result["verdicts"])),
    )


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
    ``{"verdicts": [{"context_index", "verdict", "reason"}]}``, one per piece, as the judge
    answered); then a reason is written (one call with ``reason="inline"``).

    Score: ``mean_average_precision(verdicts) * scale`` with the verdicts taken in
    ``context_index`` order (as Mastra does), whatever order the judge wrote them in; rounded
    to 2 decimals half up. For example, ``[yes, no, yes, no]`` gives (1 + 2/3) / 2 = 0.83.
    A verdict count other than the number of pieces, or a ``context_index`` that is missing,
    repeated or out of range, is invalid judge output: one repair retry, then
    ``InvalidJudgeOutputError`` (``error.type=invalid_judge_output``).

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
        InvalidJudgeOutputError: from ``run()``, see above.

    Examples:
        >>> scorer = create_context_precision_scorer(
        ...     model="openai/gpt-4o-mini",
        ...     context=["Photosynthesis turns light into chemical energy.", "Cats sleep a lot."],
        ... )
        >>> scorer.run(input="How does photosynthesis work?",
        ...            output="Plants turn light into energy.").score  # doctest: +SKIP
        1.0
    """
    check_scale(scale)
    check_reason_mode(reason)
    check_context_option(context)

    return judge_scorer(
        id=SCORER_ID,
        description="Whether the context pieces were useful for the answer, useful ones first.",
        model=model, requires=("input", "output", "context"), uses_context=True,
        context=context, context_extractor=context_extractor, scale=scale,
        analyze=JudgePrompt(
            instructions=_VERDICTS_INSTRUCTIONS,
            prompt=verdicts_prompt,
            output_schema=ContextVerdicts,
            name="context_precision_verdicts",
            validate=check_verdicts,
        ),
        generate_score=score,
        reason_instructions=_REASON_INSTRUCTIONS,
        reason_prompt=reason_prompt,
        reason=reason,
        inline_focus=_INLINE_REASON_FOCUS,
        options=context_options(context, context_extractor, scale),
    )
