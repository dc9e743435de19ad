"""Score the litellm calls of an app with tracescore.

``instrument()`` turns on OpenInference's litellm instrumentation (``openinference-
instrumentation-litellm``) with content capture on, so that every ``litellm.completion`` /
``acompletion`` / ``responses`` call becomes an ``LLM`` span that tracescore's rules select with
``on="llm"``. It registers nothing else: tracescore reads the spans as it reads any
OpenInference span.

tracescore's judge calls models through litellm too. Its calls run with OpenTelemetry
instrumentation suppressed, which OpenInference's wrappers honour: the judge's calls make no
span, so they are neither exported nor scored (``tests/test_litellm.py`` checks it).

Why OpenInference rather than litellm's own OpenTelemetry callback (``litellm.callbacks =
["otel"]``): the instrumentor uses the ``TracerProvider`` it is given (tracescore's), so the
spans pass through tracescore's processors and join the app's traces, and it is turned off
again with ``uninstrument()``; litellm's callback is set up through litellm's own callback list
and environment variables. OpenInference's package is released
steadily (0.1.51 when this was written), records messages, tool calls and token counts by
default, and writes the same shape as OpenInference's OpenAI and LangChain instrumentations, so
one reader serves all three. The OTel GenAI project publishes no litellm instrumentation;
OpenLLMetry's ``opentelemetry-instrumentation-litellm`` also exists, and tracescore reads its
spans too (README, "Spans from other instrumentations").

Token usage: OpenInference records the token counts (``llm.token_count.*``) and the model on
each LLM span itself; tracescore keeps them as they are (it records no second copy) and
counts them in its per-agent token and cost metrics (docs/monitoring.md).

Example:
    >>> import tracescore, tracescore_litellm
    >>> tracescore.configure(scoring=[tracescore.ScoringRule(scorer=..., on="llm")])
    >>> tracescore_litellm.instrument()
"""

from __future__ import annotations

from typing import Any

__all__ = ["instrument", "uninstrument"]

_instrumentor: Any = None


def instrument(tracer_provider: Any = None, *, capture_content: bool = True) -> None:
    """Turn on OpenInference's litellm instrumentation for tracescore.

    Args:
        tracer_provider: the ``TracerProvider`` whose processors see the spans; default: the
            one ``tracescore.configure()`` set up (the global provider).
        capture_content: record prompts and answers on the spans (scoring needs them), whatever
            ``OPENINFERENCE_HIDE_*`` says. False hides them: such spans are then reported *not
            scorable*, with the reason.

    Calling it again re-instruments with the new arguments.

    Example:
        >>> tracescore_litellm.instrument()
    """
    global _instrumentor
    from openinference.instrumentation import TraceConfig
    from openinference.instrumentation.litellm import LiteLLMInstrumentor

    uninstrument()
    hide = not capture_content
    instrumentor = LiteLLMInstrumentor()
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
