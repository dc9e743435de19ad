"""Writers of issue 12: scores as searchable span attributes, log records, Phoenix annotations,
metrics with exemplars and bounded dimensions, provenance. Each asserts on what a backend
receives: decoded OTLP on loopback, the JSON a loopback Phoenix recorded, the SDK's metric data.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import tracescore
from tests.helpers import ProbeScorer, eval_events, finished, memory_configure
from tests.otlp_receiver import attrs
from tracescore._core import semconv as sc
from tracescore._writers.attributes import attribute_key
from tracescore._writers.instruments import MAX_DIMENSION_VALUES, Telemetry

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _shutdown() -> Iterator[None]:
    yield
    tracescore.shutdown()


# -- a loopback backend: OTLP traces and logs, and Phoenix's annotation API ------------------------


class Backend:
    """Records what arrives: OTLP spans (``/v1/traces``), OTLP log records (``/v1/logs``) and
    Phoenix annotations (``/v1/span_annotations``); ``fail_annotations`` answers those 500."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.logs: list[dict[str, Any]] = []
        self.annotation_posts: list[dict[str, Any]] = []
        self.annotation_queries: list[str] = []
        self.fail_annotations = False
        self.cond = threading.Condition()
        backend = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if (self.headers.get("Content-Encoding") or "").lower() == "gzip":
                    body = gzip.decompress(body)
                path, _, query = self.path.partition("?")
                status, out = 200, b""
                with backend.cond:
                    if path == "/v1/traces":
                        backend._add_spans(body)
                        out = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                    elif path == "/v1/logs":
                        backend._add_logs(body)
                        out = logs_service_pb2.ExportLogsServiceResponse().SerializeToString()
                    elif path == "/v1/span_annotations":
                        backend.annotation_queries.append(query)
                        if backend.fail_annotations:
                            status = 500
                        else:
                            backend.annotation_posts.append(json.loads(body))
                        out = b'{"data": []}'
                    else:
                        status = 404
                    backend.cond.notify_all()
                self.send_response(status)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def _add_spans(self, raw: bytes) -> None:
        req = trace_service_pb2.ExportTraceServiceRequest()
        req.ParseFromString(raw)
        for rs in req.resource_spans:
            for ss in rs.scope_spans:
                for s in ss.spans:
                    self.spans.append({"name": s.name, "trace_id": s.trace_id.hex(),
                                       "span_id": s.span_id.hex(), "end": s.end_time_unix_nano,
                                       "attributes": attrs(s.attributes),
                                       "events": [(e.name, attrs(e.attributes))
                                                  for e in s.events]})

    def _add_logs(self, raw: bytes) -> None:
        req = logs_service_pb2.ExportLogsServiceRequest()
        req.ParseFromString(raw)
        for rl in req.resource_logs:
            for sl in rl.scope_logs:
                for r in sl.log_records:
                    self.logs.append({"event_name": r.event_name, "trace_id": r.trace_id.hex(),
                                      "span_id": r.span_id.hex(), "time": r.time_unix_nano,
                                      "attributes": attrs(r.attributes),
                                      "resource": attrs(rl.resource.attributes),
                                      "scope": sl.scope.name})

    def wait(self, predicate: Any, timeout: float = 30.0) -> bool:
        with self.cond:
            return self.cond.wait_for(predicate, timeout)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def backend() -> Iterator[Backend]:
    b = Backend()
    yield b
    b.close()


@tracescore.agent(name="support-bot")
def answer(question: str) -> str:
    return "The answer is 42, and that is all there is to say about it."


def rule(scorer: Any, threshold: float | None = 0.5) -> tracescore.ScoringRule:
    return tracescore.ScoringRule(scorer=scorer, on="agent", threshold=threshold)


# -- 2. scores as span attributes ---------------------------------------------------------------


def test_the_log_file_is_a_sibling_of_the_span_file() -> None:
    from tracescore._export.exporters import log_file_for

    assert log_file_for("tracescore-traces.jsonl") == Path("tracescore-logs.jsonl")
    assert log_file_for("out/run.jsonl") == Path("out/run-logs.jsonl")


