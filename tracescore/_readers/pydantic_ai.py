"""The reader of pydantic-ai's own instrumentation (``Agent.instrument_all()`` or
``Agent(instrument=...)``, instrumentation scope ``pydantic-ai``).

pydantic-ai follows the OTel GenAI conventions on its model-request spans (``chat {model}``:
``gen_ai.input.messages`` / ``gen_ai.output.messages``) and tool spans (``execute_tool {name}``:
``gen_ai.tool.call.arguments`` / ``.result``), which the GenAI reader's functions read. Its agent
run span (``invoke_agent {name}``, ``agent run`` in older releases) carries no GenAI message
attributes: the run's messages are in ``pydantic_ai.all_messages`` (the GenAI message JSON,
history included) and the output in ``final_result`` (the text, or the structured output as
JSON). Content is recorded unless ``InstrumentationSettings(include_content=False)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracescore._core import semconv as sc

from ._base import Content, attributes_of, scope_name
from ._turns import last_user_text
from ._values import ABSENT, Truncated, error_of, json_value
from .genai import GenAIReader, chat_messages, complete, truncated_reason, withheld

SCOPE = "pydantic-ai"
ALL_MESSAGES = "pydantic_ai.all_messages"
FINAL_RESULT = "final_result"

CONTENT_HINT = ("pydantic-ai records content unless its instrumentation is set up with "
                "InstrumentationSettings(include_content=False): leave include_content at its "
                "default (True) in Agent.instrument_all(...) / Agent(instrument=...)")


class PydanticAIReader(GenAIReader):
    """Reads spans of the ``pydantic-ai`` instrumentation scope."""

    name = "pydantic-ai"
    volatile = False

    def accepts(self, span: Any) -> bool:
        return scope_name(span) == SCOPE and sc.GEN_AI_OPERATION_NAME in attributes_of(span)

    def read(self, span: Any, kind: str | None) -> Content:
        if kind != "agent":
            content = super().read(span, kind)
            if content.missing is not None and "OTEL_INSTRUMENTATION_GENAI" in content.missing:
                # The GenAI switches do not apply: pydantic-ai's own does.
                head = content.missing.split("; the OTel GenAI", 1)[0]
                return content._replace(missing=f"{head}; {CONTENT_HINT}")
            return content
        attrs = attributes_of(span)
        error = error_of(span)
        try:
            messages = json_value(attrs, ALL_MESSAGES)
            result = json_value(attrs, FINAL_RESULT, must_be_json=False)
        except Truncated as cut:
            return Content(error=error, missing=truncated_reason(span, cut))
        question: Any = ABSENT
        if isinstance(messages, list) and not withheld(messages):
            question = last_user_text(chat_messages(_without_tool_results(messages)))
            if question is None:
                question = ABSENT
        answer: Any = ABSENT
        if result is not ABSENT and result is not None:
            answer = result if isinstance(result, str) else _structured(result)
        return complete(span, question, answer, error,
                        f"the last user message of {ALL_MESSAGES} / {FINAL_RESULT}",
                        CONTENT_HINT, output_optional=error is not None)


def _without_tool_results(messages: list[Any]) -> list[Any]:
    """Messages without their tool results (format versions before 6 send them as ``user``
    messages of ``tool_call_response`` parts): what remains of a user message is the user's."""
    kept = []
    for message in messages:
        if isinstance(message, Mapping) and isinstance(message.get("parts"), list):
            parts = [p for p in message["parts"]
                     if not (isinstance(p, Mapping) and p.get("type") == "tool_call_response")]
            if not parts:
                continue
            message = {**message, "parts": parts}
        kept.append(message)
    return kept


def _structured(value: Any) -> Any:
    """A structured output as the judge reads it: a one-field object is its field's text."""
    if isinstance(value, Mapping) and len(value) == 1:
        (inner,) = value.values()
        if isinstance(inner, str):
            return inner
    return value
