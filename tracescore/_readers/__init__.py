"""Readers: one module per span source, each turning an ended span into what scoring needs.

A reader answers four questions about a span it accepts, all cheap, all on the thread that ended
the span:

- ``accepts(span)``: is this span from my source? (instrumentation scope, attributes)
- ``kind(span)``: which normalised kind is it (``agent``/``retrieval``/``tool``/``llm``), or None;
- ``observe(span, kind, buffer)``: put what later spans of the trace need into the trace buffer
  (a retrieval's documents, a tool call);
- ``read(span, kind)``: the input, output and error to score, or why there is no content.

A reader may also have ``refine(span, kind, beneath) -> kind`` (the kind once what ended
beneath the span is known: ``_turns``), ``explicit = True`` (its spans are never wrappers:
tracescore's own) and ``documents_hint`` (what its framework does not trace, for the reason a
context scorer gives when a trace has no retrieval span).

The scoring processor asks the registered readers in order and the first that accepts a span
reads it: tracescore's own, pydantic-ai's, OpenInference (a span of a framework traced through
it, the OpenAI Agents SDK, LlamaIndex, LangChain/LangGraph, CrewAI, DSPy, goes on to that
framework's reader by instrumentation scope: ``OPENINFERENCE_FRAMEWORKS``), OpenLLMetry, the
OTel GenAI conventions; the generic reader, last, accepts every span. Adding a source is one
new module with one ``Reader`` class, added to ``READERS`` (or, for a framework traced through
OpenInference, to ``OPENINFERENCE_FRAMEWORKS`` under its scope). A span made by
tracescore's decorators in this process is read through its decorator's ``CallRecord``
(``tracescore._instrument.calls``) instead, which has the full values.
"""

from __future__ import annotations

from typing import Any

from ._base import Content, Reader, attributes_of, scope_name
from .crewai import CrewAIReader
from .dspy import DSPyReader
from .genai import GenAIReader
from .generic import GenericReader
from .langchain import LangChainReader
from .llama_index import LlamaIndexReader
from .openai_agents import OpenAIAgentsReader
from .openinference import OpenInferenceReader
from .openllmetry import OpenLLMetryReader
from .pydantic_ai import PydanticAIReader
from .tracescore import TracescoreReader

__all__ = ["OPENINFERENCE_FRAMEWORKS", "READERS", "Content", "Reader", "attributes_of",
           "reader_for", "scope_name"]

# tracescore's own spans also carry OpenInference and GenAI attributes: its reader goes first.
# OpenLLMetry before GenAI: traceloop's decorator spans may carry gen_ai.* too. Each accepts()
# is one or two dictionary look-ups, so a span no reader wants (an HTTP or database-driver span)
# costs a handful of look-ups and reaches the generic reader, whose kind is None. A runtime
# (``tracescore._pipeline.runtime.Runtime.readers``) holds the tuple its processor asks; this is the
# default one.
READERS: tuple[Reader, ...] = (
    TracescoreReader(), PydanticAIReader(), OpenInferenceReader(), OpenLLMetryReader(),
    GenAIReader(), GenericReader())

# The frameworks traced through OpenInference, each a narrower OpenInference reader: a span the
# OpenInference reader accepts goes to its framework's reader by instrumentation scope, one
# look-up instead of one accepts() per framework on every span.
OPENINFERENCE_FRAMEWORKS: dict[str, OpenInferenceReader] = {
    reader.scope: reader for reader in (OpenAIAgentsReader(), LlamaIndexReader(),
                                        LangChainReader(), CrewAIReader(), DSPyReader())}


def reader_for(span: Any, readers: tuple[Reader, ...] = READERS) -> Reader:
    """The first of ``readers`` that accepts ``span`` (the last, generic one at worst); for
    the OpenInference reader, its framework's reader when there is one."""
    for reader in readers:
        try:
            if reader.accepts(span):
                if type(reader) is OpenInferenceReader:
                    return OPENINFERENCE_FRAMEWORKS.get(scope_name(span), reader)
                return reader
        except Exception:  # a broken reader must not cost the span its export
            continue
    return readers[-1]
