"""Redaction of whole spans on their way out (issue 22): every span the export processor sends
or spools passes through ``Scrubber`` once, on the export thread (the caller never pays it).

Whatever set them, these go through ``tracescore._core.redact``: the span name, every span, event
and link attribute, the status description, the resource's attributes, and the instrumentation
scope's name, version and attributes. Exception messages and stack traces are event attributes,
so they are covered. A value under a secret name (``db.password``, ``git.token``,
``http.request.header.authorization``) becomes ``[REDACTED]`` whole; any other string (each
string of a sequence, whatever the sequence's first item, and a bytes value as the text it
decodes to) is searched with ``redact_text``. Numbers and booleans are kept (``max_tokens=100``
is no secret). Attribute names are searched too: a credential used as a name is replaced in it,
and its value is ``[REDACTED]``.

tracescore's own spans (instrumentation scope ``tracescore``) are always scrubbed; other
instrumentations' spans on the same provider are scrubbed unless ``foreign=False``
(``configure(redact_foreign_spans=False)``, env ``TRACESCORE_REDACT_FOREIGN_SPANS``). A span
in which nothing changed is passed on as it was (no copy); a resource or scope is redacted once
and the redacted one reused for every span that shares it.

With ``price`` (``configure()``'s export path), another instrumentation's model-call span that
carries token counts but no cost gets its cost from tracescore's price table here too, off the
caller's thread (``tracescore._instrument.usage.cost_attributes``).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util import BoundedList
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, Status

from tracescore._core import redact as _redact
from tracescore._core import semconv as sc
from tracescore._core.otel_compat import (
    attribute_dict,
    span_fields,
    span_origin,
    trace_state_of,
)

logger = logging.getLogger("tracescore")

REDACTED = _redact.REDACTED
# Resources and scopes are few; their redacted forms are kept by identity, at most this many.
_MAX_CACHED = 256
# Characters of an attribute name sent: a longer name is cut (its value kept); only what can
# survive the cut is searched for credentials (plus 512 characters, so that a key the cut
# would halve is redacted whole).
MAX_NAME_CHARS = 256


# Whether an attribute name names a secret: a pure function of the name, and the same few names
# come back on every span (the answer is read, not recomputed: it lowers, splits and searches).
_is_secret_key = functools.lru_cache(maxsize=4096)(_redact.is_secret_key)


def _value(key: str, value: Any) -> Any:
    """``value`` redacted as the attribute ``key``'s (the same object when nothing changed)."""
    if isinstance(value, str):
        if _is_secret_key(key):
            return REDACTED if value else value
        # Short values repeat from span to span (kinds, names, models): remembered (the
        # remembered string may be another object equal to this one: unchanged then).
        new = _redact.redact_name(value) if len(value) <= 64 else _redact.redact_text(value)
        return value if new is value or new == value else new
    if isinstance(value, (bytes, bytearray)):
        # A bytes attribute goes out as OTLP bytes: searched as the text it decodes to.
        if _is_secret_key(key):
            return REDACTED.encode() if value else value
        text = bytes(value).decode("utf-8", errors="replace")
        new = _redact.redact_text(text)
        return value if new == text else new.encode("utf-8", errors="replace")
    if isinstance(value, (tuple, list)):
        # Every item, whatever the first one is: the SDK keeps None among strings, and a
        # sequence it did not clean (a foreign processor's) may mix types.
        secret = _is_secret_key(key)
        out = tuple(_item(v, secret) for v in value)
        return value if all(a is b for a, b in zip(out, value, strict=True)) else out
    return value


def _item(value: Any, secret: bool) -> Any:
    """One item of a sequence attribute, redacted (the same object when nothing changed)."""
    if isinstance(value, str):
        if secret:
            return REDACTED if value else value
        new = _redact.redact_text(value)
        return value if new == value else new
    if isinstance(value, (bytes, bytearray)):
        return _value("", value) if not secret else (REDACTED.encode() if value else value)
    return value


