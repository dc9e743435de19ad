"""A decorated model call's arguments and result as chat messages, in the two shapes backends
read: the GenAI conventions' ``gen_ai.input.messages`` / ``gen_ai.output.messages`` /
``gen_ai.system_instructions`` (JSON, messages of typed parts, the
``gen_ai_latest_experimental`` shape) and OpenInference's flattened
``llm.input_messages.{i}.message.role`` / ``.content`` (what Phoenix's chat view shows).

What counts as the messages of a call (``@tracescore.llm``), first match wins:

- an argument named ``messages``, or the only argument, that is a list of ``{"role",
  "content"}`` mappings (OpenAI's chat shape: ``content`` a string or a list of ``{"type":
  "text", "text"}`` parts; an assistant's ``tool_calls`` and a ``tool`` message's
  ``tool_call_id`` become ``tool_call`` / ``tool_call_response`` parts);
- an argument named ``prompt``, ``input``, ``question`` or ``query``, or the only argument,
  that is a string: one user message.

System instructions: a string argument named ``system``, ``system_prompt`` or
``instructions`` (``system`` messages inside ``messages`` stay there, as the conventions ask for
instructions sent as part of the chat history). The result: a string, a ``{"role",
"content"}`` mapping, or an object with a string ``content`` (an OpenAI ``ChatCompletion``'s
first choice is read too); anything else gives no output messages. Nothing here raises.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

_MESSAGE_ARGS = ("messages",)
_PROMPT_ARGS = ("prompt", "input", "question", "query")
_SYSTEM_ARGS = ("system", "system_prompt", "instructions")


def input_messages(arguments: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The call's input as GenAI messages (``[{"role", "parts": [...]}]``), or None."""
    only = next(iter(arguments.values())) if len(arguments) == 1 else None
    for value in [arguments.get(name) for name in _MESSAGE_ARGS] + [only]:
        if _is_chat(value):
            return [_message(m) for m in value or ()]
    for value in [arguments.get(name) for name in _PROMPT_ARGS] + [only]:
        if isinstance(value, str):
            return [{"role": "user", "parts": [_text(value)]}]
    return None


def system_instructions(arguments: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """System instructions passed apart from the messages, as text parts, or None."""
    for name in _SYSTEM_ARGS:
        value = arguments.get(name)
        if isinstance(value, str) and value:
            return [_text(value)]
    return None


def output_messages(result: Any) -> list[dict[str, Any]] | None:
    """The call's result as one GenAI output message, or None when it is not a reply.

    ``finish_reason`` is required by the conventions' schema; a call that returned is recorded
    as ``stop`` (the decorator cannot see a provider's reason).
    """
    choices = getattr(result, "choices", None)
    if isinstance(choices, Sequence) and choices and not isinstance(choices, str):
        message = getattr(choices[0], "message", None)
        if message is not None:
            reason = getattr(choices[0], "finish_reason", None)
            out = _message({"role": getattr(message, "role", "assistant"),
                            "content": getattr(message, "content", None),
                            "tool_calls": getattr(message, "tool_calls", None)})
            out["finish_reason"] = str(reason or "stop")
            return [out]
    if isinstance(result, str):
        message = {"role": "assistant", "parts": [_text(result)]}
    elif isinstance(result, Mapping) and "content" in result:
        message = _message({"role": "assistant", **result})
    elif isinstance(getattr(result, "content", None), str):
        message = {"role": str(getattr(result, "role", None) or "assistant"),
                   "parts": [_text(result.content)]}
    else:
        return None
    message["finish_reason"] = "stop"
    return [message]


def flattened(messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """``(role, content)`` per message for OpenInference's flattened attributes: the text
    parts joined; a message with none (only tool calls) shows its parts as JSON."""
    rows = []
    for message in messages:
        parts = message.get("parts") or []
        texts = [str(p.get("content", "")) for p in parts if p.get("type") == "text"]
        content = "\n".join(texts) if texts else json.dumps(parts, default=str)
        rows.append((str(message.get("role", "user")), content))
    return rows


def _is_chat(value: Any) -> bool:
    return (isinstance(value, Sequence) and not isinstance(value, (str, bytes)) and bool(value)
            and all(isinstance(m, Mapping) and "role" in m for m in value))


def _text(content: str) -> dict[str, Any]:
    return {"type": "text", "content": content}


def _message(raw: Mapping[str, Any]) -> dict[str, Any]:
    role = str(raw.get("role") or "user")
    parts: list[dict[str, Any]] = []
    content = raw.get("content")
    if role == "tool" and raw.get("tool_call_id") is not None:
        parts.append({"type": "tool_call_response", "id": str(raw["tool_call_id"]),
                      "response": content})
    elif isinstance(content, str):
        parts.append(_text(content))
    elif isinstance(content, Sequence) and not isinstance(content, bytes):
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(_text(part["text"]))
            elif isinstance(part, str):
                parts.append(_text(part))
    elif content is not None:
        parts.append(_text(json.dumps(content, default=str)))
    for call in raw.get("tool_calls") or ():
        function = _get(call, "function")
        arguments = _get(function, "arguments")
        if isinstance(arguments, str):
            with contextlib.suppress(ValueError):  # not JSON: kept as the string it is
                arguments = json.loads(arguments)
        part = {"type": "tool_call", "id": _get(call, "id"), "name": _get(function, "name"),
                "arguments": arguments}
        parts.append({k: v for k, v in part.items() if v is not None})
    return {"role": role, "parts": parts}


def _get(obj: Any, key: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)
