"""Metrics go where the log records go (issue 24): with only ``OTEL_EXPORTER_OTLP_ENDPOINT`` set
and no MeterProvider of the application's, the score metrics arrive at the OTLP endpoint; with no
endpoint they are written beside the span file; ``TRACESCORE_METRICS=false`` (or
``OTEL_METRICS_EXPORTER=none``) and a provider of the application's keep tracescore's own away.

The OTLP case runs a real script in a fresh interpreter whose environment holds nothing of
OpenTelemetry's but the endpoint, against a loopback receiver that decodes what arrives.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from tracescore._export.exporters import metric_file_for

REPO = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import tracescore
    from tracescore.scorers import create_content_similarity_scorer

    tracescore.configure(service_name="metrics-test", scoring=[tracescore.ScoringRule(
        scorer=create_content_similarity_scorer(), on="agent", threshold=0.5,
        ground_truth=lambda span, question: "Paris is the capital of France.")])

    @tracescore.agent(name="geo")
    def answer(question):
        return "Paris is the capital of France."

    answer("What is the capital of France?")
    answer("And of Italy?")
    tracescore.shutdown()
""")


class Receiver:
    """OTLP/HTTP on loopback: ``/v1/traces`` and ``/v1/metrics`` decoded, ``/v1/logs`` taken."""

    def __init__(self) -> None:
        self.spans: list[Any] = []
        self.metrics: list[Any] = []  # ExportMetricsServiceRequest messages
        self.paths: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if (self.headers.get("Content-Encoding") or "").lower() == "gzip":
                    body = gzip.decompress(body)
                receiver.paths.append(self.path)
                if self.path == "/v1/traces":
                    req = trace_service_pb2.ExportTraceServiceRequest()
                    req.ParseFromString(body)
                    receiver.spans += [s for rs in req.resource_spans
                                       for ss in rs.scope_spans for s in ss.spans]
                elif self.path == "/v1/metrics":
                    req = metrics_service_pb2.ExportMetricsServiceRequest()
                    req.ParseFromString(body)
                    receiver.metrics.append(req)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def run_script(tmp_path: Path, **env: str) -> None:
    """Run SCRIPT with only what a fresh shell has plus ``env`` (no OTEL_*/TRACESCORE_*)."""
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("OTEL_", "TRACESCORE_", "OPENAI_", "PYTEST"))}
    clean.update(LITELLM_OFFLINE_MODE="true", PYTHONPATH=str(REPO), **env)
    script = tmp_path / "app.py"
    script.write_text(SCRIPT)
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=clean,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr


def attrs(kvs: Any) -> dict[str, Any]:
    return {kv.key: getattr(kv.value, kv.value.WhichOneof("value")) for kv in kvs}


def score_points(requests: list[Any]) -> tuple[dict[str, Any], list[Any]]:
    """The resource attributes and the data points of ``tracescore.evaluation.score``."""
    resource: dict[str, Any] = {}
    points = []
    for req in requests:
        for rm in req.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    if metric.name == "tracescore.evaluation.score":
                        resource = attrs(rm.resource.attributes)
                        points += list(metric.histogram.data_points)
    return resource, points


def test_metrics_reach_the_otlp_endpoint_with_only_the_endpoint_set(
        tmp_path: Path, receiver: Receiver) -> None:
    run_script(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url)

    assert "/v1/metrics" in receiver.paths
    resource, points = score_points(receiver.metrics)
    assert resource["service.name"] == "metrics-test"  # the span resource
    assert sum(p.count for p in points) == 2
    (point,) = points
    assert attrs(point.attributes) == {
        "gen_ai.evaluation.name": "content-similarity",
        "gen_ai.evaluation.score.label": "pass",
        "gen_ai.agent.name": "geo",
        "gen_ai.operation.name": "invoke_agent",
    }
    # The exemplars link the score to its trace, which arrived at the same endpoint.
    agent_traces = {s.trace_id for s in receiver.spans if s.name == "invoke_agent geo"}
    assert len(agent_traces) == 2
    assert {e.trace_id for e in point.exemplars} <= agent_traces
    assert point.exemplars
    # Nothing of it went to a file.
    assert not metric_file_for(tmp_path / "tracescore-traces.jsonl").exists()


@pytest.mark.parametrize("off", [{"TRACESCORE_METRICS": "false"},
                                 {"OTEL_METRICS_EXPORTER": "none"}])
def test_metrics_of_our_own_can_be_switched_off(
        tmp_path: Path, receiver: Receiver, off: dict[str, str]) -> None:
    run_script(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url, **off)

    assert "/v1/traces" in receiver.paths  # the spans still went out
    assert "/v1/metrics" not in receiver.paths


def test_metrics_go_to_a_sibling_of_the_span_file_by_default(tmp_path: Path) -> None:
    run_script(tmp_path)

    assert metric_file_for("tracescore-traces.jsonl") == Path("tracescore-metrics.jsonl")
    lines = (tmp_path / "tracescore-metrics.jsonl").read_text(encoding="utf-8").splitlines()
    docs = [json.loads(line) for line in lines]
    points = [p for d in docs for rm in d["resourceMetrics"] for sm in rm["scopeMetrics"]
              for m in sm["metrics"] if m["name"] == "tracescore.evaluation.score"
              for p in m["histogram"]["dataPoints"]]
    # Cumulative: the last export holds the total.
    assert int(points[-1]["count"]) == 2
    spans = [s for line in (tmp_path / "tracescore-traces.jsonl").read_text().splitlines()
             for rs in json.loads(line)["resourceSpans"] for ss in rs["scopeSpans"]
             for s in ss["spans"]]
    trace_ids = {s["traceId"] for s in spans}
    assert {e["traceId"] for e in points[-1]["exemplars"]} <= trace_ids  # hex, as OTLP/JSON


def test_a_meter_provider_of_the_applications_keeps_ours_away(tmp_path: Path) -> None:
    script = tmp_path / "app.py"
    script.write_text(textwrap.dedent("""
        from opentelemetry import metrics
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader

        reader = InMemoryMetricReader()
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    """) + SCRIPT + textwrap.dedent("""
        names = {m.name for rm in reader.get_metrics_data().resource_metrics
                 for sm in rm.scope_metrics for m in sm.metrics}
        assert "tracescore.evaluation.score" in names, names
    """))
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("OTEL_", "TRACESCORE_", "OPENAI_", "PYTEST"))}
    clean.update(LITELLM_OFFLINE_MODE="true", PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=clean,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "tracescore-traces.jsonl").exists()
    assert not (tmp_path / "tracescore-metrics.jsonl").exists()
