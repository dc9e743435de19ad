"""The stash of GenAI message content from log records (EVENT_ONLY): kept per span through a
real SDK LoggerProvider, taken once, bounded by spans and age, evictions counted."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry._logs import LogRecord
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

from tracescore._readers import _log_stash

TRACE = 0x0AF7651916CD43DD8448EB211C80319C


@pytest.fixture
def logger() -> Iterator[Any]:
    _log_stash.clear()
    provider = LoggerProvider()
    provider.add_log_record_processor(_log_stash._processor())
    yield provider.get_logger("opentelemetry.util.genai")
    provider.shutdown()
    _log_stash.clear()


def _context(span_id: int) -> Any:
    ctx = SpanContext(TRACE, span_id, is_remote=False, trace_flags=TraceFlags(1))
    return set_span_in_context(NonRecordingSpan(ctx))


class _Span:
    def __init__(self, span_id: int) -> None:
        self.context = SpanContext(TRACE, span_id, is_remote=False)


def _emit(logger: Any, span_id: int, **attributes: Any) -> None:
    logger.emit(LogRecord(context=_context(span_id), attributes=attributes,
                          event_name="gen_ai.client.inference.operation.details"))


def test_content_is_kept_per_span_and_taken_once(logger: Any) -> None:
    messages = ({"role": "user", "parts": ({"type": "text", "content": "Hi"},)},)
    _emit(logger, 1, **{"gen_ai.input.messages": messages, "gen_ai.request.model": "m"})
    _emit(logger, 2, **{"gen_ai.request.model": "m"})  # no content: not kept
    taken = _log_stash.take(_Span(1))
    assert taken is not None and list(taken) == ["gen_ai.input.messages"]
    assert _log_stash.take(_Span(1)) is None
    assert _log_stash.take(_Span(2)) is None


def test_bounded_by_spans_with_evictions_counted(logger: Any) -> None:
    before = _log_stash.STASH.evicted
    for span_id in range(1, _log_stash.MAX_SPANS + 11):
        _emit(logger, span_id, **{"gen_ai.output.messages": "[]"})
    assert _log_stash.STASH.evicted - before == 10
    assert _log_stash.take(_Span(1)) is None  # the oldest went first
    assert _log_stash.take(_Span(_log_stash.MAX_SPANS + 10)) is not None


def test_bounded_by_age(logger: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _emit(logger, 1, **{"gen_ai.output.messages": "[]"})
    monkeypatch.setattr(_log_stash, "MAX_AGE_S", -1.0)  # everything kept is now too old
    assert _log_stash.take(_Span(1)) is None
