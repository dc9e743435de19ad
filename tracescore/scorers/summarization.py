"""Summarization: is a summary faithful to its source (alignment) and does it cover it (coverage)?

Semantics follow the Mastra evals' summarization scorer; prompts and code are
tracescore's own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field, field_validator

from tracescore._core.errors import ConfigurationError
from tracescore._judge import Judge
from tracescore.scorers._base import JudgePrompt, NotScorable, Scorer, ScorerRun, check_scale
from tracescore.scorers._preset import explained, json_block, judge_scorer
from tracescore.scorers._prompt import data_block, data_blocks
from tracescore.scorers._rounding import round_half_up
from tracescore.scorers._text import plain_text
from tracescore.scorers._verdicts import YesNo

__all__ = ["create_summarization_scorer"]

SCORER_ID = "summarization"


class SummaryClaim(BaseModel):
    """One claim of the summary, checked against the source."""

    claim: str = Field(description="A self-contained claim the summary makes.")
    supported: YesNo = Field(description='"yes" if the source fully supports it, else "no".')
    reason: str = Field(description="Why, in one sentence.")


class ClaimsAndQuestionsBase(BaseModel):
    """Preprocess answer: the summary's claims, judged, and closed questions on the source."""

    claims: list[SummaryClaim]
    questions: list[str] = Field(
        description="Closed questions about the source's key points, each answered yes by it."
    )

    @field_validator("claims")
    @classmethod
    def _drop_blank_claims(cls, value: list[SummaryClaim]) -> list[SummaryClaim]:
        return [c for c in value if c.claim.strip()]


def _claims_schema(max_questions: int) -> type[ClaimsAndQuestionsBase]:
    """The preprocess schema for one scorer: keeps at most ``max_questions`` questions."""

    class ClaimsAndQuestions(ClaimsAndQuestionsBase):
        """Preprocess answer: the summary's claims, judged, and closed questions on the source."""

        @field_validator("questions")
        @classmethod
        def _first_questions(cls, value: list[str]) -> list[str]:
            # A judge that writes a few questions too many should not fail the score: the
            # first ones are kept (the prompt asks for the most important first).
            return [q.strip() for q in value if q.strip()][:max_questions]

    return ClaimsAndQuestions


class QuestionAnswer(BaseModel):
    """One question's answer from the summary alone."""

    answer: YesNo = Field(
        description='"yes" if the summary alone answers the question with yes, else "no".'
    )
    reason: str = Field(description="Why, in one sentence.")


class QuestionAnswers(BaseModel):
    """Analyze answer: one answer per question, in order."""

    answers: list[QuestionAnswer]


_CLAIMS_INSTRUCTIONS = """\
You evaluate a summary against the source text it summarises, strictly. Do two things.

1. Split the summary into the self-contained claims it makes and check each against the \
source: "yes" only when the source fully supports the claim; "no" when the source contradicts \
it, does not mention it, or says something less certain, less specific or different (changed \
numbers, names, dates, causes, or an overgeneralisation).

2. Write up to {max_questions} closed questions about the most important points of the \
source, most important first, each one that the source answers with "yes". They will be used \
to check whether the summary covers the source, so they must be answerable from the source \
alone and must not be copied from the summary.

A summary that makes no claim (empty, a refusal) has no claims: return an empty list."""

_ANSWERS_INSTRUCTIONS = """\
You check what a summary covers. For each question, decide from the summary alone, without \
any outside knowledge: "yes" if the summary states or clearly implies that the answer is yes; \
"no" if the summary does not say, or says otherwise.

Give exactly one answer per question, in the order of the questions, each with a one-sentence \
reason."""

_REASON_INSTRUCTIONS = """\
You explain a summarization score to a developer reading it next to a trace, in two or three \
sentences. The score is the lower of two shares: alignment (the summary's claims supported by \
the source) and coverage (the source's key questions the summary answers). Say which of the \
two limited the score, naming unsupported claims or uncovered points from the verdicts given. \
Do not repeat the formula."""


def _claims_prompt_step(source: str | None, max_questions: int) -> Callable[[ScorerRun], str]:
    """The first step's prompt, with the factory's ``source`` and ``max_questions``."""

    def source_of(run: ScorerRun) -> str:
        given = run.extra.get("source")
        for candidate in (
            plain_text(given) if given is not None else "",
            source or "",
            run.input_text,
        ):
            if candidate.strip():
                return candidate
        raise NotScorable(
            "the source is empty: pass source=... to run() or the factory, or the text to "
            "summarise as the input"
        )

    def claims_prompt(run: ScorerRun) -> str:
        return (
            f"{data_block('source', source_of(run))}\n\n"
            f"{data_block('summary', run.output_text)}\n\n"
            "List and check the claims of the summary above against the source, then write up "
            f"to {max_questions} closed questions about the source's key points."
        )

    return claims_prompt


