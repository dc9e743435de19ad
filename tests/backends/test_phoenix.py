"""Arize Phoenix, fed by the HaluEval demo: what its REST API returns afterwards.

The demo exports over OTLP/HTTP to Phoenix and posts each score as a span annotation
(``TRACESCORE_PHOENIX_URL``); log records are off (Phoenix answers OTLP logs with HTTP 405).
The assertions read Phoenix's ``GET /v1/projects/<name>/spans`` and ``.../span_annotations``.
"""

from __future__ import annotations

import dataclasses
import json
import urllib.error
import urllib.parse
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.backends import servers
from tests.backends.installed import require_binary
from tests.test_examples import AGENT_SPAN, CHAT_SPAN, RETRIEVAL_SPAN, data_rows, run_demo
from tracescore.__main__ import main
from tracescore.scorers import create_completeness_scorer

PROJECT = "halueval-rag-demo"
ROWS = 200
SCORER = "content-similarity"
SCORE_ATTRIBUTE = "tracescore.score.content_similarity"
LABEL_ATTRIBUTE = "tracescore.label.content_similarity"
INGEST_TIMEOUT = 180.0  # seconds; Phoenix writes spans to SQLite asynchronously


@dataclasses.dataclass
class PhoenixRun:
    summary: dict[str, Any]
    spans: list[dict[str, Any]]
    annotations: list[dict[str, Any]]
    base: str = ""


def _paged(url: str) -> list[dict[str, Any]] | None:
    """Every item of a paginated Phoenix list (``data``, ``next_cursor``); None on 404."""
    items: list[dict[str, Any]] = []
    cursor = None
    while True:
        page_url = url if cursor is None else f"{url}&cursor={urllib.parse.quote(cursor)}"
        try:
            page = servers.http_json(page_url)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:  # the project does not exist yet
                return None
            raise
        items += page["data"]
        cursor = page.get("next_cursor")
        if not cursor:
            return items


def read_spans(base: str, expected: int) -> list[dict[str, Any]] | None:
    """The project's spans once ``expected`` of them are in, else None."""
    spans = _paged(f"{base}/v1/projects/{PROJECT}/spans?limit=1000")
    return spans if spans is not None and len(spans) >= expected else None


def read_annotations(base: str, span_ids: list[str], expected: int) -> list[dict[str, Any]] | None:
    """The span annotations of ``span_ids`` once ``expected`` of them are in, else None."""
    annotations: list[dict[str, Any]] = []
    for i in range(0, len(span_ids), 50):  # keep the query string short
        query = urllib.parse.urlencode([("span_ids", s) for s in span_ids[i : i + 50]])
        page = _paged(f"{base}/v1/projects/{PROJECT}/span_annotations?limit=1000&{query}")
        annotations += page or []
    return annotations if len(annotations) >= expected else None


@pytest.fixture(scope="module")
def phoenix_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PhoenixRun]:
    binary = require_binary("phoenix")
    workdir = tmp_path_factory.mktemp("phoenix")
    with servers.phoenix(workdir, binary) as backend:
        base = backend.urls["base"]
        summary, _ = run_demo(
            cwd=workdir,
            env={
                "OTEL_EXPORTER_OTLP_ENDPOINT": base,
                "TRACESCORE_PHOENIX_URL": base,
                "TRACESCORE_LOG_RECORDS": "false",
                "TRACESCORE_METRICS": "false",
            },
        )
        spans = servers.wait_for(
            lambda: read_spans(base, 3 * ROWS), timeout=INGEST_TIMEOUT,
            what=f"{3 * ROWS} spans in Phoenix", process=backend.process,
        )
        agent_ids = [s["context"]["span_id"] for s in spans if s["name"] == AGENT_SPAN]
        annotations = servers.wait_for(
            lambda: read_annotations(base, agent_ids, ROWS), timeout=INGEST_TIMEOUT,
            what=f"{ROWS} span annotations in Phoenix", process=backend.process,
        )
        yield PhoenixRun(summary, spans, annotations, base)


def _kind(span: dict[str, Any], right_answers: dict[str, str]) -> str:
    """``right`` or ``hallucinated``: what the agent span's output replayed."""
    attributes = span["attributes"]
    question = json.loads(attributes["input.value"])["question"]
    answer = json.loads(attributes["output.value"])
    return "right" if answer == right_answers[question] else "hallucinated"


def test_phoenix_has_every_span_of_the_run(phoenix_run: PhoenixRun) -> None:
    spans = phoenix_run.spans
    assert phoenix_run.summary["stats"]["spans_exported"] == 3 * ROWS
    assert Counter(s["name"] for s in spans) == {
        AGENT_SPAN: ROWS, RETRIEVAL_SPAN: ROWS, CHAT_SPAN: ROWS,
    }
    kinds = {s["name"]: s["span_kind"] for s in spans}
    assert kinds == {AGENT_SPAN: "AGENT", RETRIEVAL_SPAN: "RETRIEVER", CHAT_SPAN: "LLM"}
    agents = {s["context"]["span_id"] for s in spans if s["name"] == AGENT_SPAN}
    assert all(s["parent_id"] in agents for s in spans if s["name"] != AGENT_SPAN)


