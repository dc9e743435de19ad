"""Faithfulness cascade: the support check first, the LLM judge only when the check is unsure.

The support check (``support_check``) scores every answer without a judge; when its probability
falls inside the band (``band=(low, high)``, exclusive) the answer goes to faithfulness's own
claims and verdict requests (the same requests, so with a faithfulness scorer on the same span
and a caching judge they are answered once). Judge calls and tokens are reported on the result
as for any scorer, so a rule's hourly judge budget (``max_tokens_per_hour``,
``max_cost_per_hour``) counts what the cascade spends, and nothing when the check decided.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from tracescore._core.errors import ConfigurationError
from tracescore._judge import Judge
from tracescore.scorers._base import Scorer, ScorerRun, SkipJudge
from tracescore.scorers._claims import (
    OUTPUT_CLAIMS,
    check_context_option,
    scaled_yes_share,
)
from tracescore.scorers._common import context_options
from tracescore.scorers.faithfulness import FAITHFULNESS_VERDICTS
from tracescore.scorers.support_check import support_model

__all__ = ["create_faithfulness_cascade_scorer"]

SCORER_ID = "faithfulness-cascade"
_MAX_LISTED = 3


def _check_band(band: object) -> tuple[float, float]:
    if (not isinstance(band, (tuple, list)) or len(band) != 2
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in band)
            or not 0.0 <= band[0] <= 0.5 <= band[1] <= 1.0):
        raise ConfigurationError(
            "band must be (low, high) with 0 <= low <= 0.5 <= high <= 1: the support check's "
            f"probabilities strictly between them go to the judge; got {band!r}")
    return float(band[0]), float(band[1])


def _steps(check: Any, low: float, high: float) -> tuple[
    Callable[[ScorerRun], str], Callable[[ScorerRun], str], Callable[[ScorerRun], float],
    Callable[[ScorerRun], str],
]:
    """The cascade's claims and verdicts prompts (no judge call when the support check
    ``check`` decided: its probability outside ``low``-``high``), its score and its reason."""

    def probability(run: ScorerRun) -> float:
        return check.probability(run.output_text, run.context or [], run.input_text)

    def decided(run: ScorerRun) -> float | None:
        p = probability(run)
        return p if p <= low or p >= high else None

    def claims_prompt(run: ScorerRun) -> str:
        p = decided(run)
        if p is not None:
            raise SkipJudge({"claims": [], "support_check": p})
        return OUTPUT_CLAIMS.render(run)

    def verdicts_prompt(run: ScorerRun) -> str:
        if decided(run) is not None:
            raise SkipJudge({"verdicts": []})
        return FAITHFULNESS_VERDICTS.render(run)

    def score(run: ScorerRun) -> float:
        p = decided(run)
        return p * run.scale if p is not None else scaled_yes_share(run)

    def reason(run: ScorerRun) -> str:
        p = probability(run)
        if decided(run) is not None:
            verdict = "supported" if p >= 0.5 else "not supported"
            return (f"The lexical support check gave {p:.2f} ({verdict}), outside "
                    f"{low:.2f}-{high:.2f}: no judge call.")
        assert run.preprocess_result is not None and run.analyze_result is not None
        claims = run.preprocess_result["claims"]
        verdicts = run.analyze_result["verdicts"]
        supported = sum(1 for v in verdicts if v["verdict"] == "yes")
        text = (f"The lexical support check gave {p:.2f}, unsure ({low:.2f}-{high:.2f}); the "
                f"judge found {supported} of {len(claims)} claims supported by the context.")
        missing = [(c, v) for c, v in zip(claims, verdicts, strict=True) if v["verdict"] != "yes"]
        for claim, v in missing[:_MAX_LISTED]:
            kind = "contradicted" if v["verdict"] == "no" else "not in the context"
            text += f" {kind.capitalize()}: \"{claim}\" ({v['reason'].strip()})"
        if len(missing) > _MAX_LISTED:
            text += f" And {len(missing) - _MAX_LISTED} more."
        return text

    return claims_prompt, verdicts_prompt, score, reason


def create_faithfulness_cascade_scorer(
    *,
    model: str | Judge | None = None,
    context: Sequence[Any] | None = None,
    context_extractor: Callable[[Any, Any], Sequence[Any]] | None = None,
    scale: float = 1,
    band: tuple[float, float] | None = None,
) -> Scorer:
    """Score faithfulness with the support check first and the judge only when it is unsure.

    The support check (``create_support_check_scorer``: word overlap, no judge) gives the
    probability ``p`` that the context supports the answer. Outside the band (``p <= low`` or
    ``p >= high``) the score is ``p * scale`` and no judge is called. Inside it, the judge
    breaks the answer into claims and checks each against the context, with faithfulness's own
    requests (schema names ``output_claims``, ``faithfulness_verdicts``), and the score is
    faithfulness's: ``yes / claims * scale``. Two judge calls then: the reason is
    written from the verdicts without a third. Scores are rounded to 2 decimals half up.

    ``preprocess_step_result`` holds the judge's claims (``{"claims": [...]}``), or
    ``{"claims": [], "support_check": p}`` when the check decided; ``analyze_step_result`` the
    verdicts (``{"verdicts": []}`` when the check decided); the reason gives ``p`` either way;
    ``judge_calls``, ``input_tokens`` and ``output_tokens`` count the judge's use (0 when the
    check decided), which is what a rule's hourly judge budget is charged. With the budget
    spent, a rule skips the cascade's jobs as it skips any judge scorer's.

    The default band is chosen on the development split of HaluEval QA so that the judge sees
    the 30% of answers the check is least sure of; the share on your answers, the accuracy and
    the tokens per answer beside the check alone and the judge alone: docs/judge-quality.md.
    Widen the band for answers unlike short question-answering ones.

    Context: ``context_extractor(input, output)`` wins over ``context=``, which wins over
    ``run(context=...)``; in a ``ScoringRule`` without either, the documents of the trace's
    retrieval spans, in retrieval order.

    Not scorable (no judge call): an empty output or empty context. Not scorable after the
    first judge call: the judge found no claims in the output.

    Args:
        model: the judge: a litellm model string, a ``tracescore.Judge``, or ``None`` for the
            configured judge (``configure(judge=...)``, else ``TRACESCORE_JUDGE_MODEL``).
        context: fixed context pieces for every run.
        context_extractor: ``(input, output) -> pieces``, called at each run.
        scale: maximum score, > 0. Default 1.
        band: ``(low, high)`` with ``0 <= low <= 0.5 <= high <= 1``; the check's
            probabilities strictly between them go to the judge. ``(0.5, 0.5)`` never asks
            the judge, ``(0, 1)`` nearly always does. Default: the shipped model's band
            (``support_model().band``).

    Returns:
        A ``Scorer`` with id ``faithfulness-cascade``.

    Raises:
        ConfigurationError: ``context`` is not a list, ``context_extractor`` is not callable,
            ``scale`` or ``band`` is out of range, or ``model`` is invalid.

    Examples:
        >>> scorer = create_faithfulness_cascade_scorer(
        ...     model="openai/gpt-4o-mini", context=["Paris is the capital of France."])
        >>> scorer.run(output="Paris is the capital of France.").judge_calls  # doctest: +SKIP
        0
    """
    check_context_option(context)
    check = support_model()
    low, high = _check_band(check.band if band is None else band)
    claims_prompt, verdicts_prompt, score, reason = _steps(check, low, high)
    options = context_options(context, context_extractor, scale)
    options.update(band=(low, high), check=f"support-check-v1-{check.digest}")
    return Scorer(
        id=SCORER_ID,
        description="Faithfulness, with the judge asked only when a lexical check is unsure.",
        model=model,
        preprocess=dataclasses.replace(OUTPUT_CLAIMS, prompt=claims_prompt),
        analyze=dataclasses.replace(FAITHFULNESS_VERDICTS, prompt=verdicts_prompt),
        generate_score=score,
        generate_reason=reason,
        requires=("output", "context"), context=context, context_extractor=context_extractor,
        scale=scale, options=options,
    )
