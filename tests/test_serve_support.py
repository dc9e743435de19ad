"""Support for the ``tracescore serve`` tests (no tests here): a deterministic context-using
scorer the replicas import by ``factory:``, the two "services" of the multi-process traffic, a
full OTLP gRPC receiver (traces, logs, metrics) and the in-process reference scoring.

Run as a script it is one of the two services:

    python tests/test_serve_support.py agent OTLP_GRPC_ENDPOINT N SEED [PACE]  # traceparents
    python tests/test_serve_support.py retrieval OTLP_GRPC_ENDPOINT      # reads them on stdin

The agent service makes the root ``invoke_agent answer`` span of each trace and prints its
trace parent and item number; the retrieval service makes ``retrieval search`` spans as its
remote children. Each exports its own part of every trace to the endpoint.
"""

from __future__ import annotations

import random
import re
import sys
import threading
import time
from concurrent import futures
from typing import Any

from opentelemetry.sdk.trace.id_generator import IdGenerator

WORDS = ["paris", "lyon", "river", "bridge", "museum", "tower", "garden", "station", "market",
         "castle", "harbour", "forest", "valley", "mountain", "church", "library", "school",
         "bakery", "theatre", "square"]
_TOKEN = re.compile(r"[a-z0-9]+")


# -- the scorer ---------------------------------------------------------------------------------
def grounding_scorer(**options: Any) -> Any:
    """A deterministic context scorer: the fraction of the answer's words found in the trace's
    retrieved documents (``uses_context``: the service must wait for the retrieval spans)."""
    from tracescore.scorers import create_scorer

    def score(run: Any) -> float:
        words = _TOKEN.findall(run.output_text.lower())
        context = set(_TOKEN.findall(" ".join(run.context or ()).lower()))
        if not words:
            return 0.0
        return round(sum(w in context for w in words) / len(words), 6)

    return create_scorer(id="grounding", generate_score=score,
                         requires=("output", "context"), uses_context=True, **options)


class SeededIdGenerator(IdGenerator):
    """Random-looking ids from a seed: the same traffic gets the same trace ids in every run."""

    def __init__(self, seed: int) -> None:
        # Separate streams: the n-th trace gets the same id however many spans each process
        # makes per trace.
        self._traces = random.Random(seed)
        self._spans = random.Random(seed ^ 0x5EED)
        self._lock = threading.Lock()

    def generate_trace_id(self) -> int:
        with self._lock:
            return self._traces.getrandbits(128) or 1

    def generate_span_id(self) -> int:
        with self._lock:
            return self._spans.getrandbits(64) or 1


# -- the traffic --------------------------------------------------------------------------------
def documents_for(i: int) -> list[str]:
    rng = random.Random(i * 7919)
    return [" ".join(rng.choice(WORDS) for _ in range(6)) for _ in range(2)]


def answer_for(i: int) -> str:
    rng = random.Random(i * 104729)
    return " ".join(rng.choice(WORDS) for _ in range(8))


def question_for(i: int) -> str:
    return f"question {i}"


def expected_score(i: int) -> float:
    context = set(_TOKEN.findall(" ".join(documents_for(i)).lower()))
    words = _TOKEN.findall(answer_for(i).lower())
    return round(sum(w in context for w in words) / len(words), 6)


def reference_scores(n: int, seed: int, sample_rate: float) -> dict[str, float]:
    """Score the same traffic in process (retrieval and agent in one process): trace id (hex)
    -> grounding score."""
    from opentelemetry.sdk.trace import TracerProvider

    import tracescore
    from tracescore.testing import InMemoryScoreExporter

    exporter = InMemoryScoreExporter()
    provider = TracerProvider(id_generator=SeededIdGenerator(seed))
    tracescore.configure(
        tracer_provider=provider, exporter=exporter,
        export=tracescore.ExportOptions(flush_on_sigterm=False),
        scoring=[tracescore.ScoringRule(scorer=grounding_scorer(), on="agent",
                                        sample_rate=sample_rate)])

    @tracescore.retrieval
    def search(i: int) -> list[str]:
        return documents_for(i)

    @tracescore.agent
    def answer(question: str, i: int) -> str:
        search(i)
        return answer_for(i)

    for i in range(n):
        answer(question_for(i), i)
    assert tracescore.force_flush(60_000)
    scores = {}
    for span in exporter.get_finished_spans():
        for event in span.events:
            if event.name == "gen_ai.evaluation.result":
                scores[f"{span.context.trace_id:032x}"] = event.attributes[
                    "gen_ai.evaluation.score.value"]
    tracescore.shutdown()
    provider.shutdown()
    return scores


def _configure_sender(endpoint: str, seed: int, service: str) -> Any:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    import tracescore

    provider = TracerProvider(id_generator=SeededIdGenerator(seed),
                              resource=Resource.create({"service.name": service}))
    tracescore.configure(tracer_provider=provider,
                         export=tracescore.ExportOptions(flush_on_sigterm=False),
                         exporter=OTLPSpanExporter(endpoint=endpoint, insecure=True))
    return provider


def run_agent(endpoint: str, n: int, seed: int, pace: float = 0.0) -> None:
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    import tracescore

    provider = _configure_sender(endpoint, seed, "agent-service")
    propagator = TraceContextTextMapPropagator()

    @tracescore.agent
    def answer(question: str, i: int) -> str:
        carrier: dict[str, str] = {}
        propagator.inject(carrier)
        print(f"{i} {carrier['traceparent']}", flush=True)  # "calls" the retrieval service
        return answer_for(i)

    for i in range(n):
        answer(question_for(i), i)
        if pace:
            time.sleep(pace)  # a steady request rate, so a test can act mid-run
    assert tracescore.force_flush(120_000)
    tracescore.shutdown()
    provider.shutdown()


