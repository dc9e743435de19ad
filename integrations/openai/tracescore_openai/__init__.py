"""Score the OpenAI SDK calls of an app with tracescore.

``instrument()`` turns on OpenInference's OpenAI instrumentation (``openinference-
instrumentation-openai``) with content capture on, so that every ``chat.completions`` /
``responses`` call becomes an ``LLM`` span that tracescore's rules select with ``on="llm"``.
It registers nothing else: tracescore reads the spans as it reads any OpenInference span.

Why OpenInference and not the OTel GenAI ``opentelemetry-instrumentation-openai-v2``: it records
content by default and in a stable shape (flattened messages, ``input.value``/``output.value``)
that Phoenix renders, it covers the Responses API, streaming and tool calls, and its 0.1 line
has kept its attribute names; the GenAI one is a beta whose package is being renamed
(``-genai-openai``), whose content is opt-in through an environment variable read at import,
and whose message shape follows conventions still marked experimental. tracescore reads both
(see the README, "Spans from other instrumentations").

Token usage: OpenInference records the token counts (``llm.token_count.*``) and the model on
each LLM span itself; tracescore keeps them as they are (it records no second copy) and
counts them in its per-agent token and cost metrics (docs/monitoring.md).

Example:
    >>> import tracescore, tracescore_openai
    >>> tracescore.configure(scoring=[tracescore.ScoringRule(scorer=..., on="llm")])
    >>> tracescore_openai.instrument()
"""

from __future__ import annotations

from typing import Any

__all__ = ["instrument", "uninstrument"]

_instrumentor: Any = None


def instrument(tracer_provider: Any = None, *, capture_content: bool = True) -> None:
    """Turn on OpenInference's OpenAI instrumentation for tracescore.

    Args:
        tracer_provider: the ``TracerProvider`` whose processors see the spans; default: the
            one ``tracescore.configure()`` set up (the global provider).
        capture_content: record prompts and answers on the spans (scoring needs them). False
            hides them, as ``OPENINFERENCE_HIDE_INPUTS``/``_OUTPUTS`` would: such spans are then
            reported *not scorable*, with the reason.

    Calling it again re-instruments with the new arguments.

    Example:
        >>> tracescore_openai.instrument()
    """
    global _instrumentor
    from openinference.instrumentation import TraceConfig
    from openinference.instrumentation.openai import OpenAIInstrumentor

    uninstrument()
    hide = not capture_content
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider,
                            config=TraceConfig(hide_inputs=hide, hide_outputs=hide))
    _instrumentor = instrumentor


def uninstrument() -> None:
    """Turn the instrumentation off again (nothing happens when it is off)."""
    global _instrumentor
    if _instrumentor is not None:
        _instrumentor.uninstrument()
        _instrumentor = None
