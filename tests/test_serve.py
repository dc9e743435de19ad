"""``tracescore serve`` on loopback: OTLP clients in, a decoding OTLP receiver downstream."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags
from test_serve_support import (
    GATE,
    FullReceiver,
    answer_for,
    documents_for,
    expected_score,
    reference_scores,
    scores_by_trace,
)

from tracescore._serve import ServeConfigError, parse, start
from tracescore._serve.app import RunningService

TESTS = Path(__file__).parent
# Children import this checkout's tracescore, not whichever one is installed.
_PATH = os.pathsep.join((str(TESTS), str(TESTS.resolve().parent)))


def _config(endpoint: str, rules: str = "", extra: str = "") -> Any:
    return parse(f"""
exporter: {{endpoint: "{endpoint}", protocol: grpc, compression: none}}
receivers: {{grpc: {{endpoint: "127.0.0.1:0"}}, http: {{endpoint: "127.0.0.1:0"}}}}
metrics_interval: 0.2
limits: {{flush_timeout: 10}}
trace: {{idle: 0.5, settle_after_root: 0.3, max_wait: 30}}
rules:
{rules or '  []'}
{extra}
""", toml=False)


GROUNDING = """  - factory: "test_serve_support:grounding_scorer"
    on: agent
"""


@pytest.fixture
def receiver() -> Iterator[FullReceiver]:
    with FullReceiver() as recv:
        yield recv


@pytest.fixture
def serve(receiver: FullReceiver) -> Iterator[Any]:
    started: list[RunningService] = []

    def make(rules: str = "", extra: str = "", **options: Any) -> RunningService:
        options.setdefault("telemetry_enabled", False)
        running = start(_config(receiver.endpoint, rules, extra), **options)
        started.append(running)
        return running

    yield make
    GATE.set()
    for running in started:
        running.stop(10)
    GATE.clear()


def _span(name: str, trace_id: int, span_id: int, parent: int | None = None,
          attributes: dict[str, Any] | None = None, remote_parent: bool = False,
          service: str = "svc") -> ReadableSpan:
    return ReadableSpan(
        name=name,
        context=SpanContext(trace_id, span_id, False, TraceFlags(TraceFlags.SAMPLED)),
        parent=(SpanContext(trace_id, parent, remote_parent, TraceFlags(TraceFlags.SAMPLED))
                if parent else None),
        resource=Resource({"service.name": service, "deployment.environment": "test"}),
        attributes=attributes or {},
        kind=SpanKind.SERVER,
        status=Status(StatusCode.OK),
        start_time=1_000_000_000 + span_id,
        end_time=2_000_000_000 + span_id,
        instrumentation_scope=InstrumentationScope("some.instrumentation", "1.2.3"),
    )


def _agent(trace_id: int, span_id: int, i: int, parent: int | None = None) -> ReadableSpan:
    return _span("invoke_agent answer", trace_id, span_id, parent, {
        "tracescore.span.kind": "agent", "gen_ai.operation.name": "invoke_agent",
        "input.value": json.dumps({"question": f"question {i}"}),
        "input.mime_type": "application/json",
        "output.value": json.dumps(answer_for(i)), "output.mime_type": "application/json",
    })


def _retrieval(trace_id: int, span_id: int, parent: int, i: int) -> ReadableSpan:
    docs = [{"id": None, "score": None, "content": d} for d in documents_for(i)]
    return _span("retrieval search", trace_id, span_id, parent, {
        "tracescore.span.kind": "retrieval", "gen_ai.operation.name": "retrieval",
        "gen_ai.retrieval.documents": json.dumps(docs),
    }, remote_parent=True, service="retrieval-service")


def _send(port: int, spans: list[ReadableSpan]) -> Any:
    """One ExportTraceServiceRequest over gRPC; returns the grpc error or None."""
    import grpc
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = trace_service_pb2_grpc.TraceServiceStub(channel)
        try:
            stub.Export(encode_spans(spans), timeout=10)
        except grpc.RpcError as exc:
            return exc
    return None


def _get(port: int, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


# -- configuration ---------------------------------------------------------------------------------
def test_config_errors_name_each_bad_field() -> None:
    with pytest.raises(ServeConfigError) as caught:
        parse("""
exporter: {endpoint: "backend:4317", protocol: carrier-pigeon}
receivers: {grpc: {endpoint: "nowhere"}}
rules:
  - scorer: faithfulness
    sample_rate: 2
  - scorer: faithfulness
    on: agnet
  - options: {}
  - scorer: faithfulness
    sample_rat: 0.5
