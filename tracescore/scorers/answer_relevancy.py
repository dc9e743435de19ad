"""Answer relevancy: how much of the answer addresses the question (not whether it is true).

Semantics follow the Mastra evals' answer relevancy scorer; prompts and code are
tracescore's own.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from tracescore._core.errors import ConfigurationError
from tracescore._judge import Judge
from tracescore.scorers._base import (
    JudgePrompt,
    NotScorable,
    ReasonMode,
    Scorer,
    ScorerRun,
    check_scale,
)
from tracescore.scorers._common import Texts, check_count
from tracescore.scorers._preset import (
    explained,
    items_of,
    json_block,
    judge_scorer,
    verdicts_schema,
)
from tracescore.scorers._prompt import data_block, data_blocks
from tracescore.scorers._verdicts import YesUnsureNo

__all__ = ["create_answer_relevancy_scorer"]

SCORER_ID = "answer-relevancy"


class Statements(BaseModel):
    """Preprocess answer: the statements the answer makes (blank ones are dropped)."""

    statements: Texts = Field(description="The statements of the answer, in order.")


StatementVerdicts = verdicts_schema(
    "StatementVerdicts",
    "StatementVerdict",
    items="results",
    item_doc="One statement's verdict.",
    list_doc="Analyze answer: one verdict per statement, in order.",
    result=(YesUnsureNo, Field(description='"yes", "unsure" or "no".')),
    reason=(str, Field(description="Why, in one sentence.")),
)


_STATEMENTS_INSTRUCTIONS = """\
You split an answer into the separate statements it makes, so that each one can later be \
checked against the question on its own.

- A statement is one self-contained piece of information, claim, recommendation or \
instruction.
- Keep the answer's meaning and, where possible, its words. Replace pronouns with what they \
refer to so that every statement can be understood alone.
- Do not add, correct, judge or merge anything. Greetings, filler and pure formatting are not \
statements.
- An answer that states nothing (an empty reply, a bare refusal) has no statements: return an \
empty list."""

_VERDICTS_INSTRUCTIONS = """\
You decide, statement by statement, whether the statements taken from an answer address the \
question that was asked.

Judge relevance only, never truth: a wrong statement that addresses the question is relevant.
- "yes": the statement directly helps answer the question.
- "unsure": the statement is about the question's topic but answers it only partly, \
indirectly or vaguely.
- "no": the statement does not help answer the question.

Give exactly one result per statement, in the order of the statements, each with a one-sentence \
reason."""

_REASON_INSTRUCTIONS = """\
You explain an answer-relevancy score to a developer reading it next to a trace, in two or \
three sentences. The score is the share of the answer's statements that address the question, \
counting statements judged "unsure" at a reduced weight. Say what raised or lowered the score, \
based on the verdicts given. Do not repeat the formula and do not judge truthfulness."""

_INLINE_REASON_FOCUS = """\
Say which statements address the question and which drift away from it; do not judge \
truthfulness."""


def verdicts_prompt(run: ScorerRun) -> str:
    """The analyze step's prompt: the question and the answer's statements."""
    statements = items_of(run, "statements")
    if not statements:
        raise NotScorable(
            "the judge found no statements in the output (an empty reply or a bare refusal)"
        )
    return (
        f"{data_block('question', run.input_text)}\n\n"
        f"{data_blocks('statement', statements)}\n\n"
        f"Judge each of the {len(statements)} statements above against the question. "
        f"Answer with exactly {len(statements)} results, in the same order."
    )


def check_verdicts(parsed: Any, run: ScorerRun) -> None:
    """One verdict per statement."""
    check_count(parsed.results, len(items_of(run, "statements")), "results", "statement")


def _checked_weight(uncertainty_weight: float) -> float:
    """``uncertainty_weight`` as a float, checked to be a number in [0, 1].

    Raises:
        ConfigurationError: it is not.
    """
    if (
        isinstance(uncertainty_weight, bool)
        or not isinstance(uncertainty_weight, (int, float))
        or not math.isfinite(uncertainty_weight)
        or not 0 <= uncertainty_weight <= 1
    ):
        raise ConfigurationError(
            f"uncertainty_weight must be a number in [0, 1], got {uncertainty_weight!r}"
        )
    return float(uncertainty_weight)


