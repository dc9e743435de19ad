"""The faithfulness cascade against the loopback judge through litellm: the judge is called
only when the support check is unsure, and what it spends is what a rule's budget counts."""

from __future__ import annotations

from typing import Any

import pytest

import tracescore
from tests.helpers import memory_configure
from tracescore import ConfigurationError
from tracescore.scorers import (
    create_faithfulness_cascade_scorer,
    create_faithfulness_scorer,
    create_support_check_scorer,
)
from tracescore.testing import ScriptedJudge as JudgeServer
from tracescore.testing import make_judge

CONTEXT = ["The Eiffel Tower in Paris was completed in 1889.", "The tower is 330 metres tall."]
SURE = "The tower is 330 metres tall."  # the context's own words: the check is sure
SURE_NOT = "Gustave Eiffel's company built it for the World's Fair."  # none of them
UNSURE = "The tower is 330 metres tall and painted gold every year."  # in between
CLAIMS = ["The tower is 330 metres tall.", "The tower is painted gold every year."]


@pytest.fixture(autouse=True)
def through_litellm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACESCORE_JUDGE_TRANSPORT", "litellm")


def check(output: str) -> float:
    score = create_support_check_scorer(context=CONTEXT).run(output=output).score
    assert score is not None
    return score


def script(server: JudgeServer) -> None:
    server.route("output_claims", {"claims": CLAIMS})
    server.route("faithfulness_verdicts", {"verdicts": [
        {"claim_index": 0, "verdict": "yes", "reason": "The context gives the height."},
        {"claim_index": 1, "verdict": "unsure", "reason": "The context says nothing of paint."},
    ]})
    server.route("faithfulness_reason", {"reason": "One claim is not in the context."})


def test_the_default_band_sends_only_unsure_answers_to_the_judge(
    judge_server: JudgeServer
) -> None:
    script(judge_server)
    scorer = create_faithfulness_cascade_scorer(model=make_judge(judge_server), context=CONTEXT)
    low, high = scorer.options["band"]
    # preconditions on the shipped weights (retrained weights may need other sentences)
    assert check(SURE) >= high and check(SURE_NOT) <= low and low < check(UNSURE) < high

    results = [scorer.run(output=o) for o in (SURE, SURE_NOT, UNSURE, SURE)]

    assert [r.judge_calls for r in results] == [0, 0, 2, 0]
    assert judge_server.schema_names == ["output_claims", "faithfulness_verdicts"]
    assert [r.score for r in results] == [
        round(check(SURE), 2), round(check(SURE_NOT), 2), 0.5, round(check(SURE), 2)]
    sure = results[0]
    assert (sure.input_tokens, sure.output_tokens, sure.judge_model) == (0, 0, None)
    assert sure.preprocess_step_result == {"claims": [], "support_check": check(SURE)}
    assert "no judge call" in sure.reason
    judged = results[2]
    assert judged.input_tokens > 0 and judged.output_tokens > 0
    assert judged.judge_model == "openai/test-judge"
    assert judged.preprocess_step_result == {"claims": CLAIMS}
    # the reason comes from the verdicts, without a third call
    assert "the judge found 1 of 2 claims supported" in judged.reason
    assert 'Not in the context: "The tower is painted gold every year."' in judged.reason


@pytest.mark.parametrize(("band", "calls"), [((0.5, 0.5), 0), ((0.0, 1.0), 2)])
def test_the_band_decides_when_the_judge_is_asked(
    judge_server: JudgeServer, band: tuple[float, float], calls: int
) -> None:
    script(judge_server)
    scorer = create_faithfulness_cascade_scorer(
        model=make_judge(judge_server), context=CONTEXT, band=band)

    result = scorer.run(output=SURE)

    assert result.judge_calls == len(judge_server.requests) == calls
    assert result.score == (round(check(SURE), 2) if calls == 0 else 0.5)


def test_with_faithfulness_on_the_same_answer_a_caching_judge_answers_the_cascade(
    judge_server: JudgeServer
) -> None:
    script(judge_server)
    judge = make_judge(judge_server, cache_size=8)
    faithfulness = create_faithfulness_scorer(model=judge, context=CONTEXT).run(output=UNSURE)
    cascade = create_faithfulness_cascade_scorer(model=judge, context=CONTEXT).run(
        output=UNSURE)

    assert (faithfulness.judge_calls, cascade.judge_calls) == (3, 0)
    assert faithfulness.score == cascade.score == 0.5
    assert len(judge_server.requests) == 3


def test_a_rule_budget_is_charged_only_for_judged_answers(judge_server: JudgeServer) -> None:
    script(judge_server)
    cascade = create_faithfulness_cascade_scorer(context=CONTEXT)
    _, exporter = memory_configure(
        judge=make_judge(judge_server),
        scoring=[tracescore.ScoringRule(scorer=cascade, on="agent", max_tokens_per_hour=1)],
    )

    replies = [SURE, SURE_NOT, SURE, UNSURE, SURE, UNSURE]

    @tracescore.agent(name="rag")
    def answer(turn: int) -> str:  # the input (the question) has no word of the answers
        return replies[turn]

    for turn in range(len(replies)):
        answer(turn)
        tracescore.force_flush(10_000)  # each job's spend is recorded before the next span

    # Sure answers spend nothing; the first unsure one spends the hour's budget (one token),
    # after which the rule skips the cascade's jobs, sure or not.
    assert len(judge_server.requests) == 2
    assert tracescore.stats().skipped_budget == 2
    spans = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent rag"]
    scores = [[e.attributes["gen_ai.evaluation.score.value"] for e in s.events
               if e.name == "gen_ai.evaluation.result"] for s in spans]
    assert scores == [[round(check(SURE), 2)], [round(check(SURE_NOT), 2)],
                      [round(check(SURE), 2)], [0.5], [], []]


@pytest.mark.parametrize("band", [(0.6, 0.7), (0.2, 0.4), (0.5,), "wide", (-0.1, 0.9), (True, 1)])
def test_a_band_out_of_range_fails_early(band: Any) -> None:
    with pytest.raises(ConfigurationError, match="band"):
        create_faithfulness_cascade_scorer(band=band)


def test_registered_under_its_id_with_the_check_and_band_in_its_options() -> None:
    scorer = create_faithfulness_cascade_scorer(model="openai/x")
    assert (scorer.id, scorer.uses_judge, scorer.uses_context, scorer.higher_is_better) == (
        "faithfulness-cascade", True, True, True)
    assert scorer.options["check"].startswith("support-check-v1-")
    assert scorer.fingerprint != create_faithfulness_cascade_scorer(
        model="openai/x", band=(0.1, 0.9)).fingerprint
