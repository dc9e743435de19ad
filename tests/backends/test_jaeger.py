"""Jaeger v2, fed by the HaluEval demo: what its query API returns afterwards.

The demo exports over OTLP/HTTP to Jaeger's receiver (in-memory storage). Jaeger shows span
events as "logs" and span attributes as "tags"; its tag search matches strings, which is why the
label (``tracescore.label.<key>=fail``) is the searchable form of a score there. The assertions
read ``GET /api/traces?service=...`` (with and without ``tags=``) and ``GET /api/traces/<id>``.
"""

from __future__ import annotations

import dataclasses
import json
import urllib.parse
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from tests.backends import servers
from tests.backends.installed import require_binary
from tests.test_examples import AGENT_SPAN, CHAT_SPAN, RETRIEVAL_SPAN, run_demo

SERVICE = "halueval-rag-demo"
ROWS = 200
SCORER = "content-similarity"
SCORE_TAG = "tracescore.score.content_similarity"
LABEL_TAG = "tracescore.label.content_similarity"
INGEST_TIMEOUT = 120.0  # seconds


@dataclasses.dataclass
class JaegerRun:
    summary: dict[str, Any]
    base: str
    traces: list[dict[str, Any]]


def search(base: str, tags: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """``GET /api/traces`` for the demo's service over the last hour, up to 1,000 traces."""
    query = {"service": SERVICE, "limit": "1000", "lookback": "1h"}
    if tags:
        query["tags"] = json.dumps(tags)
    return list(servers.http_json(f"{base}/api/traces?{urllib.parse.urlencode(query)}")["data"])


def _complete(base: str) -> list[dict[str, Any]] | None:
    traces = search(base)
    if len(traces) == ROWS and all(len(t["spans"]) == 3 for t in traces):
        return traces
    return None


@pytest.fixture(scope="module")
def jaeger_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JaegerRun]:
    binary = require_binary("jaeger")
    workdir = tmp_path_factory.mktemp("jaeger")
    with servers.jaeger(workdir, binary) as backend:
        base = backend.urls["base"]
        summary, _ = run_demo(
            cwd=workdir,
            env={
                "OTEL_EXPORTER_OTLP_ENDPOINT": backend.urls["otlp"],
                # Jaeger stores traces only: its receiver has no logs pipeline to take records.
                "TRACESCORE_LOG_RECORDS": "false",
                "TRACESCORE_METRICS": "false",  # nor a metrics pipeline
            },
        )
        traces = servers.wait_for(
            lambda: _complete(base), timeout=INGEST_TIMEOUT,
            what=f"{ROWS} complete traces in Jaeger", process=backend.process,
        )
        yield JaegerRun(summary, base, traces)


def _tags(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {t["key"]: t["value"] for t in items}


def _agent_span(trace: dict[str, Any]) -> dict[str, Any]:
    (span,) = [s for s in trace["spans"] if s["operationName"] == AGENT_SPAN]
    return span


def test_jaeger_has_every_trace_of_the_run(jaeger_run: JaegerRun) -> None:
    assert jaeger_run.summary["stats"]["spans_exported"] == 3 * ROWS
    names = Counter(s["operationName"] for t in jaeger_run.traces for s in t["spans"])
    assert names == {AGENT_SPAN: ROWS, RETRIEVAL_SPAN: ROWS, CHAT_SPAN: ROWS}
    services = {p["serviceName"] for t in jaeger_run.traces for p in t["processes"].values()}
    assert services == {SERVICE}


def test_jaeger_trace_shows_score_as_log_and_tags(jaeger_run: JaegerRun) -> None:
    labels: Counter[str] = Counter()
    for listed in jaeger_run.traces:
        # Read each trace again by id, as the UI's trace view does.
        (trace,) = servers.http_json(f"{jaeger_run.base}/api/traces/{listed['traceID']}")["data"]
        for span in trace["spans"]:
            if span["operationName"] != AGENT_SPAN:
                assert span["logs"] == []
                assert SCORE_TAG not in _tags(span["tags"])
        span = _agent_span(trace)
        tags = _tags(span["tags"])
        score, label = tags[SCORE_TAG], tags[LABEL_TAG]
        # A number to Jaeger (JSON writes 1.0 as 1), the label a string for its tag search.
        types = {t["key"]: t["type"] for t in span["tags"]}
        assert (types[SCORE_TAG], types[LABEL_TAG]) == ("float64", "string")
        assert 0.0 <= score <= 1.0
        assert label == ("pass" if score >= 0.5 else "fail")  # the demo's --threshold 0.5
        labels[label] += 1
        (log,) = span["logs"]
        fields = _tags(log["fields"])
        assert fields["event"] == "gen_ai.evaluation.result"
        assert fields["gen_ai.evaluation.name"] == SCORER
        assert fields["gen_ai.evaluation.score.value"] == score
        assert fields["gen_ai.evaluation.score.label"] == label
        assert fields["gen_ai.evaluation.explanation"]
    similarity = jaeger_run.summary["scorers"][SCORER]
    assert labels == {"pass": similarity["passed"], "fail": similarity["failed"]}


def test_jaeger_tag_search_on_the_label_finds_the_failing_traces(jaeger_run: JaegerRun) -> None:
    failing = {
        t["traceID"]
        for t in jaeger_run.traces
        if _tags(_agent_span(t)["tags"])[LABEL_TAG] == "fail"
    }
    similarity = jaeger_run.summary["scorers"][SCORER]
    assert len(failing) == similarity["failed"] > 0
    found = search(jaeger_run.base, {LABEL_TAG: "fail"})
    assert {t["traceID"] for t in found} == failing
    for trace in found:
        assert _tags(_agent_span(trace)["tags"])[SCORE_TAG] < 0.5
    passing = search(jaeger_run.base, {LABEL_TAG: "pass"})
    assert len(passing) == similarity["passed"]
    assert not failing & {t["traceID"] for t in passing}
