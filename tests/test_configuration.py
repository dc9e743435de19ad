"""One configuration schema: the option groups ``configure()`` takes are the very objects the
service's file validates into, with one set of defaults and environment variables; the flat
keywords of the previous release still work, with a ``DeprecationWarning``."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import tracescore
from tracescore.testing import runtime


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
