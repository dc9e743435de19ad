"""The reader of spans that follow the OpenTelemetry GenAI semantic conventions
(``opentelemetry-instrumentation-genai-*``, formerly ``-openai-v2``, and any producer writing
``gen_ai.operation.name``).

Content, where the producer captured it, is read from the ``gen_ai_latest_experimental`` shapes:
``gen_ai.input.messages`` / ``gen_ai.output.messages`` / ``gen_ai.system_instructions`` (JSON
with typed parts: ``text``, ``tool_call``, ``tool_call_response``, ...), ``gen_ai.tool.call.*``,
``gen_ai.retrieval.query.text`` and ``gen_ai.retrieval.documents`` (ids and scores; a ``content``
field where the producer adds one), and from span events (``_events``: the older conventions'
``gen_ai.content.prompt`` / ``.completion``, the per-message events ``gen_ai.user.message``
... ``gen_ai.choice``, the details event ``gen_ai.client.inference.operation.details``), and,
where the instrumentation wrote them to a log record instead (``EVENT_ONLY``), from what
``_log_stash`` kept of that record. The message helpers here are shared with the OpenLLMetry
reader, whose instrumentations write the same JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tracescore._core import semconv as sc
from tracescore._pipeline.trace_buffer import TraceBuffer

from . import _log_stash
from ._base import Content, attributes_of, scope_name
from ._events import content_events, tool_events
from ._turns import role_of, tool_only_reason
from ._values import ABSENT, TRUNCATED_HINT, Truncated, error_of, json_value, text_value

# gen_ai.operation.name -> normalised kind (README "Spans from other instrumentations").
# invoke_workflow is the top-level operation a user asks for, an agent in all but name;
# embeddings and create_agent have no answer to judge.
KINDS: Mapping[str, str] = {
    sc.OPERATION_INVOKE_AGENT: "agent",
    sc.OPERATION_INVOKE_WORKFLOW: "agent",
    sc.OPERATION_CHAT: "llm",
    sc.OPERATION_TEXT_COMPLETION: "llm",
    sc.OPERATION_GENERATE_CONTENT: "llm",
    sc.OPERATION_EXECUTE_TOOL: "tool",
    sc.OPERATION_RETRIEVAL: "retrieval",
}

CAPTURE_HINT = (
    "the OTel GenAI instrumentations capture no content by default: set "
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY (or SPAN_AND_EVENT; 'true' on "
    "instrumentations of the older conventions) with "
    "OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental. With EVENT_ONLY the content "
    "goes to gen_ai.client.inference.operation.details log records, which tracescore reads "
    "only from an OpenTelemetry SDK LoggerProvider set globally before tracescore.configure() "
    "(or before the span ended). OpenLLMetry instrumentations write the same attributes: there "
    "set TRACELOOP_TRACE_CONTENT=true"
)

# Document fields that carry text: the conventions define none (ids and scores only), producers
# that add text use one of these (tracescore's own decorators write "content").
_DOCUMENT_TEXT_FIELDS = ("content", "text", "page_content")


class GenAIReader:
    """Reads spans that carry ``gen_ai.operation.name``."""

    name = "genai"
    volatile = False

    def accepts(self, span: Any) -> bool:
        return sc.GEN_AI_OPERATION_NAME in attributes_of(span)

    def kind(self, span: Any) -> str | None:
        return KINDS.get(attributes_of(span).get(sc.GEN_AI_OPERATION_NAME))  # type: ignore[arg-type]

    def observe(self, span: Any, kind: str | None, buffer: TraceBuffer) -> None:
        if kind == "retrieval":
            observe_documents(span, buffer, retrieval_documents(attributes_of(span)))
        elif kind == "tool":
            observe_tool_call(span, buffer, tool_call(span))

    def read(self, span: Any, kind: str | None) -> Content:
        attrs = attributes_of(span)
        error = error_of(span)
        try:
            if kind == "tool":
                value_in = json_value(attrs, sc.GEN_AI_TOOL_CALL_ARGUMENTS, must_be_json=False)
                value_out = json_value(attrs, sc.GEN_AI_TOOL_CALL_RESULT, must_be_json=False)
                if value_in is ABSENT or value_out is ABSENT:
                    event_in, event_out = tool_events(span)
                    value_in = event_in if value_in is ABSENT else value_in
                    value_out = event_out if value_out is ABSENT else value_out
                what = (f"{sc.GEN_AI_TOOL_CALL_ARGUMENTS} / {sc.GEN_AI_TOOL_CALL_RESULT}, or "
                        f"{sc.GEN_AI_TOOL_MESSAGE_EVENT} / {sc.GEN_AI_CHOICE_EVENT} events")
            elif kind == "retrieval":
                value_in = text_value(attrs, sc.GEN_AI_RETRIEVAL_QUERY_TEXT)
                docs = retrieval_documents(attrs)
                value_out = list(docs) if docs else ABSENT
                what = (f"{sc.GEN_AI_RETRIEVAL_QUERY_TEXT} / document text in "
                        f"{sc.GEN_AI_RETRIEVAL_DOCUMENTS} (the conventions define only ids and "
                        "scores there; a producer must add a 'content' field)")
            else:
                value_in, value_out, calls = messages_content(span)
                what = f"{sc.GEN_AI_INPUT_MESSAGES} / {sc.GEN_AI_OUTPUT_MESSAGES}"
                if calls and value_in is not ABSENT:
                    return Content(value_in, None, error, tool_only_reason(span, calls),
                                   tuple(calls))
        except Truncated as cut:
            return Content(error=error, missing=truncated_reason(span, cut))
        hint = CAPTURE_HINT
        if value_in is ABSENT or (value_out is ABSENT and error is None):
            # Attached now, the stash reads the next spans' records; say why it saw none here.
            problem = _log_stash.attach()
            if problem:
                hint = f"{hint} (here: {problem})"
        return complete(span, value_in, value_out, error, what, hint,
                        output_optional=error is not None)


# -- shared with the OpenLLMetry reader ------------------------------------------------------------


def complete(span: Any, value_in: Any, value_out: Any, error: str | None, what: str, hint: str,
             output_optional: bool = False) -> Content:
    """Content when both sides are there; else none at all, with a reason naming the switch.

    Half the content is treated as none: a judge given an answer without its question (or the
    reverse) would score something, and that score would be wrong without anyone knowing.
    ``output_optional``: the operation failed, so no output is expected.
    """
    if value_in is not ABSENT and (value_out is not ABSENT or output_optional):
        return Content(value_in, None if value_out is ABSENT else value_out, error)
    lacking = ("no input or output" if value_in is ABSENT and value_out is ABSENT
               else "no input" if value_in is ABSENT else "no output")
    found = _content_like(span)
    return Content(error=error, missing=(
        f"not scorable: span {getattr(span, 'name', '')!r} (instrumentation "
        f"{scope_name(span) or 'unknown'!r}) carries {lacking} ({what}"
        f"{'; found instead: ' + found if found else ''}); {hint}"))


_CONTENT_WORDS = ("message", "input", "output", "prompt", "completion", "result", "content",
                  "response", "answer", "question")


def _content_like(span: Any) -> str:
    """The span's attribute names that look like content (a renamed attribute shows here), at
    most 8; "" when there are none."""
    names = [str(k) for k in attributes_of(span)
             if any(w in str(k).lower() for w in _CONTENT_WORDS)
             and not str(k).endswith(("mime_type", "token_count", "tokens"))]
    if not names:
        return ""
    shown = ", ".join(sorted(names)[:8])
    return shown + (f" and {len(names) - 8} more" if len(names) > 8 else "")


def truncated_reason(span: Any, cut: Truncated) -> str:
    """The not-scorable reason for a span whose content was cut."""
    return (f"not scorable: on span {getattr(span, 'name', '')!r} (instrumentation "
            f"{scope_name(span) or 'unknown'!r}) {cut}; judging a cut value would score what "
            f"the model never said: {TRUNCATED_HINT}")


def messages_content(span: Any) -> tuple[Any, Any, list[dict[str, Any]]]:
    """(input messages, output text, tool calls) from the latest conventions' attributes, else
    from the older conventions' span events; ``ABSENT`` for a side the span lacks. When the
    model's turn only asked for tools, the output is ``ABSENT`` and the calls (``{"name",
    "arguments"}``) are returned; otherwise they are empty.

    Raises:
        Truncated: a message attribute was cut.
    """
    attrs = attributes_of(span)
    raw_in = json_value(attrs, sc.GEN_AI_INPUT_MESSAGES)
    raw_out = json_value(attrs, sc.GEN_AI_OUTPUT_MESSAGES)
    system = json_value(attrs, sc.GEN_AI_SYSTEM_INSTRUCTIONS)
    if raw_in is ABSENT or raw_out is ABSENT:
        old_in, old_out, old_system = content_events(span)
        raw_in = old_in if raw_in is ABSENT else raw_in
        raw_out = old_out if raw_out is ABSENT else raw_out
        system = old_system if system is ABSENT else system
    if raw_in is ABSENT or raw_out is ABSENT:
        logged = _log_stash.take(span)  # EVENT_ONLY: the content went to a log record
        if logged:
            raw_in = logged.get(sc.GEN_AI_INPUT_MESSAGES, ABSENT) if raw_in is ABSENT else raw_in
            raw_out = (logged.get(sc.GEN_AI_OUTPUT_MESSAGES, ABSENT) if raw_out is ABSENT
                       else raw_out)
            if system is ABSENT:
                system = logged.get(sc.GEN_AI_SYSTEM_INSTRUCTIONS, ABSENT)
    # Parts typed "text" without their "content": the producer recorded the shape of the
    # messages but not their text (its content switch is off). Nothing there to judge.
    if withheld(raw_in):
        raw_in = ABSENT
    if withheld(raw_out):
        raw_out = ABSENT if not requested_calls(raw_out) else raw_out
    value_in = ABSENT if raw_in is ABSENT else chat_messages(raw_in)
    if value_in is not ABSENT and system is not ABSENT:
        text = parts_text(system if isinstance(system, list) else [system])
        if text:
            value_in = [{"role": "system", "content": text}, *value_in]
    calls = [] if raw_out is ABSENT else requested_calls(raw_out)
    value_out = ABSENT if raw_out is ABSENT or calls else output_text(raw_out)
    return value_in, value_out, calls


def withheld(raw: Any) -> bool:
    """True when GenAI message JSON has text parts without their ``content`` (recorded with
    content capture off) and no text part with one."""
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        return False
    empty = False
    for message in raw:
        parts = message.get("parts") if isinstance(message, Mapping) else None
        if not isinstance(parts, Sequence):
            continue
        for part in parts:
            if isinstance(part, Mapping) and part.get("type") == "text":
                if "content" in part:
                    return False
                empty = True
    return empty


def requested_calls(raw: Any) -> list[dict[str, Any]]:
    """The tool calls of the first output message when it carries no text (a turn that only
    called tools), as ``{"name", "arguments"}``; empty otherwise."""
    if not isinstance(raw, Sequence) or isinstance(raw, str) or not raw:
        return []
    first = final_message(raw)
    if not isinstance(first, Mapping):
        return []
    calls: list[dict[str, Any]] = []
    parts = first.get("parts")
    if isinstance(parts, Sequence):
        for part in parts:
            if not isinstance(part, Mapping):
                continue
            if part.get("type") == "text" and str(part.get("content") or "").strip():
                return []
            if part.get("type") == "tool_call":
                calls.append({"name": str(part.get("name", "")),
                              "arguments": _arguments(part.get("arguments"))})
        return calls
    message = first.get("message", first)  # older shapes: choice events
    if not isinstance(message, Mapping):
        return []
    text = message.get("content")
    if isinstance(text, str) and text.strip():
        return []
    for raw_call in message.get("tool_calls") or []:
        if isinstance(raw_call, Mapping):
            function = raw_call.get("function", raw_call)
            if isinstance(function, Mapping):
                calls.append({"name": str(function.get("name", "")),
                              "arguments": _arguments(function.get("arguments"))})
    return calls


def final_message(raw: Sequence[Any]) -> Any:
    """The output message that answers: the first (the first choice), unless the output is a
    transcript (an agent's messages, tool calls and tool results among them, as Microsoft Agent
    Framework's ``invoke_agent`` records), where it is the last assistant message."""
    if len(raw) > 1 and any(isinstance(m, Mapping) and role_of(m.get("role")) not in
                            ("assistant", "") for m in raw):
        for message in reversed(raw):
            if isinstance(message, Mapping) and role_of(message.get("role")) == "assistant":
                return message
    return raw[0]


def _arguments(value: Any) -> Any:
    """Tool-call arguments, decoded when they are a JSON string."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def chat_messages(raw: Any) -> list[dict[str, Any]]:
    """GenAI input messages (``[{"role", "parts": [...]}]``, or the older ``{"role",
    "content"}``) as chat messages ``[{"role", "content"}]`` with the parts' text joined."""
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    if not isinstance(raw, Sequence):
        return [{"role": "user", "content": json.dumps(raw, default=str)}]
    messages = []
    for message in raw:
        if not isinstance(message, Mapping):
            messages.append({"role": "user", "content": str(message)})
            continue
        role = str(message.get("role") or "user")
        if "parts" in message:
            content = parts_text(message.get("parts") or [])
        else:
            value = message.get("content")
            content = value if isinstance(value, str) else json.dumps(value, default=str)
        messages.append({"role": role, "content": content})
    return messages


def output_text(raw: Any) -> Any:
    """The text the model answered: the first output message's parts (text parts joined; tool
    calls and their arguments when the model only called tools)."""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, Sequence) and raw:
        first = final_message(raw)
        if isinstance(first, Mapping):
            if "parts" in first:
                return parts_text(first.get("parts") or [])
            if "content" in first or "message" in first:  # older shapes: choice events
                inner = first.get("message", first)
                if isinstance(inner, Mapping):
                    value = inner.get("content")
                    return value if isinstance(value, str) else json.dumps(value, default=str)
        return str(first)
    return raw


