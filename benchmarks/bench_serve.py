"""``tracescore serve``: throughput of one replica, of 1-3 replicas behind the Collector, the CPU
each costs, and the latency it adds to pass-through spans.

    python benchmarks/bench_serve.py [--traces 2000] [--load-traces 20000] [--skip-collector]
                                     [--replica-only] [--edge-only]

``--replica-only``: the latency and one-replica runs only (in both modes, ``hold`` and
``forward_first``); ``--edge-only``: the cost of TLS and of the bearer token per request
(sequential single-span requests over gRPC and HTTP: the client's round trip and the replica's
CPU per request, plain against TLS, token, and both).

Load: pre-encoded OTLP requests (50 traces of two spans each: a retrieval span and an agent
span, as two services make them) sent over gRPC by 4 client threads; a refused request
(RESOURCE_EXHAUSTED) is sent again after its RetryInfo delay, as the Collector does. Scoring:
the deterministic context scorer of the tests (``grounding``) on every agent span, so every
trace waits for completeness and is scored; "pass-through" runs have no rule. Downstream: a
loopback OTLP receiver in this process. Everything shares this machine's 2 cores with the load
generator and the receiver, so the figures are lower bounds for a replica on its own core.
The Collector is the one ``deploy/collector/build.sh`` builds (``$TRACESCORE_OTELCOL``).

The last part runs the tests' two-services traffic (separate processes, tracescore decorators)
through the Collector and 3 replicas and checks every span arrives once and the scores equal
those of the same traffic scored in process.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

from test_serve import _agent, _retrieval, _send, _span  # noqa: E402
from test_serve_collector import Fleet, Replica  # noqa: E402
from test_serve_support import FullReceiver, reference_scores, scores_by_trace  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def build_requests(traces: int, per_request: int, seed: int) -> list[bytes]:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    rng = random.Random(seed)
    requests = []
    for start in range(0, traces, per_request):
        spans = []
        for i in range(start, min(traces, start + per_request)):
            trace_id = rng.getrandbits(128) or 1
            spans.append(_retrieval(trace_id, 0x2, 0x1, i))
            spans.append(_agent(trace_id, 0x1, i))
        requests.append(encode_spans(spans).SerializeToString())
    return requests


def blast(port: int, requests: list[bytes], threads: int = 4) -> Counter[str]:
    """Send every request (pre-encoded) from ``threads`` clients; refused ones again after the
    RetryInfo delay. Returns counts of ok and refused attempts."""
    import grpc
    from google.rpc import error_details_pb2, status_pb2
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

    counts: Counter[str] = Counter()
    lock = threading.Lock()
    todo = list(requests)

    def worker() -> None:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            export = channel.unary_unary(
                "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                request_serializer=lambda b: b, response_deserializer=lambda b: b)
            assert trace_service_pb2_grpc  # the method path above is this service's
            while True:
                with lock:
                    if not todo:
                        return
                    body = todo.pop()
                while True:
                    try:
                        export(body, timeout=30)
                        with lock:
                            counts["ok"] += 1
                        break
                    except grpc.RpcError as exc:
                        with lock:
                            counts[exc.code().name] += 1
                        delay = 0.2
                        raw = dict(exc.trailing_metadata() or ()).get("grpc-status-details-bin")
                        if raw:
                            status = status_pb2.Status.FromString(raw)
                            info = error_details_pb2.RetryInfo()
                            if status.details and status.details[0].Unpack(info):
                                delay = info.retry_delay.ToNanoseconds() / 1e9
                        time.sleep(delay)  # the sender's backoff, as the Collector's

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return counts


def wait_for(predicate: Any, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("the downstream did not receive everything")
        time.sleep(0.05)


def one_replica(workdir: Path, traces: int, scored: bool, mode: str = "hold") -> dict[str, Any]:
    receiver = FullReceiver().__enter__()
    options = {"settle": 0.2, "rate": 1.0} if scored else {"settle": 0.2, "rate": 0.0}
    if mode != "hold":
        options["mode"] = mode
    replica = Replica(workdir, 90 + int(scored) + (10 if mode != "hold" else 0),
                      receiver.endpoint, **options)
    replica.start()
    requests = build_requests(traces, 50, seed=7 + int(scored))
    assert replica.proc is not None
    cpu0 = cpu_seconds(replica.proc.pid)
    t0 = time.perf_counter()
    counts = blast(replica.grpc, requests)
    wait_for(lambda: len(receiver.received.spans) >= 2 * traces
             and (not scored or len(scores_by_trace(receiver.received.spans)) >= traces))
    elapsed = time.perf_counter() - t0
    cpu = cpu_seconds(replica.proc.pid) - cpu0
    replica.stop()
    receiver.__exit__(None, None, None)
    spans = 2 * traces
    return {"run": "scored" if scored else "pass-through", "mode": mode, "spans": spans,
            "seconds": round(elapsed, 2), "spans_per_s": round(spans / elapsed),
            "scores_per_s": round(traces / elapsed) if scored else 0,
            "replica_cpu_s": round(cpu, 2), "cpu_ms_per_1k_spans": round(cpu / spans * 1e6),
            "refused_attempts": sum(v for k, v in counts.items() if k != "ok")}


def behind_collector(workdir: Path, replicas: int, traces: int) -> dict[str, Any]:
    (workdir / f"fleet{replicas}").mkdir()
    fleet = Fleet(workdir / f"fleet{replicas}", replicas=replicas, settle=0.2, rate=1.0)
    pids = [r.proc.pid for r in fleet.replicas if r.proc is not None]
    requests = build_requests(traces, 50, seed=100 + replicas)
    cpu0 = [cpu_seconds(p) for p in pids]
    col0 = cpu_seconds(fleet.collector.pid)
    t0 = time.perf_counter()
    counts = blast(fleet.port, requests)
    wait_for(lambda: len(fleet.spans()) >= 2 * traces
             and len(scores_by_trace(fleet.spans())) >= traces)
    elapsed = time.perf_counter() - t0
    cpus = [cpu_seconds(p) - c for p, c in zip(pids, cpu0, strict=True)]
    collector_cpu = cpu_seconds(fleet.collector.pid) - col0
    rejected = sum(sum(_stats(r.http)["rejected"].values()) for r in fleet.replicas)
    fleet.close()
    spans = 2 * traces
    return {"replicas": replicas, "spans": spans, "seconds": round(elapsed, 2),
            "spans_per_s": round(spans / elapsed), "scores_per_s": round(traces / elapsed),
            "replica_cpu_s": [round(c, 2) for c in cpus],
            "replica_cpu_ms_per_1k_spans": round(sum(cpus) / spans * 1e6),
            "collector_cpu_ms_per_1k_spans": round(collector_cpu / spans * 1e6),
            "refused_by_replicas": rejected, "refused_at_sender": sum(
                v for k, v in counts.items() if k != "ok")}


def _stats(port: int) -> dict[str, Any]:
    from test_serve_collector import stats

    return stats(port)


def pass_through_latency(workdir: Path, samples: int = 200) -> dict[str, Any]:
    """One single-span request at a time: receipt downstream minus send, through the service
    (no rule wants the span; modes ``hold`` and ``forward_first``) and straight to the
    receiver."""
    results: dict[str, Any] = {}
    for route in ("direct", "service", "service_forward_first"):
        receiver = FullReceiver().__enter__()
        arrived = threading.Event()
        original = receiver.received.add

        def add(raw: bytes, headers: dict[str, str], original: Any = original,
                arrived: threading.Event = arrived) -> None:
            original(raw, headers)
            arrived.set()

        receiver.received.add = add  # type: ignore[method-assign]
        replica = None
        port = receiver.port
        if route != "direct":
            extra = {"mode": "forward_first"} if route.endswith("forward_first") else {}
            replica = Replica(workdir, 80 + len(route), receiver.endpoint, settle=0.2, rate=0.0,
                              **extra)
            replica.start()
            port = replica.grpc
        latencies = []
        for i in range(samples + 10):
            arrived.clear()
            t0 = time.perf_counter()
            assert _send(port, [_span("GET /health", 0xF000 + i, 0x1)]) is None
            assert arrived.wait(30)
            if i >= 10:  # warm-up
                latencies.append((time.perf_counter() - t0) * 1000)
        if replica is not None:
            replica.stop()
        receiver.__exit__(None, None, None)
        latencies.sort()
        results[route] = {"p50_ms": round(statistics.median(latencies), 2),
                          "p99_ms": round(latencies[int(len(latencies) * 0.99) - 1], 2)}
    for route in ("service", "service_forward_first"):
        for q in ("p50", "p99"):
            results[f"added_{q}_ms{route[len('service'):]}"] = round(
                results[route][f"{q}_ms"] - results["direct"][f"{q}_ms"], 2)
    return results


def edge_cost(workdir: Path, samples: int = 300) -> dict[str, Any]:
    """Per request: the client's round trip (p50, p99) and the replica's CPU, for sequential
    single-span requests over gRPC and HTTP, plain, with TLS, with the bearer token, and both.
    """
    import grpc
    import requests
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from test_serve_collector import free_port
    from tls_certs import make_pki

    pki = make_pki(Path(tempfile.mkdtemp(dir=workdir)))
    token = "bench-token-0123456789abcdef"
    variants = {
        "plain": "",
        "tls": f', tls: {{cert_file: "{pki.server_cert}", key_file: "{pki.server_key}"}}',
        "token": f', auth: {{token: "{token}"}}',
        "tls+token": f', tls: {{cert_file: "{pki.server_cert}", key_file: "{pki.server_key}"}}'
                     f', auth: {{token: "{token}"}}',
    }
    results: dict[str, Any] = {}
    for index, (name, receivers) in enumerate(variants.items()):
        receiver = FullReceiver().__enter__()
        admin = free_port()
        replica = Replica(workdir, 200 + index, receiver.endpoint, settle=0.2, rate=0.0,
                          receivers=receivers + f', admin: {{endpoint: "127.0.0.1:{admin}"}}')
        replica.ready_url = f"http://127.0.0.1:{admin}/readyz"
        replica.start()
        assert replica.proc is not None
        tls = "tls" in name
        metadata = [("authorization", f"Bearer {token}")] if "token" in name else None
        headers = {"Content-Type": "application/x-protobuf"}
        if metadata:
            headers["Authorization"] = f"Bearer {token}"
        out: dict[str, Any] = {}
        target = f"127.0.0.1:{replica.grpc}"
        channel = (grpc.secure_channel(target, grpc.ssl_channel_credentials(
            pki.ca.read_bytes())) if tls else grpc.insecure_channel(target))
        export = channel.unary_unary(
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
            request_serializer=lambda b: b, response_deserializer=lambda b: b)
        session = requests.Session()
        url = f"{'https' if tls else 'http'}://127.0.0.1:{replica.http}/v1/traces"
        for protocol in ("grpc", "http"):
            bodies = [encode_spans([_span("GET /health", 0xE000 + i, 0x1)]).SerializeToString()
                      for i in range(samples + 20)]
            times = []
            cpu0 = 0.0
            for i, body in enumerate(bodies):
                if i == 20:  # warm-up done (connection and TLS session set up)
                    cpu0 = cpu_seconds(replica.proc.pid)
                t0 = time.perf_counter()
                if protocol == "grpc":
                    export(body, timeout=30, metadata=metadata)
                else:
                    response = session.post(url, data=body, headers=headers, timeout=30,
                                            verify=str(pki.ca) if tls else True)
                    assert response.status_code == 200, response.status_code
                if i >= 20:
                    times.append((time.perf_counter() - t0) * 1000)
            cpu = cpu_seconds(replica.proc.pid) - cpu0
            times.sort()
            out[protocol] = {"p50_ms": round(statistics.median(times), 3),
                             "p99_ms": round(times[int(len(times) * 0.99) - 1], 3),
                             "replica_cpu_ms_per_request": round(cpu / samples * 1000, 3)}
        channel.close()
        session.close()
        replica.stop()
        receiver.__exit__(None, None, None)
        results[name] = out
    for name in ("tls", "token", "tls+token"):
        for protocol in ("grpc", "http"):
            results[f"added_p50_ms_{name}_{protocol}"] = round(
                results[name][protocol]["p50_ms"] - results["plain"][protocol]["p50_ms"], 3)
    return results


def two_services_2000(workdir: Path, traces: int) -> dict[str, Any]:
    from test_serve import run_two_services

    seed, rate = 4242, 0.5
    (workdir / "two-services").mkdir()
    fleet = Fleet(workdir / "two-services", replicas=3, settle=8, rate=rate)
    t0 = time.perf_counter()
    run_two_services(fleet.endpoint, traces, seed)
    wait_for(lambda: len(fleet.spans()) >= 2 * traces)
    reference = reference_scores(traces, seed, rate)
    wait_for(lambda: len(scores_by_trace(fleet.spans())) >= len(reference))
    elapsed = time.perf_counter() - t0
    spans = fleet.spans()
    ids = Counter((s.trace_id, s.span_id) for s in spans)
    served = scores_by_trace(spans)
    per_replica = [_stats(r.http)["spans_scored"] for r in fleet.replicas]
    codes = fleet.close()
    return {"traces": traces, "seconds_to_last_score": round(elapsed, 1),
            "spans_once": len(ids) == 2 * traces and set(ids.values()) == {1},
            "scores_equal_in_process": served == {t: [s] for t, s in reference.items()},
            "scored_per_replica": per_replica, "clean_exits": codes == [0, 0, 0]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--traces", type=int, default=2000,
                        help="traces of the two-services run")
    parser.add_argument("--load-traces", type=int, default=20000,
                        help="traces of each throughput run")
    parser.add_argument("--skip-collector", action="store_true")
    parser.add_argument("--replica-only", action="store_true")
    parser.add_argument("--edge-only", action="store_true")
    args = parser.parse_args()
    print(f"load: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        out: dict[str, Any] = {"load_before": os.getloadavg()}
        if args.edge_only:
            out["edge_cost"] = edge_cost(workdir)
            out["load_after"] = os.getloadavg()
            print(json.dumps(out, indent=1))
            return
        out["pass_through_latency"] = pass_through_latency(workdir)
        print(json.dumps(out["pass_through_latency"]))
        out["one_replica"] = [one_replica(workdir, args.load_traces, scored=False),
                              one_replica(workdir, args.load_traces, scored=True),
                              one_replica(workdir, args.load_traces, scored=False,
                                          mode="forward_first"),
                              one_replica(workdir, args.load_traces, scored=True,
                                          mode="forward_first")]
        print(json.dumps(out["one_replica"]))
        if not args.skip_collector and not args.replica_only:
            out["behind_collector"] = []
            for n in (1, 2, 3):
                out["behind_collector"].append(behind_collector(workdir, n, args.load_traces))
                print(json.dumps(out["behind_collector"][-1]))
            out["two_services"] = two_services_2000(workdir, args.traces)
            print(json.dumps(out["two_services"]))
        out["load_after"] = os.getloadavg()
        print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
