"""The ``tracescore-v1`` and ``tracescore-v2`` prompt sets of faithfulness and hallucination,
against the loopback judge. v1: the question reaches the claims step, one support verdict per
claim serves both scorers (the judge's cache answers the second), the reason comes with the
verdicts. v2: hallucination sends faithfulness's own claims and verdict requests and scores the
unsupported share. The default set is untouched."""

from __future__ import annotations

from typing import Any

import pytest

from tracescore import ConfigurationError, InvalidJudgeOutputError, Judge
from tracescore.scorers import create_faithfulness_scorer, create_hallucination_scorer
from tracescore.testing import ScriptedJudge as JudgeServer
from tracescore.testing import make_judge

CONTEXT = ["The Oberoi Group is a hotel company with its head office in Delhi."]
QUESTION = "The Oberoi family is part of a hotel company that has a head office in what city?"
CLAIMS = ["The Oberoi Group's head office is in Mumbai.", "Mumbai is India's financial capital."]


def support(*values: str) -> dict[str, Any]:
    return {
        "verdicts": [{"claim_index": i, "evidence": "none", "verdict": v}
                     for i, v in enumerate(values)],
        "reason": "The context places the head office in Delhi.",
    }


def script(server: JudgeServer, *values: str) -> None:
    server.route("answer_claims_v1", {"claims": CLAIMS})
    server.route("claim_support_v1", support(*values))


def test_v1_faithfulness_reads_the_question_and_makes_two_calls(
    judge_server: JudgeServer, judge: Judge
) -> None:
    script(judge_server, "no", "unsure")
    scorer = create_faithfulness_scorer(model=judge, prompt_set="tracescore-v1")

    result = scorer.run(input=QUESTION, output="Mumbai, the financial capital of India.",
                        context=CONTEXT)

    assert result.score == 0.0
    assert result.judge_calls == 2
    assert judge_server.schema_names == ["answer_claims_v1", "claim_support_v1"]
    assert f"<question>\n{QUESTION}\n</question>" in (result.preprocess_prompt or "")
    assert result.reason == "The context places the head office in Delhi."
    assert result.analyze_step_result == {
        "verdicts": [{"claim_index": 0, "evidence": "none", "verdict": "no"},
                     {"claim_index": 1, "evidence": "none", "verdict": "unsure"}]}


@pytest.mark.parametrize(
    ("values", "faithfulness", "hallucination"),
    [
        (("yes", "yes"), 1.0, 0.0),
        (("yes", "unsure"), 0.5, 0.5),  # unsupported counts as hallucinated
        (("no", "yes"), 0.5, 0.5),
        (("no", "unsure"), 0.0, 1.0),
    ],
)
def test_v1_hallucination_is_the_share_of_claims_not_supported(
    judge_server: JudgeServer, values: tuple[str, ...], faithfulness: float, hallucination: float
) -> None:
    script(judge_server, *values)
    judge = make_judge(judge_server, cache_size=8)
    faith = create_faithfulness_scorer(model=judge, prompt_set="tracescore-v1")
    hallu = create_hallucination_scorer(model=judge, prompt_set="tracescore-v1")

    first = faith.run(input=QUESTION, output="Mumbai.", context=CONTEXT)
    second = hallu.run(input=QUESTION, output="Mumbai.", context=CONTEXT)

    assert (first.score, second.score) == (faithfulness, hallucination)
    # Both scorers send the same two requests: the judge's cache answers the second scorer.
    assert (first.judge_calls, second.judge_calls) == (2, 0)
    assert len(judge_server.schema_names) == 2


def test_v1_without_a_question_still_scores(judge_server: JudgeServer, judge: Judge) -> None:
    script(judge_server, "yes", "yes")
    result = create_hallucination_scorer(model=judge, prompt_set="tracescore-v1").run(
        output="The Oberoi Group's head office is in Delhi.", context=CONTEXT)

    assert result.score == 0.0
    assert "<question>" not in (result.preprocess_prompt or "")


def test_default_prompt_set_is_unchanged(judge_server: JudgeServer, judge: Judge) -> None:
    judge_server.route("output_claims", {"claims": CLAIMS})
    judge_server.route("faithfulness_verdicts", {"verdicts": [
        {"claim_index": i, "verdict": "yes", "reason": "r"} for i in range(2)]})
    judge_server.route("faithfulness_reason", {"reason": "Supported."})

    result = create_faithfulness_scorer(model=judge, prompt_set="default").run(
        input=QUESTION, output="Mumbai.", context=CONTEXT)

    assert result.score == 1.0
    assert judge_server.schema_names == [
        "output_claims", "faithfulness_verdicts", "faithfulness_reason"]
    assert "<question>" not in (result.preprocess_prompt or "")


@pytest.mark.parametrize("factory", [create_faithfulness_scorer, create_hallucination_scorer])
def test_an_unknown_prompt_set_is_refused(factory: Any) -> None:
    with pytest.raises(ConfigurationError, match="prompt_set must be one of"):
        factory(model="openai/x", prompt_set="v2")


def entries(*pairs: tuple[int, str]) -> dict[str, Any]:
    return {"verdicts": [{"claim_index": i, "evidence": f"passage {n}", "verdict": v}
                         for n, (i, v) in enumerate(pairs)],
            "reason": "r"}


