"""Faithfulness: how much of what the answer claims is backed by the context it was given.

Semantics follow the Mastra evals' faithfulness scorer; prompts and code are
tracescore's own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tracescore._judge import Judge
from tracescore.scorers._base import Scorer
from tracescore.scorers._claims import (
    OUTPUT_CLAIMS,
    claim_verdicts_schema,
    claim_verdicts_step,
    claims_reason_step,
    claims_scorer,
)
from tracescore.scorers._prompt_sets import (
    DEFAULT_PROMPT_SETS,
    PromptSet,
    resolve_prompt_set,
    v1_claims_scorer,
)
from tracescore.scorers._verdicts import YesUnsureNo

__all__ = ["FAITHFULNESS_VERDICTS", "create_faithfulness_scorer"]

SCORER_ID = "faithfulness"
_DESCRIPTION = "The share of the answer's claims that its context supports."


ClaimVerdicts = claim_verdicts_schema(
    YesUnsureNo,
    '"yes" (the context supports it), "no" (the context contradicts it) or '
    '"unsure" (the context does not say).',
    item_doc="One claim's verdict.",
    list_doc="Analyze answer: one verdict per claim, in order.",
)


_VERDICTS_INSTRUCTIONS = """\
You check the claims taken from an assistant's answer against the context the assistant was \
given, claim by claim.

- "yes": the context states the claim or directly implies it.
- "no": the context contradicts the claim (or a part of it).
- "unsure": the context neither supports nor contradicts the claim, or supports only part of it.

Judge against the context only, never against your own knowledge: a claim you know to be true \
but that the context does not back is "unsure", and a claim you believe false that the context \
states is "yes". Give exactly one verdict per claim, in the order of the claims, with \
claim_index set to the claim's index and a one-sentence reason."""

FAITHFULNESS_VERDICTS = claim_verdicts_step(
    instructions=_VERDICTS_INSTRUCTIONS,
    output_schema=ClaimVerdicts,
    name="faithfulness_verdicts",
    task="Check each of the {n} claims above against the context pieces.",
)
"""The verdicts step (``yes`` supported, ``no`` contradicted, ``unsure`` not in the context),
which hallucination's ``tracescore-v2`` prompt set sends too."""

_REASON_INSTRUCTIONS = """\
You explain a faithfulness score to a developer reading it next to a trace, in two or three \
sentences. The score is the share of the answer's claims that the context supports; claims \
the context contradicts or does not mention count as unsupported. Name the unsupported or \
contradicted claims, if any, based on the verdicts given. Do not repeat the formula."""


def create_faithfulness_scorer(
    *,
    model: str | Judge | None = None,
    context: Sequence[Any] | None = None,
    context_extractor: Callable[[Any, Any], Sequence[Any]] | None = None,
    scale: float = 1,
    prompt_set: PromptSet = "default",
) -> Scorer:
    """Score how faithful an answer is to its context: the share of its claims the context backs.

    Three judge calls: the answer is broken into claims (``preprocess_step_result``:
    ``{"claims": [...]}``; the request is the one hallucination makes too, schema name
    ``output_claims``, so with both scorers on one span the judge cache answers it once); each
    claim is judged against the context, ``yes`` (supported), ``no`` (contradicted) or
    ``unsure`` (not in the context) (``analyze_step_result``:
    ``{"verdicts": [{"claim_index", "verdict", "reason"}]}``, one per claim, in order); then a
    reason is written.

    Score (from the Mastra evals' faithfulness): ``yes / claims * scale``, rounded
    to 2 decimals half up; ``unsure`` counts as unsupported.

    Context: ``context_extractor(input, output)`` wins over ``context=``, which wins over
    ``run(context=...)``; in a ``ScoringRule`` without either, the documents of the trace's
    retrieval spans, in retrieval order. Pieces are strings or documents with
    ``content``/``text``/``page_content``.

    Not scorable (no judge call): an empty output or empty context. Not scorable after the
    first call: the judge found no claims in the output (a bare refusal, only a question).

    Args:
        model: the judge: a litellm model string, a ``tracescore.Judge``, or ``None`` for the
            configured judge (``configure(judge=...)``, else ``TRACESCORE_JUDGE_MODEL``).
        context: fixed context pieces for every run.
        context_extractor: ``(input, output) -> pieces``, called at each run.
        scale: maximum score, > 0. Default 1.
        prompt_set: ``"default"``, which for faithfulness is ``"mastra"`` (the prompts
            described above, step for step those of the Mastra evals); or
            ``"tracescore-v1"``: the claims read the question too, each claim gets its
            evidence and a support verdict (the same request for faithfulness and
            hallucination, so one judge answers both once), and the reason is written in that
            call: two judge calls instead of three; or ``"tracescore-v2"``: the ``mastra``
            prompts (the set exists so that one name serves both scorers; it changes
            hallucination only). The default is the set that agreed best with human labels on
            the development split of HaluEval; measured on its held-out split:
            docs/judge-quality.md; details in ``tracescore.scorers._prompt_sets``.

    Returns:
        A ``Scorer`` with id ``faithfulness``.

    Raises:
        ConfigurationError: ``context`` is not a list, ``context_extractor`` is not callable,
            ``scale`` is out of range, ``model`` is invalid or ``prompt_set`` is unknown.

    Examples:
        >>> scorer = create_faithfulness_scorer(
        ...     model="openai/gpt-4o-mini", context=["Paris is the capital of France."])
        >>> scorer.run(output="The capital of France is Paris.").score  # doctest: +SKIP
        1.0
    """
    chosen = resolve_prompt_set(SCORER_ID, prompt_set)
    if chosen == "tracescore-v1":
        return v1_claims_scorer(
            SCORER_ID, description=_DESCRIPTION, model=model, context=context,
            context_extractor=context_extractor, scale=scale, higher_is_better=True)
    return claims_scorer(
        id=SCORER_ID,
        description=_DESCRIPTION,
        model=model,
        context=context,
        context_extractor=context_extractor,
        scale=scale,
        requires=("output", "context"),
        preprocess=OUTPUT_CLAIMS,
        analyze=FAITHFULNESS_VERDICTS,
        generate_reason=claims_reason_step(
            instructions=_REASON_INSTRUCTIONS, name="faithfulness_reason"
        ),
        prompt_set="default" if chosen == DEFAULT_PROMPT_SETS[SCORER_ID] else chosen,
    )
