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
- **The agent turn, from structure.** A trace's local root whose subtree holds model calls and
  no agent span is the turn of the request it served (an HTTP handler, a pipeline, a framework
  root no convention marks as an agent), whatever its instrumentation: any span of any source
  that wraps the model calls of one request. A root beneath which only spans that name a model
  without saying what they are ended (``gen_ai.request.model`` with no operation) is a turn too,
  with a reason saying what is missing.
- **Turns read from model calls.** An agent turn is judged on the user's question and the text
  the user got. What its own span says comes first when it is text; what it does not say, or
  says only as a structure (a workflow's state, a function's arguments, a pipeline's data), is
  read from the model calls beneath it: the question is the last user message the first call
  received (or the one value of the span's input that message quotes), the answer the last
  call's final text (or the span's structured output when that text is not in it).
  Readers that know better for their framework (tracescore's own decorators) keep their values.
- **Tool-call-only turns.** A model turn that only asked for tools has no answer to judge: its
  reason says so, and tool-call scorers get its calls.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from tracescore._core import semconv as sc
from tracescore._pipeline.trace_buffer import (
    NOTHING_BENEATH,
    UNMARKED_MODEL,
    Beneath,
    TraceBuffer,
)

from ._base import Content, Reader, attributes_of, scope_name

TOOL_ONLY = "this model turn only called tools"

_MODEL_KEYS = (sc.GEN_AI_REQUEST_MODEL, sc.GEN_AI_SYSTEM, sc.GEN_AI_PROVIDER_NAME,
               sc.LLM_MODEL_NAME)
_ROLES = {"human": "user", "ai": "assistant", "model": "assistant", "bot": "assistant",
          "developer": "system", "tool-response": "tool", "tool_response": "tool",
          "function": "tool", "ipython": "tool", "tool-call": "assistant",
          "tool_call": "assistant"}

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
    explicit = getattr(reader, "explicit", False)
    if (kind is None and not explicit and (parent is None or span.parent.is_remote)
            and "agent" not in beneath.kinds
            and ("llm" in beneath.kinds or UNMARKED_MODEL in beneath.kinds)):
        kind = "agent"  # the root-most span holding the request's model calls
    elif (kind is None and not explicit and (parent is None or span.parent.is_remote)
            and not beneath.kinds and getattr(reader, "name", "") == "generic"
            and names_a_model(span)):
        # A trace that is one model call no convention marks: its turn, said to be so.
        kind = "agent"
        beneath = beneath._replace(kinds=frozenset({UNMARKED_MODEL}), unmarked=span)
    refine = getattr(reader, "refine", None)
    if refine is not None:
        with contextlib.suppress(Exception):  # a broken reader keeps the kind it gave
            kind = refine(span, kind, beneath)
    if parent is not None:
        passed = kind
        if kind is None and getattr(reader, "name", "") == "generic" and names_a_model(span):
            passed = UNMARKED_MODEL
        buffer.pass_up(ctx.trace_id, parent, passed, beneath, span)
    reader.observe(span, kind, buffer)
    wrapper = kind is not None and kind in beneath.kinds and not explicit
    return Routed(kind, wrapper, beneath)


def unmarked_reason(span: Any, beneath: bool = True) -> str:
    """What was found and what is missing when ``span`` names a model but no convention marks
    it a model call: the span, its instrumentation, the model attributes it has, the marks it
    lacks and how to add them. ``beneath``: the span is beneath the turn (else it is the turn)."""
    attrs = attributes_of(span)
    named = ", ".join(f"{key}={str(attrs[key])[:80]!r}" for key in _MODEL_KEYS if key in attrs)
    return (f"{'beneath it, ' if beneath else ''}span {getattr(span, 'name', '')!r} "
            f"(instrumentation {scope_name(span) or 'unknown'!r}) names a model ({named}) "
            "without saying what it is: no convention's mark of a model call "
            "(gen_ai.operation.name chat/text_completion/generate_content, "
            "openinference.span.kind LLM, llm.request.type chat/completion) and no messages "
            "tracescore can read. Turn on the instrumentation's GenAI conventions, or decorate "
            "the model call with @tracescore.llm")


def names_a_model(span: Any) -> bool:
    """True when a span names a model (``gen_ai.request.model``, ``gen_ai.system``,
    ``gen_ai.provider.name``, ``llm.model_name``); asked of spans no reader recognised (the
    generic reader's), it marks a model call its instrumentation did not mark with any
    convention's operation or kind."""
    attrs = attributes_of(span)
    return any(key in attrs for key in _MODEL_KEYS)


def finish(span: Any, kind: str | None, content: Content, beneath: Beneath,
           reader_for: Callable[[Any], Reader], reader: Reader | None = None) -> Content:
    """``content`` completed from the trace: an agent turn's question and answer where its own
    span does not carry them as text, from the model calls beneath it (see the module
    docstring); ``reader_for`` finds their readers (the registry's); ``reader``, the span's
    own, keeps its values when it is ``explicit`` (tracescore's decorators)."""
    if kind != "agent":
        return content
    own_missing = content.missing is not None and content.input is None \
        and content.output is None
    explicit = getattr(reader, "explicit", False)
    if explicit and not own_missing:
        return content
    first, last = beneath.first_call, beneath.last_call
    if first is None or last is None:
        if not own_missing:
            return content
        if UNMARKED_MODEL in beneath.kinds:
            found = beneath.unmarked
            why = ("spans beneath it name a model without saying what they are"
                   if found is None else unmarked_reason(found, found is not span))
            return content._replace(missing=f"{content.missing}; {why}")
        return content._replace(missing=(
            f"{content.missing}; and no model call (LLM span) ended beneath it to read the "
            "turn from"))
    opened = reader_for(first).read(first, "llm")
    closed = opened if last is first else reader_for(last).read(last, "llm")
    asked = last_user_text(opened.input)
    question = _question(_structure(content.input), asked)
    if question is None:
        if content.input is not None and content.missing is None:
            question = content.input  # a structure the model calls do not explain
        else:
            why = opened.missing or f"its input carries no user message ({opened.input!r:.80})"
            return content._replace(missing=(
                f"{content.missing or 'not scorable: no question'}; its first model call, span "
                f"{getattr(first, 'name', '')!r}, has no question to read: {why}"))
    said = closed.output if _is_text(closed.output) else None
    answer = _answer(_structure(content.output), said)
    if answer is None:
        if closed.tool_calls:
            return Content(question, None, content.error, tool_only_reason(
                span, closed.tool_calls, turn="agent turn's last model turn"),
                closed.tool_calls)
        if content.error is not None:
            return Content(question, None, content.error)
        return content._replace(missing=(
            f"{content.missing or 'not scorable: no answer'}; its last model call, span "
            f"{getattr(last, 'name', '')!r}, has no answer to read: "
            f"{closed.missing or 'no output'}"))
    return Content(question, answer, content.error)


def _is_text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip()) and not looks_like_repr(value)


def _question(own: Any, asked: str | None) -> str | None:
    """The user's question: the span's own input when it is text (or chat messages), else the
    longest text value of its input that the first model call's user message quotes, else that
    message; None when neither says."""
    if _is_text(own):
        return str(own)
    if isinstance(own, Sequence) and not isinstance(own, str):
        found = last_user_text(own)
        if found is not None:
            return found
    if asked is None:
        return None
    quoted = [leaf for leaf in _leaves(own) if leaf.strip() and leaf in asked]
    return max(quoted, key=len) if quoted else asked


def _answer(own: Any, said: str | None) -> Any:
    """The text the user got: the span's own output when it is text (the last model call's when
    both are the same text), the last call's text when the span has none or holds that text in a
    structure (also inside a repr there), else the span's own structured output; None when
    neither says."""
    if _is_text(own):
        return said if said is not None and said.strip() == str(own).strip() else own
    if own is None:
        return said
    if said is not None and (not isinstance(own, (Mapping, Sequence))
                             or any(said.strip() in leaf for leaf in _leaves(own))):
        return said
    return own


def _structure(value: Any) -> Any:
    """A JSON object or array recorded as text without its mime type, decoded; any other
    value as it is."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        with contextlib.suppress(ValueError):
            decoded = json.loads(value)
            if isinstance(decoded, (Mapping, list)):
                return decoded
    return value


def _leaves(value: Any, depth: int = 0) -> list[str]:
    """The strings inside a JSON-like value (bounded: 6 levels, 200 strings)."""
    if isinstance(value, str):
        return [value]
    found: list[str] = []
    if depth > 6:
        return found
    items = value.values() if isinstance(value, Mapping) else (
        value if isinstance(value, Sequence) else ())
    for item in items:
        found.extend(_leaves(item, depth + 1))
        if len(found) >= 200:
            break
    return found[:200]


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
    messages, roles as ``role_of`` names them), or the input itself when it is a string."""
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, Sequence):
        for message in reversed(value):
            if isinstance(message, Mapping) and role_of(message.get("role")) == "user":
                text = message.get("content")
                if isinstance(text, str) and text.strip():
                    return text
    return None


def role_of(value: Any) -> str:
    """A message role as the conventions name it (``system``, ``user``, ``assistant``,
    ``tool``), from the many spellings instrumentations record: ``human``/``ai`` (LangChain),
    ``ChatRole.USER`` (an enum's str), ``developer``, ``model`` (Gemini), ``tool-response``
    (smolagents), ``function``; any other role lower-cased."""
    text = str(value or "").strip().lower().rsplit(".", 1)[-1]
    return _ROLES.get(text, text)


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
