"""Hallucination: how much of what the answer claims contradicts or goes beyond its context.

The score follows the Mastra evals' hallucination scorer (hallucinated claims =
contradicted or unsupported ones, over all claims); prompts and code are tracescore's own. The
default prompts ask the judge whether the context supports each claim (``tracescore-v2``);
``prompt_set="mastra"`` asks Mastra's "is it hallucinated?" step for step. Lower is better.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tracescore._judge import Judge
from tracescore.scorers._base import JudgePrompt, Scorer, ScorerRun
from tracescore.scorers._claims import (
    OUTPUT_CLAIMS,
    claim_verdicts_schema,
    claim_verdicts_step,
    claims_reason_step,
    claims_scorer,
    scaled_yes_share,
)
from tracescore.scorers._prompt_sets import (
    DEFAULT_PROMPT_SETS,
    PromptSet,
    resolve_prompt_set,
    unsupported_share,
    v1_claims_scorer,
)
from tracescore.scorers._verdicts import YesNo
from tracescore.scorers.faithfulness import FAITHFULNESS_VERDICTS

__all__ = ["create_hallucination_scorer"]

SCORER_ID = "hallucination"
_DESCRIPTION = "The share of the answer's claims that contradict or go beyond its context."


ClaimVerdicts = claim_verdicts_schema(
    YesNo,
    '"yes" if the claim is hallucinated (the context contradicts it or does not contain it), '
    '"no" if the context supports it.',
    item_doc="One claim's verdict: ``yes`` means hallucinated.",
    list_doc="Analyze answer: one verdict per claim, in order.",
)


_VERDICTS_INSTRUCTIONS = """\
You detect hallucinations: claims taken from an assistant's answer that are not grounded in \
the context the assistant was given. Decide for each claim:

- "yes" (hallucinated): the context contradicts the claim, or the context does not contain \
the information the claim asserts (the assistant made it up or brought it in from elsewhere).
- "no" (grounded): the context states the claim or directly implies it.

Judge against the context only, never against your own knowledge: a true claim the context \
does not back is still "yes". Give exactly one verdict per claim, in the order of the claims, \
with claim_index set to the claim's index and a one-sentence reason."""

_DEFAULT_VERDICTS = claim_verdicts_step(
    instructions=_VERDICTS_INSTRUCTIONS,
    output_schema=ClaimVerdicts,
    name="hallucination_verdicts",
    task="Decide for each of the {n} claims above whether it is hallucinated "
    "with respect to the context pieces.",
)

_REASON_INSTRUCTIONS = """\
You explain a hallucination score to a developer reading it next to a trace, in two or three \
sentences. The score is the share of the answer's claims that contradict the context or are \
not supported by it, so lower is better. Name the hallucinated claims, if any, and say whether \
they contradict the context or are merely unsupported, based on the verdicts given. Do not \
repeat the formula."""

_V2_REASON_INSTRUCTIONS = """\
You explain a hallucination score to a developer reading it next to a trace, in two or three \
sentences. Verdicts: "yes" the context supports the claim, "no" it contradicts it, "unsure" it \
does not say. The score is the share of claims not supported. Name those claims, if any, \
contradicted or merely unsupported. Do not repeat the formula."""


