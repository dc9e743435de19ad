"""The environment: one parser per variable, bad values warn once and fall back, and content
capture honours the GenAI conventions' enum (``NO_CONTENT`` keeps content off spans)."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import tracescore
from tests.helpers import ProbeScorer, finished, memory_configure
from tracescore._setup import env as _env
from tracescore.testing import runtime

CAPTURE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
PACKAGE = Path(tracescore.__file__).parent


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # Warnings are once per value per process: each test starts with none given yet. The
    # settings configure() publishes are put back afterwards, so no test leaks them.
    monkeypatch.setattr(_env, "_warned", set())
    rt = runtime()
    for name in ("capture", "max_length", "disabled"):
        monkeypatch.setattr(rt, name, getattr(rt, name))
    yield


def _capture() -> bool | None:
    return tracescore.ContentOptions().resolve().capture


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "tracescore" and r.levelno == logging.WARNING]


# --- The privacy fix ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["NO_CONTENT", "no_content", " No_Content "])
def test_no_content_keeps_content_off_exported_spans(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(CAPTURE, value)
    _, exporter = memory_configure()
    try:
        @tracescore.agent
        def answer(question: str) -> str:
            return "secret answer"

        answer("secret question")
        (span,) = finished(exporter)
        assert "input.value" not in span.attributes
        assert "output.value" not in span.attributes
        assert not any("secret" in str(v) for v in span.attributes.values())
    finally:
        tracescore.shutdown(2000)


def test_no_content_applies_before_configure() -> None:
    # Decorators used without configure() read the default the runtime took at import.
    code = "import tracescore.testing as t; print(t.runtime().capture)"
    env = {**os.environ, CAPTURE: "NO_CONTENT"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env).stdout.strip()
    assert out == "False"


def test_no_content_still_scores_full_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CAPTURE, "NO_CONTENT")
    scorer = ProbeScorer()
    _, exporter = memory_configure(scoring=[tracescore.ScoringRule(scorer=scorer)])
    try:
        @tracescore.agent
        def answer(question: str) -> str:
            return "secret answer"

        answer("secret question")
        (span,) = finished(exporter)
        assert "output.value" not in span.attributes
        assert scorer.calls[0]["output"] == "secret answer"
    finally:
        tracescore.shutdown(2000)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("NO_CONTENT", False),
        ("SPAN_ONLY", True),
        ("event_only", True),
        ("Span_And_Event", True),
        ("true", True),
        ("FALSE", False),
        ("1", True),
        ("0", False),
        ("yes", True),
        ("no", False),
        ("on", True),
        ("off", False),
    ],
)
def test_capture_content_accepts_enum_and_booleans(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, value: str, expected: bool
) -> None:
    monkeypatch.setenv(CAPTURE, value)
    assert _capture() is expected
    assert _warnings(caplog) == []


@pytest.mark.parametrize("value", [None, "", "   "])
def test_capture_content_unset_is_on(monkeypatch: pytest.MonkeyPatch, value: str | None) -> None:
    if value is None:
        monkeypatch.delenv(CAPTURE, raising=False)
    else:
        monkeypatch.setenv(CAPTURE, value)
    assert _capture() is True


@pytest.mark.parametrize("value", ["NO-CONTENT", "maybe", "SPAN", "2"])
def test_capture_content_unknown_is_off_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, value: str
) -> None:
    monkeypatch.setenv(CAPTURE, value)
    assert _capture() is False
    (message,) = _warnings(caplog)
    assert CAPTURE in message and "NO_CONTENT" in message


def test_capture_content_argument_beats_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CAPTURE, "NO_CONTENT")
    _, exporter = memory_configure(capture_content=True)
    try:
        @tracescore.agent
        def answer(question: str) -> str:
            return "a"

        answer("q")
        (span,) = finished(exporter)
        assert span.attributes["output.value"] == '"a"'
    finally:
        tracescore.shutdown(2000)


# --- The parsers -------------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "expected"), [("TRUE", True), (" on ", True), ("No", False)])
def test_read_bool(monkeypatch: pytest.MonkeyPatch, raw: str, expected: bool) -> None:
    monkeypatch.setenv("TRACESCORE_TEST_VAR", raw)
    assert _env.read_bool("TRACESCORE_TEST_VAR", not expected) is expected


@pytest.mark.parametrize("default", [True, False])
def test_read_bool_falls_back_and_warns_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, default: bool
) -> None:
    monkeypatch.setenv("TRACESCORE_TEST_VAR", "sometimes")
    assert _env.read_bool("TRACESCORE_TEST_VAR", default) is default
    assert _env.read_bool("TRACESCORE_TEST_VAR", default) is default
    (message,) = _warnings(caplog)
    assert "TRACESCORE_TEST_VAR='sometimes'" in message
    # A different bad value is news: it warns again.
    monkeypatch.setenv("TRACESCORE_TEST_VAR", "never")
    _env.read_bool("TRACESCORE_TEST_VAR", default)
    assert len(_warnings(caplog)) == 2


def test_read_bool_unset_is_the_default_without_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("TRACESCORE_TEST_VAR", raising=False)
    assert _env.read_bool("TRACESCORE_TEST_VAR", True) is True
    monkeypatch.setenv("TRACESCORE_TEST_VAR", "  ")
    assert _env.read_bool("TRACESCORE_TEST_VAR", False) is False
    assert _warnings(caplog) == []


@pytest.mark.parametrize(
    ("raw", "integer", "expected"),
    [("2.5", False, 2.5), (" 7 ", True, 7), ("8.0", True, 8), ("1e3", True, 1000)],
)
def test_read_positive(
    monkeypatch: pytest.MonkeyPatch, raw: str, integer: bool, expected: float
) -> None:
    monkeypatch.setenv("TRACESCORE_TEST_VAR", raw)
    value = _env.read_positive("TRACESCORE_TEST_VAR", 99, integer=integer)
    assert value == expected
    assert isinstance(value, int) is integer


@pytest.mark.parametrize(
    ("raw", "integer"),
    [("abc", False), ("0", False), ("-1", False), ("inf", False), ("nan", False),
     ("2.5", True), ("-3", True)],
)
def test_read_positive_falls_back_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, raw: str, integer: bool
) -> None:
    monkeypatch.setenv("TRACESCORE_TEST_VAR", raw)
    assert _env.read_positive("TRACESCORE_TEST_VAR", 42, integer=integer) == 42
    (message,) = _warnings(caplog)
    assert "TRACESCORE_TEST_VAR" in message and "positive" in message


def test_read_enum(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("TRACESCORE_TEST_VAR", "GRPC")
    assert _env.read_enum("TRACESCORE_TEST_VAR", ("http/protobuf", "grpc"), "http/protobuf") == (
        "grpc"
    )
    monkeypatch.setenv("TRACESCORE_TEST_VAR", "http/json")
    assert _env.read_enum("TRACESCORE_TEST_VAR", ("http/protobuf", "grpc"), "http/protobuf") == (
        "http/protobuf"
    )
    (message,) = _warnings(caplog)
    assert "http/json" in message and "grpc" in message


def test_read_str(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACESCORE_TEST_VAR", "  openai/gpt-4o-mini ")
    assert _env.read_str("TRACESCORE_TEST_VAR") == "openai/gpt-4o-mini"
    monkeypatch.setenv("TRACESCORE_TEST_VAR", " ")
    assert _env.read_str("TRACESCORE_TEST_VAR") is None
    assert _env.read_str("TRACESCORE_TEST_VAR", "fallback") == "fallback"


def test_otlp_protocol_prefers_the_traces_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_env.OTEL_EXPORTER_OTLP_PROTOCOL, "http/protobuf")
    monkeypatch.setenv(_env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, "grpc")
    assert _env.otlp_traces_protocol() == "grpc"
    monkeypatch.delenv(_env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL)
    assert _env.otlp_traces_protocol() == "http/protobuf"


def test_max_held_spans_unset_or_bad_means_no_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    def held() -> int | None:
        return tracescore.LimitsOptions().resolve().max_held_spans

    monkeypatch.delenv("TRACESCORE_MAX_HELD_SPANS", raising=False)
    assert held() is None
    monkeypatch.setenv("TRACESCORE_MAX_HELD_SPANS", "lots")
    assert held() is None
    monkeypatch.setenv("TRACESCORE_MAX_HELD_SPANS", "12")
    assert held() == 12


# --- configure() and the environment ------------------------------------------------------------


def test_flush_timeout_default_is_the_documented_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRACESCORE_FLUSH_TIMEOUT", raising=False)
    inst, _ = memory_configure()
    try:
        assert inst.flush_timeout == 10.0
        assert inst.processor.flush_timeout == 10.0
    finally:
        tracescore.shutdown(2000)


def test_bad_environment_falls_back_bad_argument_raises(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("TRACESCORE_FLUSH_TIMEOUT", "soon")
    monkeypatch.setenv("TRACESCORE_MAX_CONTENT_LENGTH", "-5")
    inst, _ = memory_configure()
    try:
        assert inst.flush_timeout == 10.0
        assert runtime().max_length == 16384
        assert len(_warnings(caplog)) == 2
    finally:
        tracescore.shutdown(2000)
    with pytest.raises(tracescore.ConfigurationError) as info:
        tracescore.configure(exporter=False, limits=tracescore.LimitsOptions(flush_timeout=-1))
    assert isinstance(info.value, ValueError)
    with pytest.raises(tracescore.ConfigurationError):
        tracescore.configure(exporter=False, capture_content="NO_CONTENT")  # type: ignore[arg-type]


@pytest.mark.parametrize(("raw", "expected"), [("YES", True), ("on", True), ("0", False)])
def test_disabled_parses_like_every_boolean(
    monkeypatch: pytest.MonkeyPatch, raw: str, expected: bool
) -> None:
    monkeypatch.setenv(_env.TRACESCORE_DISABLED, raw)
    memory_configure()
    try:
        assert runtime().disabled is expected
    finally:
        tracescore.shutdown(2000)


# --- ScoringRule is keyword-only ----------------------------------------------------------------


def test_scoring_rule_rejects_positional_arguments() -> None:
    with pytest.raises(TypeError):
        tracescore.ScoringRule(ProbeScorer(), "agent", 0.5, 0.7)  # type: ignore[misc]
    rule = tracescore.ScoringRule(scorer=ProbeScorer(), on="agent", sample_rate=0.5)
    assert rule.sample_rate == 0.5


# --- One module reads the environment -----------------------------------------------------------

# The judge's child process is handed the whole environment, which is not a read.
_PENDING: set[str] = set()
_READ = re.compile(r"os\.environ(?!\))|os\.getenv|getenv\(")


def test_only_env_module_reads_the_environment() -> None:
    readers = set()
    for path in PACKAGE.rglob("*.py"):
        if path.relative_to(PACKAGE).as_posix() == "_setup/env.py":
            continue
        text = path.read_text(encoding="utf-8")
        if _READ.search(text.replace("env=dict(os.environ)", "")):
            readers.add(str(path.relative_to(PACKAGE)))
    assert readers <= _PENDING, sorted(readers - _PENDING)
