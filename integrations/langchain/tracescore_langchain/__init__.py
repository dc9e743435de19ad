"""Score LangChain (and LangGraph) apps with tracescore.

``instrument()`` turns on OpenInference's LangChain instrumentation (``openinference-
instrumentation-langchain``) with content capture on. Every runnable then becomes a span: the
chain a request enters by is a ``CHAIN`` span at the trace's local root, which tracescore's rules
select with ``on="agent"``; chat models are ``LLM`` spans (``on="llm"``), retrievers
``RETRIEVER`` spans whose documents (``retrieval.documents.N.document.content``) context scorers
such as faithfulness judge, tools ``TOOL`` spans. It registers nothing else: tracescore reads the
spans as it reads any OpenInference span.

Why OpenInference: it hooks LangChain's own callback manager, so every runnable, retriever, tool
and chat model of any provider is covered (LangGraph included), it is released steadily along
LangChain (0.1.80 when this was written) and records inputs, outputs, messages and retrieved
documents by default, in the shape Phoenix renders. The OpenTelemetry GenAI project's
``opentelemetry-instrumentation-genai-langchain`` is a beta (1.3b0) whose content capture is off
by default and whose message shapes follow conventions still marked experimental; OpenLLMetry's
``opentelemetry-instrumentation-langchain`` writes each runnable's input and output as one JSON
blob. tracescore reads all three (README, "Spans from other instrumentations").

Example:
    >>> import tracescore, tracescore_langchain
    >>> tracescore.configure(scoring=[tracescore.ScoringRule(scorer=..., on="agent")])
    >>> tracescore_langchain.instrument()
"""

from __future__ import annotations

from typing import Any

__all__ = ["instrument", "uninstrument"]

_instrumentor: Any = None


def instrument(tracer_provider: Any = None, *, capture_content: bool = True) -> None:
    """Turn on OpenInference's LangChain instrumentation for tracescore.

    Args:
        tracer_provider: the ``TracerProvider`` whose processors see the spans; default: the
            one ``tracescore.configure()`` set up (the global provider).
        capture_content: record inputs, outputs, messages and retrieved documents on the spans
            (scoring needs them), whatever ``OPENINFERENCE_HIDE_*`` says. False hides them:
            such spans are then reported *not scorable*, with the reason.

    Calling it again re-instruments with the new arguments.

    Example:
        >>> tracescore_langchain.instrument()
    """
    global _instrumentor
    from openinference.instrumentation import TraceConfig
    from openinference.instrumentation.langchain import LangChainInstrumentor

    uninstrument()
    hide = not capture_content
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider, config=TraceConfig(
        hide_inputs=hide, hide_outputs=hide, hide_input_messages=hide,
        hide_output_messages=hide))
    _instrumentor = instrumentor


def uninstrument() -> None:
    """Turn the instrumentation off again (nothing happens when it is off)."""
    global _instrumentor
    if _instrumentor is not None:
        _instrumentor.uninstrument()
        _instrumentor = None