def test_phoenix_agent_spans_carry_score_event_and_attributes(phoenix_run: PhoenixRun) -> None:
    right_answers = {row["question"]: row["right_answer"] for row in data_rows()}
    scores: dict[str, list[float]] = {"right": [], "hallucinated": []}
    labels: Counter[str] = Counter()
    for span in phoenix_run.spans:
        events = [e for e in span["events"] if e["name"] == "gen_ai.evaluation.result"]
        if span["name"] != AGENT_SPAN:
            assert events == [] and SCORE_ATTRIBUTE not in span["attributes"]
            continue
        (event,) = events
        attributes = event["attributes"]
        assert attributes["gen_ai.evaluation.name"] == SCORER
        score = span["attributes"][SCORE_ATTRIBUTE]
        assert attributes["gen_ai.evaluation.score.value"] == score
        label = span["attributes"][LABEL_ATTRIBUTE]
        assert attributes["gen_ai.evaluation.score.label"] == label
        assert label == ("pass" if score >= 0.5 else "fail")  # the demo's --threshold 0.5
        labels[label] += 1
        scores[_kind(span, right_answers)].append(score)
    # What Phoenix stored agrees with what the demo printed.
    similarity = phoenix_run.summary["scorers"][SCORER]
    for kind, values in scores.items():
        assert len(values) == similarity[kind]["n"]
        assert sum(values) / len(values) == pytest.approx(similarity[kind]["mean"], abs=1e-4)
    assert labels == {"pass": similarity["passed"], "fail": similarity["failed"]}


def test_phoenix_annotations_one_per_score(phoenix_run: PhoenixRun) -> None:
    spans = {s["context"]["span_id"]: s for s in phoenix_run.spans}
    annotations = phoenix_run.annotations
    assert len(annotations) == ROWS
    assert len({a["span_id"] for a in annotations}) == ROWS
    for annotation in annotations:
        span = spans[annotation["span_id"]]
        assert span["name"] == AGENT_SPAN
        assert annotation["name"] == SCORER
        assert annotation["annotator_kind"] == "CODE"  # a heuristic scorer: no judge
        assert annotation["identifier"].startswith("tracescore:")
        result = annotation["result"]
        assert result["score"] == span["attributes"][SCORE_ATTRIBUTE]
        assert result["label"] == span["attributes"][LABEL_ATTRIBUTE]
        assert result["explanation"]
        assert annotation["metadata"]["trace_id"] == span["context"]["trace_id"]
    similarity = phoenix_run.summary["scorers"][SCORER]
    assert Counter(a["result"]["label"] for a in annotations) == {
        "pass": similarity["passed"], "fail": similarity["failed"],
    }



def test_rescore_reads_the_traces_phoenix_stored(
        phoenix_run: PhoenixRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``tracescore rescore --phoenix-url``: Phoenix's own span objects (its attribute and time
    shapes) give one agent turn per trace, each scored by both sides, and the baseline's scores
    are the ones the first reading of the same spans gives (nothing lost in the conversion)."""
    report = tmp_path / "rescore.json"
    code = main(["rescore", "--phoenix-url", phoenix_run.base, "--phoenix-project", PROJECT,
                 "--scorer", "completeness:0.5", "--scorer", "keyword-coverage:0.5",
                 "--no-progress", "--report", str(report)])
    out = capsys.readouterr().out
    assert code == 0, out
    data = json.loads(report.read_text())
    assert data["traces"]["spans"] == 3 * ROWS and data["traces"]["skipped_records"] == 0
    assert data["traces"]["complete"] == ROWS and data["turns"] == ROWS
    agents = {s["context"]["span_id"]: s for s in phoenix_run.spans if s["name"] == AGENT_SPAN}
    assert {item["span_id"] for item in data["items"]} == set(agents)
    for side in data["sides"]:
        assert (side["scored"], side["error"], side["not_scorable"]) == (ROWS, 0, 0)
    scorer = create_completeness_scorer()
    assert data["sides"][0]["evaluator_version"] == scorer.fingerprint
    for item in data["items"][:20]:
        span = agents[item["span_id"]]
        question = json.loads(span["attributes"]["input.value"])["question"]
        answer = json.loads(span["attributes"]["output.value"])
        expected = scorer.run(input=question, output=answer).score
        assert item["outcomes"][0]["score"] == pytest.approx(expected)
    (comparison,) = data["comparisons"]
    assert comparison["n"] == ROWS
