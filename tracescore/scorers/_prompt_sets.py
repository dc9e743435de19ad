"""Prompt sets of the claim-checking scorers: ``mastra``, ``tracescore-v1``, ``tracescore-v2``.

``mastra`` is the set that follows the Mastra evals' prompts step for step (the scorers' own
modules hold it; the Mastra-parity tests pin its behaviour). ``default`` names each scorer's
default set, the one that agreed best with human labels on the development split of the
judge-quality benchmark (``benchmarks/judge_quality``, docs/judge-quality.md): ``mastra`` for
faithfulness, ``tracescore-v2`` for hallucination (``DEFAULT_PROMPT_SETS``). Code that passed
``prompt_set="default"`` before keeps working and gets the current default; the Mastra prompts
stay one keyword away (``prompt_set="mastra"``).

``tracescore-v1`` is an explicit choice
(``create_faithfulness_scorer(prompt_set="tracescore-v1")``, likewise hallucination), written
and tuned on the development split of the judge-quality benchmark
(``benchmarks/judge_quality``) and measured on its held-out split (docs/judge-quality.md):

* **Claims in the light of the question.** A short answer ("Delhi") asserts nothing on its
  own; the claims step reads the question too, so the claim becomes "The Oberoi Group's head
  office is in Delhi", which the context can back. The question's own statements are not
  claims of the answer.
* **One verdict question for both scorers, asked with the polarity small models get right.**
  Each claim is judged ``yes`` (the context supports it), ``no`` (contradicts) or ``unsure``
  (does not say), with the evidence written *before* the verdict. Faithfulness is the share of
  ``yes``; hallucination the share of the others (hallucinated = contradicted or
  unsupported). A 1.5B judge asked "is it hallucinated? yes/no" answered ``yes`` for fine
  claims (benchmarks/README.md, issue 14); asked "is it supported?" it does not.
* **Two judge calls instead of three.** The reason is written in the verdict call (the inline
  reason of ``Scorer(reason_in_analyze=...)``). The claims and verdict requests are the same
  for both scorers, so with both on one span and one judge, its request cache answers the
  second scorer without a call.

With ``tracescore-v1`` the hallucination scorer's ``analyze_step_result`` holds the support
verdicts (``yes`` = supported), the same object faithfulness reports; its score is the share of
claims whose verdict is not ``yes``.

``tracescore-v2`` keeps the ``mastra`` prompts (Mastra's claims and faithfulness verdicts, which
the benchmark measured as the better pair: v1's question-aware claims and evidence-first
verdicts agreed less often with the labels) and changes only how hallucination asks:

* **Hallucination asks faithfulness's question.** Its claims and verdict requests are the
  default faithfulness requests (``output_claims``, ``faithfulness_verdicts``: ``yes``
  supported, ``no`` contradicted, ``unsure`` not in the context), and its score is the share of
  claims not judged ``yes``, so the small judge is never asked the inverted "is it
  hallucinated?" question. Its reason is its own (``hallucination_reason_v2``), written from
  those verdicts: three judge calls alone, as the default; one (the reason) after faithfulness
  on the same span with a caching judge.
* Faithfulness under ``tracescore-v2`` is the ``mastra`` faithfulness, so one ``prompt_set``
  can be set for both scorers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from tracescore._core.errors import ConfigurationError
from tracescore._judge import Judge
from tracescore.scorers._base import JudgePrompt, Scorer, ScorerRun, check_scale
from tracescore.scorers._claims import (
    check_context_option,
    claims_and_context,
    claims_of,
    yes_share,
)
from tracescore.scorers._common import Texts, check_count, context_options
from tracescore.scorers._prompt import data_block
from tracescore.scorers._verdicts import YesUnsureNo

__all__ = [
    "DEFAULT_PROMPT_SETS", "PROMPT_SETS", "PromptSet", "V1_STEPS", "resolve_prompt_set",
    "unsupported_share", "v1_claims_scorer",
]

PromptSet = Literal["default", "mastra", "tracescore-v1", "tracescore-v2"]
"""The prompt sets of faithfulness and hallucination (``default``: the scorer's own default)."""

PROMPT_SETS: tuple[str, ...] = ("default", "mastra", "tracescore-v1", "tracescore-v2")

DEFAULT_PROMPT_SETS: dict[str, str] = {"faithfulness": "mastra", "hallucination": "tracescore-v2"}
"""Each scorer's default prompt set, chosen on the development split of the judge-quality
benchmark and reported on its held-out split (docs/judge-quality.md): hallucination
``tracescore-v2`` (8 of 10 development answers agreed with the labels, ``mastra`` 5 of 10);
faithfulness ``mastra`` (``tracescore-v2`` asks the same requests; ``tracescore-v1``, the only
other, agreed on 1 of its 2 development answers)."""


def resolve_prompt_set(scorer_id: str, prompt_set: object) -> str:
    """The prompt set ``prompt_set`` stands for: ``default`` becomes the scorer's own default.

    Raises:
        ConfigurationError: ``prompt_set`` is not one of ``PROMPT_SETS``.
    """
    if prompt_set not in PROMPT_SETS:
        raise ConfigurationError(
            f"{scorer_id} prompt_set must be one of {list(PROMPT_SETS)}, got {prompt_set!r}"
        )
    assert isinstance(prompt_set, str)
    return DEFAULT_PROMPT_SETS[scorer_id] if prompt_set == "default" else prompt_set


class _V1Claims(BaseModel):
    """The claims the answer makes, each a full sentence, in order."""

    claims: Texts = Field(description="The answer's claims, each a self-contained sentence.")


_V1_CLAIMS_INSTRUCTIONS = """\
You list the factual claims an assistant's answer makes, so that each claim can be checked on \
its own against documents.

- Read the question first: the answer replies to it. When the answer is short (a name, a \
number, a date, "yes"), write the claim as the full sentence the answer means in reply to \
the question ("Who founded X?" answered "Ann Lee" is the claim "Ann Lee founded X").
- One claim per fact, date, figure, name, cause or property the answer states; keep its words \
where you can and replace pronouns with what they refer to.
- List only what the answer asserts. Do not list what the question says, do not correct, \
judge, add or merge anything.
- An answer that asserts nothing (empty, a refusal, only a question) has no claims: return \
an empty list."""


def _v1_claims_prompt(run: ScorerRun) -> str:
    question = run.input_text.strip() if run.input_text else ""
    parts = [data_block("question", question)] if question else []
    parts.append(data_block("answer", run.output_text))
    parts.append("List the claims the answer makes"
                 + (" in reply to the question." if question else "."))
    return "\n\n".join(parts)


def _v1_verdicts_schema() -> type[BaseModel]:
    item = create_model(
        "ClaimSupport",
        __doc__="One claim's evidence and verdict.",
        claim_index=(int, Field(description="The claim's index attribute (0-based).")),
        evidence=(str, Field(description="The context's words about the claim, quoted, or "
                                         "'none' when the context does not mention it.")),
        verdict=(YesUnsureNo, Field(description='"yes": the context supports the claim; '
                                                '"no": it contradicts it; "unsure": it does '
                                                "not say.")),
    )
    return create_model(
        "ClaimSupportVerdicts",
        __doc__="Exactly one entry per claim, in the claims' order.",
        verdicts=(list[item], ...),  # type: ignore[valid-type]
    )


_V1_VERDICTS_INSTRUCTIONS = """\
You check, claim by claim, whether the context an assistant was given supports the claims of \
its answer. For each claim, first quote the words of the context that are about it (or write \
"none"), then decide:

- "yes": the context states the claim or directly implies it (same names, numbers and dates).
- "no": the context says something that contradicts the claim or a part of it.
- "unsure": the context does not mention it, or supports only part of it.

Use the context only, never your own knowledge. Exactly one entry per claim, in the claims' \
order, claim_index set to the claim's index: never one entry per context passage or per quote \
(when several parts of the context bear on a claim, quote them together in that claim's \
evidence, briefly)."""


class _V1VerdictsCheck:
    """The ``claim_support_v1`` answer, one entry per claim, matched by ``claim_index``.

    A small judge sometimes writes a claim's verdict in several entries, one per context passage
    it quotes, although the instructions ask for one. Such entries are merged, so the answer is
    read rather than refused: when the answer has more entries than claims and every entry's
    ``claim_index`` names a claim (each claim at least once; with a single claim every entry is
    about it), a claim's verdict is ``no`` if any of its entries says ``no`` (the context
    contradicts it somewhere), else ``yes`` if any says ``yes`` (a passage supports it), else
    ``unsure``; the evidence is joined. An answer with as many entries as claims is read in order,
    as before; any other answer is refused (``ValueError``), which has the judge asked once more.
    """

    def __call__(self, parsed: Any, run: ScorerRun) -> None:
        assert run.preprocess_result is not None
        claims = len(run.preprocess_result["claims"])
        entries = list(parsed.verdicts)
        if len(entries) <= claims:
            check_count(entries, claims, "verdicts", "claim")
            return
        index = [0] * len(entries) if claims == 1 else [e.claim_index for e in entries]
        if set(index) != set(range(claims)):
            check_count(entries, claims, "verdicts", "claim")
        merged = []
        for claim in range(claims):
            group = [e for e, i in zip(entries, index, strict=True) if i == claim]
            said = {e.verdict for e in group}
            verdict = "no" if "no" in said else "yes" if "yes" in said else "unsure"
            evidence = " / ".join(e.evidence for e in group)
            merged.append(group[0].model_copy(
                update={"claim_index": claim, "verdict": verdict, "evidence": evidence}))
        parsed.verdicts = merged


def _v1_verdicts_prompt(run: ScorerRun) -> str:
    claims = claims_of(run)
    return claims_and_context(
        run, claims, f"Check each of the {len(claims)} claims above against the context."
    )


def unsupported_share(run: ScorerRun) -> float:
    """Hallucination under ``tracescore-v1`` and ``-v2``: the share of claims whose support
    verdict is not ``yes`` (contradicted or not in the context), times the scale."""
    assert run.analyze_result is not None
    verdicts = [v["verdict"] for v in run.analyze_result["verdicts"]]
    return (len(verdicts) - verdicts.count("yes")) / len(verdicts) * run.scale


def _supported_share(run: ScorerRun) -> float:
    return yes_share(run) * run.scale


_V1_CLAIMS = JudgePrompt(
    instructions=_V1_CLAIMS_INSTRUCTIONS,
    prompt=_v1_claims_prompt,
    output_schema=_V1Claims,
    name="answer_claims_v1",
)
_V1_VERDICTS = JudgePrompt(
    instructions=_V1_VERDICTS_INSTRUCTIONS,
    prompt=_v1_verdicts_prompt,
    output_schema=_v1_verdicts_schema(),
    name="claim_support_v1",
    validate=_V1VerdictsCheck(),
)

V1_STEPS: dict[str, dict[str, Any]] = {
    "faithfulness": {"preprocess": _V1_CLAIMS, "analyze": _V1_VERDICTS,
                     "generate_score": _supported_share},
    "hallucination": {"preprocess": _V1_CLAIMS, "analyze": _V1_VERDICTS,
                      "generate_score": unsupported_share},
}
"""The steps of ``tracescore-v1`` per scorer (the reason is written inline)."""


def v1_claims_scorer(
    scorer_id: str,
    *,
    description: str,
    model: str | Judge | None,
    context: Sequence[Any] | None,
    context_extractor: Callable[[Any, Any], Sequence[Any]] | None,
    scale: float,
    higher_is_better: bool,
) -> Scorer:
    """Faithfulness or hallucination with the ``tracescore-v1`` prompt set (two judge calls).

    Args:
        scorer_id: ``"faithfulness"`` or ``"hallucination"``.
        description: the scorer's one-line description.
        model: the judge, as the public factory takes it.
        context: fixed context pieces for every run, or ``None``.
        context_extractor: ``(input, output) -> pieces``, or ``None``.
        scale: maximum score, > 0.
        higher_is_better: ``False`` for hallucination.

    Raises:
        ConfigurationError: as the factories' (``context``, ``scale``, ``model``).
    """
    check_scale(scale)
    check_context_option(context)
    steps = V1_STEPS[scorer_id]
    return Scorer(
        id=scorer_id,
        description=description,
        model=model,
        requires=("output", "context"),
        uses_context=True,
        context=context,
        context_extractor=context_extractor,
        higher_is_better=higher_is_better,
        scale=scale,
        preprocess=steps["preprocess"],
        analyze=steps["analyze"],
        generate_score=steps["generate_score"],
        reason_in_analyze=True,
        options={**context_options(context, context_extractor, scale),
                 "prompt_set": "tracescore-v1"},
    )
