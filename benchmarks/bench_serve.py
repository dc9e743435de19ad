"""``tracescore serve``: throughput of one replica, of 1-3 replicas behind the Collector, the CPU
each costs, and the latency it adds to pass-through spans.

    python benchmarks/bench_serve.py [--traces 2000] [--load-traces 20000] [--skip-collector]

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


def one_replica(workdir: Path, traces: int, scored: bool) -> dict[str, Any]:
    receiver = FullReceiver().__enter__()
    options = {"settle": 0.2, "rate": 1.0} if scored else {"settle": 0.2, "rate": 0.0}
    replica = Replica(workdir, 90 + int(scored), receiver.endpoint, **options)
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
    return {"mode": "scored" if scored else "pass-through", "spans": spans,
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
    (no rule wants the span) and straight to the receiver."""
    results = {}
    for route in ("direct", "service"):
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
        if route == "service":
            replica = Replica(workdir, 80, receiver.endpoint, settle=0.2, rate=0.0)
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
    results["added_p50_ms"] = round(results["service"]["p50_ms"] - results["direct"]["p50_ms"], 2)
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
    args = parser.parse_args()
    print(f"load: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        out: dict[str, Any] = {"load_before": os.getloadavg()}
        out["pass_through_latency"] = pass_through_latency(workdir)
        print(json.dumps(out["pass_through_latency"]))
        out["one_replica"] = [one_replica(workdir, args.load_traces, scored=False),
                              one_replica(workdir, args.load_traces, scored=True)]
        print(json.dumps(out["one_replica"]))
        if not args.skip_collector:
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
