"""Message content that a GenAI instrumentation put in a log record instead of on its span.

With ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=EVENT_ONLY`` the OTel GenAI
instrumentations (``opentelemetry-util-genai``) write ``gen_ai.input.messages``,
``gen_ai.output.messages`` and ``gen_ai.system_instructions`` not on the span but on a
``gen_ai.client.inference.operation.details`` log record carrying the span's ids, emitted through
the global ``LoggerProvider`` just before the span ends. A ``LogRecordProcessor`` added to that
provider keeps those three values per span for a short while; the GenAI reader takes them when it
reads the span.

Bounded: at most ``MAX_SPANS`` spans, each kept at most ``MAX_AGE_S`` seconds (a span no rule
selects is never read, so its entry ages out); ``STASH.evicted`` counts entries dropped unread. Only
records that carry one of the three attributes and a span id are kept; the rest cost one
membership test each.

Only an SDK ``LoggerProvider`` set globally (``opentelemetry._logs.set_logger_provider``) is one
tracescore can see: ``attach()`` adds the processor to it once. tracescore's own provider (for
its score records) is never global and is not involved.
"""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections import OrderedDict
from typing import Any

from tracescore._core import semconv as sc

CONTENT_KEYS = (sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES,
                sc.GEN_AI_SYSTEM_INSTRUCTIONS)
MAX_SPANS = 256
MAX_AGE_S = 60.0

class LogStash:
    """The message content kept from log records, by span, with its count of entries dropped
    unread (``evicted``). One per process (``STASH``): it serves the global ``LoggerProvider``,
    which is the process's, and every runtime's GenAI reader takes from it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[int, int], tuple[float, dict[str, Any]]] = OrderedDict()
        self._attached: weakref.WeakSet[Any] = weakref.WeakSet()
        self.evicted = 0  # entries dropped before any reader took them (never read, or too many)

    def record(self, log_record: Any) -> None:
        """Keep the message content of one log record (an SDK ``ReadWriteLogRecord``, or the
        older ``LogData``; both wrap ``.log_record``) under its span's ids."""
        inner = getattr(log_record, "log_record", log_record)
        attrs = getattr(inner, "attributes", None)
        if not attrs:
            return
        content = {key: attrs[key] for key in CONTENT_KEYS if key in attrs}
        span_id = getattr(inner, "span_id", None)
        trace_id = getattr(inner, "trace_id", None)
        if not content or not span_id or not trace_id:
            return
        now = time.monotonic()
        key = (trace_id, span_id)
        entries = self._entries
        with self._lock:
            old = entries.pop(key, None)
            if old is not None:
                content = {**old[1], **content}
            entries[key] = (now, content)
            while entries:
                oldest_key, (stamp, _) = next(iter(entries.items()))
                if len(entries) <= MAX_SPANS and now - stamp <= MAX_AGE_S:
                    break
                del entries[oldest_key]
                self.evicted += 1

    def take(self, span: Any) -> dict[str, Any] | None:
        """The content kept for ``span`` (removed from the stash), or None."""
        ctx = span.context
        with self._lock:
            entry = self._entries.pop((ctx.trace_id, ctx.span_id), None)
        if entry is None or time.monotonic() - entry[0] > MAX_AGE_S:
            return None
        return entry[1]

    def attach(self) -> str | None:
        """See the module's ``attach``."""
        try:
            from opentelemetry import _logs
            from opentelemetry.sdk._logs import LoggerProvider

            provider = _logs.get_logger_provider()
            if not isinstance(provider, LoggerProvider):
                return ("no OpenTelemetry SDK LoggerProvider is set globally "
                        "(opentelemetry._logs.set_logger_provider), so the log records went "
                        "nowhere tracescore can see")
            with self._lock:
                if provider in self._attached:
                    return None
                self._attached.add(provider)
            provider.add_log_record_processor(_processor())
            return None
        except Exception as exc:  # an SDK without _logs, or a broken provider: never raise
            return f"tracescore could not read the global LoggerProvider ({type(exc).__name__})"

    def clear(self) -> None:
        """Forget every kept entry."""
        with self._lock:
            self._entries.clear()


STASH = LogStash()


def record(log_record: Any) -> None:
    """``STASH.record``: keep the message content of one log record under its span's ids."""
    STASH.record(log_record)


def take(span: Any) -> dict[str, Any] | None:
    """``STASH.take``: the content kept for ``span`` (removed from the stash), or None."""
    return STASH.take(span)


def attach() -> str | None:
    """Add the stash's processor to the global SDK ``LoggerProvider`` (once per provider).

    Returns:
        None when the stash sees the global provider's records (now or before); otherwise why
        not, for a not-scorable reason.
    """
    return STASH.attach()


def clear() -> None:
    """Forget every kept entry (tests)."""
    STASH.clear()


def _processor() -> Any:
    from opentelemetry.sdk._logs import LogRecordProcessor

    class StashProcessor(LogRecordProcessor):
        """Keeps GenAI message content from log records for the GenAI reader."""

        def on_emit(self, log_record: Any) -> None:
            with contextlib.suppress(Exception):  # never into the user's logging call
                record(log_record)

        emit = on_emit  # the SDK's name for it before 1.39

        def shutdown(self) -> None:
            clear()

        def force_flush(self, timeout_millis: int = 30_000) -> bool:
            return True

    return StashProcessor()
