"""Helpers the readers of other instrumentations share: decoding attribute values, telling a
truncated value from a whole one, and describing a failed span.

Called only for spans a rule selected (``read``) or for retrieval and tool spans (``observe``),
never in ``accepts``/``kind``: those stay dictionary look-ups.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tracescore._core import semconv as sc


class Truncated(ValueError):
    """An attribute value was cut by its producer or by the SDK's attribute length limit."""

    def __init__(self, key: str, why: str) -> None:
        super().__init__(f"{key} {why}")
        self.key = key


ABSENT: Any = object()
"""Marks an attribute the span does not carry (as opposed to one that holds JSON ``null``)."""

TRUNCATED_HINT = ("raise the span attribute length limit (OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT "
                  "/ OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT) so the whole value reaches scoring")

_limit_cache: list[int | None] = []


def attribute_length_limit() -> int | None:
    """The SDK's span attribute length limit from the environment, read once (None: no limit).

    A string exactly this long was most likely cut by the SDK. A limit passed in code to
    ``TracerProvider(span_limits=...)`` is not visible here; such values are still caught when
    they should be JSON and no longer parse.
    """
    if not _limit_cache:
        try:
            from opentelemetry.sdk.trace import SpanLimits

            _limit_cache.append(SpanLimits().max_span_attribute_length)
        except Exception:  # a broken environment value: the SDK logs it; assume no limit
            _limit_cache.append(None)
    return _limit_cache[0]


def check_length(key: str, value: Any) -> None:
    """Raise ``Truncated`` when ``value`` is a string exactly as long as the SDK's limit."""
    limit = attribute_length_limit()
    if limit is not None and isinstance(value, str) and len(value) == limit:
        raise Truncated(key, f"is exactly {limit} characters long, the span attribute length "
                             "limit: it was cut")


def json_value(attrs: Mapping[str, Any], key: str, *, must_be_json: bool = True) -> Any:
    """The decoded JSON value of ``attrs[key]``; ``ABSENT`` when the span lacks it.

    Args:
        attrs: the span's attributes.
        key: the attribute name.
        must_be_json: the producer always writes JSON here, so a value that does not parse was
            truncated (``Truncated``); False: a string that does not parse is returned as is.

    Raises:
        Truncated: the value was cut (see ``check_length``), or does not parse though it must.
    """
    raw = attrs.get(key, ABSENT)
    if raw is ABSENT:
        return ABSENT
    if not isinstance(raw, str):
        return raw
    check_length(key, raw)
    try:
        return json.loads(raw)
    except ValueError:
        if must_be_json:
            raise Truncated(key, "is not valid JSON although its producer always writes JSON: "
                                 "it was cut") from None
        return raw


def text_value(attrs: Mapping[str, Any], key: str) -> Any:
    """``attrs[key]`` as it is (``ABSENT`` when missing), checked for truncation.

    Raises:
        Truncated: see ``check_length``.
    """
    raw = attrs.get(key, ABSENT)
    if raw is not ABSENT:
        check_length(key, raw)
    return raw


def unwrap(value: Any) -> Any:
    """A one-entry mapping of a string (LangChain's ``{"input": "..."}``, a function's single
    argument) becomes that string, so the judge reads the question rather than its envelope."""
    if isinstance(value, Mapping) and len(value) == 1:
        (inner,) = value.values()
        if isinstance(inner, str):
            return inner
    return value


def error_of(span: Any) -> str | None:
    """``"Type: message"`` from the span's ``exception`` event, else its status description,
    when the span failed; None otherwise."""
    status = getattr(span, "status", None)
    if status is None or getattr(status.status_code, "name", "") != "ERROR":
        return None
    for event in getattr(span, "events", ()) or ():
        if event.name == sc.EXCEPTION_EVENT:
            attrs = event.attributes or {}
            kind = attrs.get(sc.EXCEPTION_TYPE, "Exception")
            message = attrs.get(sc.EXCEPTION_MESSAGE, "")
            return f"{kind}: {message}" if message else str(kind)
    return str(status.description or "error")


def indexed(attrs: Mapping[str, Any], prefix: str, suffix: str, limit: int = 10_000) -> list[Any]:
    """Values of ``{prefix}.{i}.{suffix}`` for i = 0, 1, ... until one is missing."""
    found = []
    for i in range(limit):
        value = attrs.get(f"{prefix}.{i}.{suffix}", ABSENT)
        if value is ABSENT:
            break
        found.append(value)
    return found