limits: {max_concurrency: 0}
export: {max_queue: 5}
""", toml=False)
    message = str(caught.value)
    # The rule keys and the option groups are checked by ScoringRule and the option classes
    # configure() takes: the same messages in process and here.
    for expected in ("exporter.endpoint: expected an http:// or https:// URL",
                     "exporter.protocol:", "receivers.grpc.endpoint: expected host:port",
                     "rules[0]: ScoringRule(sample_rate=2) must lie in 0..1",
                     "rules[1]: ScoringRule(on='agnet')",
                     "rules[2]: give exactly one of scorer (an id) or factory",
                     "rules[3]: a rule got an unexpected keyword argument 'sample_rat'",
                     "limits: LimitsOptions(max_concurrency=0) takes a positive",
                     "export.max_queue: Unexpected keyword argument"):
        assert expected in message, (expected, message)


def test_config_toml_with_environment_references(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TS_TEST_BACKEND", "http://backend:4317")
    config = parse("""
[exporter]
endpoint = "${TS_TEST_BACKEND}"
headers = { "x-tenant" = "${TS_TEST_TENANT:-acme}" }

[[rules]]
scorer = "content-similarity"
on = "llm"
sample_rate = 0.25
""", toml=True)
    assert config.exporter.endpoint == "http://backend:4317"
    assert config.exporter.headers == {"x-tenant": "acme"}
    assert config.rules[0].on == "llm" and config.rules[0].sample_rate == 0.25
    with pytest.raises(ServeConfigError, match="TS_TEST_UNSET"):
        parse('exporter: {endpoint: "${TS_TEST_UNSET}"}', toml=False)


def test_config_unknown_scorer_is_named(receiver: FullReceiver) -> None:
    with pytest.raises(ServeConfigError, match=r"rules\[0\]\.scorer: unknown scorer 'nope'"):
        start(_config(receiver.endpoint, "  - scorer: nope\n"), telemetry_enabled=False)


def test_cli_check_validates_the_file(tmp_path: Path) -> None:
    good = tmp_path / "serve.yaml"
    good.write_text('exporter: {endpoint: "http://127.0.0.1:1"}\n'
                    "rules:\n  - scorer: content-similarity\n    on: agent\n")
    bad = tmp_path / "bad.toml"
    bad.write_text('[exporter]\nendpoint = "backend"\n')
    env = {**os.environ, "PYTHONPATH": _PATH}
    ok = subprocess.run([sys.executable, "-m", "tracescore", "serve", "--config", str(good),
                         "--check"], capture_output=True, text=True, env=env, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert "1 rule(s)" in ok.stdout
    failed = subprocess.run([sys.executable, "-m", "tracescore", "serve", "--config", str(bad)],
                            capture_output=True, text=True, env=env, timeout=120)
    assert failed.returncode == 2
    assert "exporter.endpoint: expected an http:// or https:// URL" in failed.stderr


# -- forwarding ------------------------------------------------------------------------------------
def test_spans_no_rule_wants_arrive_unchanged(serve: Any, receiver: FullReceiver) -> None:
    running = serve(GROUNDING)
    plain = _span("GET /orders", 0xABC, 0x1, attributes={"http.route": "/orders", "n": 3,
                                                          "tags": ("a", "b")})
    child = _span("SELECT orders", 0xABC, 0x2, parent=0x1, attributes={"db.system": "pg"},
                  remote_parent=True)
    assert _send(running.grpc_port, [plain, child]) is None
    assert receiver.received.wait_for(lambda s: len(s) == 2)
    got = {s.name: s for s in receiver.received.spans}
    first, second = got["GET /orders"], got["SELECT orders"]
    assert first.attributes == {"http.route": "/orders", "n": 3, "tags": ["a", "b"]}
    assert first.events == [] and first.parent_span_id == ""
    assert first.resource == {"service.name": "svc", "deployment.environment": "test"}
    assert first.scope == "some.instrumentation"
    assert second.parent_span_id == f"{0x1:016x}" and second.trace_id == f"{0xABC:032x}"
    stats = running.service.snapshot()
    assert stats["spans_received"] == 2 and stats["spans_passed_through"] == 2


def test_scored_span_waits_for_a_late_retrieval_from_another_service(
        serve: Any, receiver: FullReceiver) -> None:
    """The agent span arrives first, its trace's retrieval span (another service) in a later
    request: the score uses that retrieval's documents."""
    now = [1000.0]
    running = serve(GROUNDING, settle_clock=lambda: now[0])  # idle 0.5 s, 0.3 s after the root
    settler = running.service.settler
    assert _send(running.grpc_port, [_agent(0x51, 0x1, 5)]) is None
    now[0] += 0.2
    assert settler.sweep() == 0  # the trace is not quiet yet
    assert running.service.snapshot()["deferred_spans"] == 1
    assert _send(running.grpc_port, [_retrieval(0x51, 0x2, 0x1, 5)]) is None
    now[0] += 0.2
    assert settler.sweep() == 0  # the retrieval's arrival restarted the window
    now[0] += 0.2
    assert settler.sweep() == 1
    assert receiver.received.wait_for(lambda s: len(s) == 2 and any(x.events for x in s), 30)
    scores = scores_by_trace(receiver.received.spans)
    assert scores == {f"{0x51:032x}": [expected_score(5)]}
    assert 0 < expected_score(5) < 1
    agent = receiver.received.by_name("invoke_agent answer")[0]
    assert agent.attributes["tracescore.score.grounding"] == expected_score(5)


