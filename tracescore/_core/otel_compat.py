"""The one place that reads private fields of the OpenTelemetry SDK, each with a fallback.

On the thread that ends every span, the SDK's public properties cost: each is a Python call,
and ``attributes``/``events``/``links`` copy what they return. For the exact classes the SDK
hands to span processors (``ReadableSpan``, its ``BoundedAttributes``, its ``BoundedList``)
tracescore reads the fields behind them instead. Those fields are private and may change in
any SDK release, so each one is checked once, at import, on an object built here with the
public constructors; where a field is missing or holds something else, the functions below
use the public API for good (slower, same results). No other module touches an SDK field whose
name starts with an underscore (``_suppress`` handles the API's private context key itself).

Examples:
    >>> from tracescore._core.otel_compat import span_context
    >>> span_context(span).trace_id  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util import BoundedList
from opentelemetry.trace import SpanContext, Status, TraceState

__all__ = [
    "FAST_ATTRIBUTES",
    "FAST_LISTS",
    "FAST_SPANS",
    "attribute_dict",
    "ended_parts",
    "list_items",
    "own_attributes",
    "own_events",
    "own_links",
    "span_context",
    "span_fields",
    "span_origin",
    "trace_state_of",
]


def _spans_readable() -> bool:
    """Whether a ``ReadableSpan`` keeps its fields under the names read below."""
    context = SpanContext(1, 1, False)
    status = Status()
    events = (Event("e"),)
    span = ReadableSpan("probe", context=context, attributes={"a": "b"}, events=events,
                        links=(), status=status)
    try:
        return (span._name == "probe" and span._context is context  # noqa: SLF001
                and span._status is status and span._events is events  # noqa: SLF001
                and span._links == () and span._attributes == {"a": "b"})  # noqa: SLF001
    except AttributeError:
        return False


def _attributes_readable() -> bool:
    """Whether ``BoundedAttributes`` keeps its items in a plain dict ``_dict`` and its
    immutability in ``_immutable``."""
    attributes = BoundedAttributes(maxlen=None, attributes={"a": "b"}, immutable=True)
    try:
        inner = attributes._dict  # noqa: SLF001
        return (inner.__class__ is dict and inner == {"a": "b"}
                and attributes._immutable is True)  # noqa: SLF001
    except AttributeError:
        return False


def _lists_readable() -> bool:
    """Whether ``BoundedList`` keeps its items in a deque ``_dq``."""
    bounded: BoundedList[int] = BoundedList(None)
    bounded.extend((1, 2))
    try:
        return tuple(bounded._dq) == (1, 2)  # type: ignore[attr-defined]  # noqa: SLF001
    except (AttributeError, TypeError):
        return False


def _states_readable() -> bool:
    """Whether a ``SpanContext`` is the tuple whose fifth item is its ``TraceState``, which
    keeps its entries in ``_dict``."""
    state = TraceState([("k", "v")])
    try:
        context = SpanContext(1, 1, False, trace_state=state)
        return context[4] is state and len(state._dict) == 1  # noqa: SLF001
    except (AttributeError, IndexError, TypeError):
        return False


def _origins_readable() -> bool:
    """Whether a ``ReadableSpan`` keeps its scope, resource and parent under the names read
    below."""
    parent = SpanContext(1, 2, False)
    span = ReadableSpan("probe", parent=parent)
    try:
        return (span._instrumentation_scope is span.instrumentation_scope  # noqa: SLF001
                and span._resource is span.resource  # noqa: SLF001
                and span._parent is parent and span.parent is parent)  # noqa: SLF001
    except AttributeError:
        return False


FAST_SPANS: bool = _spans_readable()
FAST_ATTRIBUTES: bool = _attributes_readable()
FAST_LISTS: bool = _lists_readable()
FAST_STATES: bool = _states_readable()
FAST_ORIGINS: bool = FAST_SPANS and _origins_readable()


def span_context(span: Any) -> SpanContext | None:
    """``span.context``, read from the field for the SDK's own ``ReadableSpan``."""
    if FAST_SPANS and span.__class__ is ReadableSpan:
        context: SpanContext | None = span._context  # noqa: SLF001
        return context
    return span.context  # type: ignore[no-any-return]