def test_attribute_key_is_traceql_safe() -> None:
    assert attribute_key("answer-relevancy") == "answer_relevancy"
    assert attribute_key("tool-call-accuracy-code") == "tool_call_accuracy_code"
    assert attribute_key("My.Custom-Scorer v2") == "my_custom_scorer_v2"


def test_score_and_label_are_attributes_of_the_scored_span() -> None:
    _, exp = memory_configure(scoring=[rule(ProbeScorer(id="answer-relevancy"))])
    answer("q")
    (span,) = finished(exp)
    attributes = dict(span.attributes)
    assert attributes.pop("tracescore.score.answer_relevancy") == pytest.approx(0.59)
    assert attributes.pop("tracescore.label.answer_relevancy") == "pass"
    assert not [k for k in attributes if k.startswith(("tracescore.score", "tracescore.label"))]
    (event,) = eval_events(span)  # the event stays as it was
    assert event["gen_ai.evaluation.score.value"] == pytest.approx(0.59)


def test_a_failed_score_is_searchable_by_its_error_type() -> None:
    failing = ProbeScorer(id="faithfulness", fail_with=tracescore.JudgeTimeoutError("slow"))
    _, exp = memory_configure(scoring=[rule(failing)])
    answer("q")
    (span,) = finished(exp)
    assert span.attributes["tracescore.score_error.faithfulness"] == "timeout"
    assert "tracescore.score.faithfulness" not in span.attributes


class Gate:
    """A scorer that finishes only when the test opens it (a late score, deterministically)."""

    id = "slow-judge"
    uses_judge = False

    def __init__(self) -> None:
        self.opened = threading.Event()

    async def arun(self, **kwargs: Any) -> Any:
        while not self.opened.is_set():
            await asyncio.sleep(0.01)  # the loop must stay free; the test opens the gate
        return type("R", (), {"score": 0.25, "reason": "late"})()


def test_a_late_score_is_an_attribute_of_its_carrier_span() -> None:
    gate = Gate()
    inst, exp = memory_configure(scoring=[rule(gate)])
    answer("q")
    assert inst.processor.force_flush(200) is False  # the span goes out without its score
    gate.opened.set()
    assert inst.processor.force_flush(30_000)
    carrier = [s for s in exp.get_finished_spans() if s.name == "evaluation slow-judge"]
    assert len(carrier) == 1
    a = dict(carrier[0].attributes)
    assert a[sc.GEN_AI_OPERATION_NAME] == "evaluation"
    assert a[sc.OPENINFERENCE_SPAN_KIND] == "EVALUATOR"
    assert a["tracescore.score.slow_judge"] == 0.25
    assert a["tracescore.label.slow_judge"] == "fail"
    assert json.loads(a[sc.OUTPUT_VALUE]) == {"score": 0.25, "label": "fail",
                                               "explanation": "late", "error_type": None}


# -- 1. log records -------------------------------------------------------------------------------