def test_scores_travel_as_event_attribute_log_record_and_metrics(
        serve: Any, receiver: FullReceiver) -> None:
    running = serve(GROUNDING, telemetry_enabled=True)
    assert _send(running.grpc_port, [_retrieval(0x61, 0x2, 0x1, 6), _agent(0x61, 0x1, 6)]) is None
    assert receiver.received.wait_for(lambda s: len(s) == 2 and any(x.events for x in s), 30)
    assert receiver.wait(lambda: any("grounding" in b for b in receiver.log_bodies())
                         or bool(receiver.logs))
    assert receiver.wait(lambda: {"tracescore.serve.spans.received",
                                  "tracescore.serve.spans.passed_through",
                                  "tracescore.evaluation.score"} <= receiver.metric_names())
    # Exactly once each.
    assert sorted(s.name for s in receiver.received.spans) == ["invoke_agent answer",
                                                               "retrieval search"]


def test_log_records_are_forwarded(serve: Any, receiver: FullReceiver) -> None:
    import grpc
    from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
    from opentelemetry.proto.logs.v1 import logs_pb2

    running = serve(GROUNDING)
    request = logs_service_pb2.ExportLogsServiceRequest(resource_logs=[logs_pb2.ResourceLogs(
        scope_logs=[logs_pb2.ScopeLogs(log_records=[
            logs_pb2.LogRecord(event_name="gen_ai.user.message", trace_id=b"\x01" * 16)])])])
    request.resource_logs[0].scope_logs[0].log_records[0].body.string_value = "hello"
    with grpc.insecure_channel(f"127.0.0.1:{running.grpc_port}") as channel:
        logs_service_pb2_grpc.LogsServiceStub(channel).Export(request, timeout=10)
    assert receiver.wait(lambda: receiver.log_bodies() == ["hello"])
    assert running.service.snapshot()["log_records_forwarded"] == 1


