"""GenAI content carried in span events rather than span attributes.

Three generations of the OTel GenAI conventions put a model call's messages on span events:

- ``gen_ai.content.prompt`` / ``gen_ai.content.completion`` with ``gen_ai.prompt`` /
  ``gen_ai.completion`` JSON (the oldest);
- one event per message (v1.28-v1.36): ``gen_ai.system.message``, ``gen_ai.user.message``,
  ``gen_ai.assistant.message``, ``gen_ai.tool.message`` with a ``content`` field, and
  ``gen_ai.choice`` with the answer in ``message``. The content is text, or JSON: a message
  (``{"role", "content", "tool_calls"}``), the conventions' typed parts, or a provider's content
  blocks (``[{"text": ...}, {"toolUse": {...}}]``, as Strands Agents and Bedrock write them);
- ``gen_ai.client.inference.operation.details`` with ``gen_ai.input.messages`` /
  ``gen_ai.output.messages`` / ``gen_ai.system_instructions`` (the latest conventions, where a
  producer records an event instead of attributes).

Everything here returns the shapes ``genai.messages_content`` reads: input messages
``[{"role", "content"}]`` or typed parts, output ``[{"message": {"content", "tool_calls"}}]``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tracescore._core import semconv as sc

from ._values import ABSENT, json_value

_ROLE_EVENTS = {sc.GEN_AI_SYSTEM_MESSAGE_EVENT: "system", sc.GEN_AI_USER_MESSAGE_EVENT: "user",
                sc.GEN_AI_ASSISTANT_MESSAGE_EVENT: "assistant",
                sc.GEN_AI_TOOL_MESSAGE_EVENT: "tool"}
_MAX_DEPTH = 6


def content_events(span: Any) -> tuple[Any, Any, Any]:
    """(input, output, system instructions) from the span's events; ``ABSENT`` for what none
    carries.

    Raises:
        Truncated: a JSON value was cut by the SDK's attribute length limit.
    """
    value_in: Any = ABSENT
    value_out: Any = ABSENT
    system: Any = ABSENT
    messages: list[dict[str, Any]] = []
    choice: Any = ABSENT
    for event in getattr(span, "events", ()) or ():
        attrs = event.attributes or {}
        name = event.name
        if name == sc.GEN_AI_CONTENT_PROMPT_EVENT:
            value_in = json_value(attrs, sc.GEN_AI_PROMPT, must_be_json=False)
        elif name == sc.GEN_AI_CONTENT_COMPLETION_EVENT:
            value_out = json_value(attrs, sc.GEN_AI_COMPLETION, must_be_json=False)
        elif name == sc.GEN_AI_OPERATION_DETAILS_EVENT:
            found_in = json_value(attrs, sc.GEN_AI_INPUT_MESSAGES)
            found_out = json_value(attrs, sc.GEN_AI_OUTPUT_MESSAGES)
            found_system = json_value(attrs, sc.GEN_AI_SYSTEM_INSTRUCTIONS)
            value_in = found_in if found_in is not ABSENT else value_in
            value_out = found_out if found_out is not ABSENT else value_out
            system = found_system if found_system is not ABSENT else system
        elif name in _ROLE_EVENTS:
            content = json_value(attrs, "content", must_be_json=False)
            if content is not ABSENT:
                text, calls = blocks(content)
                role = str(attrs.get("role") or _ROLE_EVENTS[name])
                messages.append({"role": role, "content": text, "tool_calls": calls})
        elif name == sc.GEN_AI_CHOICE_EVENT:
            message = json_value(attrs, "message", must_be_json=False)
            if message is not ABSENT:
                text, calls = blocks(message)
                choice = [{"message": {"role": "assistant", "content": text,
                                       "tool_calls": [{"function": c} for c in calls]}}]
    if value_in is ABSENT and messages:
        value_in = [{"role": m["role"], "content": m["content"]} for m in messages]
    if value_out is ABSENT and choice is not ABSENT:
        value_out = choice
    return value_in, value_out, system


def tool_events(span: Any) -> tuple[Any, Any]:
    """(arguments, result) of a tool span from its events: the ``gen_ai.tool.message`` it got
    and the ``gen_ai.choice`` it returned; ``ABSENT`` for what none carries."""
    arguments: Any = ABSENT
    result: Any = ABSENT
    for event in getattr(span, "events", ()) or ():
        attrs = event.attributes or {}
        if event.name == sc.GEN_AI_TOOL_MESSAGE_EVENT:
            arguments = json_value(attrs, "content", must_be_json=False)
        elif event.name == sc.GEN_AI_CHOICE_EVENT:
            message = json_value(attrs, "message", must_be_json=False)
            if message is not ABSENT:
                text, _ = blocks(message)
                result = text if text else message
    return arguments, result


def blocks(value: Any, depth: int = 0) -> tuple[str, list[dict[str, Any]]]:
    """The text and the tool calls (``{"name", "arguments"}``) of one message's content:
    text, a message object, typed parts or content blocks, decoded from JSON when it is a
    JSON string. Tool results count as text (a tool message's content)."""
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except ValueError:
            return value, []
        if isinstance(decoded, (list, dict)):
            value = decoded
        else:
            return value, []
    if depth > _MAX_DEPTH:
        return "", []
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    if isinstance(value, Mapping):
        value = [value]
    if not isinstance(value, Sequence):
        return json.dumps(value, default=str), []
    for block in value:
        if isinstance(block, str):
            texts.append(block)
            continue
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        call = _call(block)
        if call is not None:
            calls.append(call)
        elif isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind in ("text", None) and isinstance(block.get("content"), str):
            texts.append(block["content"])
        elif "content" in block or "parts" in block:  # a message, or a tool result's content
            text, inner = blocks(block.get("content", block.get("parts")), depth + 1)
            texts.append(text)
            calls.extend(inner)
        else:
            result = block.get("toolResult") or block.get("tool_result")
            if isinstance(result, Mapping):
                texts.append(blocks(result.get("content", ""), depth + 1)[0])
            elif kind == "tool_call_response":
                response = block.get("response", block.get("result"))
                texts.append(response if isinstance(response, str)
                             else json.dumps(response, default=str))
        requested = block.get("tool_calls")
        for raw in requested if isinstance(requested, list) else ():
            if isinstance(raw, Mapping):
                found = _call(raw.get("function", raw)) or _call({"tool_call": raw})
                if found is not None:
                    calls.append(found)
    return "\n".join(t for t in texts if t), calls


def _call(block: Mapping[str, Any]) -> dict[str, Any] | None:
    """A tool call block as ``{"name", "arguments"}``: the conventions' ``tool_call`` part,
    a ``toolUse`` / ``tool_use`` block, an OpenAI ``function`` object; None otherwise."""
    for key in ("toolUse", "tool_use", "functionCall", "function_call", "tool_call"):
        inner = block.get(key)
        if isinstance(inner, Mapping) and "name" in inner:
            return {"name": str(inner["name"]),
                    "arguments": _decoded(inner.get("input", inner.get("arguments",
                                                                        inner.get("args"))))}
    if block.get("type") in ("tool_call", "tool_use", "function_call") and "name" in block:
        return {"name": str(block["name"]),
                "arguments": _decoded(block.get("arguments", block.get("input")))}
    if "name" in block and "arguments" in block and "content" not in block:
        return {"name": str(block["name"]), "arguments": _decoded(block["arguments"])}
    return None


def _decoded(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value
