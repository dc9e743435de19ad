"""The HTML reports of ``tracescore eval --html`` and ``tracescore calibrate --html`` (issue 24):
what the page holds matches the JSON report written by the same run, untrusted text is escaped,
long text is cut with a note. (tests/backends/test_reports.py opens the same pages in headless
Chromium and reads what it shows.)"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

import tracescore
from tests.test_calibrate import rows as labelled_rows
from tests.test_calibrate import script as script_calibration
from tests.test_calibrate import write_jsonl
from tracescore._cli.main import main
from tracescore._offline.evals.report import write_html
from tracescore.scorers import create_content_similarity_scorer
from tracescore.testing import ScriptedJudge

REPO = Path(__file__).resolve().parents[1]
VOID = {"meta", "br", "img", "input", "link", "hr", "area", "base", "col", "source", "wbr"}


class Node:
    def __init__(self, tag: str, attrs: dict[str, str | None]) -> None:
        self.tag, self.attrs, self.children, self.parts = tag, attrs, [], []

    def text(self) -> str:
        return "".join(p if isinstance(p, str) else p.text() for p in self.parts).strip()

    def walk(self) -> Any:
        yield self
        for child in self.children:
            yield from child.walk()

    def find_all(self, tag: str | None = None, **attrs: str | None) -> list[Node]:
        names = {k: k.rstrip("_").replace("_", "-") for k in attrs}  # class_ -> class
        return [n for n in self.walk() if (tag is None or n.tag == tag)
                and all(n.attrs.get(names[k]) == v if v is not None else names[k] in n.attrs
                        for k, v in attrs.items())]


class TreeBuilder(HTMLParser):
    """The document as a tree (the standard library's tokenizer, entities decoded)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, dict(attrs))
        self.stack[-1].children.append(node)
        self.stack[-1].parts.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].parts.append(data)


def parse(path: Path) -> Node:
    builder = TreeBuilder()
    builder.feed(path.read_text(encoding="utf-8"))
    return builder.root


def shown(value: Any, digits: int = 4) -> str:
    return "–" if value is None else f"{value:.{digits}g}"


