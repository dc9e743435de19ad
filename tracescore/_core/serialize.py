"""Safe, bounded JSON rendering of arbitrary Python values for span attributes.

Nothing here raises: cyclic structures, objects that are not JSON-serialisable, bytes and huge
strings all get a safe, truncated representation. The work done is bounded by the length cap,
not by the size of the value (shared references can make a small object render as terabytes).
Credentials never get through (``tracescore._core.redact``): values under secret names (``api_key``,
``openai_key``, ``password``, ``authorization``, ``*token``, ...; also the fields of namedtuples,
dataclasses, pydantic models and ``functools.partial`` keywords, read before any ``repr``) become
``[REDACTED]``, and every string is searched for credentials before it is cut. Text that is not
valid UTF-8 (lone surrogates, which OTLP
encoders refuse) gets U+FFFD instead.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import sys
from collections import deque
from collections.abc import Iterable, Mapping, MappingView
from typing import Any, NamedTuple, cast

from tracescore._core.redact import (
    REDACTED,
    fields_of,
    is_secret_key,
    is_secret_pair,
    redact_name,
    redact_text,
)

__all__ = ["REDACTED", "DEFAULT_MAX_LENGTH", "Document", "is_secret_key", "to_documents",
           "to_json", "truncate", "utf8_safe"]

DEFAULT_MAX_LENGTH = 16_384
# A string longer than the cap is searched a little past the cut, so that a credential the cut
# would halve is redacted whole before the cut (credential formats are far shorter than this).
_REDACT_SLACK = 512
_MAX_DEPTH = 12
_MAX_ITEMS = 1_000
_TRUNCATION_MARK = "...[truncated {} chars]"
# Documents a retrieval records at most (on the caller's thread: a million-string result must
# not cost seconds there); scoring is given fewer still (tracescore._pipeline.input_caps).
MAX_DOCUMENTS = 1_000
# Numbers JSON cannot carry. Non-finite floats become the strings the OTLP/JSON encoding of
# doubles uses; an int whose decimal form is longer than Python will write (4,300 digits by
# default, sys.get_int_max_str_digits) becomes a marker string: str() raises ValueError on it.
_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
_LOG10_2 = math.log10(2)
_SEQUENCES = (list, tuple, set, frozenset, deque, MappingView)
_SURROGATES = re.compile("[\ud800-\udfff]")
# One encoder for the fast paths: ``json.dumps`` with any non-default option builds a new
# ``JSONEncoder`` per call, which costs as much as encoding a short value.
_ENCODE = json.JSONEncoder(ensure_ascii=False).encode


def _refuse(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON")


# The C encoder itself for flat dicts of JSON scalars (no cycles possible, nothing to convert):
# ``JSONEncoder.encode`` makes one per call, two thirds of the cost of a short dict.
_C_FLAT = getattr(json.encoder, "c_make_encoder", None)
_ENCODE_FLAT = (
    _C_FLAT(None, _refuse, json.encoder.encode_basestring, None, ": ", ", ", False, False, True)
    if _C_FLAT is not None else None
)
def truncate(text: str, max_length: int) -> str:
    """Cut ``text`` to at most ``max_length`` characters, ending with a marker saying how many
    characters were dropped (when the marker itself fits). ``max_length <= 0`` means no
    limit."""
    if max_length <= 0 or len(text) <= max_length:
        return text
    mark = _TRUNCATION_MARK.format(len(text) - max_length)
    if len(mark) >= max_length:
        return text[:max_length]
    return text[: max_length - len(mark)] + mark


def utf8_safe(text: str) -> str:
    """``text`` with every lone surrogate (not encodable as UTF-8, so refused by OTLP encoders)
    replaced by U+FFFD."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return _SURROGATES.sub("\ufffd", text)


def _fitted(encoded: str, max_length: int) -> str:
    """``truncate`` then ``utf8_safe``, with the common case (short, ASCII) answered at once:
    this runs twice on every decorated call."""
    if encoded.isascii() and (max_length <= 0 or len(encoded) <= max_length):
        return encoded
    return utf8_safe(truncate(encoded, max_length))