def _judged_steps() -> tuple[
    Callable[[ScorerRun], str], Callable[[QuestionAnswers, ScorerRun], None],
    Callable[[ScorerRun], float], Callable[[ScorerRun], str],
]:
    """The answers prompt, its check, the score and the reason prompt, which share the
    helpers reading the first step's claims and questions."""

    def claims_of(run: ScorerRun) -> list[dict[str, Any]]:
        assert run.preprocess_result is not None
        claims: list[dict[str, Any]] = run.preprocess_result["claims"]
        return claims

    def questions_of(run: ScorerRun) -> list[str]:
        assert run.preprocess_result is not None
        questions: list[str] = run.preprocess_result["questions"]
        return questions

    def answers_prompt(run: ScorerRun) -> str:
        if not claims_of(run):
            raise NotScorable(
                "the judge found no claims in the summary (an empty reply or a refusal)"
            )
        questions = questions_of(run)
        if not questions:
            raise NotScorable(
                "the judge wrote no questions about the source: its coverage cannot be checked"
            )
        return (
            f"{data_block('summary', run.output_text)}\n\n"
            f"{data_blocks('question', questions)}\n\n"
            f"Answer each of the {len(questions)} questions above from the summary alone. "
            f"Answer with exactly {len(questions)} answers, in the same order."
        )

    def check_answers(parsed: QuestionAnswers, run: ScorerRun) -> None:
        expected = len(questions_of(run))
        if len(parsed.answers) != expected:
            raise ValueError(
                f"expected {expected} answers, one per question in order, got {len(parsed.answers)}"
            )

    def shares(run: ScorerRun) -> tuple[float, float]:
        assert run.analyze_result is not None
        claims = claims_of(run)
        answers = run.analyze_result["answers"]
        alignment = sum(1 for c in claims if c["supported"] == "yes") / len(claims)
        coverage = sum(1 for a in answers if a["answer"] == "yes") / len(answers)
        return alignment, coverage

    def score(run: ScorerRun) -> float:
        return min(shares(run)) * run.scale

    def reason_prompt(run: ScorerRun) -> str:
        assert run.analyze_result is not None
        alignment, coverage = shares(run)
        answered = [
            {"question": q, "answer": a["answer"], "reason": a["reason"]}
            for q, a in zip(questions_of(run), run.analyze_result["answers"], strict=True)
        ]
        return explained(
            run,
            json_block("claims", claims_of(run)),
            json_block("coverage", answered),
            lead=f"Alignment: {_fmt(alignment)}; coverage: {_fmt(coverage)}. ",
        )

    return answers_prompt, check_answers, score, reason_prompt


def create_summarization_scorer(
    *,
    model: str | Judge | None = None,
    source: str | None = None,
    max_questions: int = 10,
    scale: float = 1,
) -> Scorer:
    """Score a summary: faithful to its source (alignment) and covering it (coverage).

    The ``output`` is the summary. The source is ``run(source=...)``, else the factory's
    ``source=``, else the input (its first user message). Three judge calls: the summary's
    claims are listed and each checked against the source (``supported`` ``yes``/``no``), and
    up to ``max_questions`` closed questions that the source answers "yes" are written
    (``preprocess_step_result``: ``{"claims": [{"claim", "supported", "reason"}],
    "questions": [...]}``; questions beyond ``max_questions`` are dropped); each question is
    then answered from the summary alone (``analyze_step_result``:
    ``{"answers": [{"answer", "reason"}]}``, one per question, in order); then a reason is
    written.

    Score (from the Mastra evals' summarization):
    ``min(alignment, coverage) * scale`` where alignment is supported claims / claims and
    coverage is questions answered "yes" / questions; rounded to 2 decimals half up.

    Not scorable: an empty output or an empty source (no judge call); no claims in the summary
    or no questions from the source (after the first call).

    Args:
        model: the judge: a litellm model string, a ``tracescore.Judge``, or ``None`` for the
            configured judge (``configure(judge=...)``, else ``TRACESCORE_JUDGE_MODEL``).
        source: a fixed source text for every run.
        max_questions: most questions written about the source, >= 1. Default 10.
        scale: maximum score, > 0. Default 1.

    Returns:
        A ``Scorer`` with id ``summarization``.

    Raises:
        ConfigurationError: an option is invalid or ``model`` is invalid.

    Examples:
        >>> scorer = create_summarization_scorer(model="openai/gpt-4o-mini")
        >>> scorer.run(input="<the report's full text>",
        ...            output="<its summary>").score  # doctest: +SKIP
        0.8
    """
    if source is not None and not isinstance(source, str):
        raise ConfigurationError(f"source must be a string or None, got {type(source).__name__}")
    if isinstance(max_questions, bool) or not isinstance(max_questions, int) or max_questions < 1:
        raise ConfigurationError(f"max_questions must be an integer >= 1, got {max_questions!r}")
    check_scale(scale)

    answers_prompt, check_answers, score, reason_prompt = _judged_steps()
    return judge_scorer(
        id=SCORER_ID,
        description="Whether the summary is faithful to its source and covers its key points.",
        model=model,
        requires=("output",),
        scale=scale,
        preprocess=JudgePrompt(
            instructions=_CLAIMS_INSTRUCTIONS.format(max_questions=max_questions),
            prompt=_claims_prompt_step(source, max_questions),
            output_schema=_claims_schema(max_questions),
            name="summarization_claims",
        ),
        analyze=JudgePrompt(
            instructions=_ANSWERS_INSTRUCTIONS,
            prompt=answers_prompt,
            output_schema=QuestionAnswers,
            name="summarization_answers",
            validate=check_answers,
        ),
        generate_score=score,
        reason_instructions=_REASON_INSTRUCTIONS,
        reason_prompt=reason_prompt,
        options={"source": source, "max_questions": max_questions, "scale": float(scale)},
    )


def _fmt(share: float) -> str:
    # Shares such as 2/3 read better as 0.67 than as 0.6666666666666666.
    return f"{round_half_up(share):g}"
