"""The opt-in inline reason: the analyze call writes the reason, one judge call fewer."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from tracescore import ConfigurationError, InvalidJudgeOutputError
from tracescore.scorers import (
    JudgePrompt,
    create_answer_relevancy_scorer,
    create_context_precision_scorer,
    create_scorer,
)
from tracescore.scorers._base import INLINE_REASON_REQUEST, check_reason_mode
from tracescore.testing import ScriptedJudge as JudgeServer
from tracescore.testing import make_judge

QUESTION = "What should a healthy breakfast include?"
ANSWER = (
    "A healthy breakfast includes whole grains and protein. Fruit adds fibre. "
    "Breakfast timing matters for some people. The Eiffel Tower is in Paris."
)
STATEMENTS = [
    "A healthy breakfast includes whole grains and protein.",
    "Fruit adds fibre.",
    "Breakfast timing matters for some people.",
    "The Eiffel Tower is in Paris.",
]
CONTEXT = [
    "Whole grains and protein keep you full.",
    "The Eiffel Tower is 330 m tall.",
    "Fruit is a good source of fibre.",
    "Cats sleep most of the day.",
]
INLINE_REASON = "Three statements are about breakfast; the Eiffel Tower one is off topic."


def relevancy_verdicts(*results: str, reason: str | None = None) -> dict[str, Any]:
    reply: dict[str, Any] = {
        "results": [{"result": r, "reason": f"verdict {i}"} for i, r in enumerate(results)]
    }
    if reason is not None:
        reply["reason"] = reason
    return reply


def precision_verdicts(*values: str, reason: str | None = None) -> dict[str, Any]:
    reply: dict[str, Any] = {
        "verdicts": [
            {"context_index": i, "verdict": v, "reason": f"piece {i}"} for i, v in enumerate(values)
        ]
    }
    if reason is not None:
        reply["reason"] = reason
    return reply


def script_relevancy(server: JudgeServer, verdicts: Any) -> None:
    server.route("answer_relevancy_statements", {"statements": STATEMENTS})
    server.route("answer_relevancy_verdicts", verdicts)
    server.route("answer_relevancy_reason", {"reason": "Mostly on topic (step)."})


def schema_properties(request: dict[str, Any]) -> dict[str, Any]:
    schema = request["response_format"]["json_schema"]["schema"]
    properties: dict[str, Any] = schema["properties"]
    return properties


def test_answer_relevancy_inline_drops_a_call_and_keeps_the_score(
    judge_server: JudgeServer,
) -> None:
    # Step mode first: 3 calls; (2 + 0.3 * 1) / 4 = 0.575 -> 0.58.
    script_relevancy(judge_server, relevancy_verdicts("yes", "yes", "unsure", "no"))
    step = create_answer_relevancy_scorer(model=make_judge(judge_server)).run(
        input=QUESTION, output=ANSWER
    )
    assert (step.score, step.judge_calls, step.reason) == (0.58, 3, "Mostly on topic (step).")

    judge_server.reset()
    script_relevancy(
        judge_server, relevancy_verdicts("yes", "yes", "unsure", "no", reason=INLINE_REASON)
    )
    # A judge of its own: no answer can come from the step-mode judge's request cache.
    scorer = create_answer_relevancy_scorer(model=make_judge(judge_server), reason="inline")
    inline = scorer.run(input=QUESTION, output=ANSWER)

    assert inline.score == step.score == 0.58
    assert inline.judge_calls == 2
    assert judge_server.schema_names == ["answer_relevancy_statements", "answer_relevancy_verdicts"]
    assert inline.reason == INLINE_REASON
    # The analyze step result keeps its usual shape: the reason moved to ScoreResult.reason.
    assert inline.analyze_step_result == step.analyze_step_result
    assert inline.preprocess_step_result == step.preprocess_step_result
    assert inline.analyze_prompt == step.analyze_prompt
    assert inline.generate_reason_prompt is None
    assert inline.input_tokens < step.input_tokens
    # The verdicts request asks for the reason, after the verdicts.
    verdicts_request = judge_server.requests[1]
    assert list(schema_properties(verdicts_request)) == ["results", "reason"]
    system = verdicts_request["messages"][0]["content"]
    assert INLINE_REASON_REQUEST in system
    assert "do not judge truthfulness" in system.split(INLINE_REASON_REQUEST)[1]
    assert scorer.reason_in_analyze is True
    assert scorer.options == {"uncertainty_weight": 0.3, "scale": 1.0}


def test_context_precision_inline_drops_a_call_and_keeps_the_score(
    judge_server: JudgeServer,
) -> None:
    # Step mode: 2 calls; MAP of [yes, no, yes, no] = (1 + 2/3) / 2 -> 0.83.
    judge_server.route("context_precision_verdicts", precision_verdicts("yes", "no", "yes", "no"))
    judge_server.route("context_precision_reason", {"reason": "Step reason."})
    step = create_context_precision_scorer(model=make_judge(judge_server), context=CONTEXT).run(
        input=QUESTION, output=ANSWER
    )
    assert (step.score, step.judge_calls) == (0.83, 2)

    judge_server.reset()
    judge_server.route(
        "context_precision_verdicts",
        precision_verdicts("yes", "no", "yes", "no", reason="Pieces 0 and 2 are useful."),
    )
    scorer = create_context_precision_scorer(
        model=make_judge(judge_server), context=CONTEXT, reason="inline"
    )
    inline = scorer.run(input=QUESTION, output=ANSWER)

    assert inline.score == step.score == 0.83
    assert inline.judge_calls == 1
    assert judge_server.schema_names == ["context_precision_verdicts"]
    assert inline.reason == "Pieces 0 and 2 are useful."
    assert inline.analyze_step_result == step.analyze_step_result
    assert inline.generate_reason_prompt is None
    assert list(schema_properties(judge_server.requests[0])) == ["verdicts", "reason"]
    assert "(by index)" in judge_server.requests[0]["messages"][0]["content"]


def test_blank_or_missing_inline_reason_gets_one_repair(judge_server: JudgeServer) -> None:
    script_relevancy(
        judge_server,
        [
            relevancy_verdicts("yes", "yes", "yes", "yes", reason="   "),
            relevancy_verdicts("yes", "yes", "yes", "yes", reason="All on topic."),
        ],
    )
    scorer = create_answer_relevancy_scorer(model=make_judge(judge_server), reason="inline")

    result = scorer.run(input=QUESTION, output=ANSWER)

    assert (result.score, result.reason) == (1.0, "All on topic.")
    assert result.judge_calls == 3  # statements, verdicts, verdicts repaired
    repair = judge_server.requests[2]["messages"][-1]["content"]
    assert 'the "reason" field is empty' in repair

    judge_server.reset()
    # A step-mode answer (no reason at all), twice: invalid after one repair.
    script_relevancy(judge_server, relevancy_verdicts("yes", "yes", "yes", "yes"))
    with pytest.raises(InvalidJudgeOutputError, match="reason"):
        create_answer_relevancy_scorer(model=make_judge(judge_server), reason="inline").run(
            input=QUESTION, output=ANSWER
        )
    assert judge_server.count("answer_relevancy_verdicts") == 2


def test_the_scorer_own_validation_still_applies(judge_server: JudgeServer) -> None:
    script_relevancy(judge_server, relevancy_verdicts("yes", "no", reason=INLINE_REASON))

    with pytest.raises(InvalidJudgeOutputError, match="expected 4 results"):
        create_answer_relevancy_scorer(model=make_judge(judge_server), reason="inline").run(
            input=QUESTION, output=ANSWER
        )
    assert judge_server.count("answer_relevancy_verdicts") == 2


def test_not_scorable_before_analyze_keeps_its_reason(judge_server: JudgeServer) -> None:
    judge_server.route("answer_relevancy_statements", {"statements": []})

    result = create_answer_relevancy_scorer(model=make_judge(judge_server), reason="inline").run(
        input=QUESTION, output="I can't help with that."
    )

    assert result.not_scorable is True and "no statements" in result.reason
    assert result.judge_calls == 1


def test_inline_reason_with_create_scorer(judge_server: JudgeServer) -> None:
    class Polite(BaseModel):
        polite: bool

    judge_server.route("politeness_analyze", {"polite": True, "reason": "It says please."})
    scorer = create_scorer(
        id="politeness",
        model=make_judge(judge_server),
        analyze=JudgePrompt(
            instructions="Decide whether the answer is polite.",
            prompt="{output}",
            output_schema=Polite,
        ),
        generate_score=lambda run: 1.0 if run.analyze_result["polite"] else 0.0,
        reason_in_analyze=True,
    )

    result = scorer.run(output="Please find the report attached.")

    assert (result.score, result.reason, result.judge_calls) == (1.0, "It says please.", 1)
    assert result.analyze_step_result == {"polite": True}
    system = judge_server.requests[0]["messages"][0]["content"]
    assert system.startswith("Decide whether the answer is polite.\n\n" + INLINE_REASON_REQUEST)
    assert list(schema_properties(judge_server.requests[0])) == ["polite", "reason"]


class _HasReason(BaseModel):
    reason: str


class _Plain(BaseModel):
    ok: bool


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"analyze": lambda run: {"ok": True}}, "needs an analyze step that is a JudgePrompt"),
        ({}, "needs an analyze step"),
        (
            {
                "analyze": JudgePrompt(instructions="x", prompt="{output}", output_schema=_Plain),
                "generate_reason": lambda run: "why",
            },
            "replaces generate_reason",
        ),
        (
            {"analyze": JudgePrompt(instructions="x", prompt="{output}", output_schema=_HasReason)},
            "already has a 'reason' field",
        ),
        (
            {
                "analyze": JudgePrompt(instructions="x", prompt="{output}", output_schema=_Plain),
                "reason_in_analyze": "  ",
            },
            "non-empty",
        ),
        (
            {
                "analyze": JudgePrompt(instructions="x", prompt="{output}", output_schema=_Plain),
                "reason_in_analyze": 1,
            },
            "non-empty",
        ),
    ],
)
def test_invalid_inline_configurations_fail_early(kwargs: dict[str, Any], match: str) -> None:
    options: dict[str, Any] = {"reason_in_analyze": True, **kwargs}
    with pytest.raises(ConfigurationError, match=match):
        create_scorer(id="x", generate_score=lambda run: 1.0, **options)


def test_reason_option_of_the_factories() -> None:
    assert check_reason_mode("step") is False and check_reason_mode("inline") is True
    for factory in (create_answer_relevancy_scorer, create_context_precision_scorer):
        assert factory().reason_in_analyze is False
        assert factory(reason="inline").reason_in_analyze is True
        for bad in ("Inline", "", None, True):
            with pytest.raises(ConfigurationError, match='reason must be "step"'):
                factory(reason=bad)
