"""Spans produced against spans received: a backend outage, a 50-thread burst, 1,000 fat spans
over gRPC. Also the disk the retry spool takes, and the export thread's throughput.

Run: ``python benchmarks/bench_export_durability.py [outage|burst|fat|throughput|all]``
Options: ``--outage-seconds 60 --rate 80`` (outage), ``--threads 50 --seconds 12`` (burst),
``--baseline`` (the same scenarios through the SDK's ``BatchSpanProcessor`` with tracescore's
former settings, to compare).

The backend is an OTLP receiver in a child process (http/protobuf, or gRPC with its default
4 MiB message limit, which the Collector shares), so its CPU and GIL are not the measured
process's. It counts distinct span ids, so a duplicate does not count twice. The outage stops
that process and starts a new one on the same port.

Scenarios:

- ``outage``: decorated calls at ``--rate`` spans/s for 10 s, then the backend stops for
  ``--outage-seconds`` (calls go on), then it comes back for 20 s more; then ``force_flush``.
  Reports produced, received, ``stats()`` and the spool's largest size on disk.
- ``burst``: ``--threads`` threads each call a decorated function (1 KB of input) at
  ``--thread-rate`` spans/s (waiting between calls as an agent waits on its model; 0: as fast
  as they can) for ``--seconds``; then ``force_flush``.
- ``fat``: 1,000 spans of 12 KB input + 12 KB output over gRPC; then ``force_flush``.
- ``throughput``: spans/s one core's decorators produce (export off) against spans/s the export
  processor encodes and sends to the loopback receiver (measured on a pre-built queue).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


# --- the backend, in a child process ----------------------------------------------------------


def _count(raw: bytes, seen: set[bytes]) -> None:
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

    request = trace_service_pb2.ExportTraceServiceRequest()
    request.ParseFromString(raw)
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                seen.add(span.span_id)


def _sink(kind: str, port: int, received: Any, requests: Any, largest: Any, ready: Any) -> None:
    seen: set[bytes] = set()
    lock = threading.Lock()

    def add(raw: bytes) -> None:
        with lock:
            _count(raw, seen)
            received.value = len(seen)
            requests.value += 1
            largest.value = max(largest.value, len(raw))

    if kind == "grpc":
        from concurrent import futures

        import grpc
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

        class Service(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:  # noqa: N802
                add(request.SerializeToString())
                return trace_service_pb2.ExportTraceServiceResponse()

        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Service(), server)
        server.add_insecure_port(f"127.0.0.1:{port}")
        server.start()
        ready.set()
        server.wait_for_termination()
        return

    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802
            add(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    ready.set()
    server.serve_forever()


class Backend:
    """A receiver process that can be stopped and started again on the same port."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        ctx = mp.get_context("spawn")
        self._ctx = ctx
        self.received = ctx.Value("q", 0)
        self.requests = ctx.Value("q", 0)
        self.largest = ctx.Value("q", 0)
        self.total = 0  # distinct spans of earlier lives
        self._proc: Any = None

    def start(self) -> None:
        ready = self._ctx.Event()
        self.received.value = 0
        self._proc = self._ctx.Process(
            target=_sink, args=(self.kind, self.port, self.received, self.requests,
                                self.largest, ready), daemon=True)
        self._proc.start()
        if not ready.wait(30):
            raise RuntimeError("receiver did not start")

    def stop(self) -> None:
        self.total += self.received.value
        self._proc.kill()
        self._proc.join(10)

    def count(self) -> int:
        return self.total + self.received.value

    @property
    def endpoint(self) -> str:
        if self.kind == "grpc":
            return f"127.0.0.1:{self.port}"
        return f"http://127.0.0.1:{self.port}/v1/traces"


# --- configuration ------------------------------------------------------------------------------


def _exporter(backend: Backend) -> Any:
    if backend.kind == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(endpoint=backend.endpoint, insecure=True)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=backend.endpoint)


