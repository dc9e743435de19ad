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

A chat model's span is also made the current span while the model is called (LangChain's
callbacks leave it unattached), so that a client library instrumented as well (``tracescore_
openai``) makes its span a child of it, in the same trace, instead of the root of a trace of
its own. tracescore then judges one span per model call, the client's (the innermost of the
nest, see docs/frameworks.md).

Token usage: OpenInference records the token counts (``llm.token_count.*``) and the model on
each LLM span itself; tracescore keeps them as they are (it records no second copy) and
counts them in its per-agent token and cost metrics (docs/monitoring.md).

Example:
    >>> import tracescore, tracescore_langchain
    >>> tracescore.configure(scoring=[tracescore.ScoringRule(scorer=..., on="agent")])
    >>> tracescore_langchain.instrument()
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["instrument", "uninstrument"]

_instrumentor: Any = None
_patched: list[tuple[Any, str, Any]] = []


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
    _nest_model_calls(instrumentor)


def uninstrument() -> None:
    """Turn the instrumentation off again (nothing happens when it is off)."""
    global _instrumentor
    while _patched:
        owner, name, original = _patched.pop()
        setattr(owner, name, original)
    if _instrumentor is not None:
        _instrumentor.uninstrument()
        _instrumentor = None


def _nest_model_calls(instrumentor: Any) -> None:
    """Make a chat model's span current while the model runs (``BaseChatModel``'s
    ``_generate_with_cache`` / ``_agenerate_with_cache``, which ``invoke``, ``batch`` and the
    agents call; a direct ``stream()`` is not covered). The context is attached and detached
    in the same call, so it cannot leak past it, whatever happens in between."""
    from langchain_core.language_models.chat_models import BaseChatModel
    from opentelemetry import context, trace

    def current(run_manager: Any) -> Any:
        run_id = getattr(run_manager, "run_id", None)
        try:
            span = instrumentor.get_span(run_id) if run_id is not None else None
        except Exception:  # the instrumentor's internals moved: no nesting, no harm
            span = None
        return None if span is None else context.attach(trace.set_span_in_context(span))

    original = BaseChatModel._generate_with_cache
    original_async = BaseChatModel._agenerate_with_cache

    @functools.wraps(original)
    def generate(self: Any, *args: Any, **kwargs: Any) -> Any:
        token = current(kwargs.get("run_manager"))
        try:
            return original(self, *args, **kwargs)
        finally:
            if token is not None:
                context.detach(token)

    @functools.wraps(original_async)
    async def agenerate(self: Any, *args: Any, **kwargs: Any) -> Any:
        token = current(kwargs.get("run_manager"))
        try:
            return await original_async(self, *args, **kwargs)
        finally:
            if token is not None:
                context.detach(token)

    _patched.extend([(BaseChatModel, "_generate_with_cache", original),
                     (BaseChatModel, "_agenerate_with_cache", original_async)])
    BaseChatModel._generate_with_cache = generate  # type: ignore[method-assign]
    BaseChatModel._agenerate_with_cache = agenerate  # type: ignore[method-assign]
