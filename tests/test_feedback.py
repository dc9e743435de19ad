"""Human feedback after the fact (issue 25): ``record_feedback`` on finished spans goes out as a
``gen_ai.evaluation.result`` log record marked HUMAN (decoded from a loopback OTLP receiver and
from the local file exporter's file) and as a Phoenix annotation; ``calibrate_feedback`` and
``tracescore calibrate --feedback`` read the verdicts back, pair them with the scorer's recorded
scores and say whether the threshold should move."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from opentelemetry import trace

import tracescore
from tests.helpers import ProbeScorer, memory_configure
from tests.test_writers import Backend
from tracescore._offline.calibrate import stats

REPO = Path(__file__).resolve().parents[1]
OTLP_ENV = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "TRACESCORE_EXPORT_FILE")


@pytest.fixture(autouse=True)
def _shutdown() -> Iterator[None]:
    yield
    tracescore.shutdown()


@pytest.fixture
def backend() -> Iterator[Backend]:
    b = Backend()
    yield b
    b.close()


SPANS: list[Any] = []


@tracescore.agent(name="support-bot")
def answer(text: str) -> str:
    SPANS.append(trace.get_current_span().get_span_context())
    return text


def rule() -> tracescore.ScoringRule:
    # ProbeScorer scores len(output) / 100; under the id of a real scorer, so calibration
    # knows its direction and scale.
    return tracescore.ScoringRule(scorer=ProbeScorer(id="faithfulness"), on="agent",
                                  threshold=0.5)


# Output lengths (so judge scores 0.2 ... 1.0) and the human verdicts on them: the judge
# (threshold 0.5) agrees on 5 of 6; the humans fail the 0.6 answer.
CASES = [(20, "fail"), (40, "fail"), (60, "fail"), (80, "pass"), (90, "pass"), (100, "pass")]


def run_cases() -> list[Any]:
    SPANS.clear()
    for length, _ in CASES:
        answer("x" * length)
    return list(SPANS)


def test_feedback_round_trips_through_the_file_exporter_into_calibrate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in OTLP_ENV:
        monkeypatch.delenv(name, raising=False)
    tracescore.configure(scoring=[rule()])
    spans = run_cases()
    assert tracescore.force_flush(30_000)
    # Later, once the spans went out: a reviewer's verdict on each.
    for span, (_, verdict) in zip(spans, CASES, strict=True):
        assert tracescore.record_feedback("faithfulness", span=span, label=verdict,
                                          annotator="reviewer")
    tracescore.shutdown()

    logs = tmp_path / "tracescore-logs.jsonl"
    result = tracescore.calibrate_feedback("faithfulness", feedback=[logs])

    assert len(result.items) == 6
    assert {i.id for i in result.items} == {f"{s.trace_id:032x}/{s.span_id:016x}" for s in spans}
    a = result.at_threshold
    assert (a.true_pass, a.false_fail, a.false_pass, a.true_fail) == (3, 0, 1, 2)
    assert result.threshold_advice is not None
    assert result.best is not None and result.best.threshold == 0.8
    # One item more agrees at 0.8 and none fewer: not enough to move on six items.
    assert result.threshold_advice["move"] is False
    assert "keep the threshold at 0.5" in result.table()

    out = subprocess.run(
        [sys.executable, "-m", "tracescore", "calibrate", "--feedback", str(logs),
         "--scorer", "faithfulness", "--report", str(tmp_path / "r.json")],
        capture_output=True, text=True, cwd=REPO, env={**_env(), "LITELLM_OFFLINE_MODE": "true"})
    # Six items cannot show that the judge beats chance: exit 1, and the report says why.
    assert out.returncode == 1, out.stderr
    assert "accuracy 83.3% (5/6)" in out.stdout
    assert "scorer: NO BETTER THAN CHANCE at 0.5" in out.stdout
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["threshold_advice"]["best"] == 0.8


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k not in OTLP_ENV}


def test_a_feedback_record_is_a_human_evaluation_of_the_span_over_otlp(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", backend.url)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    tracescore.configure(service_name="feedback-test", scoring=[rule()])
    (span,) = [run_cases()[0]]
    assert tracescore.force_flush(30_000)
    assert tracescore.record_feedback(
        "faithfulness", trace_id=f"{span.trace_id:032x}", span_id=f"{span.span_id:016x}",
        score=0.0, label="thumbs_down", explanation="Made up a date.", annotator="end_user")
    assert tracescore.force_flush(30_000)
    assert backend.wait(lambda: any(r["attributes"].get("tracescore.evaluation.annotator_kind")
                                    for r in backend.logs))

    (human,) = [r for r in backend.logs
                if r["attributes"].get("tracescore.evaluation.annotator_kind") == "HUMAN"]
    assert human["event_name"] == "gen_ai.evaluation.result"
    assert (human["trace_id"], human["span_id"]) == (f"{span.trace_id:032x}",
                                                     f"{span.span_id:016x}")
    assert human["attributes"] == {
        "gen_ai.evaluation.name": "faithfulness", "gen_ai.evaluation.score.value": 0.0,
        "gen_ai.evaluation.score.label": "thumbs_down",
        "gen_ai.evaluation.explanation": "Made up a date.",
        "tracescore.evaluation.annotator_kind": "HUMAN",
        "tracescore.evaluation.annotator": "end_user"}
    assert human["resource"]["service.name"] == "feedback-test"
    # The judge's own records are not marked human.
    assert all("tracescore.evaluation.annotator_kind" not in r["attributes"]
               for r in backend.logs if r is not human)


def test_feedback_is_a_human_annotation_in_phoenix(backend: Backend) -> None:
    inst, _ = memory_configure(output=tracescore.OutputOptions(phoenix_url=backend.url),
                               scoring=[rule()])
    span = run_cases()[3]
    assert tracescore.force_flush(30_000)
    assert tracescore.record_feedback("faithfulness", span=span, label="pass",
                                      annotator="reviewer")
    assert tracescore.force_flush(30_000)
    assert backend.wait(lambda: any(a["annotator_kind"] == "HUMAN" for p in
                                    backend.annotation_posts for a in p["data"]))
    (human,) = [a for p in backend.annotation_posts for a in p["data"]
                if a["annotator_kind"] == "HUMAN"]
    assert human == {
        "span_id": f"{span.span_id:016x}", "name": "faithfulness", "annotator_kind": "HUMAN",
        "result": {"label": "pass"},
        "metadata": {"trace_id": f"{span.trace_id:032x}", "source": "tracescore",
                     "tracescore.evaluation.annotator": "reviewer"},
        "identifier": "tracescore-feedback:reviewer",
    }


class FakePhoenix:
    """Phoenix's read API on loopback: ``GET /v1/projects/{p}/spans`` (two pages) and
    ``GET /v1/projects/{p}/span_annotations?span_ids=...``."""

    def __init__(self, annotations: list[dict[str, Any]]) -> None:
        self.queries: list[str] = []
        fake = self
        span_ids = sorted({a["span_id"] for a in annotations})

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                url = urlparse(self.path)
                query = parse_qs(url.query)
                fake.queries.append(self.path)
                if url.path == "/v1/projects/bot/spans":
                    page = int((query.get("cursor") or ["0"])[0])
                    half = span_ids[page * 3:page * 3 + 3]
                    body = {"data": [{"context": {"span_id": s, "trace_id": "ab" * 16}}
                                     for s in half],
                            "next_cursor": "1" if page == 0 and len(span_ids) > 3 else None}
                elif url.path == "/v1/projects/bot/span_annotations":
                    wanted = set(query.get("span_ids") or [])
                    body = {"data": [a for a in annotations if a["span_id"] in wanted],
                            "next_cursor": None}
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                out = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_calibrate_reads_phoenix_annotations() -> None:
    annotations = []
    for i, (length, verdict) in enumerate(CASES):
        span_id = f"{i + 1:016x}"
        annotations.append({"span_id": span_id, "name": "faithfulness", "annotator_kind": "LLM",
                            "result": {"score": length / 100, "label": "pass"},
                            "metadata": {"tracescore.judge.model": "openai/judge"},
                            "updated_at": "2026-12-01T10:00:00+00:00"})
        annotations.append({"span_id": span_id, "name": "faithfulness",
                            "annotator_kind": "HUMAN", "result": {"label": verdict},
                            "updated_at": "2026-12-01T11:00:00+00:00"})
    phoenix = FakePhoenix(annotations)
    try:
        result = tracescore.calibrate_feedback("faithfulness", phoenix_url=phoenix.url,
                                               phoenix_project="bot")
    finally:
        phoenix.close()
    assert len(result.items) == 6
    assert result.at_threshold.accuracy == pytest.approx(5 / 6)
    assert result.judge_model == "openai/judge"
    assert any("cursor=1" in q for q in phoenix.queries)  # the second page of spans was read


def test_the_latest_human_verdict_wins_and_unpaired_spans_are_left_out(tmp_path: Path) -> None:
    from tracescore._offline.feedback import FeedbackRecord

    def rec(span: str, human: bool, when: int, score: float | None = None,
            label: str | None = None) -> FeedbackRecord:
        return FeedbackRecord("ab" * 16, span, "hallucination", score, label, human, when)

    records = [rec("01" * 8, False, 1, score=0.2), rec("01" * 8, True, 2, label="fail"),
               rec("01" * 8, True, 3, label="pass"),  # the reviewer changed their mind
               rec("02" * 8, True, 2, label="fail"),  # no score on this span
               rec("03" * 8, False, 1, score=0.9)]  # no verdict on this one
    result = tracescore.calibrate_feedback("hallucination", records=records)
    (item,) = result.items
    assert (item.score, item.human_pass) == (0.2, True)
    assert result.at_threshold.accuracy == 1.0  # lower is better: 0.2 passes at 0.5


def test_nothing_paired_is_a_problem_not_a_crash() -> None:
    result = tracescore.calibrate_feedback("faithfulness", records=[])
    assert not result.passed
    assert "no span has both a human verdict and a faithfulness score" in result.problems[0]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"label": "pass"}, "needs the judged span"),
        ({"trace_id": "zz", "label": "pass"}, "hex string"),
        ({"trace_id": "0" * 32, "label": "pass"}, "not a valid 128-bit id"),
        ({"trace_id": "ab" * 16}, "needs a score= or a label="),
        ({"trace_id": "ab" * 16, "score": float("nan")}, "finite number"),
        ({"span": "not a span", "label": "pass"}, "Span or SpanContext"),
    ],
)
def test_record_feedback_refuses_what_cannot_be_a_record(kwargs: dict[str, Any],
                                                          match: str) -> None:
    with pytest.raises(tracescore.ConfigurationError, match=match):
        tracescore.record_feedback("faithfulness", **kwargs)


def test_record_feedback_without_a_destination_says_so() -> None:
    memory_configure()  # a custom exporter: no log provider of tracescore's, no Phoenix
    assert tracescore.record_feedback("faithfulness", trace_id="ab" * 16, label="pass") is False


def test_mcnemar_and_threshold_advice() -> None:
    assert stats.mcnemar_p(0, 0) == 1.0
    assert stats.mcnemar_p(9, 1) == pytest.approx(0.021484375)
    # 20 items the judge passes at 0.6 that humans fail: a threshold of 0.7 fixes them all.
    pairs = [(0.6, False)] * 20 + [(0.9, True)] * 20 + [(0.2, False)] * 10
    advice = stats.threshold_advice(pairs, 0.5)
    assert advice is not None and advice["move"] is True
    assert (advice["best"], advice["gained"], advice["lost"]) == (0.9, 20, 0)
    assert "move the threshold from 0.5 to 0.9" in str(advice["text"])
    low, high = stats.wilson_interval(45, 50) or (0, 0)
    assert 0.78 < low < 0.79 and 0.95 < high < 0.96
    kappa = stats.kappa_interval(20, 0, 0, 30)
    assert kappa == (1.0, 1.0)
