"""Calibration advice a team can follow: the advised threshold maximises balanced accuracy, never
passes or fails everything, and a judge whose agreement with the humans is no better than
chance is marked so in the terminal, the JSON report and the HTML page (never "passed").

The scorer here reads its score from the output text, so each case's scores are exactly the
ones written below; everything else is the public ``tracescore.calibrate`` and the command line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import tracescore
from tracescore.__main__ import main
from tracescore.scorers import Scorer


def score_in_output() -> Scorer:
    """A scorer whose score is the number written in the output (no judge)."""
    return Scorer(id="score-in-output", description="the number in the output",
                  generate_score=lambda run: float(run.output_text),
                  generate_reason=lambda run: "read from the output")


def items(*groups: tuple[int, float, str]) -> list[dict[str, Any]]:
    """``(count, score, human label)`` groups as labelled items."""
    out = []
    for count, score, label in groups:
        out += [{"id": f"{label}-{score}-{i}", "input": "q", "output": str(score),
                 "label": label} for i in range(count)]
    return out


def calibrate(data: list[dict[str, Any]], threshold: float = 0.5) -> Any:
    return tracescore.calibrate(data, score_in_output(), threshold=threshold, progress=False)


# 36 human passes, 4 fails (the shares of a production sample where most answers are fine). At
# 0.5 the judge passes 20 and fails 16 of the human passes and fails all 4 human fails. Passing
# everything (0.3) agrees with 36 of 40 (90%), more than 0.5's 24 (60%): raw accuracy advised
# it. Balanced accuracy: 0.5 gives (20/36 + 4/4) / 2 = 0.778, passing everything 0.5.
IMBALANCED = items((20, 0.8, "pass"), (16, 0.3, "pass"), (4, 0.35, "fail"))


def test_imbalanced_labels_advise_a_separating_threshold_not_pass_everything() -> None:
    result = calibrate(IMBALANCED)
    best = result.best
    assert best is not None and not best.degenerate
    assert best.threshold in (0.5, 0.8)  # the same labelling: 0.5 stays (nearest)
    assert best.balanced_accuracy == pytest.approx((20 / 36 + 1) / 2)
    advice = result.threshold_advice
    assert advice["move"] is False and advice["criterion"] == "balanced_accuracy"
    assert str(advice["text"]).startswith("keep the threshold at 0.5")
    report = result.to_dict()
    assert report["threshold_choice"]["criterion"] == "balanced_accuracy"
    assert report["best_threshold"]["degenerate"] is False
    assert report["at_threshold"]["confusion"] == {"pass": {"pass": 20, "fail": 16},
                                                   "fail": {"pass": 0, "fail": 4}}


def test_a_lower_is_better_scorer_is_advised_the_same_way() -> None:
    # Hallucination-like: a pass is a low score. 20 human passes at 0.1, 16 at 0.7, the 4 human
    # fails at 0.65. Passing everything (<= 0.7) is 90% "accurate"; balanced accuracy keeps 0.5.
    scorer = Scorer(id="score-in-output", description="the number in the output",
                    higher_is_better=False,
                    generate_score=lambda run: float(run.output_text),
                    generate_reason=lambda run: "read from the output")
    data = items((20, 0.1, "pass"), (16, 0.7, "pass"), (4, 0.65, "fail"))
    result = tracescore.calibrate(data, scorer, threshold=0.5, progress=False)
    assert result.best is not None and not result.best.degenerate
    assert result.best.threshold == 0.5 and result.threshold_advice["move"] is False
    assert result.at_threshold.confusion() == {"pass": {"pass": 20, "fail": 16},
                                               "fail": {"pass": 0, "fail": 4}}


def test_a_degenerate_threshold_is_never_advised_and_the_test_cannot_fire_for_it() -> None:
    # The shape: a judge that agrees with nobody in particular. 26 human passes at 0.3
    # (failed at 0.5), 10 at 0.8; the 4 human fails at 0.9 and 0.3. Raw accuracy advised 0.3
    # (pass everything) with "exact McNemar p" far below 0.05.
    data = items((26, 0.3, "pass"), (10, 0.8, "pass"), (2, 0.9, "fail"), (2, 0.3, "fail"))
    result = calibrate(data)
    assert result.best is None
    advice = result.threshold_advice
    assert advice["move"] is False and advice["best"] is None and advice["p_value"] is None
    assert str(advice["text"]).startswith("no threshold advised: every threshold that does "
                                          "not pass or fail all 40 items")
    assert result.at_threshold.kappa is not None and result.at_threshold.kappa < 0
    assert result.no_better_than_chance is True
    assert result.verdict == "no better than chance" and not result.passed
    table = result.table()
    assert "scorer: NO BETTER THAN CHANCE at 0.5" in table
    assert "move the threshold" not in table


def test_balanced_labels_never_advise_zero() -> None:
    # 20/20, and the judge scores the human passes 0 and the human fails 1 (inverted). Raw
    # accuracy tied every threshold that passes or fails everything at 50% and took the one
    # nearest 0.5: 0, "pass everything".
    data = items((20, 0.0, "pass"), (20, 1.0, "fail"))
    result = calibrate(data)
    assert result.best is None
    assert result.threshold_advice["best"] is None
    assert result.at_threshold.kappa == -1.0
    assert result.verdict == "no better than chance"


def test_balanced_labels_with_a_real_judge_advise_the_separating_threshold() -> None:
    # 20/20: the humans fail what the judge scores 0.6 and 0.2, pass what it scores 0.9. At 0.5
    # the 10 items at 0.6 are let through; 0.9 separates every item.
    data = items((20, 0.9, "pass"), (10, 0.6, "fail"), (10, 0.2, "fail"))
    result = calibrate(data)
    assert result.best is not None and result.best.threshold == 0.9
    advice = result.threshold_advice
    assert advice["move"] is True and advice["gained"] == 10 and advice["lost"] == 0
    # With as many passes as fails the exact test is McNemar's: 2 / 2**10.
    assert advice["p_value"] == pytest.approx(2 / 2 ** 10)
    assert result.no_better_than_chance is False and result.verdict == "passed"
    table = result.table()
    assert "confusion at threshold 0.5" in table and "confusion at the advised threshold 0.9" \
        in table


def test_humans_of_one_label_get_no_advice() -> None:
    result = calibrate(items((10, 0.9, "pass"), (5, 0.2, "pass")))
    assert result.best is None
    assert "all 15 human labels are pass" in str(result.threshold_advice["text"])
    assert result.verdict == "no better than chance"  # kappa is undefined


def test_the_command_and_the_page_say_no_better_than_chance(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The shape, 36 human passes and 4 fails, with a negative kappa: the page must not
    # show a green "passed" beside it. content-similarity (a heuristic, no judge) scores an
    # answer that repeats its question 1 and one that does not 0: at 0.5 the judge passes 10
    # of the human passes and 2 of the 4 human fails.
    data = tmp_path / "labelled.jsonl"
    rows = []
    for n, (count, label, repeats) in enumerate(
            ((26, "pass", False), (10, "pass", True), (2, "fail", True), (2, "fail", False))):
        for i in range(count):
            question = f"which colour is the sky on planet {n}-{i}"
            rows.append({"id": f"{n}-{i}", "input": question,
                         "output": question if repeats else "zebra", "label": label})
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    report, html = tmp_path / "cal.json", tmp_path / "cal.html"
    code = main(["calibrate", str(data), "--scorer", "content-similarity", "--no-progress",
                 "--report", str(report), "--html", str(html)])
    out = capsys.readouterr().out
    assert code == 1
    assert "scorer: NO BETTER THAN CHANCE" in out
    saved = json.loads(report.read_text())
    assert saved["at_threshold"]["confusion"] == {"pass": {"pass": 10, "fail": 26},
                                                  "fail": {"pass": 2, "fail": 2}}
    kappa = saved["at_threshold"]["kappa"]
    assert kappa < 0
    assert saved["verdict"] == "no better than chance" and saved["passed"] is False
    assert saved["chance"]["no_better_than_chance"] is True
    assert "kappa is undefined or <= 0" in saved["chance"]["definition"]
    assert saved["best_threshold"] is None
    page = html.read_text()
    assert 'class="badge chance">no better than chance</span>' in page
    assert 'class="badge passed"' not in page
    assert f"Cohen's kappa {kappa:.3g}" in page  # -0.0606
    assert "The scorer agrees no better than chance" in page  # no judge: the scorer's own
