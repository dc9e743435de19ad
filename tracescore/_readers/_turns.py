"""What a span means within its trace: one score per model call and per agent turn, agent turns
read from the model calls beneath them, and the texts a user reads rather than wrappers.

Spans end after everything beneath them, so when a span is routed the trace buffer knows what
ended under it (``TraceBuffer.beneath`` / ``pass_up``):

- **Nesting.** A span that wraps another span of its own kind is a *wrapper*: a framework's LLM
  span around the client library's (LlamaIndex ``predict`` around ``chat``, litellm around
  OpenAI, LangChain around OpenAI), a workflow's agent span around the agent's (the OpenAI
  Agents SDK, a CrewAI crew around its agents). Rules judge the innermost span of a nest by
  default: it carries the messages sent and the text received, never a template object or a
  workflow's summary, and it ends first, so the choice is made without waiting for the rest of
  the trace. ``ScoringRule(score_wrappers=True)`` judges wrappers too. Spans of tracescore's
  own decorators are never wrappers: a span someone decorated is always judged.
- **Turns read from model calls.** An agent span that carries no content of its own (the OpenAI
  Agents SDK's) is read from the model calls beneath it: the question is the last user message
  of the first call, the answer the text of the last call.
- **Tool-call-only turns.** A model turn that only asked for tools has no answer to judge: its
  reason says so, and tool-call scorers get its calls.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from .._trace_buffer import NOTHING_BENEATH, Beneath, TraceBuffer
from ._base import Content, Reader, scope_name

TOOL_ONLY = "this model turn only called tools"

# A Python object's default repr, or a dataclass/pydantic repr ``Name(field=..., ...)``: what a
# framework writes when it cannot serialise a value. Never the text a user typed or read.
# A framework may cut the repr (LlamaIndex ends its own at 200 characters with "..."), so the
# start decides: ``<x.Y object at 0x...>``, ``<Name(...)>``, ``Name(field=...`` or ``Name()``.
_DEFAULT_REPR = re.compile(r"^<[\w.]+(?: object at 0x[0-9a-fA-F]+>|\(|>$| object>$)")
_FIELDS_REPR = re.compile(r"^[A-Z][A-Za-z0-9_]*\((?:[a-z_][a-z0-9_]*=|\)$)")


class Routed(NamedTuple):
    """A span's place in its trace, as the rules need it.

    Attributes:
        kind: the normalised kind after what the trace showed (a framework-internal root
            without a model call beneath it is no agent).
        wrapper: the span wraps another span of its kind (see the module docstring).
        beneath: what ended beneath it.
    """

    kind: str | None
    wrapper: bool
    beneath: Beneath


def route(reader: Reader, span: Any, buffer: TraceBuffer | None, *,
          parent_links: bool = False) -> Routed:
    """Ask ``reader`` what ``span`` is, leave what later spans need in ``buffer`` and settle
    the span's place in its trace (see the module docstring).

    Args:
        reader: the span's reader (``reader_for(span)``).
        span: the ended span.
        buffer: the trace buffer, or None (then nothing is known of the trace).
        parent_links: also remember the span's parent, for tool calls under any ancestor.
    """
    kind = reader.kind(span)
    if buffer is None:
        return Routed(kind, False, NOTHING_BENEATH)
    ctx = span.context
    parent = span.parent.span_id if span.parent is not None else None
    if parent_links:
        buffer.add_span(ctx.trace_id, ctx.span_id, parent)
    beneath = buffer.beneath(ctx.trace_id, ctx.span_id)
    refine = getattr(reader, "refine", None)
    if refine is not None:
        with contextlib.suppress(Exception):  # a broken reader keeps the kind it gave
            kind = refine(span, kind, beneath)
    if parent is not None:
        buffer.pass_up(ctx.trace_id, parent, kind, beneath, span)
    reader.observe(span, kind, buffer)
    wrapper = (kind is not None and kind in beneath.kinds
               and not getattr(reader, "explicit", False))
    return Routed(kind, wrapper, beneath)


def finish(span: Any, kind: str | None, content: Content, beneath: Beneath,
           reader_for: Callable[[Any], Reader]) -> Content:
    """``content`` completed from the trace: an agent span without content of its own is read
    from the model calls beneath it (see the module docstring); ``reader_for`` finds their
    readers (the registry's)."""
    if kind != "agent" or content.missing is None or content.input is not None \
            or content.output is not None:
        return content
    first, last = beneath.first_call, beneath.last_call
    if first is None or last is None:
        return content._replace(missing=(
            f"{content.missing}; and no model call (LLM span) ended beneath it to read the "
            "turn from"))
    opened = reader_for(first).read(first, "llm")
    question = last_user_text(opened.input)
    closed = opened if last is first else reader_for(last).read(last, "llm")
    if question is None:
        why = opened.missing or f"its input carries no user message ({opened.input!r:.80})"
        return content._replace(missing=(
            f"{content.missing}; its first model call, span {getattr(first, 'name', '')!r}, "
            f"has no question to read: {why}"))
    if closed.output is None:
        if closed.tool_calls:
            return Content(question, None, content.error, tool_only_reason(
                span, closed.tool_calls, turn="agent turn's last model turn"),
                closed.tool_calls)
        return content._replace(missing=(
            f"{content.missing}; its last model call, span {getattr(last, 'name', '')!r}, has "
            f"no answer to read: {closed.missing or 'no output'}"))
    return Content(question, closed.output, content.error)


def no_documents_reason(reader: Reader, span: Any) -> str:
    """Why a context scorer on ``span`` finds no context: no retrieval span of its trace ended
    before it; the reader's ``documents_hint`` (what the framework does not trace) and how to
    pass context instead."""
    hint = getattr(reader, "documents_hint", "")
    ctx = span.context
    trace = f"{ctx.trace_id:032x}" if ctx is not None else "?"
    return (f"not scorable: no retrieval span of trace {trace} ended before span "
            f"{getattr(span, 'name', '')!r}, so there are no retrieved documents to judge "
            f"against{'; ' + hint if hint else ''}. Pass the context explicitly (the scorer "
            "factory's context=[...] or context_extractor=(input, output) -> pieces), decorate "
            "the retriever with @tracescore.retrieval, or, when the agent retrieves through a "
            "tool, use ScoringRule(tool_results_as_context=True)")


def tool_only_reason(span: Any, calls: Sequence[Mapping[str, Any]],
                     turn: str = "model turn") -> str:
    """The not-scorable reason of a turn that only asked for tools (answer scorers)."""
    names = ", ".join(str(c.get("name", "?")) for c in calls[:5])
    more = f" and {len(calls) - 5} more" if len(calls) > 5 else ""
    return (f"not scorable as an answer: {TOOL_ONLY} ({names}{more}); span "
            f"{getattr(span, 'name', '')!r} (instrumentation {scope_name(span) or 'unknown'!r}, "
            f"the {turn}) has no text for the user. Tool-call scorers judge these calls; answer "
            "scorers judge the turn that answers")


def last_user_text(value: Any) -> str | None:
    """The user's question in a model call's input: the last user message's text (chat
    messages), or the input itself when it is a string."""
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, Sequence):
        for message in reversed(value):
            if isinstance(message, Mapping) and message.get("role") in ("user", "human"):
                text = message.get("content")
                if isinstance(text, str) and text.strip():
                    return text
    return None


def looks_like_repr(value: Any) -> bool:
    """True when ``value`` is a Python object's repr rather than data: ``<x.Y object at
    0x...>`` or ``Name(field=..., ...)``."""
    if not isinstance(value, str):
        return False
    text = value.strip()
    return bool(_DEFAULT_REPR.match(text) or _FIELDS_REPR.match(text))


def repr_reason(span: Any, side: str, key: str, value: str) -> str:
    """The not-scorable reason of a span whose ``side`` (input/output) is only a repr."""
    return (f"not scorable: the {side} of span {getattr(span, 'name', '')!r} (instrumentation "
            f"{scope_name(span) or 'unknown'!r}) is only a Python object's repr in {key} "
            f"({value[:80]!r}): there is no text a user wrote or read to judge")
