"""Context precision against the loopback judge: MAP, context precedence, not-scorable, errors."""

from __future__ import annotations

from typing import Any

import pytest

from tracescore import ConfigurationError, InvalidJudgeOutputError, Judge, ScorerError
from tracescore.scorers import create_context_precision_scorer
from tracescore.scorers.context_precision import mean_average_precision
from tracescore.testing import ScriptedJudge as JudgeServer

QUESTION = "What are the benefits of exercise?"
ANSWER = "Exercise strengthens the heart and reduces stress."
CONTEXT = [
    "Exercise strengthens the heart and improves circulation.",
    "A balanced diet is important for health.",
    "Regular physical activity reduces stress and anxiety.",
    "Exercise equipment can be expensive.",
]


def verdicts(*values: str) -> dict[str, Any]:
    return {
        "verdicts": [
            {"context_index": i, "verdict": v, "reason": f"piece {i}"} for i, v in enumerate(values)
        ]
    }


def script(server: JudgeServer, analyze: Any) -> None:
    server.route("context_precision_verdicts", analyze)
    server.route("context_precision_reason", {"reason": "Relevant pieces come first and third."})


def test_seed_example_scores_0_83(judge_server: JudgeServer, judge: Judge) -> None:
    script(judge_server, verdicts("yes", "no", "yes", "no"))
    scorer = create_context_precision_scorer(model=judge, context=CONTEXT)

    result = scorer.run(input=QUESTION, output=ANSWER)

    assert result.score == 0.83  # (1/1 + 2/3) / 2
    assert result.reason == "Relevant pieces come first and third."
    assert result.preprocess_step_result is None and result.preprocess_prompt is None
    assert result.analyze_step_result == verdicts("yes", "no", "yes", "no")
    assert result.judge_calls == 2
    assert judge_server.schema_names == ["context_precision_verdicts", "context_precision_reason"]
    prompt = result.analyze_prompt or ""
    positions = [
        prompt.index(f'<context index="{i}">\n{piece}\n</context>')
        for i, piece in enumerate(CONTEXT)
    ]
    assert positions == sorted(positions)
    assert f"<question>\n{QUESTION}\n</question>" in prompt
    assert f"<answer>\n{ANSWER}\n</answer>" in prompt
    assert "Score: 0.83 out of 1" in (result.generate_reason_prompt or "")


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["yes", "no", "yes", "no"], (1 + 2 / 3) / 2),
        (["no", "yes"], 0.5),
        (["yes"], 1.0),
        (["no", "no", "no"], 0.0),
        ([], 0.0),
        (["no", "no", "yes", "yes"], (1 / 3 + 2 / 4) / 2),
    ],
)
def test_mean_average_precision(values: list[str], expected: float) -> None:
    assert mean_average_precision(values) == pytest.approx(expected)


def test_scale_and_no_relevant_piece(judge_server: JudgeServer, judge: Judge) -> None:
    scorer = create_context_precision_scorer(model=judge, context=CONTEXT, scale=2)
    script(judge_server, verdicts("yes", "no", "yes", "no"))
    assert scorer.run(input=QUESTION, output=ANSWER).score == 1.67
    judge_server.reset()
    judge.cache_clear()  # the same requests again must reach the server
    script(judge_server, verdicts(" NO", "No", "no", "no "))
    assert scorer.run(input=QUESTION, output=ANSWER).score == 0.0


def test_context_precedence(judge_server: JudgeServer, judge: Judge) -> None:
    script(
        judge_server,
        lambda body: verdicts(*["yes"] * body["messages"][1]["content"].count("</context>")),
    )
    seen: list[tuple[Any, Any]] = []

    def extractor(input: Any, output: Any) -> list[str]:
        seen.append((input, output))
        return ["from the extractor"]

    with_extractor = create_context_precision_scorer(
        model=judge, context=["from the factory"], context_extractor=extractor
    )
    with_context = create_context_precision_scorer(model=judge, context=["from the factory"])
    bare = create_context_precision_scorer(model=judge)

    def prompt_of(scorer: Any) -> str:
        result = scorer.run(input=QUESTION, output=ANSWER, context=["from the run"])
        assert result.score == 1.0
        return str(result.analyze_prompt)

    assert "from the extractor" in prompt_of(with_extractor)
    assert seen == [(QUESTION, ANSWER)]
    assert "from the factory" in prompt_of(with_context)
    assert "from the run" in prompt_of(bare)
    assert with_extractor.has_own_context and with_context.has_own_context
    assert not bare.has_own_context
    assert bare.uses_context and bare.uses_judge


def test_documents_as_context(judge_server: JudgeServer, judge: Judge) -> None:
    script(judge_server, verdicts("yes", "no", "yes"))

    class Doc:
        page_content = "An object with page_content."

    result = create_context_precision_scorer(model=judge).run(
        input=[{"role": "user", "content": QUESTION}],
        output=[{"role": "assistant", "content": ANSWER}],
        context=[
            {"id": "d1", "content": "A dict with content."},
            {"text": "A dict with text."},
            Doc(),
        ],
    )

    prompt = result.analyze_prompt or ""
    for text in ("A dict with content.", "A dict with text.", "An object with page_content."):
        assert text in prompt
    assert result.score == 0.83


@pytest.mark.parametrize("context", [None, [], ["", "  "]])
def test_empty_context_is_not_scorable_without_a_judge_call(
    judge_server: JudgeServer, judge: Judge, context: Any
) -> None:
    result = create_context_precision_scorer(model=judge).run(
        input=QUESTION, output=ANSWER, context=context
    )

    assert result.score is None and result.not_scorable is True
    assert "context is empty" in result.reason
    assert judge_server.requests == []


