"""``tracescore view``: the local span file as one HTML page. A real run writes the file
(``configure()`` with the file default, decorated calls, a heuristic scorer, a late score on a
carrier span); the command renders it; the page is parsed and compared with the file: traces as
trees, scores and reasons on the spans they judge, untrusted text escaped, and the bounds on a
large, rotated file. (tests/backends/test_view_page.py opens the demo's page in headless
Chromium.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tracescore
from tests.test_html_report import Node, parse
from tracescore.scorers import create_content_similarity_scorer, create_scorer

REPO = Path(__file__).resolve().parents[1]
PAYLOAD_NAME = '<script>alert("name")</script>'
PAYLOAD_INPUT = '"><img src=x onerror=alert(1)></script><script>alert(2)</script>'
EXPECTED = {"Where is my order?": "Your order A1 has shipped.",
            "Can I get a refund?": "Refunds take 14 days."}


def view(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACESCORE_", "OTEL_"))}
    env.update(LITELLM_OFFLINE_MODE="true", PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "tracescore", "view", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)


def classes(node: Node) -> list[str]:
    return (node.attrs.get("class") or "").split()


def having(root: Node, cls: str) -> list[Node]:
    return [n for n in root.walk() if cls in classes(n)]


def file_spans(path: Path) -> list[dict[str, Any]]:
    return [span for line in path.read_text(encoding="utf-8").splitlines()
            for rs in json.loads(line)["resourceSpans"] for ss in rs["scopeSpans"]
            for span in ss["spans"]]


def attrs(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {a["key"]: next(iter(a["value"].values())) for a in items}


@pytest.fixture
def app_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Four traces in the file default: two answered questions (agent -> retrieval, tool,
    llm) scored by content-similarity, one with hostile text, and one whose score came late
    (after a flush deadline) on a carrier span."""
    for name in list(os.environ):
        if name.startswith(("OTEL_EXPORTER_OTLP", "TRACESCORE_EXPORT_FILE")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("TRACESCORE_EXPORT_FILE", str(tmp_path / "tracescore-traces.jsonl"))
    monkeypatch.setenv("TRACESCORE_CONSOLE", "false")
    gate = threading.Event()

    def slow_score(run: Any) -> float:
        gate.wait(60)  # released by the test once the flush deadline has passed
        return 0.25

    instance = tracescore.configure(service_name="view-test", scoring=[
        tracescore.ScoringRule(scorer=create_content_similarity_scorer(), sample_rate=1.0,
                               threshold=0.5, on=lambda span: span.name == "invoke_agent support",
                               ground_truth=lambda span, question: EXPECTED[question]),
        tracescore.ScoringRule(scorer=create_scorer(id="slow-check", generate_score=slow_score,
                                                    generate_reason=lambda run: "checked late"),
                               sample_rate=1.0, on=lambda span: span.name ==
                               "invoke_agent late-one"),
    ])
    assert instance.exporter_description == f"file {tmp_path / 'tracescore-traces.jsonl'}"

    @tracescore.retrieval(name="faq")
    def search(query: str) -> list[str]:
        return ["Orders ship in 3 days.", "Refunds take 14 days."]

    @tracescore.tool(name="lookup")
    def lookup(order_id: str) -> dict[str, str]:
        return {"order": order_id, "status": "shipped"}

    @tracescore.llm(name="draft")
    def draft(messages: list[dict[str, str]]) -> str:
        return "Your order A1 has shipped." if "order" in messages[0]["content"] else "No."

    @tracescore.agent(name="support")
    def answer(question: str) -> str:
        search(question)
        lookup("A1")
        return draft([{"role": "user", "content": question}])

    @tracescore.agent(name=PAYLOAD_NAME)
    def hostile(text: str) -> str:
        return text

    @tracescore.agent(name="late-one")
    def late_one(question: str) -> str:
        return "late answer"

    try:
        for question in EXPECTED:
            answer(question)
        hostile(PAYLOAD_INPUT)
        assert tracescore.force_flush()
        late_one("Is this scored?")
        # The span goes out at this deadline without its score; the score follows on a
        # carrier span once the scorer is let go.
        assert not tracescore.force_flush(timeout_millis=300)
    finally:
        gate.set()
        tracescore.shutdown()
    yield tmp_path / "tracescore-traces.jsonl"


def test_traces_are_trees_with_scores_on_the_spans_they_judge(app_file: Path) -> None:
    proc = view(cwd=app_file.parent)  # no FILE, no -o: the defaults
    assert proc.returncode == 0, proc.stderr
    page_path = app_file.parent / "tracescore-view.html"
    assert proc.stdout.startswith(
        f"tracescore view: wrote {page_path.name}: 4 traces, 10 spans, 3 scores")
    page = parse(page_path)
    spans = file_spans(app_file)
    by_id = {s["spanId"]: s for s in spans}
    traces = page.find_all("section")
    assert {t.attrs["data-trace-id"] for t in traces} == {s["traceId"] for s in spans}

    for trace in traces:
        rows = [n for n in having(trace, "span")]
        names = [r.attrs["data-name"] for r in rows]
        depths = [int(re.search(r"--depth: (\d+)", r.attrs["style"] or "")[1]) for r in rows]
        if names[0] == "invoke_agent support":
            # The root, then its children in the order they started.
            assert names == ["invoke_agent support", "retrieval faq", "execute_tool lookup",
                             "chat draft"]
            assert depths == [0, 1, 1, 1]
        for row in rows:
            span = by_id[row.attrs["data-span-id"]]
            parent = span.get("parentSpanId")
            assert (parent in by_id) == (depths[rows.index(row)] > 0)
            assert re.fullmatch(r"[\d.]+ (µs|ms|s)", having(row, "dur")[0].text())
            # Its GenAI attributes are on the page with the values of the file.
            shown = {tr.children[0].text(): tr.children[1].text()
                     for tr in having(row, "attrs")[0].find_all("tr")}
            file_attributes = attrs(span["attributes"])
            assert shown["gen_ai.operation.name"] == file_attributes["gen_ai.operation.name"]
            # The scores are on the span they judge, with the values of their events (on the
            # span itself, or on the carrier spans of late scores, its children).
            carriers = [s for s in spans if s.get("parentSpanId") == span["spanId"]
                        and attrs(s["attributes"]).get("tracescore.evaluation.carrier")]
            events = [attrs(e["attributes"]) for s in [span, *carriers]
                      for e in s.get("events", []) if e["name"] == "gen_ai.evaluation.result"]
            scores = having(row, "score")
            assert len(scores) == len(events)
            for node, event in zip(scores, events, strict=True):
                assert node.attrs["data-scorer"] == event["gen_ai.evaluation.name"]
                assert float(node.attrs["data-score"]) == event["gen_ai.evaluation.score.value"]
                assert node.attrs["data-outcome"] == event.get("gen_ai.evaluation.score.label",
                                                               "scored")
                assert having(node, "reason")[0].text() == event["gen_ai.evaluation.explanation"]

    # Scored: the two support answers; their labels agree with the table.
    scored = [n for n in having(page, "score") if n.attrs["data-scorer"] == "content-similarity"]
    assert len(scored) == 2
    table = {r.attrs["data-scorer"]: {c.attrs["data-field"]: c.text()
                                      for c in r.find_all(data_field=None)}
             for r in page.find_all("table", id="scorers")[0].find_all("tr", data_scorer=None)}
    outcomes = [n.attrs["data-outcome"] for n in scored]
    assert table["content-similarity"]["scores"] == "2"
    assert table["content-similarity"]["pass"] == str(outcomes.count("pass"))
    assert table["content-similarity"]["fail"] == str(outcomes.count("fail"))
    assert table["slow-check"]["late"] == "1"


def test_a_late_score_is_shown_on_the_span_it_judges(app_file: Path) -> None:
    spans = file_spans(app_file)
    (carrier,) = [s for s in spans if s["name"] == "evaluation slow-check"]
    (judged,) = [s for s in spans if s["name"] == "invoke_agent late-one"]
    assert carrier["parentSpanId"] == judged["spanId"]
    assert not judged.get("events")  # it went out before its score
    assert view(str(app_file), "-o", "v.html", cwd=app_file.parent).returncode == 0
    page = parse(app_file.parent / "v.html")
    assert not [n for n in having(page, "span") if n.attrs["data-name"] == "evaluation slow-check"]
    (row,) = [n for n in having(page, "span") if n.attrs["data-span-id"] == judged["spanId"]]
    (score,) = having(row, "score")
    assert score.attrs["data-scorer"] == "slow-check"
    assert score.attrs["data-score"] == "0.25"
    assert having(score, "reason")[0].text() == "checked late"
    assert "late (carrier span)" in score.text()


def test_untrusted_text_is_escaped(app_file: Path) -> None:
    assert view(str(app_file), "-o", "v.html", cwd=app_file.parent).returncode == 0
    raw = (app_file.parent / "v.html").read_text(encoding="utf-8")
    for needle in ("<script>alert", "<img src=x", "</script><script>"):
        assert needle not in raw
    page = parse(app_file.parent / "v.html")
    # One script element, the page's own; the hostile name and input are text and attributes.
    assert len(page.find_all("script")) == 1
    (row,) = [n for n in having(page, "span")
              if n.attrs["data-name"] == f"invoke_agent {PAYLOAD_NAME}"]
    shown = {tr.children[0].text(): tr.children[1].text()
             for tr in having(row, "attrs")[0].find_all("tr")}
    assert json.loads(shown["input.value"]) == {"text": PAYLOAD_INPUT}
    assert json.loads(shown["output.value"]) == PAYLOAD_INPUT
    # Nothing is fetched: the policy forbids it and no element names a source.
    assert 'content="default-src \'none\';' in raw
    assert not [n for n in page.walk() if "src" in n.attrs or n.attrs.get("href")]


def test_the_page_never_overwrites_a_file_it_reads(app_file: Path) -> None:
    before = app_file.read_bytes()
    proc = view("-o", app_file.name, cwd=app_file.parent)
    assert proc.returncode == 2
    assert proc.stderr == (f"tracescore view: error: --output {app_file.name} is the FILE file: "
                           "writing it would overwrite it; name another file\n")
    assert app_file.read_bytes() == before


def test_a_missing_file_says_how_to_make_one(tmp_path: Path) -> None:
    proc = view(cwd=tmp_path)
    assert proc.returncode == 2
    assert "tracescore view: error: no span file 'tracescore-traces.jsonl'" in proc.stderr
    assert not (tmp_path / "tracescore-view.html").exists()


def test_a_large_rotated_file_is_read_within_the_bounds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.jsonl"
    monkeypatch.setenv("TRACESCORE_CONSOLE", "false")
    tracescore.configure(exporter=tracescore.FileSpanExporter(path, max_bytes=100_000,
                                                              backup_count=100),
                         export=tracescore.ExportOptions(max_batch_spans=30))

    @tracescore.retrieval(name="faq")
    def search(query: str) -> list[str]:
        return [f"passage for {query}"]

    @tracescore.agent(name="bulk")
    def answer(question: str) -> str:
        return search(question)[0]

    try:
        for n in range(600):
            answer(f"question {n:04d}")
    finally:
        tracescore.shutdown()
    rotated = sorted(tmp_path.glob("big.jsonl.*"))
    assert len(rotated) >= 3  # the spans are spread over the file and its backups
    assert sum(len(file_spans(p)) for p in [path, *rotated]) == 1200

    def newest_questions(page: Node) -> list[int]:
        found = []
        for row in having(page, "span"):
            if row.attrs["data-name"] == "invoke_agent bulk":
                text = having(row, "attrs")[0].text()
                found.append(int(re.search(r"question (\d{4})", text)[1]))
        return sorted(found)

    # The trace bound: the newest 50 traces, the rest counted on the page.
    proc = view(str(path), "-o", "t.html", "--max-traces", "50", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "left out: 550 older traces, 1100 spans" in proc.stdout
    assert proc.stdout.startswith("tracescore view: wrote t.html: 50 traces, 100 spans, 0 scores")
    page = parse(tmp_path / "t.html")
    assert len(page.find_all("section")) == 50
    assert newest_questions(page) == list(range(550, 600))
    note = page.find_all(id="left-out")[0].text()
    assert " ".join(note.split()).startswith(
        "Showing the newest 50 of 600 traces. 550 older traces (1100 spans) were left out")

    # The span bound: 75 spans kept, whole traces of two spans each.
    proc = view(str(path), "-o", "s.html", "--max-spans", "75", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    page = parse(tmp_path / "s.html")
    assert len(having(page, "span")) <= 75
    assert newest_questions(page) == list(range(563, 600))

    # --no-rotated: the current file only, whose spans are the newest.
    proc = view(str(path), "-o", "c.html", "--no-rotated", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    page = parse(tmp_path / "c.html")
    assert len(having(page, "span")) == len(file_spans(path))