def _key(key: Any) -> tuple[Any, bool]:
    """An attribute's name, redacted: a credential used as a name leaves as ``[REDACTED]``
    in its place (the rest of the name kept), and a name longer than ``MAX_NAME_CHARS`` is
    cut; with whether the value filed under it may be shown (not under a credential)."""
    if not isinstance(key, str):
        return key, True
    if len(key) > MAX_NAME_CHARS:
        head = key[:MAX_NAME_CHARS + 512]
        new = _redact.redact_text(head)
        mark = f"...[truncated {len(key) - MAX_NAME_CHARS} chars]"
        return new[:MAX_NAME_CHARS - len(mark)] + mark, new == head
    new = _redact.redact_name(key)
    return (key, True) if new == key else (new, False)


def _unchanged(attributes: Mapping[str, Any]) -> bool:
    """True when redaction would change nothing in ``attributes``: no name names a secret or
    holds a credential, no string (nor string of a sequence) holds one, and every other value
    is a number, a flag or None. Names and short texts seen before under the same rules are
    answered from the redactor's memory (``Redactor.unchanged``): most spans carry the same few
    names, kinds and models, so a span with nothing to redact costs a set look-up per
    attribute and one search per long text. False whenever unsure (bytes, other types, a
    user's callback): ``redact_attributes`` then walks it in full."""
    redactor = _redact.active()
    memory = redactor.unchanged()
    if memory is None:
        return False
    names, texts = memory
    for key, value in attributes.items():
        if key not in names:
            if (type(key) is not str or len(key) > _redact.UNCHANGED_TEXT_CHARS
                    or _is_secret_key(key) or redactor.redact_name(key) != key):
                return False
            _redact.note_clean(names, key)
        kind = type(value)
        if kind is str:
            if value not in texts and not _text_unchanged(redactor, texts, value):
                return False
        elif kind is tuple or kind is list:
            for item in value:
                if type(item) is str:
                    if item not in texts and not _text_unchanged(redactor, texts, item):
                        return False
                elif not (item is None or type(item) in _SCALARS):
                    return False
        elif not (value is None or kind in _SCALARS):
            return False
    return True


_SCALARS = (bool, int, float)


def _text_unchanged(redactor: _redact.Redactor, texts: set[str], text: str) -> bool:
    if redactor.redact_text(text) != text:
        return False
    if len(text) <= _redact.UNCHANGED_TEXT_CHARS:
        _redact.note_clean(texts, text)
    return True


