"""Numeric settings past their maximum: a warning and the maximum, never a bound switched off.

The maxima are read from docs/configuration.md's "Maxima" tables, so the documentation and the
behaviour cannot drift apart: every documented variable, set to 1e23, warns once naming the
documented maximum; every documented field of the service's file, set to 1e23, too, and a real
``tracescore serve`` starts with them (before, grpcio stopped it with an ``OverflowError``).
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import tracescore

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
HUGE = "1" + "0" * 23  # 10^23, written so that an integer setting reads it too
GIB = 1 << 30


def _maxima_rows() -> tuple[dict[str, float], dict[str, float]]:
    """(variable -> maximum, service field -> maximum) as documented."""
    section = DOC.split("## Maxima", 1)[1].split("\n## ", 1)[0]
    variables: dict[str, float] = {}
    fields: dict[str, float] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`"):
            continue
        name = cells[0].strip("`")
        number_cell = cells[2] if len(cells) == 4 else cells[1]
        number = float(re.match(r"[\d,]+", number_cell).group().replace(",", ""))  # type: ignore[union-attr]
        (variables if len(cells) == 4 else fields)[name] = number
    return variables, fields


VARIABLES, FIELDS = _maxima_rows()


def _warned_maxima(records: list[logging.LogRecord]) -> dict[str, float]:
    found = {}
    for record in records:
        match = re.match(r"tracescore: (\S+) is (.+?), past the largest value it takes; "
                         r"using ([\d.e+]+)", record.getMessage())
        if match:
            found[match.group(1)] = float(match.group(3))
    return found


def test_the_tables_list_every_numeric_setting() -> None:
    assert len(VARIABLES) == 21 and len(FIELDS) == 17
    assert VARIABLES["TRACESCORE_EXPORT_QUEUE_BYTES"] == 16 * GIB


def _read_every_variable(tmp_path: Path) -> Any:
    """Everything that reads the documented variables, through the public API."""
    content = tracescore.ContentOptions().resolve()
    limits = tracescore.LimitsOptions().resolve()
    export = tracescore.ExportOptions().resolve()
    exporter = tracescore.FileSpanExporter(str(tmp_path / "traces.jsonl"))
    judge = tracescore.Judge("openai/judge", api_base="http://127.0.0.1:9/v1")
    instance = tracescore.configure(exporter=False)
    return content, limits, export, exporter, judge, instance


def test_every_variable_past_its_maximum_warns_once_and_takes_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    for name in VARIABLES:
        monkeypatch.setenv(name, HUGE)
    with caplog.at_level(logging.WARNING, logger="tracescore"):
        content, limits, export, exporter, judge, instance = _read_every_variable(tmp_path)
        first = list(caplog.records)
        caplog.clear()
        _read_every_variable(tmp_path)  # read again (configure() again): no second warning
        again = _warned_maxima(caplog.records)
    tracescore.shutdown(5000)
    warned = _warned_maxima(first)
    assert warned == VARIABLES, set(warned) ^ set(VARIABLES)
    assert again == {}
    # The values in force are the maxima (the queue's memory bound is on: 16 GiB, not 1e23).
    assert export.queue_bytes == 16 * GIB
    assert export.schedule_delay == VARIABLES["OTEL_BSP_SCHEDULE_DELAY"] / 1000
    assert export.retry_max_age == VARIABLES["TRACESCORE_EXPORT_RETRY_MAX_AGE"]
    assert content.max_length == VARIABLES["TRACESCORE_MAX_CONTENT_LENGTH"]
    assert limits.max_queue_size == VARIABLES["TRACESCORE_MAX_QUEUE_SIZE"]
    assert limits.score_timeout == VARIABLES["TRACESCORE_SCORE_TIMEOUT"]
    assert exporter.max_bytes == VARIABLES["TRACESCORE_EXPORT_FILE_MAX_BYTES"]
    assert judge.max_concurrency == VARIABLES["TRACESCORE_JUDGE_MAX_CONCURRENCY"]
    assert instance.flush_timeout == VARIABLES["TRACESCORE_FLUSH_TIMEOUT"]


def test_values_at_the_maximum_are_taken_without_a_word(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("TRACESCORE_EXPORT_QUEUE_BYTES", str(16 * GIB))
    with caplog.at_level(logging.WARNING, logger="tracescore"):
        assert tracescore.ExportOptions().resolve().queue_bytes == 16 * GIB
    assert caplog.records == []


@pytest.mark.parametrize("option,value,expected", [
    (lambda v: tracescore.ExportOptions(queue_bytes=v).queue_bytes, 10 ** 23, 16 * GIB),
    (lambda v: tracescore.ExportOptions(schedule_delay=v).schedule_delay, 1e23, 3600.0),
    (lambda v: tracescore.LimitsOptions(score_timeout=v).score_timeout, 1e300, 86_400.0),
    (lambda v: tracescore.LimitsOptions(max_concurrency=v).max_concurrency, 10 ** 9, 1024),
    (lambda v: tracescore.ContentOptions(max_length=v).max_length, 10 ** 23, 16 << 20),
    (lambda v: tracescore.FileSpanExporter("x.jsonl", backup_count=v).backup_count,
     10 ** 23, 1000),
], ids=["queue_bytes", "schedule_delay", "score_timeout", "max_concurrency", "max_length",
        "backup_count"])
def test_explicit_options_past_their_maximum_warn_and_take_it(
        option: Any, value: Any, expected: Any, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tracescore"):
        assert option(value) == expected
    assert len(_warned_maxima(caplog.records)) == 1


def test_configure_flush_timeout_past_its_maximum(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tracescore"):
        instance = tracescore.configure(exporter=False,
                                        limits=tracescore.LimitsOptions(flush_timeout=1e23))
    tracescore.shutdown(5000)
    assert instance.flush_timeout == 3600
    assert "LimitsOptions(flush_timeout=...)" in _warned_maxima(caplog.records)


@pytest.mark.parametrize("value", ["²", "9" * 5000, "-3", "1.5"])
def test_a_judge_concurrency_variable_that_is_not_a_count_falls_back(
        value: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    # "²" passes str.isdigit() and int() refuses it; 5,000 digits pass it and int() refuses
    # them (Python's 4,300-digit limit): Judge() raised ValueError for both.
    monkeypatch.setenv("TRACESCORE_JUDGE_MAX_CONCURRENCY", value)
    with caplog.at_level(logging.WARNING, logger="tracescore"):
        judge = tracescore.Judge("openai/judge", api_base="https://api.example.invalid/v1")
    expected = 1024 if value.isascii() and value.isdigit() else None
    assert judge.max_concurrency == expected
    assert "TRACESCORE_JUDGE_MAX_CONCURRENCY" in caplog.text


def _serve_file(folder: Path, huge: str = HUGE) -> Path:
    """A service file with every documented field at ``huge``."""
    sections: dict[str, dict[str, str]] = {}
    top: dict[str, str] = {}
    for field in FIELDS:
        section, _, name = field.rpartition(".")
        (sections.setdefault(section, {}) if section else top)[name] = huge
    receivers = sections.pop("receivers")
    downstream = sections.pop("exporter")
    lines = [
        "exporter: {endpoint: \"http://127.0.0.1:9\", protocol: grpc, "
        + ", ".join(f"{k}: {v}" for k, v in downstream.items()) + "}",
        "receivers: {grpc: {endpoint: \"127.0.0.1:0\"}, http: {endpoint: \"127.0.0.1:0\"}, "
        + ", ".join(f"{k}: {v}" for k, v in receivers.items()) + "}",
        "rules: []",
        f"export: {{queue_bytes: {huge}}}",
        f"limits: {{max_queue_size: {huge}}}",
    ]
    for section, values in sections.items():
        lines.append(f"{section}: {{" + ", ".join(f"{k}: {v}" for k, v in values.items())
                     + "}")
    lines += [f"{k}: {v}" for k, v in top.items()]
    path = folder / "serve.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_every_service_field_past_its_maximum_warns_and_the_service_starts(
        tmp_path: Path) -> None:
    config = _serve_file(tmp_path)
    env = {**os.environ, "LITELLM_OFFLINE_MODE": "true", "PYTHONPATH": str(ROOT)}
    check = subprocess.run([sys.executable, "-m", "tracescore", "serve", "--check",
                            "--config", str(config)], capture_output=True, text=True,
                           env=env, timeout=120)
    assert check.returncode == 0, check.stderr
    warned = {m.group(1): float(m.group(2)) for m in re.finditer(
        r"tracescore: (\S+) is .+?, past the largest value it takes; using ([\d.e+]+)",
        check.stderr)}
    assert {k: v for k, v in warned.items() if k in FIELDS} == FIELDS
    assert warned["ExportOptions(queue_bytes=...)"] == 16 * GIB
    assert warned["LimitsOptions(max_queue_size=...)"] == 1_000_000
    proc = subprocess.Popen([sys.executable, "-m", "tracescore", "serve", "--config",
                             str(config)], stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stderr is not None
        lines = []
        for line in proc.stderr:
            lines.append(line)
            if "http port" in line or "Traceback" in line:
                break
        assert "http port" in lines[-1], "".join(lines) + proc.stderr.read()
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