def test_http_receiver_takes_gzip_protobuf(serve: Any, receiver: FullReceiver) -> None:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    running = serve(GROUNDING)
    body = gzip.compress(encode_spans([_span("plain", 0x71, 0x1)]).SerializeToString())
    req = urllib.request.Request(
        f"http://127.0.0.1:{running.http_port}/v1/traces", data=body, method="POST",
        headers={"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200
    assert receiver.received.wait_for(lambda s: [x.name for x in s] == ["plain"])


# -- backpressure, health, drain -------------------------------------------------------------------
GATED = """  - factory: "test_serve_support:gated_scorer"
    on: agent
"""
SMALL_QUEUE = ("limits: {max_queue_size: 4, max_concurrency: 2, score_timeout: 60, "
               "flush_timeout: 10}\n"
               "backpressure: {high_water: 0.5, retry_after: 0.25}")


def test_full_scoring_queue_answers_resource_exhausted_with_retry_info(
        serve: Any, receiver: FullReceiver) -> None:
    import grpc
    from google.rpc import error_details_pb2, status_pb2

    running = serve(GATED, SMALL_QUEUE)
    for i in range(2):
        assert _send(running.grpc_port, [_agent(0x80 + i, 0x1, i)]) is None
    refused = _send(running.grpc_port, [_agent(0x90, 0x1, 9), _span("plain", 0x90, 0x2, 0x1)])
    assert refused is not None and refused.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    details = dict(refused.trailing_metadata())["grpc-status-details-bin"]
    status = status_pb2.Status.FromString(details)
    info = error_details_pb2.RetryInfo()
    assert status.details[0].Unpack(info)
    assert info.retry_delay.ToNanoseconds() == 250_000_000
    assert running.service.snapshot()["rejected"] == {"scoring_queue": 1}
    GATE.set()
    assert receiver.received.wait_for(lambda s: len(s) == 2, 30)
    # The refused request kept nothing: sent again, each span arrives once.
    assert running.service.processor.force_flush(30_000)
    assert _send(running.grpc_port, [_agent(0x90, 0x1, 9), _span("plain", 0x90, 0x2, 0x1)]) \
        is None
    assert receiver.received.wait_for(lambda s: len(s) == 4, 30)
    names = sorted((s.trace_id[-2:], s.name) for s in receiver.received.spans)
    assert names == [("80", "invoke_agent answer"), ("81", "invoke_agent answer"),
                     ("90", "invoke_agent answer"), ("90", "plain")]


def test_http_answers_429_with_retry_after_then_503_while_draining(
        serve: Any, receiver: FullReceiver) -> None:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    running = serve(GATED, SMALL_QUEUE)
    for i in range(2):
        assert _send(running.grpc_port, [_agent(0xA0 + i, 0x1, i)]) is None

    def post() -> tuple[int, dict[str, str]]:
        body = encode_spans([_agent(0xB0, 0x1, 1)]).SerializeToString()
        req = urllib.request.Request(f"http://127.0.0.1:{running.http_port}/v1/traces",
                                     data=body, method="POST",
                                     headers={"Content-Type": "application/x-protobuf"})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, dict(resp.headers)
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers)

    code, headers = post()
    assert code == 429 and headers["Retry-After"] == "1"
    assert _get(running.http_port, "/healthz")[0] == 200
    assert _get(running.http_port, "/readyz")[0] == 200
    running.service.drain()
    assert _get(running.http_port, "/readyz")[0] == 503
    code, headers = post()
    assert code == 503 and "Retry-After" in headers


def test_shutdown_drains_what_was_accepted(serve: Any, receiver: FullReceiver) -> None:
    running = serve(GROUNDING, "trace: {idle: 60, settle_after_root: 60, max_wait: 120}")
    # Deferred (the trace's idle window is a minute away) and held: stop() scores and forwards.
    assert _send(running.grpc_port, [_agent(0xC1, 0x1, 3), _retrieval(0xC1, 0x2, 0x1, 3)]) \
        is None
    assert running.service.snapshot()["deferred_spans"] == 1
    assert running.stop(20)
    assert len(receiver.received.spans) == 2
    assert scores_by_trace(receiver.received.spans) == {f"{0xC1:032x}": [expected_score(3)]}


# -- two services, scored as in process ------------------------------------------------------------
def run_two_services(endpoint: str, n: int, seed: int, timeout: float = 600,
                     pace: float = 0.0) -> None:
    """The agent service's traceparents piped into the retrieval service; each exports its own
    part of every trace to ``endpoint`` (``pace``: seconds between traces), in batches every
    100 ms as a busy service streams them."""
    env = {**os.environ, "PYTHONPATH": _PATH, "OTEL_BSP_SCHEDULE_DELAY": "100"}
    script = str(TESTS / "test_serve_support.py")
    agent = subprocess.Popen([sys.executable, script, "agent", endpoint, str(n), str(seed),
                              str(pace)], stdout=subprocess.PIPE, env=env)
    retrieval = subprocess.Popen([sys.executable, script, "retrieval", endpoint],
                                 stdin=agent.stdout, env=env)
    assert agent.stdout is not None
    agent.stdout.close()
    assert agent.wait(timeout) == 0
    assert retrieval.wait(timeout) == 0


def test_two_services_scored_as_in_process(serve: Any, receiver: FullReceiver) -> None:
    n, seed, rate = 60, 1234, 0.5
    # Each sender exports on its own schedule (up to OTEL_BSP_SCHEDULE_DELAY, 5 s, apart): the
    # settle window covers that, so every agent span is read with its trace's documents.
    running = serve("""  - factory: "test_serve_support:grounding_scorer"
    on: agent
    sample_rate: 0.5
""", "trace: {idle: 15, settle_after_root: 10, max_wait: 120}")
    run_two_services(f"http://127.0.0.1:{running.grpc_port}", n, seed)
    assert receiver.received.wait_for(lambda s: len(s) == 2 * n, 60)
    assert running.stop(30)
    served = scores_by_trace(receiver.received.spans)
    expected = reference_scores(n, seed, rate)
    assert 0 < len(expected) < n  # the sample picked some traces, not all
    assert {t: [s] for t, s in expected.items()} == served
    ids = [(s.trace_id, s.span_id) for s in receiver.received.spans]
    assert len(set(ids)) == len(ids) == 2 * n


# -- fleet-wide limits in Redis --------------------------------------------------------------------
@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = shutil.which("redis-server")
    pytest.importorskip("redis")
    if server is None:
        pytest.skip("redis-server is not installed (apt-get install -y redis-server)")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no",
                             "--dir", str(tmp_path_factory.mktemp("redis"))],
                            stdout=subprocess.DEVNULL)
    import redis

    client = redis.Redis(port=port)
    deadline = time.monotonic() + 30
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    yield f"redis://127.0.0.1:{port}/0"
    proc.terminate()
    proc.wait(10)


