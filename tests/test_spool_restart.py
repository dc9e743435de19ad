"""Issue 22, point 2: the retry spool survives the process.

A real child process spools batches while its backend is down and is killed with SIGKILL; a new
process on the same spool directory adopts the dead process's folder and replays every span to
a real OTLP receiver on loopback. A live process's folder is never adopted, batches past the age
bound are counted, spool files are private, and a planted file cannot make inflating it take
more than the size it was written with.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
import tracemalloc
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore
from tests.otlp_receiver import HttpOtlpReceiver
from tracescore._export import codec
from tracescore._export.spool import PREFIX, Spool

ROOT = Path(__file__).resolve().parent.parent
BATCHES = 20
PER_BATCH = 25
NO_DROPS = {"queue_full": 0, "export_failed": 0, "too_large": 0, "shutdown": 0}

CHILD = textwrap.dedent("""
    import os, sys
    import tracescore
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    spool_dir, port, total = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    tracescore.configure(
        service_name="killed",
        exporter=OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces", timeout=1),
        export=tracescore.ExportOptions(retry_dir=spool_dir, flush_on_sigterm=False))

    @tracescore.tool(name="step")
    def step(i: int) -> int:
        return i

    for i in range(total):
        step(i)
    ok = tracescore.force_flush(60_000)
    print("SPOOLED", ok, tracescore.stats().spans_dropped, flush=True)
    sys.stdin.read()  # until killed
""")


@pytest.fixture(autouse=True)
def _shut_down() -> Iterator[None]:
    yield
    tracescore.shutdown(5000)


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.otlp") if p.is_file())


def _step_numbers(received: Any) -> list[int]:
    with received.lock:
        return [json.loads(s.attributes["input.value"])["i"] for s in received.spans
                if s.name == "execute_tool step"]


def test_batches_of_a_killed_process_are_replayed_by_the_next(tmp_path: Path) -> None:
    with HttpOtlpReceiver() as first:
        port = first.port  # closed again: the child's backend is down
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_OFFLINE_MODE": "true",
           "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": str(PER_BATCH), "TRACESCORE_LOG_RECORDS": "false"}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path), str(port), str(BATCHES * PER_BATCH)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=env, cwd=str(ROOT))
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.startswith("SPOOLED False"), (line, child.stderr.read() if child.poll()
                                                  is not None else "")
        (folder,) = [p for p in tmp_path.iterdir() if p.name.startswith(PREFIX)]
        files = _files(folder)
        assert len(files) == BATCHES
        # Private: the folder 0700, every file 0600.
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert {stat.S_IMODE(p.stat().st_mode) for p in files} == {0o600}
        # A live process's folder is never adopted: a spool made now leaves it alone.
        assert len(Spool(str(tmp_path), 1 << 30, 3600)) == 0
        assert len(_files(folder)) == BATCHES
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        child.stdout.close()  # type: ignore[union-attr]
        child.stderr.close()  # type: ignore[union-attr]
        child.stdin.close()  # type: ignore[union-attr]
    assert child.returncode == -signal.SIGKILL

    with HttpOtlpReceiver(port=port) as receiver:
        tracescore.configure(
            service_name="next",
            exporter=OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces",
                                      timeout=5),
            export=tracescore.ExportOptions(retry_dir=str(tmp_path)))
        assert tracescore.force_flush(30_000)
        steps = _step_numbers(receiver.received)
    # Produced by the killed process: 500 spans; received from the next one: the same, once
    # each and in the order they ended.
    assert steps == list(range(BATCHES * PER_BATCH))
    stats = tracescore.stats()
    assert stats.spans_exported == BATCHES * PER_BATCH
    assert stats.spans_dropped == NO_DROPS
    # The dead process's folder is gone; nothing is left on disk.
    assert not folder.exists()
    assert _files(tmp_path) == []


def _dead_spool(tmp_path: Path, batches: int, spans: int = 3) -> Path:
    """A spool folder as a process that died leaves it: batches written, lock released."""
    memory = InMemorySpanExporter()
    tracescore.configure(exporter=memory, export=tracescore.ExportOptions(retry=False))

    @tracescore.tool(name="old")
    def old(i: int) -> int:
        return i

    for i in range(batches * spans):
        old(i)
    tracescore.force_flush(5000)
    finished = list(memory.get_finished_spans())
    tracescore.shutdown(5000)
    dead = Spool(str(tmp_path), 1 << 30, 3600, adopt=False)
    for b in range(batches):
        assert dead.append(finished[b * spans:(b + 1) * spans]) == 0
    folder = dead.directory
    assert folder is not None
    dead._unlock()  # what the kernel does when the process dies
    return folder


def test_batches_past_the_age_bound_are_dropped_and_counted(tmp_path: Path) -> None:
    folder = _dead_spool(tmp_path, batches=4)
    hour_ago = time.time() - 3600
    for path in _files(folder)[:3]:
        os.utime(path, (hour_ago, hour_ago))
    memory = InMemorySpanExporter()
    tracescore.configure(exporter=memory,
                         export=tracescore.ExportOptions(retry_dir=str(tmp_path),
                                                         retry_max_age=60))
    assert tracescore.force_flush(10_000)
    assert len(memory.get_finished_spans()) == 3  # the one recent batch
    stats = tracescore.stats()
    assert stats.spans_exported == 3
    assert stats.spans_dropped == {**NO_DROPS, "export_failed": 9}
    assert not folder.exists()


def test_a_folder_of_an_earlier_version_is_adopted_only_when_its_process_is_gone(
        tmp_path: Path) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    folder = _dead_spool(tmp_path, batches=2)
    legacy_dead = folder.rename(tmp_path / f"{PREFIX}{int(gone.stdout)}-abcd1234")
    live = _dead_spool(tmp_path, batches=1)
    legacy_live = live.rename(tmp_path / f"{PREFIX}{os.getppid()}-efgh5678")
    spool = Spool(str(tmp_path), 1 << 30, 3600)
    assert len(spool) == 2 and spool.adopted == 2
    assert not legacy_dead.exists()
    assert len(_files(legacy_live)) == 1  # its process id is alive: left alone
    spool.close()


def test_inflating_a_planted_file_is_bounded_by_what_it_was_written_with(
        tmp_path: Path) -> None:
    folder = _dead_spool(tmp_path, batches=1)
    (real,) = _files(folder)
    # Replaced by a small stream that inflates to 256 MiB.
    deflate = zlib.compressobj(1)
    chunk = bytes(1 << 20)
    bomb = b"".join(deflate.compress(chunk) for _ in range(256)) + deflate.flush()
    assert len(bomb) < 2 << 20
    real.write_bytes(bomb)
    memory = InMemorySpanExporter()
    tracemalloc.start()
    try:
        tracescore.configure(exporter=memory,
                             export=tracescore.ExportOptions(retry_dir=str(tmp_path)))
        tracescore.force_flush(10_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20, f"peak {peak} bytes while reading a planted spool file"
    assert memory.get_finished_spans() == ()
    # Its spans are unknown (it does not decode), whatever its name says: counted as a file.
    assert tracescore.stats().spans_dropped == NO_DROPS
    assert tracescore.stats().spool_refused == {"folders": 0, "files": 1}
    with pytest.raises(ValueError, match="inflates past"):
        codec.decode(bomb, max_size=1 << 20)