@pytest.mark.parametrize(
    ("claims", "answer", "verdicts", "faithfulness"),
    [
        # one claim, a verdict per context passage (indices as the judge numbered them)
        (CLAIMS[:1], entries((0, "unsure"), (1, "yes")), ["yes"], 1.0),
        (CLAIMS[:1], entries((0, "yes"), (0, "no")), ["no"], 0.0),
        (CLAIMS[:1], entries((0, "unsure"), (0, "unsure")), ["unsure"], 0.0),
        # two claims, the first in two entries
        (CLAIMS, entries((0, "unsure"), (0, "yes"), (1, "no")), ["yes", "no"], 0.5),
    ],
)
def test_v1_merges_a_claims_entries_when_the_judge_splits_it(
    judge_server: JudgeServer, judge: Judge, claims: list[str], answer: dict[str, Any],
    verdicts: list[str], faithfulness: float
) -> None:
    judge_server.route("answer_claims_v1", {"claims": claims})
    judge_server.route("claim_support_v1", answer)

    result = create_faithfulness_scorer(model=judge, prompt_set="tracescore-v1").run(
        input=QUESTION, output="Mumbai.", context=CONTEXT)

    assert result.score == faithfulness
    assert result.judge_calls == 2  # read as answered: no repair retry
    got = (result.analyze_step_result or {})["verdicts"]
    assert [v["verdict"] for v in got] == verdicts
    assert [v["claim_index"] for v in got] == list(range(len(claims)))
    assert got[0]["evidence"].startswith("passage 0 / passage 1")


@pytest.mark.parametrize(
    "answer",
    [
        entries((0, "yes"), (2, "yes"), (1, "yes")),  # a claim that does not exist
        entries((0, "yes"), (0, "yes"), (0, "no")),   # the second claim has no verdict
        entries((0, "yes")),                          # too few
    ],
)
def test_v1_refuses_entries_that_cannot_be_matched_to_the_claims(
    judge_server: JudgeServer, judge: Judge, answer: dict[str, Any]
) -> None:
    judge_server.route("answer_claims_v1", {"claims": CLAIMS})
    judge_server.route("claim_support_v1", answer)

    with pytest.raises(InvalidJudgeOutputError, match="expected 2 verdicts"):
        create_faithfulness_scorer(model=judge, prompt_set="tracescore-v1").run(
            input=QUESTION, output="Mumbai.", context=CONTEXT)
    # the repair retry was asked
    assert judge_server.schema_names.count("claim_support_v1") == 2


def script_v2(server: JudgeServer, *values: str) -> None:
    server.route("output_claims", {"claims": CLAIMS})
    server.route("faithfulness_verdicts", {"verdicts": [
        {"claim_index": i, "verdict": v, "reason": "r"} for i, v in enumerate(values)]})
    server.route("faithfulness_reason", {"reason": "Faithfulness reason."})
    server.route("hallucination_reason_v2", {"reason": "Hallucination reason."})


@pytest.mark.parametrize(
    ("values", "hallucination"),
    [(("yes", "yes"), 0.0), (("yes", "unsure"), 0.5), (("no", "yes"), 0.5),
     (("no", "unsure"), 1.0)],
)
def test_v2_hallucination_asks_the_faithfulness_question(
    judge_server: JudgeServer, judge: Judge, values: tuple[str, ...], hallucination: float
) -> None:
    script_v2(judge_server, *values)

    result = create_hallucination_scorer(model=judge, prompt_set="tracescore-v2").run(
        input=QUESTION, output="Mumbai.", context=CONTEXT)

    assert result.score == hallucination
    assert result.judge_calls == 3
    assert judge_server.schema_names == [
        "output_claims", "faithfulness_verdicts", "hallucination_reason_v2"]
    assert result.reason == "Hallucination reason."
    # the reason prompt is given the support verdicts, and says lower is better
    assert "lower is better" in (result.generate_reason_prompt or "")
    assert [v["verdict"] for v in (result.analyze_step_result or {})["verdicts"]] == list(values)
    # tracescore-v2 is hallucination's default: its options do not name it
    assert "prompt_set" not in create_hallucination_scorer(
        model=judge, prompt_set="tracescore-v2").options


def test_v2_after_faithfulness_costs_one_call_with_a_caching_judge(
    judge_server: JudgeServer
) -> None:
    script_v2(judge_server, "yes", "no")
    judge = make_judge(judge_server, cache_size=8)

    faith = create_faithfulness_scorer(model=judge, prompt_set="tracescore-v2").run(
        output="Mumbai.", context=CONTEXT)
    hallu = create_hallucination_scorer(model=judge, prompt_set="tracescore-v2").run(
        output="Mumbai.", context=CONTEXT)

    assert (faith.score, hallu.score) == (0.5, 0.5)
    assert (faith.judge_calls, hallu.judge_calls) == (3, 1)
    # faithfulness under v2 is the default faithfulness
    assert judge_server.schema_names == [
        "output_claims", "faithfulness_verdicts", "faithfulness_reason",
        "hallucination_reason_v2"]


def test_v2_hallucination_rounds_the_exact_share(judge_server: JudgeServer, judge: Judge) -> None:
    # 3 of 40 claims unsupported at scale 7 is exactly 0.525: half up gives 0.53 (one minus
    # the supported share, 0.52499..., would round down)
    claims = [f"Claim {i}." for i in range(40)]
    judge_server.route("output_claims", {"claims": claims})
    judge_server.route("faithfulness_verdicts", {"verdicts": [
        {"claim_index": i, "verdict": "unsure" if i < 3 else "yes", "reason": "r"}
        for i in range(40)]})
    judge_server.route("hallucination_reason_v2", {"reason": "r"})

    result = create_hallucination_scorer(model=judge, prompt_set="tracescore-v2", scale=7).run(
        output="Forty claims.", context=CONTEXT)

    assert result.score == 0.53