def run_retrieval(endpoint: str) -> None:
    from opentelemetry import context as otel_context
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    import tracescore

    provider = _configure_sender(endpoint, 987654321, "retrieval-service")
    propagator = TraceContextTextMapPropagator()

    @tracescore.retrieval
    def search(i: int) -> list[str]:
        return documents_for(i)

    for line in sys.stdin:
        i_text, traceparent = line.split()
        token = otel_context.attach(propagator.extract({"traceparent": traceparent}))
        try:
            search(int(i_text))
        finally:
            otel_context.detach(token)
    assert tracescore.force_flush(120_000)
    tracescore.shutdown()
    provider.shutdown()


# -- a full OTLP gRPC receiver ------------------------------------------------------------------
class FullReceiver:
    """OTLP gRPC on loopback: traces (decoded by ``otlp_receiver.Received``), logs and metrics
    (kept as parsed requests)."""

    def __init__(self, port: int = 0) -> None:
        import grpc
        from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
        from opentelemetry.proto.collector.metrics.v1 import (
            metrics_service_pb2,
            metrics_service_pb2_grpc,
        )
        from opentelemetry.proto.collector.trace.v1 import (
            trace_service_pb2,
            trace_service_pb2_grpc,
        )
        from otlp_receiver import Received

        received = self.received = Received()
        self.logs: list[Any] = []
        self.metrics: list[Any] = []
        self.lock = threading.Lock()
        self.rejected_requests = 0
        outer = self

        #: A span name that makes the whole request fail with INVALID_ARGUMENT (a backend
        #: that rejects a batch for good), or None.
        self.reject_name: str | None = None

        class Traces(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:  # noqa: N802
                poison = outer.reject_name
                if poison is not None and any(
                        span.name == poison for rs in request.resource_spans
                        for ss in rs.scope_spans for span in ss.spans):
                    with outer.lock:
                        outer.rejected_requests += 1
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{poison} is not allowed")
                received.add(request.SerializeToString(), {})
                return trace_service_pb2.ExportTraceServiceResponse()

        #: A log record body that makes the request fail with INVALID_ARGUMENT, or None.
        self.reject_log_body: str | None = None

        class Logs(logs_service_pb2_grpc.LogsServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:  # noqa: N802
                poison = outer.reject_log_body
                if poison is not None and any(
                        lr.body.string_value == poison for rl in request.resource_logs
                        for sl in rl.scope_logs for lr in sl.log_records):
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{poison} is not allowed")
                with outer.lock:
                    outer.logs.append(request)
                return logs_service_pb2.ExportLogsServiceResponse()

        class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:  # noqa: N802
                with outer.lock:
                    outer.metrics.append(request)
                return metrics_service_pb2.ExportMetricsServiceResponse()

        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4),
                                   options=[("grpc.max_receive_message_length", 64 << 20)])
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), self._server)
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(Logs(), self._server)
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(), self._server)
        self.port = self._server.add_insecure_port(f"127.0.0.1:{port}")
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> FullReceiver:
        self._server.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.stop(grace=None)

    def log_bodies(self) -> list[str]:
        with self.lock:
            return [lr.body.string_value for req in self.logs for rl in req.resource_logs
                    for sl in rl.scope_logs for lr in sl.log_records]

    def metric_names(self) -> set[str]:
        with self.lock:
            return {m.name for req in self.metrics for rm in req.resource_metrics
                    for sm in rm.scope_metrics for m in sm.metrics}

    def wait(self, predicate: Any, timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(0.02)
        return False


def scores_by_trace(spans: list[Any]) -> dict[str, list[float]]:
    """Trace id -> the grounding scores found on the received spans."""
    out: dict[str, list[float]] = {}
    for span in spans:
        for name, attrs in span.events:
            if name == "gen_ai.evaluation.result" and attrs.get(
                    "gen_ai.evaluation.name") == "grounding":
                out.setdefault(span.trace_id, []).append(attrs.get("gen_ai.evaluation.score.value"))
    return out


# -- a scorer that waits for the test (backpressure) --------------------------------------------
GATE = threading.Event()


def gated_scorer(**options: Any) -> Any:
    """A scorer whose jobs finish only once ``GATE`` is set: the scoring queue fills up."""
    import asyncio

    from tracescore.scorers import create_scorer

    async def score(run: Any) -> float:
        await asyncio.to_thread(GATE.wait, 60)
        return 1.0

    return create_scorer(id="gated", generate_score=score, requires=("output",), **options)



def slow_grounding_scorer(delay: float = 0.02, **options: Any) -> Any:
    """``grounding_scorer`` whose every job takes ``delay`` seconds more, like a judge call:
    traffic outruns scoring and the service must push back."""
    import asyncio

    from tracescore.scorers import create_scorer

    async def score(run: Any) -> float:
        await asyncio.sleep(delay)
        words = _TOKEN.findall(run.output_text.lower())
        context = set(_TOKEN.findall(" ".join(run.context or ()).lower()))
        return round(sum(w in context for w in words) / len(words), 6) if words else 0.0

    return create_scorer(id="grounding", generate_score=score,
                         requires=("output", "context"), uses_context=True, **options)

if __name__ == "__main__":  # pragma: no cover - a subprocess
    role = sys.argv[1]
    if role == "agent":
        run_agent(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
                  float(sys.argv[5]) if len(sys.argv) > 5 else 0.0)
    elif role == "retrieval":
        run_retrieval(sys.argv[2])
    else:
        raise SystemExit(f"unknown role {role}")
