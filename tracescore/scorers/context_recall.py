"""Context recall: how much of the expected answer the retrieved context makes available.

Semantics are documented on the scorers page; prompts and code are tracescore's own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tracescore._judge import Judge
from tracescore.scorers._base import JudgePrompt, Scorer, ScorerRun
from tracescore.scorers._claims import (
    CLAIMS_INSTRUCTIONS,
    Claims,
    claim_verdicts_schema,
    claim_verdicts_step,
    claims_reason_step,
    claims_scorer,
    yes_share,
)
from tracescore.scorers._prompt import data_block
from tracescore.scorers._verdicts import YesNo

__all__ = ["create_context_recall_scorer"]

SCORER_ID = "context-recall"


ClaimVerdicts = claim_verdicts_schema(
    YesNo,
    '"yes" if the context contains the information of the claim, else "no".',
    item_doc="One ground-truth claim's verdict: ``yes`` means attributable to the context.",
    list_doc="Analyze answer: one verdict per ground-truth claim, in order.",
)


_VERDICTS_INSTRUCTIONS = """\
You check whether retrieved context covers an expected (reference) answer: for each claim \
taken from the reference answer, decide whether it can be attributed to the context, that is \
whether someone holding only the context could state it.

- "yes": the context states the claim or directly implies it (one piece alone or several \
together).
- "no": the context does not contain the claim's information, or contradicts it.

Judge against the context only, never against your own knowledge. Give exactly one verdict \
per claim, in the order of the claims, with claim_index set to the claim's index and a \
one-sentence reason."""

_REASON_INSTRUCTIONS = """\
You explain a context-recall score to a developer reading it next to a trace, in two or three \
sentences. The score is the share of the reference answer's claims that the retrieved context \
covers: a low score means retrieval missed information the answer needs. Name the claims the \
context does not cover, if any, based on the verdicts given. Do not repeat the formula."""


def score(run: ScorerRun) -> float:
    # The cap only matters if the verdicts outnumber the claims, which validation rejects;
    # kept so that the score can never exceed the scale.
    """The share of the ground truth's claims the context covers, times the scale."""
    return min(1.0, yes_share(run)) * run.scale


def create_context_recall_scorer(
    *,
    model: str | Judge | None = None,
    context: Sequence[Any] | None = None,
    context_extractor: Callable[[Any, Any], Sequence[Any]] | None = None,
    scale: float = 1,
) -> Scorer:
    """Score how much of the expected answer the context covers (retrieval recall).

    Three judge calls: the ground truth is broken into claims (``preprocess_step_result``:
    ``{"claims": [...]}``, schema name ``context_recall_claims``); each claim is judged
    attributable to the context (``yes``) or not (``no``) (``analyze_step_result``:
    ``{"verdicts": [{"claim_index", "verdict", "reason"}]}``, one per claim, in order); then a
    reason is written.

    Score: ``min(1, attributable / claims) * scale``, rounded to 2 decimals half
    up.

    Context: ``context_extractor(input, output)`` wins over ``context=``, which wins over
    ``run(context=...)``; in a ``ScoringRule`` without either, the documents of the trace's
    retrieval spans, in retrieval order. The ground truth comes from ``run(ground_truth=...)``
    or, online, from ``ScoringRule(ground_truth=...)`` (required there).

    Not scorable (no judge call): no ground truth or empty context. Not scorable after the
    first call: the judge found no claims in the ground truth. The output is not judged.

    Args:
        model: the judge: a litellm model string, a ``tracescore.Judge``, or ``None`` for the
            configured judge (``configure(judge=...)``, else ``TRACESCORE_JUDGE_MODEL``).
        context: fixed context pieces for every run.
        context_extractor: ``(input, output) -> pieces``, called at each run.
        scale: maximum score, > 0. Default 1.

    Returns:
        A ``Scorer`` with id ``context-recall``.

    Raises:
        ConfigurationError: ``context`` is not a list, ``context_extractor`` is not callable,
            ``scale`` is out of range or ``model`` is invalid.

    Examples:
        >>> scorer = create_context_recall_scorer(model="openai/gpt-4o-mini")
        >>> scorer.run(ground_truth="Paris is the capital of France.",
        ...            context=["Paris is France's capital."]).score  # doctest: +SKIP
        1.0
    """

    return claims_scorer(
        id=SCORER_ID,
        description="The share of the ground truth's claims that the context covers.",
        model=model,
        context=context,
        context_extractor=context_extractor,
        scale=scale,
        requires=("ground_truth", "context"),
        preprocess=JudgePrompt(
            instructions=CLAIMS_INSTRUCTIONS,
            prompt=lambda run: (
                f"{data_block('reference', run.ground_truth_text)}\n\n"
                "List the claims the reference answer above makes."
            ),
            output_schema=Claims,
            name="context_recall_claims",
        ),
        analyze=claim_verdicts_step(
            instructions=_VERDICTS_INSTRUCTIONS,
            output_schema=ClaimVerdicts,
            name="context_recall_verdicts",
            task="Decide for each of the {n} claims of the reference answer above "
            "whether the context pieces cover it.",
            source="ground truth",
        ),
        generate_score=score,
        generate_reason=claims_reason_step(
            instructions=_REASON_INSTRUCTIONS,
            name="context_recall_reason",
            source="ground truth",
        ),
    )
