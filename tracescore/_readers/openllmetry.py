"""The reader of OpenLLMetry spans (traceloop's ``traceloop-sdk`` decorators and its
``opentelemetry-instrumentation-*`` packages; attribute names from
``opentelemetry-semantic-conventions-ai``).

- ``@workflow``/``@agent``/``@task``/``@tool`` spans carry ``traceloop.span.kind`` and the
  function's arguments and result as JSON in ``traceloop.entity.input`` (``{"args": [...],
  "kwargs": {...}}``) and ``traceloop.entity.output``. The SDK cuts both at
  ``OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT``, leaving JSON that no longer parses.
- LLM spans of older releases carry ``llm.request.type`` and the messages flattened as
  ``gen_ai.prompt.{i}.{role,content}`` / ``gen_ai.completion.{i}.{role,content}``; current
  releases write ``gen_ai.operation.name`` and the GenAI conventions' message JSON, which the
  GenAI reader reads.
- Vector-database spans (chroma, pinecone, qdrant, ...) carry ``db.system`` and return their
  documents as ``db.query.result`` span events (``db.query.result.document``).

Content is recorded by default (``TRACELOOP_TRACE_CONTENT``, default ``true``).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from typing import Any

from tracescore._core import semconv as sc
from tracescore._pipeline.trace_buffer import TraceBuffer

from ._base import Content, attributes_of, scope_name
from ._turns import tool_only_reason
from ._values import ABSENT, Truncated, error_of, json_value, text_value
from .genai import (
    chat_messages,
    complete,
    messages_content,
    observe_documents,
    observe_tool_call,
    truncated_reason,
)

# traceloop.span.kind -> normalised kind (README "Spans from other instrumentations"). A task is
# a step inside a workflow (building a prompt, parsing a reply): no answer of its own to judge.
KINDS: Mapping[str, str] = {
    "workflow": "agent",
    "agent": "agent",
    "tool": "tool",
}
_LLM_REQUEST_TYPES = frozenset({"chat", "completion"})

# The instrumentation scopes of OpenLLMetry's vector-database packages (``get_tracer(__name__)``
# in each): only their spans are retrievals; any other ``db.system`` span is a database driver.
VECTOR_DB_SCOPES = frozenset(
    f"opentelemetry.instrumentation.{name}"
    for name in ("chromadb", "pinecone", "qdrant", "weaviate", "milvus", "lancedb", "marqo")
)
# Operations that return documents (chroma "query", qdrant/milvus "search", ...).
_READ_OPERATIONS = frozenset({"query", "search", "search_batch", "hybrid_search"})

CONTENT_HINT = ("OpenLLMetry records content unless TRACELOOP_TRACE_CONTENT=false (or "
                "Traceloop.init(trace_content=False)): set TRACELOOP_TRACE_CONTENT=true")


class OpenLLMetryReader:
    """Reads spans of traceloop's SDK decorators, its older LLM instrumentations and its
    vector-database instrumentations."""

    name = "openllmetry"
    volatile = False

    def accepts(self, span: Any) -> bool:
        attrs = attributes_of(span)
        if sc.TRACELOOP_SPAN_KIND in attrs or sc.LLM_REQUEST_TYPE in attrs:
            return True
        return sc.DB_SYSTEM in attrs and scope_name(span) in VECTOR_DB_SCOPES

    def kind(self, span: Any) -> str | None:
        attrs = attributes_of(span)
        value = attrs.get(sc.TRACELOOP_SPAN_KIND)
        if value is not None:
            return KINDS.get(value)
        if attrs.get(sc.LLM_REQUEST_TYPE) in _LLM_REQUEST_TYPES:
            return "llm"
        if attrs.get(sc.DB_OPERATION) in _READ_OPERATIONS:
            return "retrieval"
        return None

    def observe(self, span: Any, kind: str | None, buffer: TraceBuffer) -> None:
        if kind == "retrieval":
            observe_documents(span, buffer, query_results(span))
        elif kind == "tool":
            attrs = attributes_of(span)
            call: dict[str, Any] = {"name": str(attrs.get(
                sc.GEN_AI_TOOL_NAME, attrs.get(sc.TRACELOOP_ENTITY_NAME, span.name)))}
            for field, key in (("arguments", sc.TRACELOOP_ENTITY_INPUT),
                               ("result", sc.TRACELOOP_ENTITY_OUTPUT)):
                try:
                    value = json_value(attrs, key)
                except Truncated:
                    value = ABSENT
                if field == "arguments" and value is not ABSENT:
                    value = _arguments(value)
                call[field] = None if value is ABSENT else value
            error = error_of(span)
            if error is not None:
                call["error"] = error
            observe_tool_call(span, buffer, call)

    def read(self, span: Any, kind: str | None) -> Content:
        attrs = attributes_of(span)
        error = error_of(span)
        try:
            if sc.TRACELOOP_SPAN_KIND in attrs:
                value_in = json_value(attrs, sc.TRACELOOP_ENTITY_INPUT)
                value_out = json_value(attrs, sc.TRACELOOP_ENTITY_OUTPUT)
                if value_in is not ABSENT:
                    value_in = (_arguments(value_in) if kind == "tool"
                                else _single_argument(value_in))
                what = f"{sc.TRACELOOP_ENTITY_INPUT} / {sc.TRACELOOP_ENTITY_OUTPUT}"
            elif kind == "retrieval":
                docs = query_results(span)
                value_in = ABSENT  # the query is an embedding: nothing a judge can read
                value_out = list(docs) if docs else ABSENT
                if value_out is not ABSENT:
                    return Content(None, value_out, error)
                what = f"{sc.DB_QUERY_RESULT_DOCUMENT} on {sc.DB_QUERY_RESULT_EVENT} events"
            else:
                value_in, value_out, calls = _indexed_messages(attrs)
                if value_in is ABSENT or (value_out is ABSENT and not calls):
                    new_in, new_out, calls = messages_content(span)
                    value_in = new_in if value_in is ABSENT else value_in
                    value_out = new_out if value_out is ABSENT else value_out
                if calls and value_in is not ABSENT and value_out is ABSENT:
                    return Content(value_in, None, error, tool_only_reason(span, calls),
                                   tuple(calls))
                what = (f"{sc.GEN_AI_PROMPT}.N.content / {sc.GEN_AI_COMPLETION}.N.content or "
                        f"{sc.GEN_AI_INPUT_MESSAGES} / {sc.GEN_AI_OUTPUT_MESSAGES}")
        except Truncated as cut:
            return Content(error=error, missing=truncated_reason(span, cut))
        return complete(span, value_in, value_out, error, what, CONTENT_HINT,
                        output_optional=error is not None)


def query_results(span: Any) -> tuple[str, ...]:
    """The documents of a vector-database span's ``db.query.result`` (or ``db.search.result``)
    events, in event order (the database's rank order)."""
    found = []
    for event in getattr(span, "events", ()) or ():
        if event.name == sc.DB_QUERY_RESULT_EVENT:
            text = (event.attributes or {}).get(sc.DB_QUERY_RESULT_DOCUMENT)
        elif event.name == sc.DB_SEARCH_RESULT_EVENT:
            text = (event.attributes or {}).get(sc.DB_SEARCH_RESULT_ENTITY)
        else:
            continue
        if isinstance(text, str) and text:
            found.append(text)
    return tuple(found)


def _single_argument(value: Any) -> Any:
    """``{"args": [x], "kwargs": {}}`` (or one keyword argument) is ``x``: what the function
    was asked; more arguments stay as they are."""
    if isinstance(value, Mapping) and set(value) <= {"args", "kwargs"}:
        args = value.get("args") or []
        kwargs = value.get("kwargs") or {}
        if isinstance(args, list) and isinstance(kwargs, Mapping):
            if len(args) == 1 and not kwargs:
                return args[0]
            if not args and len(kwargs) == 1:
                return next(iter(kwargs.values()))
    return value


def _arguments(value: Any) -> Any:
    """A tool's arguments: its keyword arguments when it got only those, else the whole
    ``{"args", "kwargs"}`` record (positional arguments have no names in OpenLLMetry's JSON)."""
    if isinstance(value, Mapping) and set(value) <= {"args", "kwargs"} and not value.get("args"):
        return dict(value.get("kwargs") or {})
    return value


def _indexed_messages(attrs: Mapping[str, Any]) -> tuple[Any, Any, list[dict[str, Any]]]:
    """Older releases' ``gen_ai.prompt.{i}.*`` messages and the first
    ``gen_ai.completion.{i}.content``; ``ABSENT`` for a side the span lacks. A completion
    without content whose ``gen_ai.completion.0.tool_calls.{j}.*`` are set is a turn that only
    called tools: its calls come third.

    Raises:
        Truncated: a message was cut.
    """
    messages = []
    for i in range(10_000):
        base = f"{sc.GEN_AI_PROMPT}.{i}."
        role = attrs.get(base + "role", ABSENT)
        content = text_value(attrs, base + "content")
        if role is ABSENT and content is ABSENT:
            break
        if content is not ABSENT:
            messages.append({"role": str(role if role is not ABSENT else "user"),
                             "content": content})
    value_in: Any = chat_messages(messages) if messages else ABSENT
    value_out = text_value(attrs, f"{sc.GEN_AI_COMPLETION}.0.content")
    calls: list[dict[str, Any]] = []
    if value_out is ABSENT or (isinstance(value_out, str) and not value_out.strip()):
        for j in range(1_000):
            base = f"{sc.GEN_AI_COMPLETION}.0.tool_calls.{j}."
            name = attrs.get(base + "name", ABSENT)
            if name is ABSENT:
                break
            arguments = attrs.get(base + "arguments")
            with contextlib.suppress(ValueError):
                arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
            calls.append({"name": str(name), "arguments": arguments})
        if calls:
            value_out = ABSENT
    return value_in, value_out, calls