def parts_text(parts: Sequence[Any]) -> str:
    """The text of typed message parts: ``text`` parts (also ``reasoning`` is left out:
    it is not the answer), tool calls as ``name(arguments)``, tool results as their JSON."""
    texts: list[str] = []
    calls: list[str] = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind == "text" or (kind is None and "content" in part):
            texts.append(str(part.get("content", "")))
        elif kind == "tool_call":
            arguments = json.dumps(part.get("arguments"), default=str)
            calls.append(f"{part.get('name', '')}({arguments})")
        elif kind == "tool_call_response":
            # "response" in the conventions; pydantic-ai writes "result"
            result = part.get("response", part.get("result"))
            texts.append(result if isinstance(result, str) else json.dumps(result, default=str))
    if texts:
        return "\n".join(texts)
    return "\n".join(calls)


def retrieval_documents(attrs: Mapping[str, Any]) -> tuple[str, ...]:
    """The text of ``gen_ai.retrieval.documents`` entries that carry any, in rank order;
    truncated or unreadable values give none."""
    try:
        docs = json_value(attrs, sc.GEN_AI_RETRIEVAL_DOCUMENTS)
    except Truncated:
        return ()
    if not isinstance(docs, list):
        return ()
    found = []
    for doc in docs:
        if isinstance(doc, str):
            found.append(doc)
        elif isinstance(doc, Mapping):
            for field in _DOCUMENT_TEXT_FIELDS:
                text = doc.get(field)
                if isinstance(text, str):
                    found.append(text)
                    break
    return tuple(found)


