"""``tracescore.calibrate`` and ``tracescore calibrate``: agreement numbers on a labelled set
whose judge verdicts are scripted, so accuracy, Cohen's kappa and the best threshold are known
by construction (worked out by hand below); resuming after an interruption; the reports."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

import tracescore
from tracescore import ConfigurationError
from tracescore._cli.main import main
from tracescore._offline.calibrate import stats
from tracescore.scorers import create_faithfulness_scorer
from tracescore.testing import ScriptedJudge, make_judge
from tracescore.testing._judge_server import prompt_of

CONTEXT = ["The Eiffel Tower is in Paris. It was finished in 1889."]

# (how many of the item's 4 claims the judge supports, the human label). Faithfulness is the
# share of supported claims, so the scores are 1, 1, .75, .75, .5, .75, .25, .25, 0, .75.
#
# At the default threshold 0.5 (pass when score >= 0.5), the judge passes items 1-6 and 10:
#   human pass (1, 2, 3, 4, 6):  judge pass 5, judge fail 0
#   human fail (5, 7, 8, 9, 10): judge pass 2 (5, 10), judge fail 3
#   accuracy = (5 + 3) / 10 = 0.8
#   chance agreement p_e = P(human pass) P(judge pass) + P(human fail) P(judge fail)
#                        = 0.5 * 0.7 + 0.5 * 0.3 = 0.5
#   kappa = (0.8 - 0.5) / (1 - 0.5) = 0.6
# At 0.75 the judge passes 1, 2, 3, 4, 6, 10: only item 10 disagrees, accuracy 0.9,
#   p_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.5, kappa = (0.9 - 0.5) / 0.5 = 0.8. At 1.0: 0.7; at 0.25:
#   0.6; at 0: 0.5. So the best threshold is 0.75, a gain of 0.1 accuracy.
ITEMS = [(4, "pass"), (4, "pass"), (3, "pass"), (3, "pass"), (2, "fail"),
         (3, "pass"), (1, "fail"), (1, "fail"), (0, "fail"), (3, "fail")]


def script(server: ScriptedJudge) -> None:
    for number, (supported, _) in enumerate(ITEMS, start=1):
        marker = f"ITEM{number:02d}"
        claims = [f"{marker} claim {i}" for i in range(4)]
        server.route_prompt(marker, {"claims": claims}, schema_name="output_claims")
        server.route_prompt(marker, {"verdicts": [
            {"claim_index": i, "verdict": "yes" if i < supported else "no", "reason": "r"}
            for i in range(4)
        ]}, schema_name="faithfulness_verdicts")
    # An answer with no claim is not scorable; one the judge refuses is an error.
    server.route_prompt("NOCLAIMS", {"claims": []}, schema_name="output_claims")
    server.route_prompt("REFUSED", ScriptedJudge.Reply(status=401), schema_name="output_claims")
    server.route("faithfulness_reason", {"reason": "scripted"})


def rows() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"id": f"q{number}", "input": "Where is the Eiffel Tower?", "context": CONTEXT,
         "output": f"ITEM{number:02d} answer", "label": label}
        for number, (_, label) in enumerate(ITEMS, start=1)
    ]
    out.append({"id": "empty", "input": "?", "context": CONTEXT, "output": "NOCLAIMS",
                "label": "pass"})
    out.append({"id": "refused", "input": "?", "context": CONTEXT, "output": "REFUSED",
                "label": "fail"})
    return out


def write_jsonl(path: Path, items: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in items), encoding="utf-8")
    return path


def test_agreement_numbers_match_the_hand_computation(
    judge_server: ScriptedJudge, tmp_path: Path
) -> None:
    script(judge_server)
    data = write_jsonl(tmp_path / "labelled.jsonl", rows())

    result = tracescore.calibrate(data, "faithfulness", judge=make_judge(judge_server))

    assert result.counts == {"scored": 10, "not_scorable": 1, "error": 1}
    at = result.at_threshold
    assert (at.threshold, at.n, at.accuracy, at.kappa) == (0.5, 10, 0.8, 0.6)
    assert at.confusion() == {"pass": {"pass": 5, "fail": 0}, "fail": {"pass": 2, "fail": 3}}
    assert result.best is not None
    assert (result.best.threshold, result.best.accuracy, result.best.kappa) == (0.75, 0.9, 0.8)
    report = result.to_dict()
    assert report["best_threshold_gain"] == pytest.approx(0.1)
    assert report["at_threshold"]["kappa_band"] == "moderate"
    # Cost: every request the server answered is one call, with the tokens it reported (the
    # refused request is not: a failed scorer run reports no accounting).
    requests = [b for b in judge_server.requests if "REFUSED" not in prompt_of(b)]
    assert result.cost["judge_calls"] == len(requests)
    assert result.cost["prompt_tokens"] == sum(max(1, len(prompt_of(b)) // 4) for b in requests)
    # Ten items cannot show that the judge beats chance: kappa's 95% interval reaches 0.
    assert result.kappa_interval == (0.0, 1.0)
    assert (result.passed, result.verdict) == (False, "no better than chance")
    assert "accuracy 80.0% (8/10), balanced accuracy 80.0%, Cohen's kappa 0.600 (moderate)" \
        in result.table()
    assert "advised threshold 0.75: accuracy 90.0% (9/10), balanced accuracy 90.0%" \
        in result.table()
    assert "judge: NO BETTER THAN CHANCE at 0.5" in result.table()


def test_an_interrupted_run_resumes_where_it_stopped(
    judge_server: ScriptedJudge, tmp_path: Path
) -> None:
    script(judge_server)
    data = write_jsonl(tmp_path / "labelled.jsonl", rows())
    state = tmp_path / "run.state.jsonl"
    judge = make_judge(judge_server, cache_size=0)
    scorer = create_faithfulness_scorer(model=judge)

    with pytest.raises(KeyboardInterrupt):
        tracescore.calibrate(data, Interrupting(scorer, at="ITEM04"), state_file=state)
    first_requests = len(judge_server.requests)
    assert first_requests > 0
    recorded = [json.loads(line) for line in state.read_text().splitlines()]
    assert [r.get("id") for r in recorded[1:]] == ["q1", "q2", "q3"]

    result = tracescore.calibrate(data, scorer, state_file=state)

    assert result.resumed == 3
    # The same numbers as an uninterrupted run, and the first three items were not asked again.
    assert (result.at_threshold.accuracy, result.at_threshold.kappa) == (0.8, 0.6)
    later = judge_server.prompts[first_requests:]
    assert not any(f"ITEM0{n} " in p for p in later for n in (1, 2, 3))
    # The refused item was recorded as an error and is tried again by the next run.
    again = tracescore.calibrate(data, scorer, state_file=state)
    assert again.resumed == 11
    assert any("REFUSED" in p for p in judge_server.prompts[-1:])


class Interrupting:
    """The scorer, except that the item whose output contains ``at`` is interrupted (Ctrl-C)."""

    def __init__(self, scorer: Any, at: str) -> None:
        self._scorer, self._at = scorer, at

    def __getattr__(self, name: str) -> Any:
        return getattr(self._scorer, name)

    async def arun(self, **kwargs: Any) -> Any:
        if self._at in str(kwargs.get("output")):
            raise KeyboardInterrupt
        return await self._scorer.arun(**kwargs)


def test_a_state_file_of_another_judge_is_refused(
    judge_server: ScriptedJudge, tmp_path: Path
) -> None:
    script(judge_server)
    data = write_jsonl(tmp_path / "labelled.jsonl", rows()[:2])
    state = tmp_path / "state.jsonl"
    tracescore.calibrate(data, "faithfulness", judge=make_judge(judge_server), state_file=state)

    with pytest.raises(ConfigurationError, match="was written for"):
        tracescore.calibrate(data, "faithfulness",
                             judge=make_judge(judge_server, model="openai/other"),
                             state_file=state)


def test_the_command_writes_reports_and_exits_by_the_minimums(
    judge_server: ScriptedJudge, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script(judge_server)
    data = write_jsonl(tmp_path / "labelled.jsonl", rows())
    report, junit = tmp_path / "out" / "cal.json", tmp_path / "out" / "cal.xml"
    base = ["calibrate", str(data), "--scorer", "faithfulness", "--judge", "test-judge",
            "--judge-api-base", judge_server.api_base, "--no-progress"]

    # --min-accuracy 0.8 holds; what fails the run is a judge no better than chance on ten items.
    assert main([*base, "--report", str(report), "--junit", str(junit),
                 "--min-accuracy", "0.8"]) == 1
    out = capsys.readouterr().out
    assert "Cohen's kappa 0.600" in out and "errors (judge_error x1)" in out
    assert [line for line in out.splitlines() if line.startswith("FAILED")] == [
        "FAILED: the judge agrees with the humans no better than chance at threshold 0.5 "
        "(Cohen's kappa 0.600, 95% interval 0.000 to 1.000): do not rely on its pass/fail"]
    saved = json.loads(report.read_text())
    assert saved["at_threshold"]["confusion"] == {"pass": {"pass": 5, "fail": 0},
                                                   "fail": {"pass": 2, "fail": 3}}
    assert saved["judge_model"] == "openai/test-judge"
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "2"  # chance, the refused item
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert "no better than chance" in cases["agreement"].find("failure").get("message")
    assert cases["judge"].find("failure") is not None

    assert main([*base, "--min-kappa", "0.7"]) == 1
    assert "FAILED: Cohen's kappa 0.600 is below --min-kappa 0.7" in capsys.readouterr().out


def test_labels_from_csv_with_numbers_and_words(tmp_path: Path) -> None:
    path = tmp_path / "labelled.csv"
    path.write_text("id,input,output,context,label\n"
                    'a,q,x,"[""c1"", ""c2""]",0.9\n'
                    "b,q,y,plain context,FAIL\n"
                    "c,q,z,,yes\n", encoding="utf-8")

    from tracescore._offline.calibrate import load_labelled

    items = load_labelled(path, label_threshold=0.5)

    assert [(i.id, i.human_pass, i.context) for i in items] == [
        ("a", True, ["c1", "c2"]), ("b", False, ["plain context"]), ("c", True, None)]
    with pytest.raises(ConfigurationError, match="neither pass/fail"):
        load_labelled([{"output": "x", "label": "maybe"}])


def test_kappa_and_threshold_edge_cases() -> None:
    assert stats.cohen_kappa(5, 0, 0, 0) is None  # one label everywhere: chance agreement is 1
    assert stats.cohen_kappa(0, 5, 5, 0) == -1.0
    # Lower is better (hallucination): pass at or below the threshold.
    pairs = [(0.0, True), (0.2, True), (0.6, False), (0.4, False)]
    best = stats.best_threshold(pairs, 0.5, higher_is_better=False)
    assert best is not None and (best.threshold, best.accuracy) == (0.2, 1.0)
    # A judge that calls every answer hallucinated (as the 1.5B model did in the benchmark):
    # failing everything is no advice, and the one threshold that separates the items is
    # worse than chance, so nothing is advised.
    pairs = [(1.0, True), (1.0, True), (0.5, True), (1.0, False), (0.5, False), (0.5, False)]
    assert stats.best_threshold(pairs, 0.5, higher_is_better=False) is None
    advice = stats.threshold_advice(pairs, 0.5, higher_is_better=False)
    assert advice is not None and advice["move"] is False and advice["best"] is None
    assert str(advice["text"]).startswith("no threshold advised")