def _configure(backend: Backend, baseline: bool, **kwargs: Any) -> Any:
    import tracescore

    if not baseline:
        return tracescore.configure(exporter=_exporter(backend), **kwargs)
    # tracescore before this change: the SDK's BatchSpanProcessor, queue 8,192, batches of 512.
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from tracescore._setup import config as _config

    original = _config._build_export

    def build(settings: Any) -> Any:
        return BatchSpanProcessor(_exporter(backend), max_queue_size=8192), "baseline"

    _config._build_export = build  # type: ignore[assignment]
    try:
        return tracescore.configure(exporter=_exporter(backend))
    finally:
        _config._build_export = original  # type: ignore[assignment]


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def _report(title: str, produced: int, backend: Backend, inst: Any, extra: str = "") -> None:
    stats = inst.stats()
    received = backend.count()
    lost = produced - received
    print(f"\n== {title}")
    print(f"produced {produced:,}  received {received:,}  lost {lost:,} "
          f"({100 * lost / max(produced, 1):.1f}%)")
    print(f"stats: spans_exported {stats.spans_exported:,}  spans_dropped "
          f"{getattr(stats, 'spans_dropped', '(n/a)')}")
    print(f"requests {backend.requests.value:,}, largest {backend.largest.value:,} bytes{extra}")
    print(f"load: {os.getloadavg()[0]:.2f}")


# --- scenarios ----------------------------------------------------------------------------------


