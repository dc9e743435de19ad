"""Turning what a scorer is given (strings, chat messages, dicts, objects) into judged text.

Rules (the text a scorer reads, as the scorers page describes it):

- ``None`` is the empty string; ``bytes`` are decoded as UTF-8 with replacement characters.
- A list of chat messages (dicts or objects with ``role`` and ``content``): the judged question
  is the first ``user`` message with text; the judged answer is the last ``assistant`` message
  with text. ``content`` may be a string, a list of parts (``{"type": "text", "text": ...}``;
  non-text parts are skipped), or a dict with ``content``/``parts``.
- ``input`` may be a dict with ``input_messages`` (or ``inputMessages``): a message list.
- ``output`` may be ``{"text": ...}``.
- A dict with a single string value is that value; a list of strings is joined with newlines.
- Anything else is dumped as JSON, falling back to ``repr``: extraction never raises.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["input_text", "output_text", "plain_text", "context_texts", "normalise_tool_calls"]

_TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})
_DOCUMENT_TEXT_KEYS = ("content", "text", "page_content")


def input_text(value: Any) -> str:
    """The judged question: the first user message's text, else the value as text.

    Args:
        value: a str, bytes, a list of chat messages, a dict with ``input_messages``, a single
            message, or any other object.

    Returns:
        The text; ``""`` for ``None``.
    """
    messages = _messages_in(value, keys=("input_messages", "inputMessages", "messages"))
    if messages is not None:
        for message in messages:
            if _role(message) == "user":
                text = _message_text(message)
                if text:
                    return text
        return ""
    return plain_text(value)


def output_text(value: Any) -> str:
    """The judged answer: the last assistant message's text, ``{"text": ...}``, else the value.

    Args:
        value: a str, bytes, ``{"text": ...}``, a list of chat messages, a single message, or
            any other object.

    Returns:
        The text; ``""`` for ``None`` or when no assistant message has text.
    """
    if isinstance(value, Mapping) and isinstance(value.get("text"), str):
        return str(value["text"])
    messages = _messages_in(value, keys=("output_messages", "outputMessages", "messages"))
    if messages is not None:
        for message in reversed(messages):
            if _role(message) == "assistant":
                text = _message_text(message)
                if text:
                    return text
        return ""
    return plain_text(value)


def plain_text(value: Any) -> str:
    """Any value as text, without interpreting chat messages. Never raises.

    Args:
        value: anything.

    Returns:
        ``""`` for ``None`` and empty dicts, lists and tuples; the string itself; decoded
        bytes; the text of a single message; the only string value of a one-key dict;
        newline-joined strings of a list of strings; else a JSON dump (non-serialisable parts
        as ``repr``), else ``repr(value)``.
    """
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", errors="replace")
    if _role(value) is not None:
        return _message_text(value)
    if isinstance(value, (Mapping, list, tuple)) and not value:
        return ""
    if isinstance(value, Mapping):
        if len(value) == 1:
            (only,) = value.values()
            if isinstance(only, str):
                return only
    elif isinstance(value, Sequence) and value and all(isinstance(v, str) for v in value):
        return "\n".join(value)
    elif not isinstance(value, (list, tuple, set, frozenset, int, float)):
        # Objects: their model/dataclass fields, or their repr (not a quoted JSON string).
        converted = _jsonable(value)
        if isinstance(converted, str):
            return converted
        value = converted
    return _safe_dump(value)


def context_texts(value: Any) -> list[str] | None:
    """Normalise context pieces to a list of strings, keeping their order.

    Args:
        value: ``None``; a string (one piece); or an iterable of strings, of dicts with
            ``content``/``text``/``page_content``, or of objects with such attributes.

    Returns:
        The pieces as strings, or ``None`` when ``value`` is ``None``.
    """
    if value is None:
        return None
    if isinstance(value, (str, bytes, bytearray)):
        return [plain_text(value)]
    if isinstance(value, Mapping) or not isinstance(value, Iterable):
        return [_document_text(value)]
    return [_document_text(item) for item in value]


def _document_text(item: Any) -> str:
    if isinstance(item, str):
        return item
    for key in _DOCUMENT_TEXT_KEYS:
        if isinstance(item, Mapping):
            candidate = item.get(key)
        else:
            try:
                candidate = getattr(item, key, None)
            except Exception:  # noqa: BLE001 - a broken property must not break scoring
                candidate = None
        if isinstance(candidate, str):
            return candidate
    return plain_text(item)


def _messages_in(value: Any, *, keys: tuple[str, ...]) -> list[Any] | None:
    """The message list inside ``value``, or ``None`` when ``value`` holds no messages."""
    if isinstance(value, Mapping):
        for key in keys:
            inner = value.get(key)
            if isinstance(inner, Sequence) and not isinstance(inner, (str, bytes)):
                return list(inner)
        if _role(value) is not None:
            return [value]
        return None
    if isinstance(value, (str, bytes, bytearray)) or not isinstance(value, Sequence):
        return [value] if _role(value) is not None else None
    if value and any(_role(item) is not None for item in value):
        return list(value)
    return None


def _role(message: Any) -> str | None:
    if isinstance(message, Mapping):
        role = message.get("role")
    elif isinstance(message, (str, bytes, bytearray, Sequence)) or message is None:
        return None
    else:
        try:
            role = getattr(message, "role", None)
        except Exception:  # noqa: BLE001
            return None
        if role is not None and not hasattr(message, "content"):
            return None
    if role is None:
        return None
    # Enum roles (e.g. role=Role.USER) compare by value.
    role = getattr(role, "value", role)
    return role.lower() if isinstance(role, str) else None


def _message_text(message: Any) -> str:
    if isinstance(message, Mapping):
        content = message.get("content")
    else:
        try:
            content = getattr(message, "content", None)
        except Exception:  # noqa: BLE001
            content = None
    return _content_text(content)


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, (bytes, bytearray)):
        return bytes(content).decode("utf-8", errors="replace")
    if isinstance(content, Mapping):
        # Message formats that nest their text: {"content": "..."} or {"parts": [...]}.
        if isinstance(content.get("content"), str):
            return str(content["content"])
        if isinstance(content.get("parts"), Sequence):
            return _content_text(content["parts"])
        if content.get("type") in _TEXT_PART_TYPES and isinstance(content.get("text"), str):
            return str(content["text"])
        return ""
    if isinstance(content, Sequence):
        texts: list[str] = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, Mapping):
                if part.get("type", "text") in _TEXT_PART_TYPES and isinstance(
                    part.get("text"), str
                ):
                    texts.append(str(part["text"]))
            else:
                text = getattr(part, "text", None)
                if isinstance(text, str) and getattr(part, "type", "text") in _TEXT_PART_TYPES:
                    texts.append(text)
        return "\n".join(t for t in texts if t)
    return plain_text(content)


def _jsonable(value: Any) -> Any:
    """``json.dumps`` fallback: models and dataclasses as dicts, sets as lists, else repr."""
    model_dump = getattr(value, "model_dump", None)
    if callable(model_dump) and not isinstance(value, type):
        try:
            return model_dump(mode="json")
        except Exception:  # noqa: BLE001
            pass
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        try:
            return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        except Exception:  # noqa: BLE001
            pass
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    return _safe_repr(value)


def _safe_dump(value: Any) -> str:
    try:
        return json.dumps(value, default=_jsonable, ensure_ascii=False)
    except (ValueError, TypeError, RecursionError):
        # ValueError: circular reference; TypeError: non-string dict keys of odd types.
        return _safe_repr(value)


def _safe_repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception:  # noqa: BLE001
        return f"<{type(value).__name__} object>"


def _parse_arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _one_call(item: Any) -> dict[str, Any] | None:
    get = item.get if isinstance(item, Mapping) else (lambda k, d=None: getattr(item, k, d))
    function = get("function")
    if function is not None:  # OpenAI style: {"type": "function", "function": {name, arguments}}
        fget = (function.get if isinstance(function, Mapping)
                else (lambda k, d=None: getattr(function, k, d)))
        name, arguments = fget("name"), fget("arguments")
    else:
        name = get("name") or get("tool_name") or get("toolName")
        arguments = get("arguments", get("args", get("input")))
    if not name:
        return None
    call = {
        "name": str(name),
        "arguments": _parse_arguments(arguments),
        "result": get("result", get("output")),
    }
    error = get("error")
    if error is not None:  # a tool that raised: the judge should know it failed
        call["error"] = str(error)
    return call


def normalise_tool_calls(explicit: Any, output: Any) -> list[dict[str, Any]] | None:
    """The tool calls of a run as ``[{"name", "arguments", "result"}, ...]`` in call order.

    Args:
        explicit: ``run(tool_calls=...)``: a list of dicts or objects with ``name`` (or
            ``tool_name``/``toolName``), ``arguments`` (or ``args``/``input``; JSON strings are
            parsed) and optional ``result``/``output`` and ``error``, or OpenAI-style
            ``{"function": {"name", "arguments"}}`` items. Wins when given.
        output: the scored output; when it is a list of chat messages, the ``tool_calls`` of its
            assistant messages are read (results from the following ``role="tool"`` messages,
            matched by ``tool_call_id``).

    Returns:
        The calls (possibly an empty list when tools were known to be absent), or ``None`` when
        neither source says anything about tools.
    """
    if explicit is not None:
        items = explicit if isinstance(explicit, (list, tuple)) else [explicit]
        return [c for c in (_one_call(i) for i in items) if c is not None]
    if not isinstance(output, (list, tuple)):
        return None
    calls: list[dict[str, Any]] = []
    by_id: dict[str, dict[str, Any]] = {}
    saw_messages = False
    for message in output:
        if not isinstance(message, Mapping):
            continue
        saw_messages = True
        if message.get("role") == "assistant":
            for raw in message.get("tool_calls") or []:
                call = _one_call(raw)
                if call is None:
                    continue
                calls.append(call)
                call_id = raw.get("id") if isinstance(raw, Mapping) else None
                if call_id:
                    by_id[str(call_id)] = call
        elif message.get("role") == "tool":
            target = by_id.get(str(message.get("tool_call_id")))
            if target is not None:
                target["result"] = message.get("content")
    return calls if saw_messages else None
