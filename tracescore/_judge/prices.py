"""Model prices from the table that ships inside the litellm wheel, read without importing
litellm.

litellm keeps its price map as ``litellm/model_prices_and_context_window_backup.json`` in its
package directory; ``importlib.util.find_spec`` finds that directory without running litellm's
``__init__`` (2.5-6 s and 3,000 modules). The file is ~3.5 MB, so it is read once per model
asked about (on a worker thread for the direct transport) and only that model's prices are
kept: the judge never holds the whole table.

This is the table litellm itself uses with ``LITELLM_OFFLINE_MODE=true`` (or
``LITELLM_LOCAL_MODEL_COST_MAP=true``). Without those, litellm fetches a newer map at import;
tracescore never goes on the network for prices, so a model newer than the installed litellm
is unpriced here (cost ``None``) until litellm is upgraded. Prices a user registered with
``litellm.register_model`` are seen only by the litellm transport.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
from typing import Any, NamedTuple

TABLE_FILE = "model_prices_and_context_window_backup.json"


class Price(NamedTuple):
    """USD per token of one model, and the litellm provider the table names for it."""

    input: float
    output: float
    cache_read: float | None
    provider: str


def table_path() -> str | None:
    """The price table's path inside the installed litellm, or None when there is none."""
    try:
        spec = importlib.util.find_spec("litellm")  # locates, does not import
    except (ImportError, ValueError):
        return None
    for directory in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(directory, TABLE_FILE)
        if os.path.isfile(path):
            return path
    return None


@functools.lru_cache(maxsize=64)
def lookup(model: str) -> Price | None:
    """The price of ``model`` (a litellm model string, with or without its provider prefix),
    read from the table once per model; None when the table has no usable entry.

    Examples:
        >>> lookup("openai/gpt-4o-mini").input > 0
        True
    """
    path = table_path()
    if path is None or not model:
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            table: dict[str, Any] = json.load(handle)
    except (OSError, ValueError):
        return None
    for key in _keys(model):
        entry = table.get(key)
        if isinstance(entry, dict):
            price = _price(entry)
            if price is not None:
                return price
    return None


def _keys(model: str) -> list[str]:
    # litellm's own order: the string as given, then the name without the provider prefix.
    keys = [model]
    if "/" in model:
        keys.append(model.split("/", 1)[1])
    return keys


def _price(entry: dict[str, Any]) -> Price | None:
    inp, out = entry.get("input_cost_per_token"), entry.get("output_cost_per_token")
    if not isinstance(inp, (int, float)) or not isinstance(out, (int, float)):
        return None
    cache = entry.get("cache_read_input_token_cost")
    return Price(float(inp), float(out),
                 float(cache) if isinstance(cache, (int, float)) else None,
                 str(entry.get("litellm_provider") or ""))


def cost(price: Price, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> float:
    """USD cost of one call: input tokens (cached ones at the cache-read price when the table
    has one) plus output tokens, each times its per-token price, as litellm computes it for a
    plain chat completion.

    Examples:
        >>> cost(Price(1e-6, 2e-6, None, "openai"), 1000, 100)
        0.0012
    """
    cached = min(max(cached_tokens, 0), prompt_tokens) if price.cache_read is not None else 0
    total = (prompt_tokens - cached) * price.input + completion_tokens * price.output
    if cached:
        total += cached * (price.cache_read or 0.0)
    return round(total, 12)
