"""One configuration schema: the option groups ``configure()`` takes are the very objects the
service's file validates into, with one set of defaults and environment variables; the flat
keywords of the previous release still work, with a ``DeprecationWarning``."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import tracescore
from tracescore.testing import runtime

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _cleanup() -> Any:
    yield
    tracescore.shutdown(2000)


def test_groups_reach_the_runtime() -> None:
    tracescore.configure(exporter=False,
                         content=tracescore.ContentOptions(capture=False, max_length=123),
                         limits=tracescore.LimitsOptions(max_scoring_length=77))
    rt = runtime()
    assert (rt.capture, rt.max_length, rt.caps.max_length) == (False, 123, 77)


@pytest.mark.parametrize(("flat", "value", "read"), [
    ("max_content_length", 321, lambda rt: rt.max_length),
    ("max_scoring_documents", 5, lambda rt: rt.caps.max_documents),
])
def test_flat_names_still_work_and_warn(flat: str, value: Any, read: Any) -> None:
    with pytest.warns(DeprecationWarning, match=rf"configure\({flat}=\.\.\.\) is deprecated"):
        tracescore.configure(exporter=False, **{flat: value})
    assert read(runtime()) == value


def test_a_field_given_both_ways_or_an_unknown_keyword_is_refused() -> None:
    with pytest.warns(DeprecationWarning), pytest.raises(tracescore.ConfigurationError,
                                                         match="both"):
        tracescore.configure(exporter=False, max_concurrency=2,
                             limits=tracescore.LimitsOptions(max_concurrency=3))
    with pytest.raises(TypeError, match="max_concurency"):
        tracescore.configure(exporter=False, max_concurency=2)
    with pytest.raises(tracescore.ConfigurationError, match="LimitsOptions"):
        tracescore.configure(exporter=False, limits={"max_concurrency": 2})  # type: ignore[arg-type]
    with pytest.raises(tracescore.ConfigurationError, match="disagree"):
        tracescore.configure(exporter=False, capture_content=True,
                             content=tracescore.ContentOptions(capture=False))


def test_none_takes_the_environment_then_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACESCORE_MAX_CONCURRENCY", "3")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "250")
    limits = tracescore.LimitsOptions().resolve()
    assert limits.max_concurrency == 3 and limits.max_queue_size == 1000
    assert tracescore.LimitsOptions(max_concurrency=9).resolve().max_concurrency == 9
    assert tracescore.ExportOptions().resolve().schedule_delay == 0.25
    assert all(getattr(limits, f.name) is not None for f in dataclasses.fields(limits)
               if f.name != "max_held_spans")


def test_the_service_file_validates_into_the_same_objects(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("yaml")
    from tracescore._serve import parse

    monkeypatch.delenv("OTEL_BSP_SCHEDULE_DELAY", raising=False)
    monkeypatch.delenv("TRACESCORE_EXPORT_QUEUE_BYTES", raising=False)
    config = parse("""
downstream: {endpoint: "http://backend:4317"}
limits: {max_concurrency: 4}
export: {retry: false}
redaction: {patterns: ["cust-[0-9]+"]}
rules:
  - scorer: content-similarity
    on: llm
    sample_rate: 0.5
""", toml=False)
    assert isinstance(config.limits, tracescore.LimitsOptions)
    assert isinstance(config.export, tracescore.ExportOptions)
    assert config.limits.max_concurrency == 4 and config.limits.job_timeout == 300
    # The service profile: three export defaults differ, stated in one place.
    assert (config.export.queue_bytes, config.export.schedule_delay,
            config.export.max_batch_spans) == (128 * 1024 * 1024, 0.0, 2048)
    assert config.export.retry is False
    assert config.redaction.patterns == ("cust-[0-9]+",)
    assert config.rules[0].to_rule(_Scorer()).sample_rate == 0.5


def test_the_service_reads_the_older_section_names_with_a_warning() -> None:
    pytest.importorskip("yaml")
    from tracescore._serve import parse

    with pytest.warns(DeprecationWarning) as caught:
        config = parse("""
downstream: {endpoint: "http://backend:4317"}
scoring: {max_queue_size: 7}
limits: {redis_url: "redis://cache:6379"}
""", toml=False)
    assert len(caught) == 2
    assert config.limits.max_queue_size == 7
    assert config.fleet.redis_url == "redis://cache:6379"


class _Scorer:
    id = "s"

    async def arun(self, **kwargs: Any) -> Any:  # pragma: no cover - never run
        raise NotImplementedError


_CONFIGURE_AGAIN = """
import logging, sys
logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
import tracescore

@tracescore.agent
def answer(question):
    return question

tracescore.configure()                        # the file default: spans, logs and metrics files
answer("first")
tracescore.configure()                        # a notebook cell run again
answer("second")
tracescore.configure(service_name="renamed")  # another resource: another tracer provider
answer("third")
print("done")
"""


def test_configure_again_replaces_without_opentelemetry_warnings(tmp_path: Path) -> None:
    # At interpreter exit too: the replaced configuration's providers must not be shut down a
    # second time by the SDK's own exit hooks, and no global provider is set twice.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACESCORE_", "OTEL_"))}
    env.update(LITELLM_OFFLINE_MODE="true", PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-W", "always", "-c", _CONFIGURE_AGAIN],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "done"
    # Nothing on stderr but tracescore's own first-run lines (said once, summed up at exit).
    assert proc.stderr.splitlines() == [
        "tracescore: no OTLP endpoint set: spans and scores go to tracescore-traces.jsonl "
        "(see them: tracescore view tracescore-traces.jsonl; quiet: TRACESCORE_CONSOLE=false)",
        "tracescore: wrote 3 spans to tracescore-traces.jsonl (no scores: "
        "configure(scoring=[tracescore.ScoringRule(...)]) adds them)",
        "  see them: tracescore view tracescore-traces.jsonl  (an HTML page of the traces and "
        "their scores)",
    ]
    spans = [span["name"]
             for line in (tmp_path / "tracescore-traces.jsonl").read_text("utf-8").splitlines()
             for rs in json.loads(line)["resourceSpans"]
             for ss in rs["scopeSpans"] for span in ss["spans"]]
    assert spans == ["invoke_agent answer"] * 3  # every configuration exported its span
