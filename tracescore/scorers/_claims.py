"""Claims: the shared first step of the claim-checking scorers, and their shared helpers.

Faithfulness and hallucination both start by breaking the answer into claims. They use the very
same judge request (``OUTPUT_CLAIMS``: same instructions, same user prompt, same schema name
``output_claims``), so when both score one span the judge's request cache answers the second
from the first and the answer is decomposed once. Context recall breaks the ground truth into
claims with the same instructions under its own schema name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from tracescore._core.errors import ConfigurationError
from tracescore._judge import Judge
from tracescore.scorers._base import (
    JudgePrompt,
    NotScorable,
    Requirement,
    Scorer,
    ScorerRun,
    check_scale,
)
from tracescore.scorers._common import Reason, Texts, check_count, context_options
from tracescore.scorers._preset import (
    explained,
    items_of,
    json_block,
    judge_scorer,
    verdicts_schema,
)
from tracescore.scorers._prompt import data_block, data_blocks

__all__ = [
    "CLAIMS_INSTRUCTIONS",
    "OUTPUT_CLAIMS",
    "ClaimSource",
    "ClaimVerdictsCheck",
    "Claims",
    "check_context_option",
    "claim_verdicts_schema",
    "claim_verdicts_step",
    "claims_and_context",
    "claims_scorer",
    "claims_of",
    "claims_reason_step",
    "judged_claims",
    "scaled_yes_share",
    "yes_share",
]

ClaimSource = Literal["output", "ground truth"]
"""What the claims are taken from: the judged answer or the reference answer."""


class Claims(BaseModel):
    """Preprocess answer: the claims a text makes, in order (blank ones are dropped)."""

    claims: Texts = Field(description="The claims of the text, in order.")


CLAIMS_INSTRUCTIONS = """\
You break a text into the factual claims it makes, so that each claim can later be checked on \
its own against source documents.