def test_eval_page_matches_the_json_report(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    report, html = tmp_path / "out.json", tmp_path / "out.html"
    code = main(["eval", str(REPO / "examples/data/eval_sample.jsonl"),
                 "--target", str(REPO / "examples/test_eval_example.py") + ":answer",
                 "--scorer", "content-similarity:0.8", "--scorer", "completeness:0.5",
                 "--report", str(report), "--html", str(html), "--no-trace"])
    assert code == 0, capsys.readouterr()
    assert f"html: {html}" in capsys.readouterr().out
    data = json.loads(report.read_text())
    page = parse(html)

    assert page.find_all(id="verdict")[0].text() == data["verdict"]
    assert page.find_all(id="total-items")[0].text() == str(data["summary"]["total_items"])
    rows = {r.attrs["data-scorer"]: {c.attrs["data-field"]: c.text()
                                      for c in r.find_all(data_field=None)}
            for r in page.find_all("table", id="scorers")[0].find_all("tr", data_scorer=None)}
    assert set(rows) == set(data["summary"]["scorers"]) == {"content-similarity", "completeness"}
    for scorer_id, s in data["summary"]["scorers"].items():
        assert rows[scorer_id]["mean"] == shown(s["mean"])
        assert rows[scorer_id]["scored"] == str(s["scored"])
        assert rows[scorer_id]["status"] == ("ok" if s["passed"] else "FAIL")

    # The failing items: every (item, scorer) the JSON labels fail, with its texts.
    expected = {(i["id"], sid): (i, cell) for i in data["items"]
                for sid, cell in i["scores"].items() if cell["label"] == "fail"}
    assert expected  # completeness fails on most items of the sample
    listed = page.find_all("tr", class_="failing-item")
    assert {(r.attrs["data-item"], r.attrs["data-scorer"]) for r in listed} == set(expected)
    assert page.find_all(id="failing-count")[0].text() == str(len(expected))
    for row in listed:
        item, cell = expected[(row.attrs["data-item"], row.attrs["data-scorer"])]
        fields = {c.attrs["data-field"]: c.text() for c in row.find_all(data_field=None)}
        assert fields["input"] == item["input"]
        assert fields["output"] == item["output"]
        assert fields["reason"] == cell["reason"]
        assert fields["score"] == shown(cell["score"])

    # The histogram of each scorer: counts per tenth of the scale, summing to the scored items.
    for chart in page.find_all("div", class_="chart"):
        scorer_id = chart.attrs["data-scorer"]
        scores = [i["scores"][scorer_id]["score"] for i in data["items"]
                  if i["scores"][scorer_id]["status"] == "scored"]
        counts = [int(t.text()) for t in chart.find_all("text", class_="count")]
        assert counts == [sum(1 for s in scores if min(9, int(s * 10)) == b) for b in range(10)]
        assert sum(counts) == data["summary"]["scorers"][scorer_id]["scored"]


HOSTILE = [
    {"id": 'x"><script>alert(1)</script>', "input": "</div><script>alert('in')</script>",
     "ground_truth": "<b>bold</b> & more"},
]


def test_untrusted_text_is_escaped_everywhere(tmp_path: Path) -> None:
    def target(question: str) -> str:
        return '"><img src=x onerror=alert(2)>'

    result = tracescore.run_evals(
        data=HOSTILE, target=target,
        scorers=[{"scorer": create_content_similarity_scorer(), "threshold": 0.99}],
        experiment_name="<svg onload=alert(3)>")
    out = tmp_path / "r.html"
    write_html(result, out)
    text = out.read_text(encoding="utf-8")

    for raw in ("<script", "<img", "<svg onload", "<b>"):
        assert raw not in text
    page = parse(out)
    # Decoded, the page says exactly what the data said.
    (row,) = page.find_all("tr", class_="failing-item")
    assert row.attrs["data-item"] == HOSTILE[0]["id"]
    fields = {c.attrs["data-field"]: c.text() for c in row.find_all(data_field=None)}
    assert fields["input"] == HOSTILE[0]["input"]
    assert fields["output"] == '"><img src=x onerror=alert(2)>'
    assert fields["ground_truth"] == HOSTILE[0]["ground_truth"]
    assert page.find_all(id="experiment-name")[0].text() == "<svg onload=alert(3)>"
    assert not page.find_all("script")


def test_target_errors_and_items_without_ids_are_listed(tmp_path: Path) -> None:
    def target(question: str) -> str:
        if question == "boom":
            raise ValueError("the target broke <b>here</b>")
        return "an answer"

    result = tracescore.run_evals(
        data=[{"input": "boom", "ground_truth": "x"}, {"input": "ok", "ground_truth": "x"}],
        target=target,
        scorers=[{"scorer": create_content_similarity_scorer(), "threshold": 0.9}])
    out = tmp_path / "r.html"
    write_html(result, out)

    rows = {(r.attrs["data-item"], r.attrs["data-scorer"]): r
            for r in parse(out).find_all("tr", class_="failing-item")}
    assert set(rows) == {("#0", "target"), ("#1", "content-similarity")}
    (reason,) = rows[("#0", "target")].find_all("td", data_field="reason")
    assert reason.text() == "ValueError: the target broke <b>here</b>"


def test_long_texts_are_cut_with_a_note(tmp_path: Path) -> None:
    long_output = "word " * 3_000  # 15,000 characters

    result = tracescore.run_evals(
        data=[{"id": "long", "input": "q", "ground_truth": "short"}],
        target=lambda question: long_output,
        scorers=[{"scorer": create_content_similarity_scorer(), "threshold": 0.9}])
    out = tmp_path / "r.html"
    write_html(result, out)

    (row,) = parse(out).find_all("tr", class_="failing-item")
    (cell,) = row.find_all("td", data_field="output")
    shown_text = cell.find_all("div", class_="text")[0].text()
    assert long_output.startswith(shown_text) and 1_000 < len(shown_text) <= 2_000
    assert f"of {len(long_output)}) in the JSON report" in cell.text()


def test_calibration_page_matches_the_json_report(
        judge_server: ScriptedJudge, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script_calibration(judge_server)
    data_file = write_jsonl(tmp_path / "labelled.jsonl", labelled_rows())
    report, html = tmp_path / "cal.json", tmp_path / "cal.html"
    code = main(["calibrate", str(data_file), "--scorer", "faithfulness:0.5",
                 "--judge", "openai/test-judge", "--judge-api-base", judge_server.api_base,
                 "--report", str(report), "--html", str(html)])
    assert code == 1, capsys.readouterr()  # ten items: no better than chance
    data = json.loads(report.read_text())
    page = parse(html)
    (verdict,) = page.find_all("span", id="verdict")
    assert verdict.text() == data["verdict"] == "no better than chance"
    assert "passed" not in verdict.attrs["class"]
    (chance,) = page.find_all("p", id="chance")
    assert "agrees no better than chance" in chance.text()
    assert data["chance"]["kappa_interval"] == [0.0, 1.0]

    for name, key in (("at threshold", "at_threshold"), ("advised threshold", "best_threshold")):
        (table,) = page.find_all("table", data_threshold=name)
        cells = {(c.attrs["data-human"], c.attrs["data-judge"]): int(c.text())
                 for c in table.find_all("td", data_human=None)}
        confusion = data[key]["confusion"]
        assert cells == {(h, j): confusion[h][j] for h in ("pass", "fail")
                         for j in ("pass", "fail")}
    # The worked example of tests/test_calibrate.py: 5/0/2/3 at 0.5, best threshold 0.75.
    assert data["at_threshold"]["confusion"] == {"pass": {"pass": 5, "fail": 0},
                                                 "fail": {"pass": 2, "fail": 3}}
    (row,) = page.find_all("tr", data_agreement="advised threshold")
    fields = {c.attrs["data-field"]: c.text() for c in row.find_all(data_field=None)}
    assert fields["threshold"] == "0.75" and fields["accuracy"] == "90.0%"
    assert fields["balanced_accuracy"] == "90.0%"

    # The judge's scores per human label, with both thresholds drawn.
    scored = [i for i in data["items"] if i["status"] == "scored"]
    for human, wanted in (("pass", True), ("fail", False)):
        (chart,) = page.find_all("div", class_="chart", data_human=human)
        scores = [i["score"] for i in scored if i["human_pass"] is wanted]
        counts = [int(t.text()) for t in chart.find_all("text", class_="count")]
        assert counts == [sum(1 for s in scores if min(9, int(s * 10)) == b) for b in range(10)]
        lines = sorted(float(x.attrs["data-value"]) for x in chart.find_all("line",
                                                                             class_="threshold"))
        assert lines == [0.5, 0.75]

    (advice,) = page.find_all("p", id="threshold-advice")
    assert advice.text() == "Threshold: " + data["threshold_advice"]["text"]
    disagreeing = {r.attrs["data-item"] for r in page.find_all("tr", class_="disagreement")}
    assert disagreeing == {"q5", "q10"}  # human fail, judge pass at 0.5
    assert {r.attrs["data-item"] for r in page.find_all("table", id="not-scored")[0]
            .find_all("tr", data_item=None)} == {"empty", "refused"}
