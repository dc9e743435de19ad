"""Export paths chosen from the standard OTel environment: OTLP http/protobuf, gRPC, file."""

from __future__ import annotations

import json
from typing import Any

import pytest

import tracescore
from tests.helpers import ProbeScorer, scaled
from tests.otlp_receiver import GrpcOtlpReceiver, HttpOtlpReceiver


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> Any:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                 "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
                 "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "5")
    yield
    tracescore.shutdown(3000)


def run_agent() -> None:
    @tracescore.agent(name="exported")
    def answer(q: str) -> str:
        return "an answer"

    answer("a question")


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
@pytest.mark.parametrize("generic", [True, False], ids=["OTLP_ENDPOINT", "OTLP_TRACES_ENDPOINT"])
def test_otlp_export_from_env(monkeypatch: pytest.MonkeyPatch, protocol: str,
                              generic: bool) -> None:
    receiver_cls = GrpcOtlpReceiver if protocol == "grpc" else HttpOtlpReceiver
    with receiver_cls() as receiver:
        if generic:
            monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
            monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
        else:
            endpoint = receiver.endpoint + ("" if protocol == "grpc" else "/v1/traces")
            monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint)
            monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", protocol)
        monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test")
        inst = tracescore.configure(
            service_name="export-test",
            scoring=[tracescore.ScoringRule(scorer=ProbeScorer(), threshold=0.5)],
        )
        assert inst.exporter_description.startswith(f"OTLP {protocol}")
        run_agent()
        assert tracescore.force_flush(5000)
        assert receiver.received.wait_for(lambda spans: len(spans) == 1, timeout=5)
        (span,) = receiver.received.spans
        assert span.name == "invoke_agent exported"
        assert span.resource["service.name"] == "export-test"
        assert span.resource["openinference.project.name"] == "export-test"
        assert span.resource["deployment.environment"] == "test"
        assert span.scope == "tracescore"
        (event,) = span.events
        assert event[0] == "gen_ai.evaluation.result"
        assert event[1]["gen_ai.evaluation.name"] == "probe"
        assert event[1]["gen_ai.evaluation.score.value"] == pytest.approx(0.09)
        assert event[1]["gen_ai.evaluation.score.label"] == "fail"
        # While the receiver still answers: with the generic endpoint the score log records and
        # metrics go there too, and a shutdown after it closed waits its whole deadline (3 s).
        tracescore.shutdown(int(scaled(5000)))


def test_default_is_otlp_json_file(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    inst = tracescore.configure(scoring=[tracescore.ScoringRule(scorer=ProbeScorer())])
    assert inst.exporter_description == "file tracescore-traces.jsonl"
    run_agent()
    assert tracescore.force_flush(5000)
    lines = (tmp_path / "tracescore-traces.jsonl").read_text().splitlines()
    assert len(lines) == 1
    doc = json.loads(lines[0])
    span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert span["name"] == "invoke_agent exported"
    assert len(span["traceId"]) == 32 and int(span["traceId"], 16)
    assert len(span["spanId"]) == 16
    assert span["kind"] == 1  # SPAN_KIND_INTERNAL, enums as integers
    (event,) = span["events"]
    assert event["name"] == "gen_ai.evaluation.result"
    keys = {a["key"] for a in event["attributes"]}
    assert {"gen_ai.evaluation.name", "gen_ai.evaluation.score.value"} <= keys


def test_export_file_env(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "nested" / "spans.jsonl"
    monkeypatch.setenv("TRACESCORE_EXPORT_FILE", str(target))
    inst = tracescore.configure()
    assert inst.exporter_description == f"file {target}"
    run_agent()
    assert tracescore.force_flush(5000)
    assert target.exists()


def test_unreachable_backend_does_not_hang_flush(monkeypatch: pytest.MonkeyPatch) -> None:
    # Nothing listens on port 9 (discard) on loopback.
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    tracescore.configure()
    run_agent()
    # It may fail to export, but it returns; the exit path uses the same deadline.
    tracescore.force_flush(2000)
