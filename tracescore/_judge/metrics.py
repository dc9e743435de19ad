"""What a judge call cost and how it went: its USD price, and the GenAI client metrics
(``gen_ai.client.operation.duration``, ``gen_ai.client.token.usage``) of the configured
instance.

Neither may ever fail a judge call: an unpriced model has no cost, and a metrics error is
dropped.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

from tracescore._core import semconv as sc
from tracescore._pipeline import runtime as _runtime

from . import prices
from .direct import ChatResponse
from .failures import ERROR_TYPES, classify
from .loading import load_litellm

# The metric attribute that says which transport made a judge call (``direct``/``litellm``).
TRANSPORT_ATTRIBUTE = sc.TRACESCORE_JUDGE_TRANSPORT

# litellm's provider prefixes -> the GenAI conventions' gen_ai.provider.name values (the
# prefix itself where the conventions name it the same way or not at all).
_PROVIDER_NAMES = {
    "bedrock": "aws.bedrock",
    "bedrock_converse": "aws.bedrock",
    "azure": "azure.ai.openai",
    "azure_ai": "azure.ai.inference",
    "gemini": "gcp.gemini",
    "vertex_ai": "gcp.vertex_ai",
    "watsonx": "ibm.watsonx.ai",
    "mistral": "mistral_ai",
    "xai": "x_ai",
}

# Models litellm has no price for: asking again costs ~1.3 ms per call for the same answer.
_UNPRICED: set[str] = set()


def cost(response: Any) -> float | None:
    """USD cost of a chat completion, or ``None`` when litellm has no price for its model.

    A ``ChatResponse`` (direct transport, child process) comes priced already, from litellm's
    price table read without litellm (``prices``); only a litellm response asks litellm.
    """
    if isinstance(response, ChatResponse):
        return response.cost
    # litellm has usually priced the response already; computing it again costs ~0.5 ms, and
    # raising for an unpriced model ~1.3 ms, on every call.
    hidden = getattr(response, "_hidden_params", None)
    if isinstance(hidden, dict) and isinstance(hidden.get("response_cost"), (int, float)):
        return float(hidden["response_cost"])
    model = str(getattr(response, "model", "") or "")
    if model in _UNPRICED:
        return None
    try:
        value = load_litellm().completion_cost(completion_response=response)
    except Exception:  # noqa: BLE001 - litellm raises for models it has no price for
        if model and len(_UNPRICED) < 1024:
            _UNPRICED.add(model)
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def record_call(model: str, duration: float, response: Any, error: BaseException | None,
                transport: str = "litellm") -> None:
    """Record one call with the GenAI client metrics of the runtime the scoring job runs for
    (a service's own, else the configured instance's), if it has telemetry.

    Args:
        model: the judge's litellm model string.
        duration: seconds the call took.
        response: the chat completion (ignored when ``error`` is set).
        error: what the call raised, or ``None``.
        transport: ``direct`` or ``litellm``, recorded as ``tracescore.judge.transport``.
    """
    telemetry = _runtime.current().telemetry
    if telemetry is None:
        return
    try:
        attrs: dict[str, Any] = {
            sc.GEN_AI_OPERATION_NAME: sc.OPERATION_CHAT,
            sc.GEN_AI_PROVIDER_NAME: provider_name(model),
            sc.GEN_AI_REQUEST_MODEL: model,
            TRANSPORT_ATTRIBUTE: transport,
        }
        input_tokens = output_tokens = 0
        if error is not None:
            attrs[sc.ERROR_TYPE] = ERROR_TYPES.get(classify(error), "judge_error")
        else:
            response_model = getattr(response, "model", None)
            if isinstance(response_model, str) and response_model:
                attrs[sc.GEN_AI_RESPONSE_MODEL] = response_model
            usage = getattr(response, "usage", None)
            input_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
            output_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        telemetry.record_judge_call(attrs, duration, input_tokens, output_tokens)
    except Exception:
        pass  # metrics must never fail a judge call


@functools.lru_cache(maxsize=256)
def provider_name(model: str) -> str:
    """``gen_ai.provider.name`` of a judge: the conventions' name for litellm's provider
    prefix (``openai/...`` -> ``openai``, ``bedrock/...`` -> ``aws.bedrock``).

    Examples:
        >>> provider_name("bedrock/anthropic.claude-3")
        'aws.bedrock'
    """
    prefix = model.split("/", 1)[0] if "/" in model else ""
    if not prefix:
        # litellm's own table names the provider of a bare model name; litellm itself is
        # asked only where it is imported already (an out-of-process parent never imports it).
        price = prices.lookup(model)
        prefix = price.provider if price is not None and price.provider else ""
    if not prefix and "litellm" in sys.modules:
        try:
            prefix = str(load_litellm().get_llm_provider(model)[1])
        except Exception:
            prefix = ""
    prefix = prefix or "unknown"
    return _PROVIDER_NAMES.get(prefix, prefix)
