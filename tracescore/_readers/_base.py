"""The reader interface and what a reader returns (see ``tracescore._readers``)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol, runtime_checkable

from tracescore._core.otel_compat import attribute_dict, own_attributes
from tracescore._pipeline.trace_buffer import TraceBuffer


class Content(NamedTuple):
    """What a reader found to score on one span.

    Attributes:
        input: the operation's input (a string, chat messages, or any JSON-like value).
        output: the operation's output; for a retrieval, the documents' contents.
        error: the operation's exception as ``"Type: message"`` when it failed.
        missing: why there is no content to score, when there is none (for example the
            instrumentation's content capture is off, and which switch turns it on). A model
            turn that only called tools has its input and ``tool_calls`` but no output, and
            says so here: answer scorers report it not scorable, tool-call scorers judge it.
        tool_calls: the tool calls the operation asked for itself (a model turn's requested
            calls, each ``{"name", "arguments"}``), for tool-call scorers when no tool span
            ran beneath the scored span.
    """

    input: Any = None
    output: Any = None
    error: str | None = None
    missing: str | None = None
    tool_calls: tuple[Mapping[str, Any], ...] = ()


@runtime_checkable
class Reader(Protocol):
    """What the scoring processor needs of a span source. See the module docstring.

    The span is an OpenTelemetry ``ReadableSpan`` (one the SDK ended, or one built from OTLP
    data); readers only read its public properties.
    """

    name: str

    def accepts(self, span: Any) -> bool: ...

    def kind(self, span: Any) -> str | None: ...

    def observe(self, span: Any, kind: str | None, buffer: TraceBuffer) -> None: ...

    def read(self, span: Any, kind: str | None) -> Content: ...


def scope_name(span: Any) -> str:
    """The name of the instrumentation scope that made ``span`` ("" when unknown)."""
    scope = getattr(span, "instrumentation_scope", None)
    return str(getattr(scope, "name", "") or "") if scope is not None else ""


def attributes_of(span: Any) -> Mapping[str, Any]:
    """``span.attributes``, or an empty mapping: a read-only view of the ended span's own
    dict where the SDK keeps one (its look-ups at C speed; every reader asks this)."""
    inner = attribute_dict(own_attributes(span), frozen_only=True)
    if inner is not None:
        return MappingProxyType(inner)
    attrs = getattr(span, "attributes", None)
    return attrs if attrs is not None else {}
