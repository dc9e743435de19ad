"""Token usage, response ids and cost of a model call, read from what the call returned.

``from_response`` reads the response objects of the OpenAI SDK (a chat ``ChatCompletion`` and a
Responses API ``Response``), litellm (``ModelResponse``, the chat shape) and the Anthropic SDK
(``Message``), typed or as plain dicts, by duck typing: no SDK is imported. ``StreamUsage``
does the same for a stream of chunks (an OpenAI chat stream whose last chunk carries ``usage``
when the request set ``stream_options={"include_usage": True}``; Anthropic's
``message_start`` / ``message_delta`` events; the Responses API's ``response.completed``
event). ``attributes`` turns a ``Usage`` into span attributes in both vocabularies tracescore
writes: the OTel GenAI conventions' ``gen_ai.usage.*`` / ``gen_ai.response.*`` and
OpenInference's ``llm.token_count.*`` (what Phoenix shows).

Input tokens follow the GenAI conventions: ``gen_ai.usage.input_tokens`` counts every input
token, cached ones included (Anthropic reports uncached, cache-read and cache-write tokens
apart: they are added up), with the cached part also in ``gen_ai.usage.cache_read.input_tokens``
and ``gen_ai.usage.cache_creation.input_tokens``.

Cost comes from a price table that is data (``prices.json`` beside this module, list prices
per million tokens, with its date and source), overlaid by the user's own file
(``ContentOptions.price_file`` / ``TRACESCORE_PRICE_FILE``). A call is priced only when every
token it used has a price: an unknown model, a cache read or write the table has no price for,
a prompt above the table's ``max_input_tokens`` (long-context pricing), a long-lived cache
write (one hour, 12 hours) or a non-standard service tier (batch, flex, priority) gives no
cost at all, never a guess.

Only the standard library, OpenTelemetry's context API, ``_semconv`` and ``_errors`` are
imported. Nothing here raises
from ``from_response``, ``StreamUsage.add`` or ``attributes``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import stat
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from opentelemetry import context as otel_context

from tracescore._core import semconv as sc
from tracescore._core.errors import ConfigurationError
from tracescore._core.otel_compat import attribute_dict, own_attributes

logger = logging.getLogger("tracescore")

#: The OpenTelemetry context key under which an agent span's name is kept while it runs, so a
#: model call inside it (a decorated one, or another instrumentation's span) is counted for it.
AGENT_KEY = otel_context.create_key(sc.CONTEXT_AGENT)

PRICES_PATH = Path(__file__).with_name("prices.json")

# Service tiers billed at list price; any other (batch, flex, priority, scale) is not priced.
_STANDARD_TIERS = frozenset({"default", "standard", "auto", "standard_only"})

# A token count is read only from 0 to 2**53 (exact as a float, far past any real call): a
# negative or larger count is not reported (one past 2**63 made OTLP's encoder drop the
# attribute and fail every later export of the cumulative token histogram).
MAX_TOKENS = 1 << 53
MAX_TEXT = 256  # characters of a model name, response id, tier or finish reason kept
MAX_FINISH_REASONS = 128  # one per choice
MAX_PRICE_FILE_BYTES = 16 << 20



class Usage:
    """What one model call reported about itself.

    Attributes:
        input_tokens: every input token, cached ones included (None: not reported).
        output_tokens: output tokens, reasoning included (None: not reported).
        cache_read: input tokens read from the provider's prompt cache (0 when none).
        cache_write: input tokens written to the prompt cache (0 when none).
        cache_write_long: True when some cache writes were billed at a longer-lived rate
            (Anthropic's one hour, OpenAI's 12 hours), which the price table does not hold.
        model: the model that answered (``gen_ai.response.model``), or None.
        response_id: the provider's id of the response, or None.
        finish_reasons: why generation stopped, one per choice, or None.
        service_tier: the tier the provider billed, when it says.
    """

    __slots__ = ("input_tokens", "output_tokens", "cache_read", "cache_write", "cache_write_long",
                 "model", "response_id", "finish_reasons", "service_tier")

    def __init__(self) -> None:
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.cache_read = 0
        self.cache_write = 0
        self.cache_write_long = False
        self.model: str | None = None
        self.response_id: str | None = None
        self.finish_reasons: list[str] | None = None
        self.service_tier: str | None = None

    def empty(self) -> bool:
        """Nothing was read."""
        return (self.input_tokens is None and self.output_tokens is None and self.model is None
                and self.response_id is None and not self.finish_reasons)


def _get(obj: Any, key: str) -> Any:
    if obj is None:
        return None
    kind = type(obj)
    if kind is dict:  # the common cases first: a parsed JSON dict, a typed object
        return obj.get(key)
    fields = getattr(obj, "__dict__", None)
    if fields is not None and key in fields:
        return fields[key]
    if hasattr(kind, "__pydantic_fields__"):
        # A pydantic model (the SDKs' types): fields live in its __dict__, extra ones in
        # __pydantic_extra__; asking getattr for an absent name would raise inside pydantic,
        # which costs more than reading the whole response.
        extra = getattr(obj, "__pydantic_extra__", None)
        return extra.get(key) if isinstance(extra, dict) else None
    if isinstance(obj, Mapping):
        return obj.get(key)
    try:
        return getattr(obj, key, None)
    except Exception:
        return None


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    else:
        return None
    return number if 0 <= number <= MAX_TOKENS else None


def _str(value: Any) -> str | None:
    if not (isinstance(value, str) and value):
        # enums of typed SDKs (a finish reason or tier as a str subclass is caught above)
        value = getattr(value, "value", None)
        if not (isinstance(value, str) and value):
            return None
    return value if len(value) <= MAX_TEXT else value[:MAX_TEXT] + "..."


def from_response(result: Any) -> Usage | None:
    """The usage, model, id and finish reasons of a model call's return value, or None when it
    is not a response this module knows (a string, a dict without these fields, ...).

    Args:
        result: an OpenAI ``ChatCompletion`` or ``Response``, a litellm ``ModelResponse``, an
            Anthropic ``Message``, or any of them as a dict (``model_dump()`` / parsed JSON).
    """
    if result is None or isinstance(result, (str, bytes, int, float, list, tuple)):
        return None
    try:
        usage = Usage()
        _read(result, usage)
        return None if usage.empty() else usage
    except Exception:
        logger.debug("tracescore could not read a response's usage", exc_info=True)
        return None


def _read(obj: Any, out: Usage) -> None:
    """Fill ``out`` from one response or one stream chunk."""
    model = _str(_get(obj, "model"))
    if model:
        out.model = model
    rid = _str(_get(obj, "id"))
    if rid:
        out.response_id = rid
    tier = _str(_get(obj, "service_tier"))
    if tier:
        out.service_tier = tier
    choices = _get(obj, "choices")
    if isinstance(choices, (list, tuple)) and choices:
        reasons = [r for r in (_str(_get(c, "finish_reason"))
                               for c in choices[:MAX_FINISH_REASONS]) if r]
        if reasons:
            out.finish_reasons = reasons
    stop = _str(_get(obj, "stop_reason"))  # Anthropic
    if stop:
        out.finish_reasons = [stop]
    status = _str(_get(obj, "status"))  # the Responses API
    if status and _get(obj, "object") == "response":
        if status == "completed":
            out.finish_reasons = ["stop"]
        elif status == "incomplete":
            reason = _str(_get(_get(obj, "incomplete_details"), "reason"))
            out.finish_reasons = [reason or status]
    usage = _get(obj, "usage")
    if usage is not None:
        _read_usage(usage, out, anthropic=stop is not None or _get(obj, "type") == "message")


def _read_usage(usage: Any, out: Usage, *, anthropic: bool) -> None:
    raw_prompt = _get(usage, "prompt_tokens")
    if raw_prompt is not None:  # the chat shape (OpenAI, litellm): prompt_tokens counts cached
        out.input_tokens = _int(raw_prompt)
        out.output_tokens = _int(_get(usage, "completion_tokens"))
        details = _get(usage, "prompt_tokens_details")
        out.cache_read = _int(_get(details, "cached_tokens")) or 0
        out.cache_write = (_int(_get(details, "cache_write_tokens"))
                           or _int(_get(details, "cache_creation_tokens"))  # litellm's name
                           or _int(_get(usage, "cache_creation_input_tokens")) or 0)
        out.cache_write_long = _long_writes(details)
        return
    inputs = _int(_get(usage, "input_tokens"))
    outputs = _int(_get(usage, "output_tokens"))
    read = _int(_get(usage, "cache_read_input_tokens"))
    write = _int(_get(usage, "cache_creation_input_tokens"))
    if anthropic or read is not None or write is not None:
        # Anthropic: input_tokens are the uncached ones; the cache's are reported apart.
        if inputs is not None or read or write:
            out.input_tokens = (inputs or 0) + (read or 0) + (write or 0)
        out.cache_read = read or 0
        out.cache_write = write or 0
        long_writes = _int(_get(_get(usage, "cache_creation"), "ephemeral_1h_input_tokens"))
        out.cache_write_long = bool(long_writes)
        tier = _str(_get(usage, "service_tier"))
        if tier:
            out.service_tier = tier
    else:  # the Responses API: input_tokens counts cached ones
        out.input_tokens = inputs
        details = _get(usage, "input_tokens_details")
        out.cache_read = _int(_get(details, "cached_tokens")) or 0
        out.cache_write = _int(_get(details, "cache_write_tokens")) or 0
        out.cache_write_long = _long_writes(details)
    if outputs is not None:
        out.output_tokens = outputs


def _long_writes(details: Any) -> bool:
    """Whether OpenAI billed some cache writes at its longer (12-hour) retention rate."""
    return bool(_int(_get(_get(details, "cache_write_tokens_details"), "ttl_12h_tokens")))


class StreamUsage:
    """Usage gathered from a stream's chunks, one ``add`` per chunk (cheap: a few look-ups).

    Chat chunks (OpenAI, litellm) give the id, model and finish reasons as they come and the
    usage on the last chunk when the request asked for it; Anthropic's ``message_start`` gives
    the id, model and input usage, each ``message_delta`` the stop reason and the output tokens
    so far; the Responses API's ``response.completed`` (or ``.incomplete``) event carries the
    whole response.
    """

    __slots__ = ("usage", "_anthropic_input")

    def __init__(self) -> None:
        self.usage = Usage()
        self._anthropic_input: Any = None

    def add(self, chunk: Any) -> None:
        """Read one chunk; anything unknown is ignored. Never raises."""
        if chunk is None or isinstance(chunk, (str, bytes)):
            return
        try:
            kind = _get(chunk, "type")
            if kind == "message_start":
                message = _get(chunk, "message")
                _read(message, self.usage)
                self._anthropic_input = _get(message, "usage")
            elif kind == "message_delta":
                stop = _str(_get(_get(chunk, "delta"), "stop_reason"))
                if stop:
                    self.usage.finish_reasons = [stop]
                delta = _get(chunk, "usage")
                if delta is not None:
                    self._anthropic_delta(delta)
            elif isinstance(kind, str) and kind.startswith("response."):
                response = _get(chunk, "response")
                if response is not None:
                    _read(response, self.usage)
            elif kind is None or _get(chunk, "object") == "chat.completion.chunk":
                _read(chunk, self.usage)
        except Exception:
            logger.debug("tracescore could not read a stream chunk's usage", exc_info=True)

    def _anthropic_delta(self, delta: Any) -> None:
        # message_delta's counts are cumulative: the last one holds. Input counts appear there
        # too in recent API versions; else message_start's stand.
        merged = Usage()
        _read_usage(self._anthropic_input or {}, merged, anthropic=True)
        later = Usage()
        _read_usage(delta, later, anthropic=True)
        u = self.usage
        u.output_tokens = later.output_tokens if later.output_tokens is not None \
            else merged.output_tokens
        if _int(_get(delta, "input_tokens")) is not None:
            u.input_tokens, u.cache_read, u.cache_write = (later.input_tokens, later.cache_read,
                                                           later.cache_write)
        else:
            u.input_tokens, u.cache_read, u.cache_write = (merged.input_tokens, merged.cache_read,
                                                           merged.cache_write)
        u.cache_write_long = later.cache_write_long or merged.cache_write_long

    def result(self) -> Usage | None:
        """What the stream reported, or None when nothing was read."""
        u = self.usage
        if self._anthropic_input is not None and u.input_tokens is None:
            _read_usage(self._anthropic_input, u, anthropic=True)
        return None if u.empty() else u


# --- prices -------------------------------------------------------------------------------------
class Price:
    """One model's list prices in USD per million tokens (see ``prices.json``)."""

    __slots__ = ("input", "output", "cache_read", "cache_write", "max_input_tokens")

    def __init__(self, entry: Mapping[str, Any]) -> None:
        self.input = float(entry["input"])
        self.output = float(entry["output"])
        self.cache_read = _opt_float(entry.get("cache_read"))
        self.cache_write = _opt_float(entry.get("cache_write"))
        limit = entry.get("max_input_tokens")
        self.max_input_tokens = int(limit) if limit is not None else None


