"""Safe, bounded JSON rendering of arbitrary Python values for span attributes.

Nothing here raises: cyclic structures, objects that are not JSON-serialisable, bytes and huge
strings all get a safe, truncated representation.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

DEFAULT_MAX_LENGTH = 16_384
_MAX_DEPTH = 12
_MAX_ITEMS = 1_000
_TRUNCATION_MARK = "...[truncated {} chars]"


def truncate(text: str, max_length: int) -> str:
    """Cut ``text`` to at most ``max_length`` characters, ending with a marker saying how many
    characters were dropped. ``max_length <= 0`` means no limit."""
    if max_length <= 0 or len(text) <= max_length:
        return text
    mark = _TRUNCATION_MARK.format(len(text) - max_length)
    keep = max(max_length - len(mark), 0)
    return text[:keep] + mark


def _jsonable(value: Any, max_length: int, depth: int, seen: set[int]) -> Any:
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        # Cut long strings before json.dumps ever sees them: a 10 MB answer costs nothing then.
        return truncate(value, max_length)
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value[: max_length + 1] if max_length > 0 else value)
        return truncate(raw.decode("utf-8", errors="replace"), max_length)
    if depth >= _MAX_DEPTH:
        return f"<{type(value).__name__}: max depth>"
    marker = id(value)
    if marker in seen:
        return f"<cycle: {type(value).__name__}>"
    seen.add(marker)
    try:
        if isinstance(value, Mapping):
            out: dict[str, Any] = {}
            for i, (k, v) in enumerate(value.items()):
                if i >= _MAX_ITEMS:
                    out["..."] = f"{len(value) - _MAX_ITEMS} more items"
                    break
                out[str(k)] = _jsonable(v, max_length, depth + 1, seen)
            return out
        if isinstance(value, (list, tuple, set, frozenset)):
            items = []
            for i, v in enumerate(value):
                if i >= _MAX_ITEMS:
                    items.append(f"... {len(value) - _MAX_ITEMS} more items")
                    break
                items.append(_jsonable(v, max_length, depth + 1, seen))
            return items
        dump = getattr(value, "model_dump", None)  # pydantic v2 models
        if callable(dump):
            return _jsonable(dump(mode="json"), max_length, depth + 1, seen)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            fields = {f.name: getattr(value, f.name, None) for f in dataclasses.fields(value)}
            return _jsonable(fields, max_length, depth + 1, seen)
        return truncate(_safe_repr(value), max_length)
    except Exception:
        return truncate(_safe_repr(value), max_length)
    finally:
        seen.discard(marker)


def _safe_repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception:
        return f"<unrepresentable {type(value).__name__}>"


def to_json(value: Any, max_length: int = DEFAULT_MAX_LENGTH) -> str:
    """Render ``value`` as a JSON string of at most ``max_length`` characters.

    Args:
        value: anything. Strings and bytes are cut first, containers are walked (cycles, depth
            over 12 and more than 1,000 items are replaced by markers), pydantic models and
            dataclasses become objects, other objects their ``repr``.
        max_length: the cap in characters on the result; ``<= 0`` means no cap.

    Returns:
        A JSON document, or (only when the cap cut it) a truncated JSON text with a marker.
    """
    # Fast path for the common shapes (a string, a flat dict of scalars), which need no walk.
    kind = type(value)
    if kind is str:
        return truncate(json.dumps(truncate(value, max_length), ensure_ascii=False), max_length)
    if kind is dict and len(value) <= 64:
        flat = True
        for k, v in value.items():
            tv = type(v)
            if type(k) is not str or not (
                v is None or tv is int or tv is float or tv is bool
                or (tv is str and (max_length <= 0 or len(v) <= max_length))
            ):
                flat = False
                break
        if flat:
            return truncate(json.dumps(value, ensure_ascii=False), max_length)
    try:
        text = json.dumps(
            _jsonable(value, max_length, 0, set()), ensure_ascii=False, default=_safe_repr
        )
    except Exception:
        text = json.dumps(truncate(_safe_repr(value), max_length), ensure_ascii=False)
    return truncate(text, max_length)


class Document(NamedTuple):
    """One retrieved document: ``content`` is its full text; ``id``/``score``/``metadata`` are
    optional."""

    content: str
    id: str | None = None
    score: float | None = None
    metadata: Any = None


_CONTENT_KEYS = ("content", "text", "page_content")


def _get(obj: Any, key: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    if value is None:
        return ""
    return to_json(value, max_length=0)


def to_documents(result: Any) -> list[Document]:
    """Normalise what a retrieval function returned into documents.

    Accepts a list (or any iterable but a string/mapping) of strings, of dicts with
    ``content``/``text``/``page_content`` and optional ``id``/``score``/``metadata``, or of
    objects with such attributes (LangChain and LlamaIndex documents among them). A single
    string is one document; ``None`` is none. Never raises: an item without text is rendered
    as JSON.
    """
    if result is None:
        return []
    if isinstance(result, (str, bytes, bytearray)) or isinstance(result, Mapping):
        items: Iterable[Any] = [result]
    elif isinstance(result, Iterable):
        items = result
    else:
        items = [result]
    docs: list[Document] = []
    try:
        for item in items:
            if isinstance(item, (str, bytes, bytearray)):
                docs.append(Document(_text(item)))
                continue
            content = None
            for key in _CONTENT_KEYS:
                content = _get(item, key)
                if content is not None:
                    break
            if content is None:
                docs.append(Document(_text(item)))
                continue
            raw_id = _get(item, "id")
            raw_score = _get(item, "score")
            try:
                score = float(raw_score) if raw_score is not None else None
            except (TypeError, ValueError):
                score = None
            docs.append(
                Document(
                    _text(content),
                    str(raw_id) if raw_id is not None else None,
                    score,
                    _get(item, "metadata"),
                )
            )
    except Exception:
        docs.append(Document(_text(result)))
    return docs