def _weighted_steps(
    weight: float,
) -> tuple[Callable[[ScorerRun], float], Callable[[ScorerRun], str]]:
    """The score and the reason prompt, with the weight ``weight`` of an ``unsure`` verdict."""

    def score(run: ScorerRun) -> float:
        assert run.analyze_result is not None
        verdicts = [r["result"] for r in run.analyze_result["results"]]
        yes = verdicts.count("yes")
        unsure = verdicts.count("unsure")
        return (yes + weight * unsure) / len(verdicts) * run.scale

    def reason_prompt(run: ScorerRun) -> str:
        assert run.analyze_result is not None
        judged = [
            {"statement": s, "result": r["result"], "reason": r["reason"]}
            for s, r in zip(
                items_of(run, "statements"), run.analyze_result["results"], strict=True
            )
        ]
        return explained(
            run,
            data_block("question", run.input_text),
            data_block("answer", run.output_text),
            json_block("verdicts", judged),
            note=f" (an unsure verdict counts {weight:g})",
        )

    return score, reason_prompt


def create_answer_relevancy_scorer(
    *,
    model: str | Judge | None = None,
    uncertainty_weight: float = 0.3,
    scale: float = 1,
    reason: ReasonMode = "step",
) -> Scorer:
    """Score how relevant an answer is to the question it replies to.

    Three judge calls: the answer is split into statements (``preprocess_step_result``:
    ``{"statements": [...]}``); each statement is judged ``yes``/``unsure``/``no`` on whether it
    addresses the question (``analyze_step_result``: ``{"results": [{"result", "reason"}]}``,
    one per statement, in order); then a reason is written (two calls with ``reason="inline"``).

    Score (from the Mastra evals' answer relevancy):
    ``(yes + uncertainty_weight * unsure) / statements * scale``, rounded to 2 decimals half up.

    Not scorable (no score, no judge call): an empty output, or an input without a question.
    Not scorable after the first call: the judge found no statements in the output.

    Args:
        model: the judge: a litellm model string, a ``tracescore.Judge``, or ``None`` for the
            configured judge (``configure(judge=...)``, else ``TRACESCORE_JUDGE_MODEL``).
        uncertainty_weight: weight of an ``unsure`` verdict, in [0, 1]. Default 0.3.
        scale: maximum score, > 0. Default 1.
        reason: ``"step"`` (default): the reason is written in a third call that sees the
            score; ``"inline"``: the verdicts call also writes it, before the score is known,
            as a summary of the verdicts (two calls; same score; see ``Scorer``).

    Returns:
        A ``Scorer`` with id ``answer-relevancy``.

    Raises:
        ConfigurationError: an option is out of range or ``model`` is invalid.

    Examples:
        >>> scorer = create_answer_relevancy_scorer(model="openai/gpt-4o-mini")
        >>> result = scorer.run(input="What is the capital of France?",
        ...                     output="Paris is the capital of France.")  # doctest: +SKIP
        >>> result.score  # doctest: +SKIP
        1.0
    """
    weight = _checked_weight(uncertainty_weight)
    check_scale(scale)
    score, reason_prompt = _weighted_steps(weight)
    return judge_scorer(
        id=SCORER_ID,
        description="How much of the answer addresses the question (relevance, not truth).",
        model=model,
        requires=("input", "output"),
        scale=scale,
        preprocess=JudgePrompt(
            instructions=_STATEMENTS_INSTRUCTIONS,
            prompt=lambda run: (
                f"{data_block('answer', run.output_text)}\n\n"
                "List the statements the answer above makes."
            ),
            output_schema=Statements,
            name="answer_relevancy_statements",
        ),
        analyze=JudgePrompt(
            instructions=_VERDICTS_INSTRUCTIONS,
            prompt=verdicts_prompt,
            output_schema=StatementVerdicts,
            name="answer_relevancy_verdicts",
            validate=check_verdicts,
        ),
        generate_score=score,
        reason_instructions=_REASON_INSTRUCTIONS,
        reason_prompt=reason_prompt,
        reason=reason,
        inline_focus=_INLINE_REASON_FOCUS,
        options={"uncertainty_weight": weight, "scale": float(scale)},
    )