def redact_attributes(attributes: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """``attributes`` with every value redacted (see the module docstring); the same mapping
    when nothing changed.

    A name that holds a credential is redacted too (``sk-proj-...`` becomes ``[REDACTED]``,
    ``user.sk-proj-...`` becomes ``user.[REDACTED]``), and its value becomes ``[REDACTED]``
    whatever it was: what is filed under a credential is not shown. Two names that redact
    alike are kept apart by a suffix (``[REDACTED]#2``).

    Examples:
        >>> dict(redact_attributes({"db.password": "hunter2", "n": 3}))
        {'db.password': '[REDACTED]', 'n': 3}
    """
    if not attributes or _unchanged(attributes):
        return attributes
    changed: dict[str, Any] | None = None
    renamed: list[tuple[str, str, Any]] = []
    for key, value in attributes.items():
        new_key, shown = _key(key)
        if new_key is not key:
            renamed.append((key, new_key, _value(key, value) if shown else REDACTED))
            continue
        new = _value(key, value)
        if new is not value:
            if changed is None:
                changed = dict(attributes)
            changed[key] = new
    if renamed:
        if changed is None:
            changed = dict(attributes)
        for key, _, _ in renamed:
            del changed[key]
        suffixes: dict[str, int] = {}  # per redacted or cut name, the last suffix given
        for _, new_key, new_value in renamed:
            name, n = new_key, suffixes.get(new_key, 1)
            while name in changed:
                n += 1
                name = f"{new_key}#{n}"
            suffixes[new_key] = n
            changed[name] = new_value
    return attributes if changed is None else changed


class Scrubber:
    """Redact a batch of spans before it is exported or spooled.

    Args:
        foreign: also scrub spans of other instrumentations (any scope but ``tracescore``).
            tracescore's own spans are always scrubbed.
        price: attributes to add to another instrumentation's span, or None.
        redactor: the redactor of the runtime whose spans these are (a service's own, with its
            file's patterns); None: the calling context's (``configure()``'s, ``PROCESS``).

    Examples:
        >>> processor = ExportProcessor(exporter, queue_bytes=..., batch_bytes=...,
        ...                             scrub=Scrubber(foreign=True))
    """

    def __init__(self, *, foreign: bool = True,
                 price: Callable[[ReadableSpan], Mapping[str, Any] | None] | None = None,
                 redactor: _redact.Redactor | None = None) -> None:
        self.foreign = foreign
        self.redactor = redactor
        # Attributes to add to another instrumentation's span (its cost, from the attributes
        # it has: ``tracescore._instrument.usage.cost_attributes``), or None.
        self.price = price
        self._resources: dict[int, tuple[Resource, Resource]] = {}
        self._scopes: dict[int, tuple[InstrumentationScope, InstrumentationScope]] = {}
        # The last scope read and whether it is another instrumentation's, one tuple.
        self._last_scope: tuple[Any, bool] = (None, True)

    def __call__(self, spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
        """The batch with each span redacted, one for one; a span that cannot be read safely
        goes out as a bare ``[REDACTED]`` span with its ids and times only (logged)."""
        if self.redactor is not None:
            with _redact.using(self.redactor):
                return self._batch(spans)
        return self._batch(spans)

    def _batch(self, spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
        out: list[ReadableSpan] = []
        for span in spans:
            try:
                out.append(self.span(span))
            except Exception:
                logger.warning("tracescore could not redact a span for export; it goes out "
                               "with its ids and times only (the application is unaffected)",
                               exc_info=True)
                out.append(ReadableSpan(name=REDACTED, context=span.context,
                                        parent=span.parent, kind=span.kind,
                                        start_time=span.start_time, end_time=span.end_time))
        return out

    def span(self, span: ReadableSpan) -> ReadableSpan:
        """One span, redacted (the same object when nothing needed redacting or the span is
        foreign and ``foreign`` is off)."""
        scope, old_resource = span_origin(span)
        last = self._last_scope  # a batch's spans mostly share one scope
        if last[0] is scope:
            foreign = last[1]
        else:
            foreign = scope is None or scope.name != sc.INSTRUMENTATION_SCOPE
            self._last_scope = (scope, foreign)
        # The span's own fields, read once (the public properties copy its containers). The
        # plain dict behind an ended span's attributes is walked at C speed; it is passed on
        # only when redaction changed nothing (``span.attributes`` is a new view each time).
        old_name, old_context, old_status, own, own_events, own_links = span_fields(span)
        original = attribute_dict(own, frozen_only=True) or span.attributes
        extra = self.price(span) if (self.price is not None and foreign and original) else None
        if not self.foreign and foreign:
            return span if not extra else _with_attributes(span, extra)
        name = _redact.redact_name(old_name) if old_name else old_name
        if name == old_name:
            name = old_name
        attributes = redact_attributes(original)
        if extra:
            attributes = {**(attributes or {}), **extra}
        events = span.events if own_events else ()
        new_events: list[Event] | None = None
        for i, event in enumerate(events):
            event_name = _redact.redact_name(event.name) if event.name else event.name
            if event_name == event.name:
                event_name = event.name
            event_attrs = redact_attributes(event.attributes)
            if event_name is not event.name or event_attrs is not event.attributes:
                if new_events is None:
                    new_events = list(events)
                new_events[i] = Event(event_name, event_attrs, event.timestamp)
        links = span.links if own_links else ()
        new_links: list[Link] | None = None
        for i, link in enumerate(links):
            link_attrs = redact_attributes(link.attributes)
            link_context = _context(link.context)
            if link_attrs is not link.attributes or link_context is not link.context:
                if new_links is None:
                    new_links = list(links)
                new_links[i] = Link(link_context, link_attrs)
        status = old_status
        if status is not None and status.description:
            description = _redact.redact_text(status.description)
            if description is not status.description:
                status = Status(status.status_code, description)
        resource = self._resource(old_resource)
        new_scope = self._scope(scope)
        context = old_context if trace_state_of(old_context) is None else _context(old_context)
        if (name is old_name and attributes is original and new_events is None
                and new_links is None and status is old_status
                and resource is old_resource and new_scope is scope
                and context is old_context):
            return span
        return ReadableSpan(
            name=name,
            context=context,
            parent=span.parent,
            resource=resource,
            # The counts of what the SDK dropped for its limits are kept (the constructor
            # reads them from the SDK's bounded containers).
            attributes=_keep_dropped_attributes(attributes, span.dropped_attributes),
            events=_keep_dropped(new_events if new_events is not None else events,
                                 span.dropped_events),
            links=_keep_dropped(new_links if new_links is not None else links,
                                span.dropped_links),
            kind=span.kind,
            status=status,
            start_time=span.start_time,
            end_time=span.end_time,
            instrumentation_scope=new_scope,
        )

    def _resource(self, resource: Resource | None) -> Resource | None:
        if resource is None:
            return None
        cached = self._resources.get(id(resource))
        if cached is not None and cached[0] is resource:
            return cached[1]
        attributes = redact_attributes(resource.attributes)
        redacted = (resource if attributes is resource.attributes
                    else Resource(dict(attributes or {}), resource.schema_url))
        self._remember(self._resources, resource, redacted)
        return redacted

    def _scope(self, scope: InstrumentationScope | None) -> InstrumentationScope | None:
        if scope is None:
            return None
        cached = self._scopes.get(id(scope))
        if cached is not None and cached[0] is scope:
            return cached[1]
        attributes = redact_attributes(scope.attributes)
        # The scope's name and version are strings of whoever called get_tracer().
        name = _redact.redact_name(scope.name) if scope.name else scope.name
        version = _redact.redact_name(scope.version) if scope.version else scope.version
        redacted = (scope if attributes is scope.attributes and name == scope.name
                    and version == scope.version
                    else InstrumentationScope(name, version, scope.schema_url,
                                              dict(attributes or {})))
        self._remember(self._scopes, scope, redacted)
        return redacted

    @staticmethod
    def _remember(cache: dict[int, Any], original: Any, redacted: Any) -> None:
        if len(cache) >= _MAX_CACHED:
            cache.clear()  # ids of collected objects may be reused: start again
        # The original is kept in the entry so that its id cannot be reused while cached.
        cache[id(original)] = (original, redacted)


def _context(context: Any) -> Any:
    """``context`` with the values of its W3C ``tracestate`` redacted (OTLP sends a span's and
    each link's); the same object when nothing changed."""
    state = getattr(context, "trace_state", None)
    if not state:
        return context
    entries = [(key, _redact.redact_text(value)) for key, value in state.items()]
    if all(new == old for (_, new), old in zip(entries, state.values(), strict=True)):
        return context
    from opentelemetry.trace import SpanContext, TraceState

    return SpanContext(context.trace_id, context.span_id, context.is_remote,
                       context.trace_flags, TraceState(entries))


def _with_attributes(span: ReadableSpan, extra: Mapping[str, Any]) -> ReadableSpan:
    """A copy of ``span`` with ``extra`` attributes added (nothing else redacted)."""
    return ReadableSpan(
        name=span.name, context=span.context, parent=span.parent, resource=span.resource,
        attributes=_keep_dropped_attributes({**(span.attributes or {}), **extra},
                                            span.dropped_attributes),
        events=span.events, links=span.links, kind=span.kind, status=span.status,
        start_time=span.start_time, end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope)


def _keep_dropped_attributes(attributes: Any, dropped: int) -> Any:
    if not dropped or getattr(attributes, "dropped", 0) == dropped:
        return attributes
    bounded = BoundedAttributes(maxlen=None, attributes=dict(attributes or {}), immutable=True)
    bounded.dropped = dropped
    return bounded


def _keep_dropped(items: Any, dropped: int) -> Any:
    if not dropped or getattr(items, "dropped", 0) == dropped:
        return items
    bounded: BoundedList[Any] = BoundedList(None)
    bounded.extend(items)
    bounded.dropped = dropped
    return bounded


Scrub = Callable[[Sequence[ReadableSpan]], list[ReadableSpan]]
