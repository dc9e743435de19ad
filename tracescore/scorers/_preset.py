"""The scaffold of the prebuilt LLM-judge scorers: each one is a preset over ``judge_scorer``.

Every prebuilt judge scorer has the same shape: an optional first step (a judged or computed
list: statements, opinions, claims, semantic units), one judged ``analyze`` step, a score
computed from its answer, and a reason the judge writes from the verdicts and the score (or,
with ``reason="inline"``, in the analyze call). What differs from one scorer to another is its
prompts, its answer schemas and its score formula; ``judge_scorer`` builds the rest (the reason
step and its schema name, the inline-reason option, the ``Scorer``), and the small helpers below
build the prompt pieces they repeat (JSON blocks, the closing score line, one-verdict-per-item
schemas).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, create_model

from tracescore._core.errors import ConfigurationError
from tracescore._judge import Judge
from tracescore.scorers._base import (
    JudgePrompt,
    ReasonMode,
    Requirement,
    Scorer,
    ScorerRun,
    Step,
    check_reason_mode,
)
from tracescore.scorers._common import Reason
from tracescore.scorers._prompt import data_block

__all__ = [
    "explained",
    "items_of",
    "judge_scorer",
    "json_block",
    "reason_step",
    "verdicts_schema",
]


def items_of(run: ScorerRun, key: str) -> list[Any]:
    """The list the first step found under ``key`` (``"statements"``, ``"opinions"``, ...)."""
    assert run.preprocess_result is not None
    items: list[Any] = run.preprocess_result[key]
    return items


def json_block(label: str, value: Any) -> str:
    """``value`` as indented JSON in a delimited data block named ``label`` (verdicts, an
    analysis), as the reason prompts show what the judge answered before."""
    return data_block(label, json.dumps(value, ensure_ascii=False, indent=1))


def explained(run: ScorerRun, *blocks: str, lead: str = "", note: str = "") -> str:
    """A reason prompt: ``blocks``, then ``"{lead}Score: S out of SCALE{note}. Explain this
    score."`` (``lead`` e.g. the sub-scores, ``note`` e.g. ``" (lower is better)"``)."""
    closing = f"{lead}Score: {run.score:g} out of {run.scale:g}{note}. Explain this score."
    return "\n\n".join([*blocks, closing])


def reason_step(
    scorer_id: str, instructions: str, prompt: Callable[[ScorerRun], str]
) -> JudgePrompt:
    """The reason step of a prebuilt judge scorer: schema ``Reason``, named
    ``<scorer id with underscores>_reason``."""
    return JudgePrompt(
        instructions=instructions,
        prompt=prompt,
        output_schema=Reason,
        name=f"{scorer_id.replace('-', '_')}_reason",
    )


def verdicts_schema(
    name: str,
    item_name: str,
    *,
    items: str,
    item_doc: str,
    list_doc: str,
    **fields: Any,
) -> type[BaseModel]:
    """An analyze schema ``{items: [{field: ...}, ...]}``: one verdict per judged item.

    The scorers differ in the fields of a verdict and in the docstrings, which pydantic puts in
    the JSON schema the judge reads; the fields keep the order given.

    Args:
        name: the model's name, e.g. ``"OpinionVerdicts"`` (the schema's title).
        item_name: one verdict's model name, e.g. ``"OpinionVerdict"``.
        items: the list field, e.g. ``"results"`` or ``"verdicts"``.
        item_doc: the description of one verdict.
        list_doc: the description of the answer.
        **fields: a verdict's fields as ``(type, pydantic.Field(...))``.

    Returns:
        The pydantic model class.
    """
    item = create_model(item_name, __doc__=item_doc, **fields)
    listed: dict[str, Any] = {items: (list[item], ...)}  # type: ignore[valid-type]
    model: type[BaseModel] = create_model(name, __doc__=list_doc, **listed)
    return model


def judge_scorer(
    *,
    id: str,  # noqa: A002 - the Scorer option it passes on
    description: str,
    model: str | Judge | None,
    scale: float,
    requires: tuple[Requirement, ...],
    analyze: JudgePrompt,
    generate_score: Callable[[ScorerRun], float],
    options: Mapping[str, Any],
    reason_instructions: str = "",
    reason_prompt: Callable[[ScorerRun], str] | None = None,
    generate_reason: JudgePrompt | None = None,
    preprocess: Step | None = None,
    higher_is_better: bool = True,
    reason: ReasonMode = "step",
    inline_focus: str | None = None,
    context: Sequence[Any] | None = None,
    context_extractor: Callable[[Any, Any], Sequence[Any]] | None = None,
    uses_context: bool | None = None,
    run_inputs: Iterable[str] = (),
    scorer_class: type[Scorer] = Scorer,
    **extra: Any,
) -> Scorer:
    """A prebuilt judge scorer from its parts: what each ``create_*_scorer`` declares.

    Args:
        id: the scorer id, e.g. ``"bias"``; the reason step's schema name is derived from it.
        description: the scorer's one-line description.
        model: the judge, as the public factory takes it.
        scale: maximum score, > 0 (checked by ``Scorer``).
        requires: what a run needs, e.g. ``("input", "output")``.
        analyze: the judged step.
        generate_score: the score from the analysis (already scaled).
        options: the scorer's effective options.
        reason_instructions: the reason step's system prompt.
        reason_prompt: the reason step's user prompt (usually ``explained(...)``).
        generate_reason: instead of the two above, a reason step built elsewhere (the claim
            scorers share theirs).
        preprocess: the optional first step.
        higher_is_better: ``False`` for bias, toxicity, hallucination.
        reason: the factory's ``reason=`` option: ``"step"`` (a reason call after the score)
            or ``"inline"`` (the analyze call writes it; needs ``inline_focus``).
        inline_focus: what an inline reason should focus on, for factories that offer it.
        context: fixed context pieces (context scorers).
        context_extractor: ``(input, output) -> pieces`` (context scorers).
        uses_context: mark a context scorer (see ``Scorer``).
        run_inputs: extra ``run()`` keyword arguments the scorer needs per run.
        scorer_class: ``Scorer`` or a subclass (prompt alignment's both-mode scorer).
        **extra: further keyword arguments of ``scorer_class``.

    Raises:
        ConfigurationError: ``reason`` is invalid, or inline without an ``inline_focus``; and
            what ``Scorer`` raises for the scale or the model.
    """
    focus: str | bool = False
    inline = check_reason_mode(reason)
    if inline:
        if inline_focus is None:
            raise ConfigurationError(f"scorer {id!r} does not write its reason inline")
        focus = inline_focus
    if generate_reason is None and reason_prompt is not None:
        generate_reason = reason_step(id, reason_instructions, reason_prompt)
    return scorer_class(
        id=id, description=description, model=model, requires=requires,
        uses_context=uses_context, context=context, context_extractor=context_extractor,
        higher_is_better=higher_is_better, scale=scale, run_inputs=run_inputs,
        preprocess=preprocess, analyze=analyze, generate_score=generate_score,
        generate_reason=None if inline else generate_reason, reason_in_analyze=focus,
        options=options, **extra,
    )
