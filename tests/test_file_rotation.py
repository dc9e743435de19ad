"""The local file default rotates by size with a bounded number of files (issue 10, item 6)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider

import tracescore
from tracescore._export.exporters import FileSpanExporter, exporter_from_env
from tracescore._setup import env as _env

# A span of this exporter's lines is ~600 bytes; 20 KB files hold a few dozen.
MAX_BYTES = 20_000
BACKUPS = 2


def _spans(start: int, count: int, payload: str = "x" * 200) -> list[ReadableSpan]:
    tracer = TracerProvider().get_tracer("rotation")
    spans = []
    for i in range(start, start + count):
        span = tracer.start_span(f"span-{i}", attributes={"seq": i, "payload": payload})
        span.end()
        assert isinstance(span, ReadableSpan)
        spans.append(span)
    return spans


def _read(path: Path) -> list[int]:
    """The ``seq`` of every span in one file, in file order; every line must be OTLP/JSON."""
    seqs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        doc = json.loads(line)
        for rs in doc["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    assert len(span["traceId"]) == 32 and len(span["spanId"]) == 16
                    attrs = {a["key"]: a["value"] for a in span["attributes"]}
                    seqs.append(int(attrs["seq"]["intValue"]))
    return seqs


def test_writing_past_the_limit_rotates_and_stays_bounded(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    exporter = FileSpanExporter(path, max_bytes=MAX_BYTES, backup_count=BACKUPS)
    written = 0
    for _ in range(200):  # ~20 times what the files may hold
        exporter.export(_spans(written, 2))
        written += 2
    exporter.shutdown()

    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["traces.jsonl", "traces.jsonl.1", "traces.jsonl.2"]
    line_max = max(len(line) + 1 for p in tmp_path.iterdir()
                   for line in p.read_bytes().splitlines())
    for p in tmp_path.iterdir():
        assert p.stat().st_size <= MAX_BYTES  # a line is only added while it fits
    assert sum(p.stat().st_size for p in tmp_path.iterdir()) <= (BACKUPS + 1) * MAX_BYTES
    assert line_max < MAX_BYTES

    base, first, second = (_read(tmp_path / name) for name in files)
    # Newest in the base file, each older file strictly older, nothing lost in between: what
    # is kept is exactly the newest spans written.
    assert base[-1] == written - 1
    assert min(base) > max(first) and min(first) > max(second)
    kept = second + first + base
    assert kept == list(range(written - len(kept), written))
    assert len(kept) < written  # the oldest were rotated out


def test_a_line_bigger_than_the_limit_goes_alone_without_rotating_an_empty_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "traces.jsonl"
    exporter = FileSpanExporter(path, max_bytes=1_000, backup_count=3)
    for i in range(3):
        exporter.export(_spans(i, 1, payload="y" * 2_000))
    # Each oversized line rotated the previous one away; no empty file was rotated in.
    assert _read(path) == [2]
    assert _read(tmp_path / "traces.jsonl.1") == [1]
    assert _read(tmp_path / "traces.jsonl.2") == [0]
    assert not (tmp_path / "traces.jsonl.3").exists()


def test_a_file_removed_by_someone_else_is_started_afresh(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    exporter = FileSpanExporter(path, max_bytes=MAX_BYTES, backup_count=BACKUPS)
    exporter.export(_spans(0, 1))
    path.unlink()
    exporter.export(_spans(1, 1))
    assert _read(path) == [1]


def test_defaults_and_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exporter = FileSpanExporter(tmp_path / "a.jsonl")
    assert (exporter.max_bytes, exporter.backup_count) == (50 * 1024 * 1024, 4)
    assert (exporter.backup_count + 1) * exporter.max_bytes <= 300 * 1024 * 1024

    monkeypatch.delenv(_env.OTEL_EXPORTER_OTLP_ENDPOINT, raising=False)
    monkeypatch.delenv(_env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, raising=False)
    monkeypatch.setenv(_env.TRACESCORE_EXPORT_FILE, str(tmp_path / "env.jsonl"))
    monkeypatch.setenv(_env.TRACESCORE_EXPORT_FILE_MAX_BYTES, "4096")
    monkeypatch.setenv(_env.TRACESCORE_EXPORT_FILE_BACKUP_COUNT, "7")
    chosen, _ = exporter_from_env()
    assert isinstance(chosen, FileSpanExporter)
    assert (chosen.path, chosen.max_bytes, chosen.backup_count) == (
        tmp_path / "env.jsonl", 4096, 7)
    # Arguments beat the environment.
    explicit = FileSpanExporter(tmp_path / "b.jsonl", max_bytes=10, backup_count=1)
    assert (explicit.max_bytes, explicit.backup_count) == (10, 1)


@pytest.mark.parametrize("kwargs", [{"max_bytes": 0}, {"max_bytes": -1},
                                    {"backup_count": 0}, {"max_bytes": 1.5},
                                    {"backup_count": True}])
def test_bad_limits_raise(tmp_path: Path, kwargs: dict[str, Any]) -> None:
    with pytest.raises(tracescore.ConfigurationError, match="positive integer"):
        FileSpanExporter(tmp_path / "x.jsonl", **kwargs)


def test_the_configured_default_rotates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Through configure() and the decorators, as a user without an OTLP endpoint runs it.
    monkeypatch.delenv(_env.OTEL_EXPORTER_OTLP_ENDPOINT, raising=False)
    monkeypatch.delenv(_env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, raising=False)
    monkeypatch.setenv(_env.TRACESCORE_EXPORT_FILE, str(tmp_path / "t.jsonl"))
    monkeypatch.setenv(_env.TRACESCORE_EXPORT_FILE_MAX_BYTES, str(MAX_BYTES))
    monkeypatch.setenv(_env.TRACESCORE_EXPORT_FILE_BACKUP_COUNT, "1")
    tracescore.configure(service_name="rotation")
    try:
        @tracescore.agent
        def answer(i: int) -> str:
            return "z" * 500

        for i in range(300):
            answer(i)
            if i % 10 == 9:
                assert tracescore.force_flush(5000)
    finally:
        tracescore.shutdown(5000)
    # Beside the spans, the self-metrics' sibling file (issue 24), rotated the same way.
    span_files = sorted(p for p in tmp_path.iterdir() if not p.name.startswith("t-metrics"))
    assert [p.name for p in span_files] == ["t.jsonl", "t.jsonl.1"]
    assert sum(p.stat().st_size for p in span_files) <= 2 * MAX_BYTES
    assert {p.name for p in tmp_path.iterdir()} - {p.name for p in span_files} <= {
        "t-metrics.jsonl", "t-metrics.jsonl.1"}