def test_redis_rate_limit_holds_across_replicas(redis_url: str) -> None:
    from tracescore._pipeline.limits_redis import RedisStore, RedisTokenBucket

    # Three replicas, one rule at 6 per minute (burst one): however often each asks, the fleet
    # gets the bucket's single token now, where three local buckets would give three.
    stores = [RedisStore(redis_url, refresh_interval=60) for _ in range(3)]
    buckets = [RedisTokenBucket(s, "ts-test:rate", 6) for s in stores]
    for store in stores:
        store.round()  # what the background thread does; called here to count exactly
    taken = sum(b.try_take() for b in buckets for _ in range(5))
    for store in stores:
        store.round()
    taken += sum(b.try_take() for b in buckets for _ in range(5))
    assert taken == 1
    assert all(s.healthy and s.errors == 0 for s in stores)


def test_redis_budget_holds_across_replicas(redis_url: str) -> None:
    from tracescore._pipeline.limits_redis import RedisHourlyBudget, RedisStore

    first, second = RedisStore(redis_url), RedisStore(redis_url)
    a = RedisHourlyBudget(first, "ts-test:budget", 1000, None)
    b = RedisHourlyBudget(second, "ts-test:budget", 1000, None)
    a.spend(700, None)
    first.round()
    second.round()
    assert b.admits()  # 700 of 1000 used fleet-wide
    b.spend(400, None)
    second.round()
    first.round()
    assert not a.admits() and not b.admits()  # 1100: the fleet's budget is spent


def test_unreachable_redis_falls_back_to_per_replica_limits() -> None:
    from tracescore._pipeline.limits_redis import RedisStore, RedisTokenBucket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens there once closed
    store = RedisStore(f"redis://127.0.0.1:{port}/0")
    bucket = RedisTokenBucket(store, "ts-test:down", 60)
    store.round()
    assert not store.healthy and store.errors == 1
    assert bucket.try_take()  # the local bucket's one-second burst


# -- the export processor under a service's traffic ------------------------------------------------
def test_export_processor_sends_a_lone_span_after_an_idle_period() -> None:
    """A span that arrives when the export thread idles on an empty queue goes out after the
    schedule delay (the service forwards pass-through spans this way), not at the next flush."""
    import threading

    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    from tracescore._export.processor import ExportProcessor

    exported: list[str] = []
    arrived = threading.Condition()

    class Exporter(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            with arrived:
                exported.extend(s.name for s in spans)
                arrived.notify_all()
            return SpanExportResult.SUCCESS

    processor = ExportProcessor(Exporter(), queue_bytes=1 << 20, batch_bytes=1 << 20,
                                schedule_delay=0.05)
    try:
        for name in ("first", "second"):
            processor.on_end(_span(name, 0xD1, len(exported) + 1))
            with arrived:
                assert arrived.wait_for(lambda n=name: n in exported, timeout=30)
    finally:
        processor.shutdown()


def test_two_services_share_a_rate_limit_through_redis(
        redis_url: str, receiver: FullReceiver) -> None:
    """Two replicas configured with the same Redis and a rule of 6 per minute (a one-token
    burst): between them they score one span now, where per-replica limits would score two."""
    rules = """  - scorer: content-similarity
    on: agent
    name: fleet
    max_per_minute: 6
"""
    extra = f'fleet: {{redis_url: "{redis_url}", key_prefix: "ts-test-serve"}}'
    replicas = [start(_config(receiver.endpoint, rules, extra), telemetry_enabled=False)
                for _ in range(2)]
    try:
        for index, running in enumerate(replicas):
            spans = [_agent(0xE0 + 8 * index + i, 0x1, i) for i in range(4)]
            assert _send(running.grpc_port, spans) is None
        for running in replicas:
            assert running.service.processor.force_flush(30_000)
        scored = sum(r.service.snapshot()["spans_scored"] for r in replicas)
        limited = sum(r.service.snapshot()["skipped_rate_limited"] for r in replicas)
        assert (scored, limited) == (1, 7)
    finally:
        for running in replicas:
            running.stop(10)