def _shown(text: str, max_length: int) -> str:
    """``text`` redacted, then cut to ``max_length`` (searching only what can survive the cut,
    plus a little, so a 10 MB string costs no more than the cap)."""
    if max_length <= 0 or len(text) <= max_length:
        return redact_text(text)
    head = redact_text(text[: max_length + _REDACT_SLACK])
    mark = _TRUNCATION_MARK.format(len(text) - max_length)
    if len(mark) >= max_length:
        return head[:max_length]
    return head[: max_length - len(mark)] + mark


def _redact(key: Any, value: Any) -> bool:
    # Numbers and flags under such keys (``max_token``) are not secrets; text and structures are.
    return (
        isinstance(key, str)
        and not (value is None or isinstance(value, (bool, int, float)))
        and is_secret_key(key)
    )


class _Budget:
    """Characters left to render. Every item costs at least what it adds to the JSON text, so
    once it runs out nothing more could survive the final cut and the walk stops."""

    __slots__ = ("left",)

    def __init__(self, max_length: int) -> None:
        self.left: float = max_length if max_length > 0 else float("inf")


def _number(value: int | float) -> int | float | str:
    """``value`` as JSON can carry it: itself, or a string for NaN, infinities and ints too
    long to write out (see ``to_json``)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else _NON_FINITE[repr(float(value))]
    if isinstance(value, bool) or value.bit_length() < 4_096:  # < 1,234 digits: always writable
        return value
    digits = int(value.bit_length() * _LOG10_2) + 1
    limit = getattr(sys, "get_int_max_str_digits", lambda: 4_300)() or 4_300
    if digits < limit:
        return value
    return f"<int of about {digits:,} digits>"


def _jsonable(value: Any, max_length: int, depth: int, seen: set[int], budget: _Budget) -> Any:
    if value is None or isinstance(value, bool):
        budget.left -= 1
        return value
    if isinstance(value, (int, float)):
        budget.left -= 1
        return _number(value)
    if isinstance(value, str):
        # Cut long strings before json.dumps ever sees them: a 10 MB answer costs nothing then.
        text = _shown(value, max_length)
        budget.left -= len(text) + 2
        return text
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value[: max_length + _REDACT_SLACK] if max_length > 0 else value)
        text = _shown(raw.decode("utf-8", errors="replace"), max_length)
        budget.left -= len(text) + 2
        return text
    if depth >= _MAX_DEPTH:
        return f"<{type(value).__name__}: max depth>"
    marker = id(value)
    if marker in seen:
        return f"<cycle: {type(value).__name__}>"
    seen.add(marker)
    budget.left -= 2
    try:
        # Named fields are read before anything takes a repr, which would show secret ones.
        fields = fields_of(value)
        if fields is not None:
            value = fields
        if isinstance(value, Mapping):
            out: dict[str, Any] = {}
            for i, (k, v) in enumerate(value.items()):
                if i >= _MAX_ITEMS or budget.left <= 0:
                    out["..."] = f"{len(value) - i} more items"
                    break
                raw_key = str(k)
                key = redact_text(raw_key)
                budget.left -= len(key) + 4
                # A credential used as a key: what is filed under it is not shown either.
                if key != raw_key or _redact(k, v):
                    budget.left -= len(REDACTED) + 2
                    out[key] = REDACTED
                else:
                    out[key] = _jsonable(v, max_length, depth + 1, seen, budget)
            return out
        if isinstance(value, _SEQUENCES):
            if isinstance(value, (tuple, list)) and is_secret_pair(value):
                value = [value[0], REDACTED]  # ("Authorization", "Bearer ...")
            items = []
            for i, v in enumerate(cast("Iterable[Any]", value)):
                if i >= _MAX_ITEMS or budget.left <= 0:
                    items.append(f"... {len(value) - i} more items")
                    break
                budget.left -= 2
                items.append(_jsonable(v, max_length, depth + 1, seen, budget))
            return items
        dump = getattr(value, "model_dump", None)  # pydantic v2 models
        if callable(dump):
            return _jsonable(dump(mode="json"), max_length, depth + 1, seen, budget)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            fields = {f.name: getattr(value, f.name, None) for f in dataclasses.fields(value)}
            return _jsonable(fields, max_length, depth + 1, seen, budget)
        text = _shown(_safe_repr(value), max_length)
    except Exception:
        text = _shown(_safe_repr(value), max_length)
    finally:
        seen.discard(marker)
    budget.left -= len(text) + 2
    return text


def _safe_repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception:
        return f"<unrepresentable {type(value).__name__}>"


def to_json(value: Any, max_length: int = DEFAULT_MAX_LENGTH) -> str:
    """Render ``value`` as a JSON string of at most ``max_length`` characters.

    Args:
        value: anything. Strings and bytes are cut first, containers are walked (cycles, depth
            over 12 and more than 1,000 items are replaced by markers, and the walk stops once
            the cap is reached), pydantic models and dataclasses become objects, other objects
            their ``repr``. Values under secret-looking keys (and the second item of a
            ``(secret name, value)`` pair) become ``[REDACTED]``; every string, key and repr
            is searched for credentials (``tracescore._core.redact.redact_text``).
        max_length: the cap in characters on the result; ``<= 0`` means no cap.

    Numbers JSON has no form for become strings: ``NaN``, ``Infinity`` and ``-Infinity`` as
    those words (the OTLP/JSON encoding's spelling), an int longer than Python writes out
    (``sys.get_int_max_str_digits()``, 4,300 digits by default) as ``"<int of about N
    digits>"``. Never raises.

    Returns:
        A JSON document (strict JSON: no ``NaN`` literal), or (only when the cap cut it) a
        truncated JSON text with a marker; always encodable as UTF-8.
    """
    # Fast path for the common shapes (a string, a flat dict of scalars), which need no walk.
    kind = type(value)
    if kind is str:
        return _fitted(_ENCODE(_shown(value, max_length) if 0 < max_length < len(value)
                               else redact_text(value)), max_length)
    if kind is dict and len(value) <= 64:
        flat = True
        for k, v in value.items():
            tv = type(v)
            if type(k) is not str or not (
                v is None or tv is bool
                or (tv is int and v.bit_length() < 4_096)
                or (tv is float and math.isfinite(v))
                or (tv is str and (max_length <= 0 or len(v) <= max_length)
                    and not is_secret_key(k))
            ):
                flat = False
                break
        if flat:
            shown = {}
            for k, v in value.items():
                key = redact_name(k)
                # A credential used as a key: its value is not shown either.
                shown[key] = (REDACTED if key != k else redact_text(v) if type(v) is str
                              else v)
            encoded = ("".join(_ENCODE_FLAT(shown, 0)) if _ENCODE_FLAT is not None
                       else _ENCODE(shown))
            return _fitted(encoded, max_length)
    try:
        text = json.dumps(
            _jsonable(value, max_length, 0, set(), _Budget(max_length)),
            ensure_ascii=False, default=_safe_repr, allow_nan=False,
        )
    except Exception:
        text = json.dumps(_shown(_safe_repr(value), max_length), ensure_ascii=False)
    return utf8_safe(truncate(text, max_length))


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


def to_documents(result: Any, max_documents: int | None = None) -> list[Document]:
    """Normalise what a retrieval function returned into documents.

    With ``max_documents``, only the first that many items are read (the decorators pass
    ``MAX_DOCUMENTS``): the cost is bounded by the cap, not by the result's size.

    Accepts a list (or any re-iterable collection but a string/mapping) of strings, of dicts
    with ``content``/``text``/``page_content`` and optional ``id``/``score``/``metadata``, or of
    objects with such attributes (LangChain and LlamaIndex documents among them). A single
    string is one document; ``None`` is none. A one-shot iterator (a generator) is never
    consumed, since the caller gets it back: it yields no documents. Never raises: an item
    without text is rendered as JSON.
    """
    if result is None:
        return []
    docs: list[Document] = []
    try:
        if isinstance(result, (str, bytes, bytearray, Mapping)):
            items: Iterable[Any] = [result]
        elif isinstance(result, Iterable):
            items = [] if iter(result) is result else result
        else:
            items = [result]
        for index, item in enumerate(items):
            if max_documents is not None and index >= max_documents:
                break
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