def create_hallucination_scorer(
    *,
    model: str | Judge | None = None,
    context: Sequence[Any] | None = None,
    context_extractor: Callable[[Any, Any], Sequence[Any]] | None = None,
    scale: float = 1,
    prompt_set: PromptSet = "default",
) -> Scorer:
    """Score how much an answer hallucinates: the share of its claims its context does not back.

    Lower is better (``higher_is_better=False``: with a ``ScoringRule`` threshold, a score at or
    below it passes).

    Three judge calls: the answer is broken into claims (``preprocess_step_result``:
    ``{"claims": [...]}``); each claim is judged against the context, ``yes`` (supported),
    ``no`` (contradicted) or ``unsure`` (not in the context) (``analyze_step_result``:
    ``{"verdicts": [{"claim_index", "verdict", "reason"}]}``, one per claim, in order); then a
    reason is written. The claims and verdict requests are faithfulness's own (schema names
    ``output_claims``, ``faithfulness_verdicts``), so with both scorers on one span and a
    caching judge (``Judge(cache_size=...)``) hallucination costs one call more (its reason).

    Score (hallucinated = contradicted or not supported by the context): the share
    of claims not judged ``yes``, times ``scale``, rounded to 2 decimals half up from the exact
    share. This is the ``tracescore-v2`` prompt set, the default because it agreed with human
    labels far more often than the Mastra prompts on HaluEval's development split with a small
    local judge (docs/judge-quality.md). ``prompt_set="mastra"`` sends the Mastra evals' own
    question instead ("is this claim hallucinated?": ``yes`` hallucinated, ``no`` grounded,
    schema name ``hallucination_verdicts``), scored ``yes / claims * scale``.

    Context: ``context_extractor(input, output)`` wins over ``context=``, which wins over
    ``run(context=...)``; in a ``ScoringRule`` without either, the documents of the trace's
    retrieval spans, in retrieval order.

    Not scorable (no judge call): an empty output or empty context. Not scorable after the
    first call: the judge found no claims in the output.

    Args:
        model: the judge: a litellm model string, a ``tracescore.Judge``, or ``None`` for the
            configured judge (``configure(judge=...)``, else ``TRACESCORE_JUDGE_MODEL``).
        context: fixed context pieces for every run.
        context_extractor: ``(input, output) -> pieces``, called at each run.
        scale: maximum score, > 0. Default 1.
        prompt_set: ``"default"``, which for hallucination is ``"tracescore-v2"`` (described
            above); ``"mastra"``: the Mastra evals' prompts, step for step; or
            ``"tracescore-v1"``: the claims read the question too, each claim gets its
            evidence and a support verdict (the same request for faithfulness and
            hallucination, so one judge answers both once), and the reason is written in that
            call: two judge calls instead of three. Measured side by side on HaluEval's
            held-out split: docs/judge-quality.md; details in
            ``tracescore.scorers._prompt_sets``.

    Returns:
        A ``Scorer`` with id ``hallucination``.

    Raises:
        ConfigurationError: ``context`` is not a list, ``context_extractor`` is not callable,
            ``scale`` is out of range, ``model`` is invalid or ``prompt_set`` is unknown.

    Examples:
        >>> scorer = create_hallucination_scorer(
        ...     model="openai/gpt-4o-mini", context=["Paris is the capital of France."])
        >>> scorer.run(output="Paris, the capital, has 9 million people.").score  # doctest: +SKIP
        0.5
    """
    chosen = resolve_prompt_set(SCORER_ID, prompt_set)
    if chosen == "tracescore-v1":
        return v1_claims_scorer(
            SCORER_ID, description=_DESCRIPTION, model=model, context=context,
            context_extractor=context_extractor, scale=scale, higher_is_better=False)
    analyze, score, reason = _verdict_steps(chosen)
    return claims_scorer(
        id=SCORER_ID, description=_DESCRIPTION, model=model, context=context,
        context_extractor=context_extractor, scale=scale, requires=("output", "context"),
        higher_is_better=False, preprocess=OUTPUT_CLAIMS, analyze=analyze,
        generate_score=score, generate_reason=reason,
        prompt_set="default" if chosen == DEFAULT_PROMPT_SETS[SCORER_ID] else chosen,
    )


def _verdict_steps(chosen: str) -> tuple[JudgePrompt, Callable[[ScorerRun], float], JudgePrompt]:
    """The verdicts step, the score and the reason step of the prompt set ``chosen``
    (``"tracescore-v2"`` or ``"mastra"``)."""
    if chosen == "tracescore-v2":
        analyze, score = FAITHFULNESS_VERDICTS, unsupported_share
        reason = claims_reason_step(instructions=_V2_REASON_INSTRUCTIONS,
                                    name="hallucination_reason_v2", note=" (lower is better)")
    else:
        analyze, score = _DEFAULT_VERDICTS, scaled_yes_share
        reason = claims_reason_step(instructions=_REASON_INSTRUCTIONS,
                                    name="hallucination_reason", note=" (lower is better)")
    return analyze, score, reason
