"""The reader of LangChain and LangGraph, traced through OpenInference
(``openinference-instrumentation-langchain``: a LangChain callback handler, one span per run).

What LangGraph's spans mean, beyond their OpenInference kinds:

- A compiled graph's ``invoke`` is the trace's root ``CHAIN`` (``LangGraph`` by default): the
  agent's turn. Its input and output are the graph's state, ``{"messages": [...]}`` for the
  message graphs the LangGraph docs build: the question is the last user message of the input,
  the answer the last AI message of the output.
- Each node run is a span with ``langgraph_node`` in its ``metadata``; OpenInference marks every
  run whose name contains "agent" as ``AGENT`` (the prebuilt ReAct graph's ``agent`` node), but
  a node is one step of the turn, not a turn: never an agent here.
- Chat models are ``LLM`` spans with flattened messages (``llm.input_messages``, ...); a model
  turn that only asked for tools has tool calls and no content.

LangChain chains keep the OpenInference reader's rule (the root ``CHAIN`` is the turn, when a
model call ended beneath it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tracescore._core import semconv as sc

from ._base import Content, attributes_of, scope_name
from ._turns import last_user_text, tool_only_reason
from ._values import ABSENT, Truncated, error_of
from .genai import complete, truncated_reason
from .openinference import OpenInferenceReader, _value

SCOPE = "openinference.instrumentation.langchain"

_ROLES = {"human": "user", "user": "user", "ai": "assistant", "assistant": "assistant",
          "AIMessage": "assistant", "HumanMessage": "user", "AIMessageChunk": "assistant",
          "system": "system", "SystemMessage": "system", "tool": "tool",
          "ToolMessage": "tool"}


class LangChainReader(OpenInferenceReader):
    """Reads OpenInference spans of LangChain and LangGraph."""

    name = "langchain"
    scope = SCOPE

    def accepts(self, span: Any) -> bool:
        return (sc.OPENINFERENCE_SPAN_KIND in attributes_of(span)
                and scope_name(span) == SCOPE)

    def kind(self, span: Any) -> str | None:
        kind = super().kind(span)
        if kind == "agent" and _graph_node(span):
            return None
        return kind

    def read(self, span: Any, kind: str | None) -> Content:
        if kind != "agent":
            return super().read(span, kind)
        attrs = attributes_of(span)
        error = error_of(span)
        try:
            value_in = _value(attrs, sc.INPUT_VALUE)
            value_out = _value(attrs, sc.OUTPUT_VALUE)
        except Truncated as cut:
            return Content(error=error, missing=truncated_reason(span, cut))
        if not (_is_state(value_in) or _is_state(value_out)):
            if _graph_root(span) and isinstance(value_out, Mapping) and not (
                    len(value_out) == 1 and isinstance(next(iter(value_out.values())), str)):
                # A graph whose state has no "messages": which field is the answer is the
                # app's to say, not ours to guess (a custom extractor reads the raw state).
                return Content(error=error, missing=(
                    f"not scorable: span {getattr(span, 'name', '')!r} (instrumentation "
                    f"{SCOPE!r}) is a LangGraph run whose state in {sc.OUTPUT_VALUE} has no "
                    f"'messages' list (found keys: {', '.join(sorted(map(str, value_out)))[:200]}):"
                    " no answer to read; decorate the function that invokes the graph with "
                    "@tracescore.agent (its question and return value are judged), or keep "
                    "the answer in 'messages'"))
            return super().read(span, kind)
        question = last_user_text(state_messages(value_in)) if _is_state(value_in) else None
        if question is None and value_in is not ABSENT and not _is_state(value_in):
            question = value_in if isinstance(value_in, str) else None
        answer: Any = ABSENT
        if _is_state(value_out):
            last = _last_ai(state_messages(value_out))
            if last is not None:
                text, calls = last
                if text:
                    answer = text
                elif calls and question is not None:
                    return Content(question, None, error,
                                   tool_only_reason(span, calls, turn="graph's last model turn"),
                                   tuple(calls))
        return complete(span, ABSENT if question is None else question, answer, error,
                        f"the last user message of the state's messages in {sc.INPUT_VALUE} / "
                        f"the last AI message of {sc.OUTPUT_VALUE}", self.hint,
                        output_optional=error is not None)


def _graph_node(span: Any) -> bool:
    metadata = attributes_of(span).get(sc.OI_METADATA)
    return isinstance(metadata, str) and '"langgraph_node"' in metadata


def _graph_root(span: Any) -> bool:
    metadata = attributes_of(span).get(sc.OI_METADATA)
    return isinstance(metadata, str) and '"langgraph"' in metadata and not _graph_node(span)


def _is_state(value: Any) -> bool:
    return isinstance(value, Mapping) and isinstance(value.get("messages"), list)


def state_messages(state: Any) -> list[dict[str, Any]]:
    """A graph state's ``messages`` as ``[{"role", "content", "tool_calls"}]``, whatever
    LangChain serialisation they come in (``{"role", "content"}``, ``{"type", "data"}``, or the
    ``lc`` constructor form)."""
    found = []
    for raw in state.get("messages") or []:
        if not isinstance(raw, Mapping):
            continue
        body: Mapping[str, Any] = raw
        role = raw.get("role")
        if isinstance(raw.get("data"), Mapping):  # {"type": "ai", "data": {...}}
            body, role = raw["data"], raw.get("type")
        elif isinstance(raw.get("kwargs"), Mapping):  # {"lc": 1, "id": [..., "AIMessage"]}
            body = raw["kwargs"]
            ids = raw.get("id")
            role = body.get("type") or (ids[-1] if isinstance(ids, list) and ids else None)
        elif role is None:
            role = raw.get("type")
        content = body.get("content")
        if isinstance(content, list):  # content blocks: their text
            content = "\n".join(str(b.get("text", "")) for b in content
                                if isinstance(b, Mapping) and b.get("type") == "text")
        found.append({"role": _ROLES.get(str(role), str(role)), "content": content,
                      "tool_calls": body.get("tool_calls") or []})
    return found


def _last_ai(messages: Sequence[Mapping[str, Any]]) -> tuple[str, list[dict[str, Any]]] | None:
    for message in reversed(messages):
        if message.get("role") == "assistant":
            text = message.get("content")
            calls = [{"name": str(c.get("name", "")), "arguments": c.get("args", c.get(
                "arguments"))} for c in message.get("tool_calls") or [] if isinstance(c, Mapping)]
            return (text if isinstance(text, str) and text.strip() else "", calls)
    return None
