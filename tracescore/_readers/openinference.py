"""The reader of OpenInference spans (``openinference-instrumentation-*``: openai, langchain,
llama-index, litellm, crewai, ...; attribute names from ``openinference-semantic-conventions``).

OpenInference writes ``input.value`` / ``output.value`` on every span (text, or JSON with
``*.mime_type`` ``application/json``), chat messages flattened as
``llm.input_messages.{i}.message.{role,content}`` on LLM spans, and retrieved documents as
``retrieval.documents.{i}.document.{id,score,content}`` on RETRIEVER spans. It records content by
default; ``OPENINFERENCE_HIDE_*`` replace values with ``__REDACTED__``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from typing import Any

from tracescore._core import semconv as sc
from tracescore._pipeline.trace_buffer import Beneath, TraceBuffer

from ._base import Content, attributes_of
from ._turns import looks_like_repr, repr_reason, role_of, tool_only_reason
from ._values import ABSENT, Truncated, error_of, json_value, text_value, unwrap
from .genai import complete, observe_documents, observe_tool_call, truncated_reason

# openinference.span.kind -> normalised kind (README "Spans from other instrumentations").
# CHAIN is every LangChain runnable (prompt templates, parsers, each step of a sequence): only
# the chain a request enters by, the trace's local root, is the application's answer and counts
# as an agent (see OpenInferenceReader.kind). EMBEDDING, RERANKER, GUARDRAIL, EVALUATOR, PROMPT
# have no answer of their own to judge.
KINDS: Mapping[str, str] = {
    sc.OI_KIND_AGENT: "agent",
    sc.OI_KIND_LLM: "llm",
    sc.OI_KIND_RETRIEVER: "retrieval",
    sc.OI_KIND_TOOL: "tool",
}

HIDE_HINT = (
    "OpenInference records inputs and outputs unless told not to: unset OPENINFERENCE_HIDE_INPUTS "
    "/ OPENINFERENCE_HIDE_OUTPUTS (and OPENINFERENCE_HIDE_INPUT_MESSAGES / "
    "OPENINFERENCE_HIDE_OUTPUT_MESSAGES / OPENINFERENCE_HIDE_RETRIEVAL_DOCUMENTS), or pass "
    "TraceConfig(hide_inputs=False, hide_outputs=False) to the instrumentor"
)

_DOC_PREFIX = sc.RETRIEVAL_DOCUMENTS_PREFIX
_MAX_ITEMS = 10_000  # documents or messages read from one span


class OpenInferenceReader:
    """Reads spans that carry ``openinference.span.kind`` (tracescore's own spans carry it too,
    but the tracescore reader, registered first, takes those)."""

    name = "openinference"
    volatile = False

    def accepts(self, span: Any) -> bool:
        return sc.OPENINFERENCE_SPAN_KIND in attributes_of(span)

    def kind(self, span: Any) -> str | None:
        value = attributes_of(span).get(sc.OPENINFERENCE_SPAN_KIND)
        kind = KINDS.get(value)  # type: ignore[arg-type]
        if kind is None and value == sc.OI_CHAIN:
            parent = span.parent
            if parent is None or parent.is_remote:
                return "agent"
        return kind

    def refine(self, span: Any, kind: str | None, beneath: Beneath) -> str | None:
        """A root CHAIN is taken for the agent's turn only when a model call ended beneath
        it: a root without one is the framework's own work (building an index, ingesting,
        embedding a batch), with no answer to judge."""
        if (kind == "agent" and "llm" not in beneath.kinds
                and attributes_of(span).get(sc.OPENINFERENCE_SPAN_KIND) == sc.OI_CHAIN):
            return None
        return kind

    def observe(self, span: Any, kind: str | None, buffer: TraceBuffer) -> None:
        if kind == "retrieval":
            observe_documents(span, buffer, documents(attributes_of(span)))
        elif kind == "tool":
            attrs = attributes_of(span)
            call: dict[str, Any] = {"name": str(attrs.get(sc.TOOL_NAME, span.name))}
            for field, key in (("arguments", sc.INPUT_VALUE), ("result", sc.OUTPUT_VALUE)):
                try:
                    value = _value(attrs, key)
                except Truncated:
                    value = ABSENT
                call[field] = None if value is ABSENT else value
            error = error_of(span)
            if error is not None:
                call["error"] = error
            observe_tool_call(span, buffer, call)

    def read(self, span: Any, kind: str | None) -> Content:
        attrs = attributes_of(span)
        error = error_of(span)
        try:
            value_in = _value(attrs, sc.INPUT_VALUE)
            value_out = _value(attrs, sc.OUTPUT_VALUE)
            what = f"{sc.INPUT_VALUE} / {sc.OUTPUT_VALUE}"
            if kind == "llm":
                messages = _messages(attrs, sc.LLM_INPUT_MESSAGES)
                if messages:
                    value_in = messages
                elif value_in is not ABSENT:
                    value_in = unwrap(value_in)  # {"prompt": ...}: the prompt
                answer = _messages(attrs, sc.LLM_OUTPUT_MESSAGES)
                text = answer[0]["content"] if answer else ABSENT
                if text is ABSENT or (isinstance(text, str) and not text.strip()):
                    calls = tool_calls(attrs, f"{sc.LLM_OUTPUT_MESSAGES}.0.message.")
                    if calls and value_in is not ABSENT:
                        return Content(value_in, None, error, tool_only_reason(span, calls),
                                       tuple(calls))
                if text is not ABSENT:
                    value_out = text
                what = f"{sc.LLM_INPUT_MESSAGES} / {sc.LLM_OUTPUT_MESSAGES} or {what}"
            elif kind == "retrieval":
                docs = documents(attrs)
                value_out = list(docs) if docs else ABSENT
                what = f"{sc.INPUT_VALUE} / {_DOC_PREFIX}.N.{sc.DOCUMENT_CONTENT}"
            elif kind in ("agent", None):
                value_in = unwrap(value_in) if value_in is not ABSENT else ABSENT
                value_out = unwrap(value_out) if value_out is not ABSENT else ABSENT
        except Truncated as cut:
            return Content(error=error, missing=truncated_reason(span, cut))
        for side, key, value in (("input", sc.INPUT_VALUE, value_in),
                                 ("output", sc.OUTPUT_VALUE, value_out)):
            if looks_like_repr(value):
                return Content(error=error, missing=repr_reason(span, side, key, value))
        return complete(span, value_in, value_out, error, what, self.hint,
                        output_optional=error is not None)

    #: what turns content on (the end of a not-scorable reason)
    hint = HIDE_HINT


def documents(attrs: Mapping[str, Any]) -> tuple[str, ...]:
    """``retrieval.documents.{i}.document.content`` in rank order; a document without text (or
    redacted, or cut) is left out, the ones after it are still read."""
    found = []
    for i in range(_MAX_ITEMS):
        content = attrs.get(f"{_DOC_PREFIX}.{i}.{sc.DOCUMENT_CONTENT}", ABSENT)
        if content is ABSENT and f"{_DOC_PREFIX}.{i}.{sc.DOCUMENT_ID}" not in attrs:
            break
        if isinstance(content, str) and content != sc.OI_REDACTED:
            try:
                text_value(attrs, f"{_DOC_PREFIX}.{i}.{sc.DOCUMENT_CONTENT}")
            except Truncated:
                continue
            found.append(content)
    return tuple(found)


def tool_calls(attrs: Mapping[str, Any], base: str) -> list[dict[str, Any]]:
    """A flattened message's ``{base}tool_calls.{j}.tool_call.function.{name,arguments}`` as
    ``{"name", "arguments"}`` (arguments decoded when they are JSON)."""
    calls = []
    for j in range(_MAX_ITEMS):
        prefix = f"{base}tool_calls.{j}.tool_call.function."
        name = attrs.get(prefix + "name", ABSENT)
        if name is ABSENT:
            break
        arguments = attrs.get(prefix + "arguments")
        if isinstance(arguments, str):
            with contextlib.suppress(ValueError):
                arguments = json.loads(arguments)
        calls.append({"name": str(name), "arguments": arguments})
    return calls


def _value(attrs: Mapping[str, Any], key: str) -> Any:
    """``input.value`` / ``output.value`` decoded per its mime type; ``ABSENT`` when missing or
    redacted.

    Raises:
        Truncated: the value was cut (JSON that no longer parses, or a string exactly as long
            as the SDK's attribute limit).
    """
    raw = attrs.get(key, ABSENT)
    if raw is ABSENT or raw == sc.OI_REDACTED:
        return ABSENT
    mime = attrs.get(f"{key.rsplit('.', 1)[0]}.mime_type")
    if mime == sc.MIME_JSON:
        return json_value(attrs, key)
    return text_value(attrs, key)


def _messages(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """Flattened OpenInference messages as ``[{"role", "content"}]``; redacted ones left out.

    Raises:
        Truncated: a message's content was cut.
    """
    messages = []
    for i in range(_MAX_ITEMS):
        base = f"{prefix}.{i}.message."
        role = attrs.get(base + "role", ABSENT)
        content = text_value(attrs, base + "content")
        if content is ABSENT:
            texts = []
            for j in range(_MAX_ITEMS):
                text = text_value(attrs, f"{base}contents.{j}.{sc.MESSAGE_CONTENT_TEXT}")
                if text is ABSENT:
                    if f"{base}contents.{j}.{sc.MESSAGE_CONTENT_TYPE}" in attrs:
                        continue  # an image or audio part: no text
                    break
                texts.append(str(text))
            content = "\n".join(texts) if texts else ABSENT
        if role is ABSENT and content is ABSENT:
            break
        if content is ABSENT or content == sc.OI_REDACTED:
            continue
        messages.append({"role": role_of(role) if role is not ABSENT else "user",
                         "content": content})
    return messages