def test_empty_extracted_context_is_not_scorable(judge_server: JudgeServer, judge: Judge) -> None:
    scorer = create_context_precision_scorer(model=judge, context_extractor=lambda i, o: [])
    result = scorer.run(input=QUESTION, output=ANSWER, context=CONTEXT)
    assert result.not_scorable is True
    assert judge_server.requests == []


def test_empty_output_is_not_scorable(judge_server: JudgeServer, judge: Judge) -> None:
    result = create_context_precision_scorer(model=judge, context=CONTEXT).run(
        input=QUESTION, output={"text": " "}
    )
    assert result.not_scorable is True and "output is empty" in result.reason
    assert judge_server.requests == []


def test_verdict_count_mismatch_is_invalid_after_one_repair(
    judge_server: JudgeServer, judge: Judge
) -> None:
    script(judge_server, verdicts("yes", "no"))

    with pytest.raises(InvalidJudgeOutputError) as info:
        create_context_precision_scorer(model=judge, context=CONTEXT).run(
            input=QUESTION, output=ANSWER
        )

    assert "expected 4 verdicts" in str(info.value)
    assert judge_server.schema_names == ["context_precision_verdicts"] * 2


def indexed(*pairs: tuple[int, str]) -> dict[str, Any]:
    """Verdicts in the order given, each with its own context_index."""
    return {
        "verdicts": [{"context_index": i, "verdict": v, "reason": f"piece {i}"} for i, v in pairs]
    }


def test_verdicts_out_of_order_are_scored_in_context_order(
    judge_server: JudgeServer, judge: Judge
) -> None:
    # By context index the verdicts are [yes, no, no, yes]: MAP = (1/1 + 2/4) / 2 = 0.75, which
    # is what Mastra gives (it sorts by context_index). Read in the order received,
    # [no, yes, yes, no], they would give (1/2 + 2/3) / 2 = 0.583 -> 0.58.
    script(judge_server, indexed((1, "no"), (0, "yes"), (3, "yes"), (2, "no")))

    result = create_context_precision_scorer(model=judge, context=CONTEXT).run(
        input=QUESTION, output=ANSWER
    )

    assert result.score == 0.75
    assert judge_server.schema_names == ["context_precision_verdicts", "context_precision_reason"]
    # The reason step sees the verdicts in context order.
    reason_prompt = result.generate_reason_prompt or ""
    assert [reason_prompt.index(f"piece {i}") for i in range(4)] == sorted(
        reason_prompt.index(f"piece {i}") for i in range(4)
    )


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        (((0, "yes"), (1, "no"), (1, "yes"), (3, "no")), "context_index 1 appears twice"),
        (((0, "yes"), (1, "no"), (2, "yes"), (4, "no")), "context_index 4 is out of range"),
        (((0, "yes"), (1, "no"), (2, "yes"), (-1, "no")), "context_index -1 is out of range"),
    ],
    ids=["duplicate", "out-of-range", "negative"],
)
def test_bad_context_indices_are_invalid_after_one_repair(
    judge_server: JudgeServer, judge: Judge, pairs: tuple[tuple[int, str], ...], message: str
) -> None:
    script(judge_server, indexed(*pairs))

    with pytest.raises(InvalidJudgeOutputError) as info:
        create_context_precision_scorer(model=judge, context=CONTEXT).run(
            input=QUESTION, output=ANSWER
        )

    assert info.value.error_type == "invalid_judge_output"
    assert message in str(info.value)
    assert judge_server.schema_names == ["context_precision_verdicts"] * 2


def test_missing_context_index_is_invalid_after_one_repair(
    judge_server: JudgeServer, judge: Judge
) -> None:
    answer = verdicts("yes", "no", "yes", "no")
    del answer["verdicts"][2]["context_index"]
    script(judge_server, answer)

    with pytest.raises(InvalidJudgeOutputError):
        create_context_precision_scorer(model=judge, context=CONTEXT).run(
            input=QUESTION, output=ANSWER
        )

    assert judge_server.schema_names == ["context_precision_verdicts"] * 2


def test_a_repaired_answer_is_scored(judge_server: JudgeServer, judge: Judge) -> None:
    script(
        judge_server,
        [indexed((0, "yes"), (0, "no"), (2, "yes"), (3, "no")), verdicts("yes", "no", "yes", "no")],
    )

    result = create_context_precision_scorer(model=judge, context=CONTEXT).run(
        input=QUESTION, output=ANSWER
    )

    assert result.score == 0.83
    assert judge_server.schema_names == ["context_precision_verdicts"] * 2 + [
        "context_precision_reason"
    ]


def test_failing_extractor_is_a_scorer_error(judge_server: JudgeServer, judge: Judge) -> None:
    def extractor(input: Any, output: Any) -> list[str]:
        raise KeyError("documents")

    scorer = create_context_precision_scorer(model=judge, context_extractor=extractor)
    with pytest.raises(ScorerError) as info:
        scorer.run(input=QUESTION, output=ANSWER)

    assert info.value.error_type == "scorer_error"
    assert isinstance(info.value.__cause__, KeyError)
    assert judge_server.requests == []


def test_options_merge_with_defaults() -> None:
    assert create_context_precision_scorer(scale=3).options == {
        "context": None,
        "context_extractor": None,
        "scale": 3.0,
    }
    assert create_context_precision_scorer(context=("a",)).options["scale"] == 1.0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"context": "a single string"},
        {"context": 42},
        {"context_extractor": "not callable"},
        {"scale": 0},
        {"model": ""},
    ],
)
def test_invalid_options_fail_early(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        create_context_precision_scorer(**kwargs)
