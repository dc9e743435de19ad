"""The reader of the OpenAI Agents SDK's runs, traced through OpenInference
(``openinference-instrumentation-openai-agents``: a tracing processor the SDK calls for each of
its own spans; the SDK's documentation lists it among its external tracing processors, and the
SDK has no OpenTelemetry exporter of its own).

Per run the instrumentation makes an ``AGENT`` span for the workflow (the trace's root, named
after the run's workflow, ``Agent workflow`` by default), an ``AGENT`` span per agent that took
part (named after the agent), ``turn`` ``CHAIN`` spans, ``generation`` (or ``response``)
``LLM`` spans and function ``TOOL`` spans. The agent and workflow spans carry no
``input.value`` / ``output.value``: the content is on the LLM spans, so an agent's turn is read
from the model calls beneath it (``_turns.finish``), and the workflow span, which wraps the
agents' spans, is not judged by default (``ScoringRule(score_wrappers=True)`` judges it too).
"""

from __future__ import annotations

from typing import Any

from tracescore._core import semconv as sc

from ._base import Content, attributes_of, scope_name
from .openinference import OpenInferenceReader

SCOPE = "openinference.instrumentation.openai_agents"


class OpenAIAgentsReader(OpenInferenceReader):
    """Reads OpenInference spans of the OpenAI Agents SDK."""

    name = "openai-agents"
    scope = SCOPE

    def accepts(self, span: Any) -> bool:
        return (sc.OPENINFERENCE_SPAN_KIND in attributes_of(span)
                and scope_name(span) == SCOPE)

    def read(self, span: Any, kind: str | None) -> Content:
        attrs = attributes_of(span)
        if kind == "agent" and sc.INPUT_VALUE not in attrs and sc.OUTPUT_VALUE not in attrs:
            return Content(missing=(
                f"not scorable: span {getattr(span, 'name', '')!r} (instrumentation {SCOPE!r}) "
                "is an AGENT span, on which OpenInference's OpenAI Agents instrumentation "
                "records no input.value or output.value by design (it is not a content "
                "switch): tracescore reads an agent's turn from the model calls (LLM "
                "'generation' / 'response' spans) beneath it"))
        return super().read(span, kind)