- A claim is one short, self-contained assertion that can be true or false: a fact, a figure, \
a date, a name, a cause, a relation or a property that the text states.
- Keep the text's meaning and, where possible, its words. Replace pronouns and references with \
what they refer to, so that every claim can be understood alone.
- Keep a hedged or conditional assertion as a claim, hedge included ("X may cause Y").
- Do not add, infer, correct, judge or merge anything. Questions, greetings, instructions to the \
reader and pure formatting are not claims.
- A text that asserts nothing (an empty reply, a bare refusal, only a question) has no claims: \
return an empty list."""

OUTPUT_CLAIMS = JudgePrompt(
    instructions=CLAIMS_INSTRUCTIONS,
    prompt=lambda run: (
        f"{data_block('answer', run.output_text)}\n\nList the claims the answer above makes."
    ),
    output_schema=Claims,
    # Not "<scorer>_claims": faithfulness and hallucination share this request on purpose.
    name="output_claims",
)
"""The claims of the judged answer, shared by faithfulness and hallucination."""


def claims_of(run: ScorerRun, *, source: ClaimSource = "output") -> list[str]:
    """The claims found by the preprocess step; ``NotScorable`` when there are none.

    Args:
        run: a run whose preprocess step returned ``{"claims": [...]}``.
        source: what the claims were taken from, for the not-scorable reason.

    Raises:
        NotScorable: the judge found no claims (an empty reply, a bare refusal, ...).
    """
    assert run.preprocess_result is not None
    claims: list[str] = run.preprocess_result["claims"]
    if not claims:
        if source == "output":
            raise NotScorable(
                "the judge found no claims in the output (an empty reply, a bare refusal or "
                "only a question): there is nothing to check against the context"
            )
        raise NotScorable(f"the judge found no claims in the {source}: there is nothing to check")
    return claims


def claim_verdicts_schema(
    verdict: Any, meaning: str, *, item_doc: str, list_doc: str
) -> type[BaseModel]:
    """The analyze schema of a claim-checking scorer: ``{"verdicts": [{"claim_index",
    "verdict", "reason"}]}``, named ``ClaimVerdicts`` (items ``ClaimVerdict``).

    The scorers differ only in the verdict's type and meaning and in the docstrings, which
    pydantic puts in the JSON schema the judge reads; field order stays index, verdict, reason.

    Args:
        verdict: the verdict's type, e.g. ``YesNo`` or ``YesUnsureNo``.
        meaning: the verdict field's description: what each value means.
        item_doc: the description of one verdict (the ``ClaimVerdict`` docstring).
        list_doc: the description of the answer (the ``ClaimVerdicts`` docstring).

    Returns:
        The ``ClaimVerdicts`` pydantic model class.
    """
    return verdicts_schema(
        "ClaimVerdicts",
        "ClaimVerdict",
        items="verdicts",
        item_doc=item_doc,
        list_doc=list_doc,
        claim_index=(int, Field(description="The claim's index attribute (0-based).")),
        verdict=(verdict, Field(description=meaning)),
        reason=(str, Field(description="Why, in one sentence.")),
    )


class ClaimVerdictsCheck:
    """A ``JudgePrompt`` validator: one verdict per claim, in order.

    Examples:
        >>> step = JudgePrompt(..., validate=ClaimVerdictsCheck())  # doctest: +SKIP
    """

    def __call__(self, parsed: Any, run: ScorerRun) -> None:
        assert run.preprocess_result is not None
        check_count(parsed.verdicts, len(run.preprocess_result["claims"]), "verdicts", "claim")


def judged_claims(run: ScorerRun) -> str:
    """The claims with their verdicts as a delimited JSON block, for the reason prompt."""
    assert run.analyze_result is not None
    judged = [
        {"claim": claim, "verdict": v["verdict"], "reason": v["reason"]}
        for claim, v in zip(items_of(run, "claims"), run.analyze_result["verdicts"], strict=True)
    ]
    return json_block("verdicts", judged)


def claims_and_context(run: ScorerRun, claims: list[str], task: str) -> str:
    """The analyze prompt of a claim-checking scorer: context pieces, then claims."""
    pieces = run.context or []
    return (
        f"{data_blocks('context', pieces)}\n\n"
        f"{data_blocks('claim', claims)}\n\n"
        f"{task} Answer with exactly {len(claims)} verdicts, one per claim, in the same order."
    )


def check_context_option(context: object) -> None:
    """Fail early unless a factory's ``context=`` is ``None`` or a list of pieces.

    Raises:
        ConfigurationError: ``context`` is a string, bytes or not a sequence.
    """
    if context is not None and (
        isinstance(context, (str, bytes)) or not isinstance(context, Sequence)
    ):
        raise ConfigurationError(
            "context must be a list of strings or documents (dicts with content/text/"
            f"page_content), got {type(context).__name__}; wrap a single text in a list"
        )


def claim_verdicts_step(
    *,
    instructions: str,
    output_schema: type[BaseModel],
    name: str,
    task: str,
    source: ClaimSource = "output",
) -> JudgePrompt:
    """The analyze step of a claim-checking scorer: one verdict per claim against the context.

    Args:
        instructions: the scorer's verdict instructions.
        output_schema: the scorer's verdicts schema (``{"verdicts": [...]}``).
        name: the schema name, e.g. ``"faithfulness_verdicts"``.
        task: the request after the claims, with ``{n}`` for the number of claims.
        source: what the claims were taken from (see ``claims_of``).
    """

    def prompt(run: ScorerRun) -> str:
        claims = claims_of(run, source=source)
        return claims_and_context(run, claims, task.format(n=len(claims)))

    return JudgePrompt(
        instructions=instructions,
        prompt=prompt,
        output_schema=output_schema,
        name=name,
        validate=ClaimVerdictsCheck(),
    )


def claims_reason_step(
    *, instructions: str, name: str, source: ClaimSource = "output", note: str = ""
) -> JudgePrompt:
    """The reason step of a claim-checking scorer: the text, the judged claims, the score.

    Args:
        instructions: the scorer's reason instructions.
        name: the schema name, e.g. ``"faithfulness_reason"``.
        source: the text the claims were taken from, shown first (the answer or the reference).
        note: said right after the score, e.g. ``" (lower is better)"``.
    """

    def prompt(run: ScorerRun) -> str:
        if source == "output":
            text = data_block("answer", run.output_text)
        else:
            text = data_block("reference", run.ground_truth_text)
        return explained(run, text, judged_claims(run), note=note)

    return JudgePrompt(instructions=instructions, prompt=prompt, output_schema=Reason, name=name)


def yes_share(run: ScorerRun) -> float:
    """The share of the claims judged ``yes`` (not scaled)."""
    assert run.analyze_result is not None
    verdicts = [v["verdict"] for v in run.analyze_result["verdicts"]]
    return verdicts.count("yes") / len(verdicts)


def scaled_yes_share(run: ScorerRun) -> float:
    """The score of faithfulness and hallucination: ``yes / claims * scale``."""
    return yes_share(run) * run.scale


def claims_scorer(
    *,
    id: str,  # noqa: A002 - the Scorer option it passes on
    description: str,
    model: str | Judge | None,
    context: Sequence[Any] | None,
    context_extractor: Callable[[Any, Any], Sequence[Any]] | None,
    scale: float,
    requires: tuple[Requirement, ...],
    preprocess: JudgePrompt,
    analyze: JudgePrompt,
    generate_reason: JudgePrompt,
    generate_score: Callable[[ScorerRun], float] = scaled_yes_share,
    higher_is_better: bool = True,
    prompt_set: str = "default",
) -> Scorer:
    """A claim-checking scorer (claims, verdicts against the context, reason), its options
    checked: what faithfulness, hallucination and context recall build alike.

    Args:
        id: the scorer id, e.g. ``"faithfulness"``.
        description: the scorer's one-line description.
        model: the judge, as the public factory takes it.
        context: fixed context pieces for every run, or ``None``.
        context_extractor: ``(input, output) -> pieces``, or ``None``.
        scale: maximum score, > 0.
        requires: what a run needs, ``("output", "context")`` or ``("ground_truth", "context")``.
        preprocess: the claims step.
        analyze: the verdicts step (``claim_verdicts_step``).
        generate_reason: the reason step (``claims_reason_step``).
        generate_score: the score from the verdicts; default ``scaled_yes_share``.
        higher_is_better: ``False`` for hallucination.
        prompt_set: the prompt set's name, kept in the scorer's ``options`` unless
            ``"default"``.

    Raises:
        ConfigurationError: ``context`` is not a list, ``context_extractor`` is not callable,
            ``scale`` is out of range or ``model`` is invalid.
    """
    check_scale(scale)
    check_context_option(context)
    options = context_options(context, context_extractor, scale)
    if prompt_set != "default":
        options["prompt_set"] = prompt_set
    return judge_scorer(
        id=id,
        description=description,
        model=model,
        requires=requires,
        uses_context=True,
        context=context,
        context_extractor=context_extractor,
        higher_is_better=higher_is_better,
        scale=scale,
        preprocess=preprocess,
        analyze=analyze,
        generate_score=generate_score,
        generate_reason=generate_reason,
        options=options,
    )