def ended_parts(span: Any) -> tuple[SpanContext | None, SpanContext | None, Any, Any]:
    """``(context, parent, instrumentation_scope, attributes)`` of an ended span, read from the
    fields for the SDK's own ``ReadableSpan``; ``attributes`` is then the plain dict behind its
    frozen ``BoundedAttributes`` (a look-up at C speed), else ``span.attributes``."""
    if FAST_ORIGINS and span.__class__ is ReadableSpan:
        attributes = span._attributes  # noqa: SLF001
        if (FAST_ATTRIBUTES and attributes.__class__ is BoundedAttributes
                and attributes._immutable):  # noqa: SLF001
            attributes = attributes._dict  # noqa: SLF001
        return (span._context, span._parent,  # noqa: SLF001
                span._instrumentation_scope, attributes)  # noqa: SLF001
    return span.context, span.parent, span.instrumentation_scope, span.attributes


def span_fields(span: Any) -> tuple[str, SpanContext | None, Status | None, Any, Any, Any]:
    """``(name, context, status, attributes, events, links)`` of an ended span, without the
    copies the public properties make where the span holds its own containers (for events
    and links, the deques behind the SDK's bounded lists)."""
    if FAST_SPANS and span.__class__ is ReadableSpan:
        events, links = span._events, span._links  # noqa: SLF001
        if FAST_LISTS:  # the deques behind them: no Python call to ask whether they are empty
            if events.__class__ is BoundedList:
                events = events._dq  # type: ignore[attr-defined]  # noqa: SLF001
            if links.__class__ is BoundedList:
                links = links._dq  # type: ignore[attr-defined]  # noqa: SLF001
        return (span._name, span._context, span._status,  # noqa: SLF001
                span._attributes, events, links)  # noqa: SLF001
    attributes = own_attributes(span)
    events = own_events(span)
    links = own_links(span)
    return (span.name, span.context, span.status,
            span.attributes if attributes is None else attributes,
            span.events if events is None else events,
            span.links if links is None else links)


def span_origin(span: Any) -> tuple[Any, Any]:
    """``(span.instrumentation_scope, span.resource)``, read from the fields for the SDK's own
    ``ReadableSpan``."""
    if FAST_ORIGINS and span.__class__ is ReadableSpan:
        return span._instrumentation_scope, span._resource  # noqa: SLF001
    return span.instrumentation_scope, span.resource


def trace_state_of(context: Any) -> Any:
    """``context.trace_state`` when it has entries, else None (most spans have none)."""
    if FAST_STATES and context.__class__ is SpanContext:
        state = context[4]
        return state if state._dict else None  # noqa: SLF001
    state = getattr(context, "trace_state", None)
    return state if state else None


def own_attributes(span: Any) -> Any:
    """The span's own attributes container (no copy), or ``None``: use ``span.attributes``."""
    return getattr(span, "_attributes", None) if FAST_SPANS else None


def own_events(span: Any) -> Any:
    """The span's own events container (no copy), or ``None``: use ``span.events``."""
    return getattr(span, "_events", None) if FAST_SPANS else None


def own_links(span: Any) -> Any:
    """The span's own links container (no copy), or ``None``: use ``span.links``."""
    return getattr(span, "_links", None) if FAST_SPANS else None


def attribute_dict(attributes: Any, *, frozen_only: bool = False) -> dict[str, Any] | None:
    """The plain dict inside the SDK's ``BoundedAttributes``, or ``None`` (anything else, or
    with ``frozen_only`` a container that may still change): then read it as a ``Mapping``."""
    if attributes.__class__ is BoundedAttributes:  # the SDK's own: no ABC check (~0.3 µs)
        if not FAST_ATTRIBUTES:
            return None
    elif not FAST_ATTRIBUTES or not isinstance(attributes, Mapping):
        return None
    inner = getattr(attributes, "_dict", None)
    if inner.__class__ is not dict:
        return None
    if frozen_only and not getattr(attributes, "_immutable", False):
        return None
    return inner


def list_items(container: Any) -> tuple[Any, ...] | None:
    """The items of the SDK's ``BoundedList`` as a tuple read at C speed, or ``None``."""
    if not FAST_LISTS:
        return None
    queue = getattr(container, "_dq", None)
    return None if queue is None else tuple(queue)