def test_every_score_is_an_otlp_log_record_of_the_scored_span(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", backend.url)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    from opentelemetry import _logs

    before = _logs.get_logger_provider()
    tracescore.configure(service_name="logs-test",
                         scoring=[rule(ProbeScorer(id="answer-relevancy"))])
    answer("q")
    assert tracescore.force_flush(30_000)
    assert backend.wait(lambda: backend.logs and backend.spans)
    (span,) = backend.spans
    (record,) = backend.logs
    (event,) = [a for n, a in span["events"] if n == sc.GEN_AI_EVALUATION_RESULT_EVENT]
    assert record["event_name"] == "gen_ai.evaluation.result"
    assert (record["trace_id"], record["span_id"]) == (span["trace_id"], span["span_id"])
    assert record["time"] == span["end"]  # stamped at the scored span's end
    assert record["attributes"] == event  # the same attributes as the span event
    assert record["resource"]["service.name"] == "logs-test"
    assert record["scope"] == "tracescore"
    # tracescore's provider is its own: the global one is left for the application.
    assert _logs.get_logger_provider() is before


def test_log_records_go_to_a_sibling_file_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                 "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "TRACESCORE_EXPORT_FILE"):
        monkeypatch.delenv(name, raising=False)
    tracescore.configure(scoring=[rule(ProbeScorer())])
    answer("q")
    assert tracescore.force_flush(30_000)
    tracescore.shutdown()
    (line,) = (tmp_path / "tracescore-logs.jsonl").read_text(encoding="utf-8").splitlines()
    (record,) = json.loads(line)["resourceLogs"][0]["scopeLogs"][0]["logRecords"]
    spans = [json.loads(x) for x in (tmp_path / "tracescore-traces.jsonl").read_text().splitlines()]
    (span,) = [s for doc in spans for rs in doc["resourceSpans"] for ss in rs["scopeSpans"]
               for s in ss["spans"]]
    assert record["eventName"] == "gen_ai.evaluation.result"
    assert (record["traceId"], record["spanId"]) == (span["traceId"], span["spanId"])
    assert record["timeUnixNano"] == span["endTimeUnixNano"]


def test_a_custom_exporter_gets_no_log_provider_of_ours() -> None:
    inst, _ = memory_configure(scoring=[rule(ProbeScorer())])
    assert inst.destinations.logger_provider is None


# -- 3. Phoenix annotations -----------------------------------------------------------------------


def test_scores_are_posted_to_phoenix_as_span_annotations(backend: Backend) -> None:
    inst, exp = memory_configure(output=tracescore.OutputOptions(phoenix_url=backend.url + "/"),
                                 scoring=[rule(ProbeScorer(id="answer-relevancy"))])
    answer("q")
    (span,) = finished(exp, 30_000)
    assert backend.wait(lambda: backend.annotation_posts)
    (post,) = backend.annotation_posts
    (annotation,) = post["data"]
    version = eval_events(span)[0]["tracescore.evaluator.version"]
    assert annotation == {
        "span_id": f"{span.context.span_id:016x}",
        "name": "answer-relevancy",
        "annotator_kind": "CODE",
        "result": {"score": pytest.approx(0.59), "label": "pass",
                   "explanation": eval_events(span)[0]["gen_ai.evaluation.explanation"]},
        "metadata": {"trace_id": f"{span.context.trace_id:032x}", "source": "tracescore",
                     "tracescore.evaluator.version": version, "tracescore.sample_rate": 1.0},
        "identifier": f"tracescore:{version}",
    }
    assert backend.annotation_queries == ["sync=false"]
    (writer,) = inst.destinations.writers
    assert (writer.sent, writer.failed, writer.dropped) == (1, 0, 0)


def test_phoenix_failures_are_counted_not_raised(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend.fail_annotations = True
    reader = InMemoryMetricReader()
    monkeypatch.setenv("TRACESCORE_PHOENIX_URL", backend.url)
    inst, _ = memory_configure(
        output=tracescore.OutputOptions(meter_provider=MeterProvider(metric_readers=[reader])),
                               scoring=[rule(ProbeScorer())])
    answer("q")
    assert tracescore.force_flush(30_000)
    (writer,) = inst.destinations.writers
    assert (writer.sent, writer.failed) == (0, 1)
    assert len(backend.annotation_queries) == 3  # retried twice
    points = metric_points(reader, "tracescore.phoenix.annotations")
    assert [(p.attributes, p.value) for p in points] == [({"tracescore.outcome": "failed"}, 1)]


def test_phoenix_url_must_be_a_url() -> None:
    with pytest.raises(tracescore.ConfigurationError, match="phoenix_url"):
        tracescore.configure(output=tracescore.OutputOptions(phoenix_url="localhost:6006"))


# -- 4. metrics that alert ------------------------------------------------------------------------


def metric_points(reader: InMemoryMetricReader, name: str) -> list[Any]:
    data = reader.get_metrics_data()
    return [p for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
            if m.name == name for p in m.data.data_points]


def test_the_score_histogram_links_to_the_trace_and_names_the_agent() -> None:
    reader = InMemoryMetricReader()
    _, exp = memory_configure(
        output=tracescore.OutputOptions(meter_provider=MeterProvider(metric_readers=[reader])),
                              scoring=[rule(ProbeScorer())])
    answer("q")
    (span,) = finished(exp)
    (point,) = metric_points(reader, "tracescore.evaluation.score")
    assert dict(point.attributes) == {
        "gen_ai.evaluation.name": "probe", "gen_ai.evaluation.score.label": "pass",
        "gen_ai.agent.name": "support-bot", "gen_ai.operation.name": "invoke_agent"}
    (exemplar,) = point.exemplars
    assert (exemplar.trace_id, exemplar.span_id) == (span.context.trace_id,
                                                     span.context.span_id)
    jobs = metric_points(reader, "tracescore.scoring.jobs")
    assert [dict(p.attributes)["gen_ai.agent.name"] for p in jobs] == ["support-bot"]


def test_agent_names_are_capped_per_scorer() -> None:
    telemetry = Telemetry()
    names = [telemetry.bounded("probe", "gen_ai.agent.name", f"agent-{i}") for i in range(30)]
    assert names[:MAX_DIMENSION_VALUES] == [f"agent-{i}" for i in range(MAX_DIMENSION_VALUES)]
    assert set(names[MAX_DIMENSION_VALUES:]) == {"_other"}
    assert telemetry.bounded("probe", "gen_ai.agent.name", "agent-3") == "agent-3"
    assert telemetry.bounded("other-scorer", "gen_ai.agent.name", "agent-29") == "agent-29"
    assert telemetry.bounded("probe", "gen_ai.agent.name", None) == "_none"


# -- 5. provenance --------------------------------------------------------------------------------


def test_response_id_and_evaluator_version_are_on_every_score() -> None:
    from opentelemetry import trace

    _, exp = memory_configure(scoring=[tracescore.ScoringRule(scorer=ProbeScorer(), on="llm")])

    @tracescore.llm
    def call_model(prompt: str) -> str:
        trace.get_current_span().set_attribute("gen_ai.response.id", "chatcmpl-123")
        return "a reply that is long enough"

    call_model("hi")
    (span,) = finished(exp)
    (event,) = eval_events(span)
    assert event["gen_ai.response.id"] == "chatcmpl-123"
    assert len(event["tracescore.evaluator.version"]) == 12


def test_evaluator_version_follows_the_prompt_and_not_the_process() -> None:
    from tracescore.scorers import create_answer_relevancy_scorer, create_scorer
    from tracescore.scorers._base import JudgePrompt

    base = create_answer_relevancy_scorer()
    assert base.fingerprint == create_answer_relevancy_scorer().fingerprint
    assert base.fingerprint != create_answer_relevancy_scorer(scale=10).fingerprint

    def custom(instructions: str) -> Any:
        return create_scorer(id="polite", generate_score=JudgePrompt(
            instructions=instructions, prompt="{output}"))

    assert custom("Is it polite?").fingerprint != custom("Is it polite? Be strict.").fingerprint
    code = ("from tracescore.scorers import create_answer_relevancy_scorer as c;"
            "print(c().fingerprint)")
    env = {**os.environ, "PYTHONHASHSEED": "123", "LITELLM_OFFLINE_MODE": "true"}
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=env, cwd=REPO, check=True).stdout.strip()
    assert other == base.fingerprint


def test_log_records_can_be_switched_off_for_a_backend_without_logs(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", backend.url)
    monkeypatch.setenv("TRACESCORE_LOG_RECORDS", "false")
    inst = tracescore.configure(scoring=[rule(ProbeScorer())])
    assert inst.destinations.logger_provider is None
    answer("q")
    assert tracescore.force_flush(30_000)
    assert backend.wait(lambda: backend.spans)
    assert backend.logs == []
