"""The HTML reports of ``tracescore eval --html`` and ``tracescore calibrate --html`` opened in
headless Chromium (issue 24): what the rendered page shows (its visible text, read through the
DevTools protocol) matches the JSON report of the same run, and the page renders its charts.

The same checks run in ``scripts/screenshots.py --only reports`` before it captures the
screenshots in docs/img/ (``eval-report.png``, ``calibrate-report.png``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.backends.installed import require_binary
from tracescore._cli.main import main

REPO = Path(__file__).resolve().parents[2]


def _shown(value: Any, digits: int = 4) -> str:
    return "–" if value is None else f"{value:.{digits}g}"


def _tenths(scores: list[float]) -> list[int]:
    return [sum(1 for s in scores if min(9, int(s * 10)) == b) for b in range(10)]


def make_eval_report(workdir: Path) -> tuple[Path, dict[str, Any]]:
    """``tracescore eval`` on the example data with two scorers, one of them failing items;
    the HTML file and the JSON report."""
    report, html = workdir / "eval.json", workdir / "eval.html"
    code = main(["eval", str(REPO / "examples/data/eval_sample.jsonl"),
                 "--target", str(REPO / "examples/test_eval_example.py") + ":answer",
                 "--scorer", "content-similarity:0.8", "--scorer", "completeness:0.5",
                 "--name", "support-bot", "--report", str(report), "--html", str(html),
                 "--no-trace"])
    assert code == 0
    return html, json.loads(report.read_text(encoding="utf-8"))


def make_calibration_report(workdir: Path) -> tuple[Path, dict[str, Any]]:
    """``tracescore calibrate`` on the scripted, hand-computed example of
    tests/test_calibrate.py; the HTML file and the JSON report."""
    from tests.test_calibrate import rows, script, write_jsonl
    from tracescore.testing import ScriptedJudge

    report, html = workdir / "cal.json", workdir / "cal.html"
    with ScriptedJudge() as server:
        script(server)
        data = write_jsonl(workdir / "labelled.jsonl", rows())
        code = main(["calibrate", str(data), "--scorer", "faithfulness:0.5",
                     "--judge", "openai/test-judge", "--judge-api-base", server.api_base,
                     "--report", str(report), "--html", str(html)])
    assert code == 1  # ten items cannot show the judge beats chance; the page says so
    return html, json.loads(report.read_text(encoding="utf-8"))


# What the page shows: visible text (innerText) of the marked elements, the SVG counts' text, and
# whether each chart has drawn bars of a visible size.
_READ_EVAL = """(() => {
  const text = e => e ? e.innerText.trim() : null;
  const scorers = {};
  document.querySelectorAll('#scorers tr[data-scorer]').forEach(tr => {
    const o = {}; tr.querySelectorAll('[data-field]').forEach(td => o[td.dataset.field] = text(td));
    scorers[tr.dataset.scorer] = o;
  });
  const failing = [...document.querySelectorAll('tr.failing-item')].map(tr => {
    const o = {item: tr.dataset.item, scorer: tr.dataset.scorer};
    tr.querySelectorAll('[data-field]').forEach(
      td => o[td.dataset.field] = text(td.querySelector('.text') || td));
    return o;
  });
  const charts = {};
  document.querySelectorAll('.chart[data-scorer]').forEach(c => charts[c.dataset.scorer] = {
    counts: [...c.querySelectorAll('text.count')].map(t => +t.textContent),
    bars: [...c.querySelectorAll('rect')]
      .filter(r => r.getBoundingClientRect().height > 0.5).length,
    visible: c.getBoundingClientRect().width > 100});
  return {verdict: text(document.querySelector('#verdict')), scorers, failing, charts,
          failingCount: text(document.querySelector('#failing-count'))};
})()"""

_READ_CALIBRATION = """(() => {
  const text = e => e ? e.innerText.trim() : null;
  const confusion = {};
  document.querySelectorAll('table.confusion').forEach(t => {
    const o = {}; t.querySelectorAll('td[data-human]').forEach(td =>
      o[td.dataset.human + '/' + td.dataset.judge] = +text(td));
    confusion[t.dataset.threshold] = o;
  });
  const agreement = {};
  document.querySelectorAll('#agreement tr[data-agreement]').forEach(tr => {
    const o = {}; tr.querySelectorAll('[data-field]').forEach(td => o[td.dataset.field] = text(td));
    agreement[tr.dataset.agreement] = o;
  });
  const charts = {};
  document.querySelectorAll('.chart[data-human]').forEach(c => charts[c.dataset.human] = {
    counts: [...c.querySelectorAll('text.count')].map(t => +t.textContent),
    thresholds: [...c.querySelectorAll('line.threshold')].map(l => +l.dataset.value),
    labels: [...c.querySelectorAll('text.threshold-label')].map(t => t.textContent.trim())});
  const disagreements = [...document.querySelectorAll('tr.disagreement')].map(tr => ({
    item: tr.dataset.item, score: text(tr.querySelector('[data-field=score]')),
    explanation: text(tr.querySelector('[data-field=explanation] .text'))}));
  return {confusion, agreement, charts, disagreements};
})()"""


def check_eval_page(page: Any, url: str, data: dict[str, Any]) -> None:
    """Open the evaluation page and assert that what it shows is the JSON report."""
    page.open(url, shows="Failing items")
    shown = page.evaluate(_READ_EVAL)
    assert shown["verdict"] == data["verdict"]
    assert set(shown["scorers"]) == set(data["summary"]["scorers"])
    for scorer_id, s in data["summary"]["scorers"].items():
        row = shown["scorers"][scorer_id]
        assert row["mean"] == _shown(s["mean"]), (scorer_id, row)
        assert (row["scored"], row["errors"]) == (str(s["scored"]), str(s["errors"]))
        assert row["status"] == ("ok" if s["passed"] else "FAIL")
        scores = [i["scores"][scorer_id]["score"] for i in data["items"]
                  if i["scores"][scorer_id]["status"] == "scored"]
        chart = shown["charts"][scorer_id]
        assert chart["counts"] == _tenths(scores)
        assert chart["visible"] and chart["bars"] >= sum(1 for c in chart["counts"] if c)
    expected = {(i["id"], sid): (i, cell) for i in data["items"]
                for sid, cell in i["scores"].items() if cell["label"] == "fail"}
    assert shown["failingCount"] == str(len(expected))
    assert {(f["item"], f["scorer"]) for f in shown["failing"]} == set(expected)
    for row in shown["failing"]:
        item, cell = expected[(row["item"], row["scorer"])]
        assert row["input"] == item["input"]
        assert row["output"] == item["output"]
        assert row["reason"] == cell["reason"]
        assert row["score"] == _shown(cell["score"])


def check_calibration_page(page: Any, url: str, data: dict[str, Any]) -> None:
    """Open the calibration page and assert that what it shows is the JSON report."""
    page.open(url, shows="Confusion matrix")
    shown = page.evaluate(_READ_CALIBRATION)
    for name, key in (("at threshold", "at_threshold"), ("advised threshold", "best_threshold")):
        matrix = data[key]["confusion"]
        assert shown["confusion"][name] == {f"{h}/{j}": matrix[h][j]
                                            for h in ("pass", "fail") for j in ("pass", "fail")}
        row = shown["agreement"][name]
        assert row["threshold"] == _shown(data[key]["threshold"])
        assert row["accuracy"] == f"{data[key]['accuracy']:.1%}"
        assert row["kappa"] == _shown(data[key]["kappa"], 3)
    scored = [i for i in data["items"] if i["status"] == "scored"]
    thresholds = sorted({data["at_threshold"]["threshold"], data["best_threshold"]["threshold"]})
    for human, wanted in (("pass", True), ("fail", False)):
        chart = shown["charts"][human]
        assert chart["counts"] == _tenths([i["score"] for i in scored
                                           if i["human_pass"] is wanted])
        assert sorted(chart["thresholds"]) == thresholds
        assert any(label.startswith("threshold ") for label in chart["labels"])
    at = data["at_threshold"]["threshold"]
    expected = {i["id"]: i for i in scored if (i["score"] >= at) is not i["human_pass"]}
    assert {d["item"] for d in shown["disagreements"]} == set(expected)
    for d in shown["disagreements"]:
        assert d["score"] == _shown(expected[d["item"]]["score"])
        assert d["explanation"] == expected[d["item"]]["explanation"]


def load_page_class() -> Any:
    """The DevTools-driven Chromium tab of scripts/screenshots.py (needs websocket-client and
    Pillow, the ``backends`` extra)."""
    for module in ("websocket", "PIL"):
        try:
            __import__(module)
        except ImportError:
            if os.environ.get("TRACESCORE_BACKENDS") == "1":
                pytest.fail(f"{module} is missing: pip install -e '.[backends]'")
            pytest.skip(f"{module} is not installed (pip extra 'backends')")
    spec = importlib.util.spec_from_file_location("tracescore_screenshots",
                                                  REPO / "scripts" / "screenshots.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.Page


@pytest.fixture
def page(tmp_path: Path) -> Any:
    chromium = require_binary("chromium")
    tab = load_page_class()(chromium, tmp_path)
    yield tab
    tab.close()


def test_the_eval_report_shows_what_the_json_says(page: Any, tmp_path: Path) -> None:
    html, data = make_eval_report(tmp_path)
    check_eval_page(page, html.as_uri(), data)
    page.screenshot(tmp_path / "eval-report.png")
    assert (tmp_path / "eval-report.png").stat().st_size > 10_000


def test_the_calibration_report_shows_what_the_json_says(page: Any, tmp_path: Path) -> None:
    html, data = make_calibration_report(tmp_path)
    check_calibration_page(page, html.as_uri(), data)
    page.screenshot(tmp_path / "calibrate-report.png")
    assert (tmp_path / "calibrate-report.png").stat().st_size > 10_000
