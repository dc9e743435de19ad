"""The seam between tracescore's decorators and scoring: full call values, handed over in process.

A decorated call records its input and output on its span truncated (``max_content_length``) or
not at all (content capture off), but scoring must see the full values. The decorator therefore
announces its ``CallRecord`` here for exactly as long as ``span.end()`` runs: the span
processors' ``on_end`` run inside that call, and the reader of tracescore's own spans looks the
record up by the span's ids. The scoring processor takes the record along with a span it routes
later, on its loop, and announces it again for as long as that routing runs (``reading``).
Nothing outlives either call, so there is nothing to evict and nothing to leak, whatever spans
end on which provider.

Only the standard library is imported: the decorators' hot path imports this module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# Set by configure(): whether any scoring rule is configured, so decorators build CallRecords
# (and bind their arguments) even with content capture off. A plain module attribute: the
# decorators read it on every call.
wanted: bool = False
# Set by configure() with ``wanted``: whether any scoring rule's sample picks a trace, by trace
# id; None when any trace may be scored (a rule scores failures, which are known only at the
# end). The decorators build no CallRecord for a trace no rule can pick.
picks: Callable[[int], bool] | None = None

# (trace_id, span_id) -> the record of the call whose span is ending right now. Entries live
# only while span.end() runs (set and removed by ``ending``), on whichever thread ends it.
_ending: dict[tuple[int, int], CallRecord] = {}


class CallRecord:
    """What a decorated call hands to scoring: full, untruncated values.

    Attributes:
        kind: ``agent`` | ``retrieval`` | ``tool`` | ``llm``.
        input: the single argument when the function took one (``self`` aside), else a dict
            of the bound arguments by name.
        arguments: the bound arguments by name.
        output: the return value (for generators: the yielded items, joined when all are
            strings).
        documents: for retrieval spans, the normalised documents.
        error: the exception the call raised, if any.
    """

    __slots__ = ("kind", "input", "arguments", "output", "documents", "error")

    def __init__(self, kind: str, arguments: dict[str, Any]) -> None:
        self.kind = kind
        self.arguments = arguments
        self.input: Any = next(iter(arguments.values())) if len(arguments) == 1 else arguments
        self.output: Any = None
        self.documents: list[Any] | None = None
        self.error: BaseException | None = None


def end_span(span: Any, record: CallRecord | None) -> None:
    """End ``span`` with ``record`` visible to the span processors' ``on_end``.

    Raises whatever ``span.end()`` raises (the decorators contain it).
    """
    if record is None:
        span.end()
        return
    ctx = span.get_span_context()
    key = (ctx.trace_id, ctx.span_id)
    _ending[key] = record
    try:
        span.end()
    finally:
        _ending.pop(key, None)


def record_of(trace_id: int, span_id: int) -> CallRecord | None:
    """The record of the decorated call whose span is ending now (or is being routed, see
    ``reading``), or None (the span was not made by a decorator, or ``on_end`` runs outside
    the ``end()`` call, as an asynchronous span processor would run it)."""
    return _ending.get((trace_id, span_id))


def reading(span: Any, record: CallRecord, fn: Callable[[Any], Any]) -> Any:
    """``fn(span)`` with ``record`` visible to ``record_of`` as the record of ``span`` (whose
    ``end()`` returned before): the scoring processor routes spans after their end, off the
    thread that ended them. Returns what ``fn`` returns; raises what it raises."""
    ctx = span.context
    key = (ctx.trace_id, ctx.span_id)
    _ending[key] = record
    try:
        return fn(span)
    finally:
        _ending.pop(key, None)