def outage(args: argparse.Namespace) -> None:
    import tracescore

    backend = Backend("http")
    backend.start()
    spool_dir = Path(tempfile.mkdtemp(prefix="bench-spool-"))
    inst = _configure(backend, args.baseline,
                      export=tracescore.ExportOptions(retry_dir=str(spool_dir)))

    @tracescore.tool(name="step")
    def step(i: int, payload: str) -> str:
        return payload

    import random

    rng = random.Random(1)
    # Words drawn at random compress about as well as prose (~2.5x with zlib), unlike "ppp...".
    words = ["agent", "order", "refund", "the", "customer", "policy", "shipping", "asked",
             "about", "a", "delay", "tool", "returned", "status", "of", "invoice", "account",
             "support", "answer", "question", "model", "context", "document", "retrieved"]
    texts = [" ".join(rng.choice(words) for _ in range(args.payload // 6)) + f" {i}"
             for i in range(64)]
    produced = 0
    largest_spool = 0
    phases = [("up", 10.0), ("down", args.outage_seconds), ("up", 20.0)]
    interval = 1.0 / args.rate
    began = time.monotonic()
    for phase, seconds in phases:
        if phase == "down":
            backend.stop()
        elif produced:
            backend.start()
        t0 = time.monotonic()
        next_at = t0
        next_sample = t0
        while time.monotonic() - t0 < seconds:
            step(produced, texts[produced % 64] + str(produced))
            produced += 1
            next_at += interval
            now = time.monotonic()
            if now >= next_sample:
                largest_spool = max(largest_spool, _du(spool_dir))
                next_sample = now + 1.0
            if next_at > now:
                time.sleep(next_at - now)
        print(f"[{time.monotonic() - began:6.1f}s] {phase} phase over: produced {produced:,}, "
              f"received {backend.count():,}, spool {_du(spool_dir):,} bytes", flush=True)
    flushed = tracescore.force_flush(60_000)
    left = _du(spool_dir)
    _report(f"outage of {args.outage_seconds:.0f} s at {args.rate:.0f} spans/s "
             f"({'baseline BatchSpanProcessor' if args.baseline else 'tracescore'})",
             produced, backend, inst,
             f"\nflush {flushed}; spool on disk: largest {largest_spool:,} bytes, "
             f"after the replay {left:,} bytes; "
             f"{largest_spool / max(1, args.rate * args.outage_seconds):.0f} bytes per span "
             "spooled")
    tracescore.shutdown(10_000)
    backend.stop()
    shutil.rmtree(spool_dir, ignore_errors=True)


def burst(args: argparse.Namespace) -> None:
    import tracescore

    backend = Backend("http")
    backend.start()
    inst = _configure(backend, args.baseline)

    @tracescore.tool(name="burst")
    def work(i: int, payload: str) -> str:
        return "ok"

    payload = "q" * 1000
    counts = [0] * args.threads
    stop = threading.Event()
    start = threading.Barrier(args.threads + 1)

    interval = 1.0 / args.thread_rate if args.thread_rate > 0 else 0.0

    def run(t: int) -> None:
        start.wait()
        n = 0
        next_at = time.monotonic()
        while not stop.is_set():
            work(n, payload)
            n += 1
            if interval:
                # The rest of an agent step: waiting on a model or a tool.
                next_at += interval
                delay = next_at - time.monotonic()
                if delay > 0:
                    stop.wait(delay)
        counts[t] = n

    threads = [threading.Thread(target=run, args=(t,)) for t in range(args.threads)]
    for thread in threads:
        thread.start()
    start.wait()
    t0 = time.monotonic()
    stop.wait(args.seconds)
    stop.set()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - t0
    produced = sum(counts)
    queued_at_end = getattr(inst.processor._downstream, "queued_bytes", None)
    flushed = tracescore.force_flush(120_000)
    drained = time.monotonic() - t0
    _report(f"burst: {args.threads} threads for {args.seconds:.0f} s, "
             f"{args.thread_rate or 'unlimited'} spans/s each "
             f"({'baseline BatchSpanProcessor' if args.baseline else 'tracescore'})",
             produced, backend, inst,
             f"\n{produced / elapsed:,.0f} spans/s produced; flush {flushed}, everything out "
             f"{drained:.1f} s after the start; queue at the end of the burst: "
             f"{queued_at_end if queued_at_end is not None else '(n/a)'} bytes")
    tracescore.shutdown(10_000)
    backend.stop()


def fat(args: argparse.Namespace) -> None:
    import tracescore

    backend = Backend("grpc")
    backend.start()
    inst = _configure(backend, args.baseline)

    @tracescore.tool(name="fat")
    def work(i: int, text: str) -> str:
        return text

    t0 = time.monotonic()
    for i in range(1000):
        work(i, f"{i:05d}" + "y" * 12_000)
    flushed = tracescore.force_flush(120_000)
    _report(f"1,000 spans of 12 KB + 12 KB over gRPC "
             f"({'baseline BatchSpanProcessor' if args.baseline else 'tracescore'})",
             1000, backend, inst, f"\nflush {flushed} in {time.monotonic() - t0:.1f} s")
    tracescore.shutdown(10_000)
    backend.stop()


def throughput(args: argparse.Namespace) -> None:
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    import tracescore

    class Keep(SpanExporter):
        def __init__(self) -> None:
            self.spans: list[Any] = []

        def export(self, spans: Any) -> SpanExportResult:
            self.spans.extend(spans)
            return SpanExportResult.SUCCESS

    keep = Keep()
    tracescore.configure(exporter=keep)

    @tracescore.tool(name="burst")
    def work(i: int, payload: str) -> str:
        return "ok"

    payload = "q" * 1000
    n = 20_000
    t0 = time.process_time()
    for i in range(n):
        work(i, payload)
    tracescore.force_flush(60_000)
    produce_cpu = time.process_time() - t0
    spans = list(keep.spans)
    tracescore.shutdown(5000)

    backend = Backend("http")
    backend.start()
    from tracescore._export import ExportProcessor

    processor = ExportProcessor(_exporter(backend), queue_bytes=1 << 40, batch_bytes=3 << 20,
                                schedule_delay=3600)
    for span in spans:
        processor.on_end(span)
    t0 = time.perf_counter()
    c0 = time.process_time()
    processor.force_flush(120_000)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    processor.shutdown()
    print("\n== throughput (1 KB of input per span)")
    print(f"decorators, export off: {n / produce_cpu:,.0f} spans per CPU-second "
          f"(this includes the export processor's on_end)")
    print(f"export processor to the loopback receiver: {len(spans) / wall:,.0f} spans/s wall, "
          f"{len(spans) / max(cpu, 1e-9):,.0f} spans per CPU-second; received "
          f"{backend.count():,} of {len(spans):,}")
    print(f"load: {os.getloadavg()[0]:.2f}")
    backend.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", nargs="?", default="all",
                        choices=["outage", "burst", "fat", "throughput", "all"])
    parser.add_argument("--outage-seconds", type=float, default=60.0)
    parser.add_argument("--rate", type=float, default=80.0)
    parser.add_argument("--payload", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=12.0)
    parser.add_argument("--thread-rate", type=float, default=100.0,
                        help="spans/s per burst thread (0: as fast as it can)")
    parser.add_argument("--baseline", action="store_true")
    args = parser.parse_args()
    chosen = ["outage", "burst", "fat", "throughput"] if args.scenario == "all" else [
        args.scenario]
    for name in chosen:
        globals()[name](args)


if __name__ == "__main__":
    main()