def _finite(value: float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an int past a float's range
        return False


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _check_entry(name: str, entry: Any, origin: str) -> None:
    if not isinstance(entry, Mapping):
        raise ConfigurationError(f"price table {origin}: {name!r} takes an object of prices")
    for key in ("input", "output"):
        if key not in entry:
            raise ConfigurationError(f"price table {origin}: {name!r} has no {key!r} price")
    for key, value in entry.items():
        if key not in ("input", "output", "cache_read", "cache_write", "max_input_tokens"):
            raise ConfigurationError(
                f"price table {origin}: {name!r} has an unknown field {key!r} (input, output, "
                "cache_read, cache_write, max_input_tokens)")
        if (value is None and key not in ("input", "output")):
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 \
                or not _finite(value):
            raise ConfigurationError(
                f"price table {origin}: {name}.{key} takes a number >= 0 (finite), got "
                f"{str(value)[:40]!r}")


def _load(path: str | os.PathLike[str]) -> dict[str, Price]:
    """The ``models`` of one price file (JSON, or TOML when it ends in ``.toml``).

    Raises:
        ConfigurationError: the file cannot be read or an entry is malformed.
    """
    origin = os.fspath(path)
    try:
        # A named pipe would block configure() and a device never ends: a regular file only,
        # opened without blocking and read up to a bound.
        fd = os.open(origin, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with open(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise ConfigurationError(f"price table {origin} is not a regular file")
            raw = fh.read(MAX_PRICE_FILE_BYTES + 1)
        if len(raw) > MAX_PRICE_FILE_BYTES:
            raise ConfigurationError(f"price table {origin} is larger than "
                                     f"{MAX_PRICE_FILE_BYTES >> 20} MiB")
        if origin.endswith(".toml"):
            try:
                import tomllib  # type: ignore[import-not-found,unused-ignore]
            except ModuleNotFoundError:  # Python 3.10
                import tomli as tomllib  # type: ignore[import-not-found,no-redef,unused-ignore]
            data = tomllib.loads(raw.decode("utf-8"))
        else:
            data = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError, ImportError, RecursionError) as exc:
        raise ConfigurationError(
            f"price table {origin} could not be read: {type(exc).__name__}: "
            f"{' '.join(str(exc).split())[:200]}") from None
    models = data.get("models") if isinstance(data, Mapping) else None
    if not isinstance(models, Mapping):
        raise ConfigurationError(
            f"price table {origin}: takes an object with \"models\": {{name: {{\"input\": ..., "
            "\"output\": ...}}}} (USD per million tokens)")
    table = {}
    for name, entry in models.items():
        _check_entry(str(name), entry, origin)
        table[str(name)] = Price(entry)
    return table


_tables: dict[str | None, dict[str, Price]] = {}
_tables_lock = threading.Lock()


def price_table(path: str | None = None) -> dict[str, Price]:
    """The prices tracescore uses: the shipped table, overlaid by ``path``'s entries (a model
    named in both takes the user's prices). Loaded once per path.

    Raises:
        ConfigurationError: ``path`` cannot be read or is malformed.
    """
    table = _tables.get(path)
    if table is not None:
        return table
    with _tables_lock:
        table = _tables.get(path)
        if table is None:
            table = dict(_load(PRICES_PATH))
            if path:
                table.update(_load(path))
            _tables[path] = table
    return table


_warned: set[str] = set()


def prices_or_shipped(path: str | None) -> dict[str, Price]:
    """``price_table(path)``, or the shipped table alone (with one warning per path) when the
    user's file cannot be read: for the decorators, which never raise. Never raises."""
    try:
        return price_table(path)
    except Exception as exc:  # noqa: BLE001 - a bad file costs its prices, nothing else
        with _tables_lock:
            if path not in _warned:
                _warned.add(str(path))
                logger.warning("%s; tracescore prices model calls with its own table only "
                               "(the application is unaffected)", exc)
            table = dict(_load(PRICES_PATH))
            _tables[path] = table
        return table


def lookup(table: Mapping[str, Price], model: str | None) -> Price | None:
    """The price of ``model``: its exact name, else the name after a ``provider/`` prefix
    (``openai/gpt-4o-mini``). Dated snapshots are listed on their own; no other guess is made."""
    if not model:
        return None
    price = table.get(model)
    if price is None and "/" in model:
        price = table.get(model.rsplit("/", 1)[1])
    return price


def cost(usage: Usage, price: Price | None) -> tuple[float, float] | None:
    """``(input cost, output cost)`` in USD, or None when the call cannot be priced exactly
    (see the module's docstring). Formula: uncached input x ``input`` + cache reads x
    ``cache_read`` + cache writes x ``cache_write`` and output x ``output``, per million."""
    if price is None or usage.input_tokens is None or usage.output_tokens is None:
        return None
    if usage.service_tier is not None and usage.service_tier not in _STANDARD_TIERS:
        return None
    if price.max_input_tokens is not None and usage.input_tokens > price.max_input_tokens:
        return None
    if usage.cache_write_long:
        return None
    read, write = usage.cache_read, usage.cache_write
    if (read and price.cache_read is None) or (write and price.cache_write is None):
        return None
    uncached = usage.input_tokens - read - write
    if uncached < 0:
        return None
    spent_in = uncached * price.input + read * (price.cache_read or 0.0) \
        + write * (price.cache_write or 0.0)
    return spent_in / 1e6, usage.output_tokens * price.output / 1e6


def attributes(usage: Usage, spent: tuple[float, float] | None) -> dict[str, Any]:
    """Span attributes for ``usage`` and its cost (GenAI and OpenInference names)."""
    attrs: dict[str, Any] = {}
    inputs, outputs = usage.input_tokens, usage.output_tokens
    if inputs is not None:
        attrs[sc.GEN_AI_USAGE_INPUT_TOKENS] = inputs
        attrs[sc.LLM_TOKEN_COUNT_PROMPT] = inputs
    if outputs is not None:
        attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS] = outputs
        attrs[sc.LLM_TOKEN_COUNT_COMPLETION] = outputs
    if inputs is not None and outputs is not None:
        attrs[sc.LLM_TOKEN_COUNT_TOTAL] = inputs + outputs
    if usage.cache_read:
        attrs[sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] = usage.cache_read
        attrs[sc.LLM_TOKEN_COUNT_CACHE_READ] = usage.cache_read
    if usage.cache_write:
        attrs[sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS] = usage.cache_write
        attrs[sc.LLM_TOKEN_COUNT_CACHE_WRITE] = usage.cache_write
    if usage.model:
        attrs[sc.GEN_AI_RESPONSE_MODEL] = usage.model
    if usage.response_id:
        attrs[sc.GEN_AI_RESPONSE_ID] = usage.response_id
    if usage.finish_reasons:
        attrs[sc.GEN_AI_RESPONSE_FINISH_REASONS] = list(usage.finish_reasons)
    if spent is not None:
        total = spent[0] + spent[1]
        attrs[sc.GEN_AI_USAGE_COST] = total
        attrs[sc.LLM_COST_PROMPT] = spent[0]
        attrs[sc.LLM_COST_COMPLETION] = spent[1]
        attrs[sc.LLM_COST_TOTAL] = total
    return attrs


def current_agent() -> str | None:
    """The name of the agent span running in the current context, if any."""
    value = otel_context.get_value(AGENT_KEY)
    return value if isinstance(value, str) else None


# --- model calls of other instrumentations (OpenInference, the GenAI conventions) ----------------
# Parents of model-call spans whose usage was counted already: a model span wrapping another
# (LangChain's LLM span around the OpenAI client's, an @tracescore.llm around an instrumented
# SDK call) is the same call, counted once, at the innermost span. Bounded: oldest forgotten.
_counted: dict[int, None] = {}
_MAX_COUNTED = 4096


# Other instrumentations' model spans found wrapping a counted one: no cost attribute at export.
_wrappers: dict[int, None] = {}
# Model calls ``record_counted`` priced from the table, by span id: (price file, cost), taken
# by ``cost_attributes`` when the same span is exported (looked up once, not twice). Bounded
# as ``_counted``.
_priced: dict[int, tuple[str | None, tuple[float, float] | None]] = {}


def _note(table: dict[int, Any], span_id: int, value: Any = None) -> None:
    table[span_id] = value
    if len(table) > _MAX_COUNTED:
        with contextlib.suppress(KeyError, RuntimeError, StopIteration):
            del table[next(iter(table))]


def note_counted(parent_span_id: int | None) -> None:
    """Remember that a model call under ``parent_span_id`` was counted."""
    if parent_span_id:
        _note(_counted, parent_span_id)


def counted_beneath(span_id: int | None) -> bool:
    """Whether a model call beneath ``span_id`` was counted (forgets it: asked once)."""
    return span_id is not None and _counted.pop(span_id, _MISSING) is not _MISSING


_MISSING = object()


def from_attributes(attrs: Mapping[str, Any]) -> tuple[Usage, float | None] | None:
    """The usage another instrumentation recorded on a model-call span (GenAI
    ``gen_ai.usage.*``, else OpenInference's ``llm.token_count.*``), and the cost it recorded
    itself (``gen_ai.usage.cost`` or ``llm.cost.total``) if any; None without token counts."""
    def first(*keys: str) -> Any:
        for key in keys:
            value = attrs.get(key)
            if value is not None:
                return value
        return None

    inputs = _int(first(sc.GEN_AI_USAGE_INPUT_TOKENS, sc.LLM_TOKEN_COUNT_PROMPT))
    outputs = _int(first(sc.GEN_AI_USAGE_OUTPUT_TOKENS, sc.LLM_TOKEN_COUNT_COMPLETION))
    if inputs is None and outputs is None:
        return None
    usage = Usage()
    usage.input_tokens, usage.output_tokens = inputs, outputs
    usage.cache_read = _int(first(sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
                                  sc.LLM_TOKEN_COUNT_CACHE_READ)) or 0
    usage.cache_write = _int(first(sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
                                   sc.LLM_TOKEN_COUNT_CACHE_WRITE)) or 0
    usage.model = _str(first(sc.GEN_AI_RESPONSE_MODEL, sc.LLM_MODEL_NAME,
                             sc.GEN_AI_REQUEST_MODEL))
    recorded = first(sc.GEN_AI_USAGE_COST, sc.LLM_COST_TOTAL)
    spent = None
    if isinstance(recorded, (int, float)) and not isinstance(recorded, bool):
        with contextlib.suppress(OverflowError):
            spent = float(recorded)
        if spent is not None and not (math.isfinite(spent) and spent >= 0):
            spent = None  # not a cost: counted as none
    return usage, spent


NOT_COUNTED: Any = _MISSING
"""What ``counted_on_end`` returns for a span whose usage is not counted."""


def counted_on_end(context: Any, parent: Any, attrs: Any) -> Any:
    """The part of counting another instrumentation's model-call span that must run as it
    ends, on its thread: whether it carries token counts, the note for a model span around it
    (``note_counted``: a wrapper of a counted call is not counted again, and the decorators'
    ``@llm`` around an instrumented SDK call ask this at their own end), and the agent it ran
    under (a context value). The rest (``record_counted``) runs off the caller's thread.

    Args:
        context, parent, attrs: the ended span's ``SpanContext``, its parent's (or None) and
            its attributes (a ``Mapping``), as ``otel_compat.ended_parts`` reads them; the span
            is of any instrumentation but tracescore's.

    Returns:
        The agent's name (``str`` or None) when the span's usage is to be counted, else
        ``NOT_COUNTED``. Never raises.
    """
    try:
        if not attrs or not _has_tokens(attrs):
            return _MISSING
        # ``note_counted``, ``counted_beneath`` and ``current_agent`` written out: this runs on
        # the thread that ends every model-call span.
        if parent is not None and parent.span_id:
            _note(_counted, parent.span_id)
        if context is not None and _counted.pop(context.span_id, _MISSING) is not _MISSING:
            _note(_wrappers, context.span_id)  # priced at its innermost span only
            return _MISSING
        agent = otel_context.get_current().get(AGENT_KEY)
        return agent if isinstance(agent, str) else None
    except Exception:
        logger.debug("tracescore could not count a model call span's usage", exc_info=True)
        return _MISSING


def _has_tokens(attrs: Mapping[str, Any]) -> bool:
    """Whether ``from_attributes`` finds token counts in ``attrs`` (a few look-ups): of each
    count, the first of its two names that is present decides, as there."""
    for first, second in _TOKEN_KEYS:
        value = attrs.get(first)
        if value is None:
            value = attrs.get(second)
        if value is not None and _int(value) is not None:
            return True
    return False


_TOKEN_KEYS = ((sc.GEN_AI_USAGE_INPUT_TOKENS, sc.LLM_TOKEN_COUNT_PROMPT),
               (sc.GEN_AI_USAGE_OUTPUT_TOKENS, sc.LLM_TOKEN_COUNT_COMPLETION))


def record_counted(span: Any, agent: str | None, telemetry: Any,
                   price_file: str | None) -> None:
    """Count a model-call span of another instrumentation that ``counted_on_end`` accepted
    in the per-agent token and cost metrics of ``telemetry`` (its own recorded cost, else
    priced from the table of ``price_file``: None for the shipped one), under ``agent``. Runs
    on any thread. Never raises."""
    try:
        # The plain dict behind an ended span's attributes: a dozen look-ups at C speed.
        attrs = attribute_dict(own_attributes(span), frozen_only=True) or span.attributes
        found = from_attributes(attrs) if attrs else None
        if found is None:
            return
        usage, spent_total = found
        spent: tuple[float, float] | None = None
        if spent_total is not None:
            spent = (spent_total, 0.0)
        else:
            spent = cost(usage, lookup(prices_or_shipped(price_file), usage.model))
            context = span.context
            if context is not None:
                _note(_priced, context.span_id, (price_file, spent))
        telemetry.record_llm_call(
            usage, spent, agent=agent,
            request_model=attrs.get(sc.GEN_AI_REQUEST_MODEL),
            provider=attrs.get(sc.GEN_AI_PROVIDER_NAME) or attrs.get(sc.LLM_PROVIDER)
            or attrs.get(sc.GEN_AI_SYSTEM))
    except Exception:
        logger.debug("tracescore could not count a model call span's usage", exc_info=True)


def cost_attributes(span: Any, price_file: str | None) -> dict[str, Any] | None:
    """The cost attributes (``gen_ai.usage.cost``, ``llm.cost.*``) for another
    instrumentation's model-call span that carries token counts and a model but no cost of its
    own; None when it has a cost already, wraps another model span of the same call (which
    carries the cost), or cannot be priced exactly. Never raises."""
    try:
        # The plain dict behind an ended span's attributes (looked up at C speed).
        attrs = attribute_dict(own_attributes(span), frozen_only=True) or span.attributes
        context = span.context
        if context is not None and _wrappers.pop(context.span_id, _MISSING) is not _MISSING:
            return None
        if attrs.get(sc.GEN_AI_USAGE_COST) is not None or attrs.get(sc.LLM_COST_TOTAL) is not None:
            return None
        known = _priced.pop(context.span_id, None) if context is not None else None
        if known is not None and known[0] == price_file:
            spent = known[1]  # priced as it was counted
        else:
            found = from_attributes(attrs)
            if found is None:
                return None
            usage = found[0]
            spent = cost(usage, lookup(prices_or_shipped(price_file), usage.model))
        if spent is None:
            return None
        total = spent[0] + spent[1]
        return {sc.GEN_AI_USAGE_COST: total, sc.LLM_COST_PROMPT: spent[0],
                sc.LLM_COST_COMPLETION: spent[1], sc.LLM_COST_TOTAL: total}
    except Exception:
        logger.debug("tracescore could not price a model call span", exc_info=True)
        return None