def tool_call(span: Any) -> dict[str, Any]:
    """A GenAI ``execute_tool`` span as a tool call (``name``, ``arguments``, ``result``,
    ``error`` when it failed); a cut or missing value becomes None."""
    attrs = attributes_of(span)
    call: dict[str, Any] = {"name": str(attrs.get(sc.GEN_AI_TOOL_NAME, span.name))}
    try:
        events = tool_events(span)
    except Truncated:
        events = (ABSENT, ABSENT)
    for (field, key), event in zip((("arguments", sc.GEN_AI_TOOL_CALL_ARGUMENTS),
                                    ("result", sc.GEN_AI_TOOL_CALL_RESULT)), events,
                                   strict=True):
        try:
            value = json_value(attrs, key, must_be_json=False)
        except Truncated:
            value = ABSENT
        value = event if value is ABSENT else value
        call[field] = None if value is ABSENT else value
    error = error_of(span)
    if error is not None:
        call["error"] = error
    return call


def observe_documents(span: Any, buffer: TraceBuffer, documents: tuple[str, ...]) -> None:
    """Put one retrieval's documents into the trace buffer (nothing when there are none)."""
    if documents:
        buffer.add_documents(span.context.trace_id, span.start_time or 0, documents)


def observe_tool_call(span: Any, buffer: TraceBuffer, call: Mapping[str, Any]) -> None:
    """Put one tool call into the trace buffer, under its span."""
    ctx = span.context
    buffer.add_tool_call(ctx.trace_id, ctx.span_id, span.start_time or 0, call)
