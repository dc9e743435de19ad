"""The reader of CrewAI, traced through OpenInference (``openinference-instrumentation-crewai``,
with OpenInference's OpenAI or litellm instrumentation for the model calls, as its docs pair
them: CrewAI's own spans include no ``LLM`` span).

Spans per ``crew.kickoff(inputs=...)``: the crew's root ``CHAIN`` (``Crew_<id>.kickoff``: the
inputs in ``input.value``, the ``CrewOutput`` as JSON in ``output.value``), an ``AGENT`` span per
task an agent executes (``<role>._execute_core``: the agent's configuration in ``input.value``,
the ``TaskOutput`` as JSON in ``output.value``), ``TOOL`` spans (``<tool>.run``) and the model
calls beneath. A ``CrewOutput`` / ``TaskOutput`` is read as the text a user reads, its ``raw``;
a task's question is its ``description`` (the task as the agent got it, inputs filled in). The
crew's root wraps its agents' spans: each task's agent span is judged by default
(``ScoringRule(score_wrappers=True)`` judges the crew too, on its inputs and final ``raw``).
The raw JSON stays on the span for custom extractors (``ScoringRule(inputs=...)``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracescore._core import semconv as sc

from ._base import Content, attributes_of, scope_name
from ._values import ABSENT, Truncated, error_of, unwrap
from .genai import complete, truncated_reason
from .openinference import OpenInferenceReader, _value

SCOPE = "openinference.instrumentation.crewai"


class CrewAIReader(OpenInferenceReader):
    """Reads OpenInference spans of CrewAI."""

    name = "crewai"
    scope = SCOPE

    def accepts(self, span: Any) -> bool:
        return (sc.OPENINFERENCE_SPAN_KIND in attributes_of(span)
                and scope_name(span) == SCOPE)

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
        answer: Any = ABSENT
        question: Any = ABSENT
        if isinstance(value_out, Mapping):
            raw = value_out.get("raw")
            if isinstance(raw, str) and raw.strip():
                answer = raw
            description = value_out.get("description")
            if isinstance(description, str) and description.strip():
                question = description  # a TaskOutput: the task as the agent got it
        elif isinstance(value_out, str):
            answer = value_out
        if question is ABSENT and value_in is not ABSENT:
            unwrapped = unwrap(value_in)
            if isinstance(unwrapped, str):
                question = unwrapped
            elif isinstance(unwrapped, Mapping) and "agent" not in unwrapped:
                question = unwrapped  # the crew's inputs, several of them
        return complete(span, question, answer, error,
                        f"a task's description or the crew's inputs in {sc.INPUT_VALUE} / the "
                        f"'raw' text of the CrewOutput or TaskOutput in {sc.OUTPUT_VALUE}",
                        self.hint, output_optional=error is not None)
