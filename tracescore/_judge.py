"""The LLM judge: the only module that talks to litellm.

litellm is imported lazily, on the first judge call (it takes seconds to import), so
``import tracescore`` and ``import tracescore.scorers`` stay light.

A judge call asks for structured output: ``response_format`` of type ``json_schema`` whose
``json_schema.name`` is the step's name (``answer_relevancy_statements``, ...). When the provider
rejects that with HTTP 400, the judge falls back to JSON mode (``{"type": "json_object"}``) and
then to no ``response_format`` at all, with the schema written into the system prompt under a
``Schema name: <name>`` line; the fallback is remembered per ``Judge`` instance.

Every litellm call runs on one event loop, in a daemon thread ("tracescore-judge"), whatever
loop the caller runs on: litellm binds its HTTP clients and its logging worker to the loop that
first used them, and breaks (or leaks sockets) when a process calls it from several loops, as
``Scorer.run()``, the scoring worker and users' own ``asyncio.run`` would. The loop's pending
tasks are cancelled at interpreter exit.

Each ``Judge`` keeps a bounded LRU cache of identical requests (``cache_size``, default 1,024;
0 disables it) and lets concurrent identical requests share one call in flight, so that two
scorers asking the same question about the same span (faithfulness and hallucination both
extract the claims of the answer) pay for it once. Only validated answers are cached.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import copy
import dataclasses
import functools
import hashlib
import json
import os
import random
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, NamedTuple, TypeVar
from urllib.parse import urlsplit, urlunsplit

from tracescore import _state
from tracescore._errors import (
    ConfigurationError,
    InvalidJudgeOutputError,
    JudgeError,
    JudgeRateLimitedError,
    JudgeTimeoutError,
    JudgeUnavailableError,
    NoJudgeConfiguredError,
)

if TYPE_CHECKING:
    from types import ModuleType

    from pydantic import BaseModel

__all__ = [
    "Judge",
    "JudgeCacheInfo",
    "JudgeReply",
    "check_model_spec",
    "resolve_judge",
    "run_blocking",
]

T = TypeVar("T")

# pydantic is imported lazily too: ``import tracescore`` (which imports this module for
# ``tracescore.Judge``) stays free of it.
SchemaT = TypeVar("SchemaT", bound="BaseModel")

DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_RETRIES = 3
DEFAULT_RETRY_BACKOFF = 1.0
DEFAULT_CACHE_SIZE = 1024
_MAX_BACKOFF = 20.0
# Keeps exception messages and repair prompts bounded whatever the provider sends back.
_MAX_ERROR_CHARS = 500
_MAX_ECHO_CHARS = 4000

# litellm arguments the judge owns: a user passing them would break structured output.
_RESERVED_KWARGS = frozenset(
    {"model", "messages", "response_format", "stream", "n", "tools", "tool_choice", "num_retries"}
)
_SECRET_MARKERS = ("key", "token", "secret", "password", "credential", "auth")
_HEADER_KWARGS = frozenset({"headers", "extra_headers"})

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

# _classify's kinds -> the error.type of the events (ScoringError.error_type).
_CALL_ERROR_TYPES = {"timeout": "timeout", "rate_limited": "rate_limited",
                     "unavailable": "judge_unavailable", "error": "judge_error"}

_ResponseMode = Literal["json_schema", "json_object", "none"]
_FALLBACK: dict[_ResponseMode, _ResponseMode | None] = {
    "json_schema": "json_object",
    "json_object": "none",
    "none": None,
}


@dataclass(frozen=True)
class JudgeReply(Generic[SchemaT]):
    """What one logical judge call produced.

    Attributes:
        parsed: the validated answer, an instance of the requested schema.
        content: the raw text of the answer that validated.
        model: the judge's litellm model string.
        calls: completions actually requested for this reply: 1, or 2 when a repair retry was
            needed (transport-level retries of failed requests are not counted), and 0 when
            the reply came from the judge's cache or from an identical request already in
            flight, whose caller accounts for the call.
        prompt_tokens: input tokens over those completions, as reported by the provider (0 for
            a cached or shared reply).
        completion_tokens: output tokens over those completions (0 for a cached or shared
            reply).
        cost: USD cost from ``litellm.completion_cost``, or ``None`` when litellm has no price
            for the model (``0.0`` for a cached or shared reply).
        cached: the reply was served without a call of its own.
    """

    parsed: SchemaT
    content: str
    model: str
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost: float | None
    cached: bool = False


class JudgeCacheInfo(NamedTuple):
    """Counters of a judge's request cache (see ``Judge.cache_info``).

    Attributes:
        hits: replies served without a call of their own: from the cache, or by joining an
            identical request in flight.
        misses: requests that made a call (cache enabled only).
        maxsize: the cache bound, ``cache_size``.
        currsize: answers held now.
    """

    hits: int
    misses: int
    maxsize: int
    currsize: int


@dataclass
class _Flight:
    """One call in flight that identical requests join (single flight)."""

    task: asyncio.Task[JudgeReply[Any]]
    waiters: int = 0
    # The first caller to receive the reply accounts for its calls, tokens and cost.
    claimed: bool = False


class _InvalidOutput(Exception):
    """The reply did not fit the schema (internal; becomes ``InvalidJudgeOutputError``)."""


class Judge:
    """An LLM judge: a litellm model string plus the litellm arguments to call it with.

    Calls run at temperature 0 with structured output, with OpenTelemetry instrumentation
    suppressed (the judge never traces itself), and with retries on HTTP 429, 5xx and connection
    errors (exponential backoff with jitter, via tenacity; litellm's own retries are off).
    Timeouts are not retried: ``timeout`` bounds each attempt.

    Identical requests are answered once: a bounded LRU cache holds the last ``cache_size``
    validated answers, keyed by (model, ``api_base``, every litellm argument except secrets,
    system prompt, user prompt, schema name and JSON schema), and a request identical to one
    in flight waits for that call instead of making its own. A cached or shared reply reports
    ``calls=0`` and no tokens, so a scorer's ``judge_calls`` counts the calls actually made.
    Failed calls are never cached. The cache belongs to this ``Judge``; a model string given
    to several scorers resolves to one shared ``Judge``, and so does the configured judge.
    Answers at temperature 0 are what makes caching sound: a user who overrides
    ``temperature`` to sample different answers should pass ``cache_size=0``.

    Args:
        model: a litellm model string, e.g. ``"openai/gpt-4o-mini"``.
        timeout: seconds per attempt. Default 60.
        max_retries: retries after the first attempt for 429/5xx/connection errors. Default 3.
        retry_backoff: base of the exponential backoff in seconds (1, 2, 4, ... plus up to the
            same amount of random jitter, capped at 20 s). Default 1.
        cache_size: how many answers the request cache holds (least recently used ones are
            dropped first); 0 disables the cache and the sharing of calls in flight.
            Default 1024.
        out_of_process: run the litellm calls in a child process (``python -m
            tracescore._judge_process``, one per application process, started on first use)
            so their CPU work does not compete with the application's threads for the GIL.
            Default ``TRACESCORE_JUDGE_OUT_OF_PROCESS`` (``true``/``false``), else False.
        **litellm_kwargs: passed to ``litellm.acompletion`` as they are (``api_base``,
            ``api_key``, ``extra_headers``, ``temperature`` to override 0, ...). Values of secret
            arguments (keys, tokens, headers) never appear in reprs or in tracescore's error
            messages. litellm's provider env vars (``OPENAI_API_KEY``, ...) keep working.

    Raises:
        ConfigurationError: ``model`` is not a non-empty string, a numeric option is out of
            range, or a keyword tracescore controls (``messages``, ``response_format``,
            ``stream``, ...) was passed.

    Example:
        >>> judge = Judge("openai/gpt-4o-mini", timeout=30)
        >>> judge.model
        'openai/gpt-4o-mini'
    """

    def __init__(
        self,
        model: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        retry_backoff: float = DEFAULT_RETRY_BACKOFF,
        cache_size: int = DEFAULT_CACHE_SIZE,
        out_of_process: bool | None = None,
        **litellm_kwargs: Any,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigurationError(
                "Judge model must be a non-empty litellm model string such as "
                f"'openai/gpt-4o-mini', got {type(model).__name__} {_short_repr(model)}"
            )
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ConfigurationError(
                f"Judge timeout must be a number of seconds > 0, got {timeout!r}"
            )
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ConfigurationError(f"Judge max_retries must be an int >= 0, got {max_retries!r}")
        if (
            isinstance(retry_backoff, bool)
            or not isinstance(retry_backoff, (int, float))
            or retry_backoff < 0
        ):
            raise ConfigurationError(
                f"Judge retry_backoff must be a number of seconds >= 0, got {retry_backoff!r}"
            )
        if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 0:
            raise ConfigurationError(
                f"Judge cache_size must be an int >= 0 (0 disables the cache), got {cache_size!r}"
            )
        reserved = sorted(_RESERVED_KWARGS.intersection(litellm_kwargs))
        if reserved:
            raise ConfigurationError(
                f"Judge does not accept {', '.join(reserved)}: tracescore sets them for each call"
            )
        if out_of_process is not None and not isinstance(out_of_process, bool):
            raise ConfigurationError("Judge out_of_process takes True, False or None")
        if out_of_process is None:
            out_of_process = os.environ.get(
                "TRACESCORE_JUDGE_OUT_OF_PROCESS", ""
            ).strip().lower() in ("1", "true", "yes", "on")
        self.out_of_process: bool = out_of_process
        self.model: str = model.strip()
        self._timeout = float(timeout)
        self._max_retries = max_retries
        self._retry_backoff = float(retry_backoff)
        self._kwargs: dict[str, Any] = dict(litellm_kwargs)
        self._secrets = _secret_values(self._kwargs)
        self._mode: _ResponseMode = "json_schema"
        self._mode_lock = threading.Lock()
        self._provider: str | None = None
        self._cache_size = cache_size
        # Hashed keys -> the validated answer's text. Guarded by a lock so that cache_info()
        # and cache_clear() work from any thread; the flights are only touched on the judge
        # loop.
        self._cache: OrderedDict[bytes, str] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._cache_hits = 0
        self._cache_misses = 0
        self._flights: dict[bytes, _Flight] = {}
        self._key_prefix = _key_prefix(self.model, self._kwargs)

    @property
    def timeout(self) -> float:
        """Seconds allowed per attempt."""
        return self._timeout

    @property
    def max_retries(self) -> int:
        """Retries after the first attempt for 429/5xx/connection errors."""
        return self._max_retries

    @property
    def retry_backoff(self) -> float:
        """Base of the exponential backoff, in seconds."""
        return self._retry_backoff

    @property
    def cache_size(self) -> int:
        """How many answers the request cache holds; 0 when it is disabled."""
        return self._cache_size

    def cache_info(self) -> JudgeCacheInfo:
        """Hits, misses, bound and current size of the request cache.

        Example:
            >>> Judge("openai/gpt-4o-mini").cache_info()
            JudgeCacheInfo(hits=0, misses=0, maxsize=1024, currsize=0)
        """
        with self._cache_lock:
            return JudgeCacheInfo(
                self._cache_hits, self._cache_misses, self._cache_size, len(self._cache)
            )

    def cache_clear(self) -> None:
        """Forget every cached answer and reset the counters (calls in flight go on)."""
        with self._cache_lock:
            self._cache.clear()
            self._cache_hits = self._cache_misses = 0

    def __repr__(self) -> str:
        parts = [f"model={self.model!r}"]
        api_base = self._kwargs.get("api_base") or self._kwargs.get("base_url")
        if isinstance(api_base, str):
            parts.append(f"api_base={_redact_url(api_base)!r}")
        parts.append(f"timeout={self._timeout!r}")
        parts.append(f"max_retries={self._max_retries!r}")
        return f"Judge({', '.join(parts)})"

    async def acomplete(
        self,
        *,
        system: str,
        user: str,
        schema: type[SchemaT],
        name: str,
        validate: Callable[[SchemaT], None] | None = None,
    ) -> JudgeReply[SchemaT]:
        """Ask the judge for one structured answer.

        The answer is parsed as JSON (slightly broken JSON is repaired with ``json-repair``),
        validated with ``schema``, then with ``validate``. When either fails, the judge is
        asked exactly once more, with the validation error and the JSON schema in the prompt.

        Args:
            system: the system prompt (the task).
            user: the user prompt (the texts to judge, delimited by the caller).
            schema: a pydantic model class describing the answer.
            name: the schema name sent as ``response_format.json_schema.name``; letters,
                digits, ``_`` and ``-``, at most 64 characters.
            validate: optional check of the parsed answer beyond the schema (for example that a
                list has one item per judged statement); it raises ``ValueError`` with a message
                the judge can act on.

        Returns:
            A ``JudgeReply`` with the parsed answer, token counts, cost and number of calls.

        Raises:
            InvalidJudgeOutputError: the answer did not validate, even after the repair retry.
            JudgeTimeoutError: an attempt took longer than ``timeout``.
            JudgeRateLimitedError: HTTP 429 after every retry.
            JudgeUnavailableError: HTTP 5xx or connection errors after every retry.
            JudgeError: any other failure (HTTP 4xx, authentication, ...).
        """
        _check_schema_name(name)
        return await _on_judge_loop(
            self._acomplete_suppressed(system, user, schema, name, validate)
        )

    async def _acomplete_suppressed(
        self,
        system: str,
        user: str,
        schema: type[SchemaT],
        name: str,
        validate: Callable[[SchemaT], None] | None,
    ) -> JudgeReply[SchemaT]:
        from opentelemetry import context as otel_context

        # Runs on the judge loop, in that task's context: the suppression covers litellm's
        # HTTP calls and nothing of the caller's.
        token = otel_context.attach(
            otel_context.set_value(otel_context._SUPPRESS_INSTRUMENTATION_KEY, True)
        )
        try:
            if self._cache_size == 0:
                return await self._acomplete(system, user, schema, name, validate)
            return await self._acomplete_cached(system, user, schema, name, validate)
        finally:
            otel_context.detach(token)

    async def _acomplete_cached(
        self,
        system: str,
        user: str,
        schema: type[SchemaT],
        name: str,
        validate: Callable[[SchemaT], None] | None,
    ) -> JudgeReply[SchemaT]:
        # Runs on the judge loop (one thread): the flights need no lock.
        schema_json = _schema_json(schema, sort_keys=True)
        key = self._cache_key(system, user, name, schema_json)
        cached = self._cache_lookup(key, schema, validate)
        if cached is not None:
            return cached
        flight = self._flights.get(key)
        if flight is not None and flight.task.get_loop() is not asyncio.get_running_loop():
            # Left over from a judge loop that was stopped (interpreter exit): start afresh.
            flight = None
        leader = flight is None
        if flight is None:
            # The call runs in its own task, so a caller that gives up (its scorer timed out)
            # does not cancel it for the others; it is cancelled when nobody waits any more.
            task = asyncio.get_running_loop().create_task(
                self._acomplete(system, user, schema, name, validate)
            )
            new_flight = flight = self._flights[key] = _Flight(task)
            task.add_done_callback(lambda done: self._land(key, new_flight, done))
            with self._cache_lock:
                self._cache_misses += 1
        else:
            with self._cache_lock:
                self._cache_hits += 1
        flight.waiters += 1
        try:
            reply: JudgeReply[Any] = await asyncio.shield(flight.task)
        finally:
            flight.waiters -= 1
            if flight.waiters == 0 and not flight.task.done():
                if self._flights.get(key) is flight:
                    del self._flights[key]
                flight.task.cancel()
        if not leader:
            try:
                # A fresh instance of this caller's schema, checked by this caller's validator.
                parsed = _parse(reply.content, schema, validate)
            except _InvalidOutput:
                return await self._acomplete(system, user, schema, name, validate)
            reply = dataclasses.replace(reply, parsed=parsed)
        if flight.claimed:
            return _shared(reply, reply.parsed)
        flight.claimed = True
        return reply

    def _cache_key(self, system: str, user: str, name: str, schema_json: str) -> bytes:
        # Hashed: keys stay small whatever the prompts' size, and no prompt text is retained.
        digest = hashlib.sha256(self._key_prefix)
        for part in (system, user, name, schema_json):
            encoded = part.encode("utf-8", "surrogatepass")
            digest.update(len(encoded).to_bytes(8, "big"))
            digest.update(encoded)
        return digest.digest()

    def _cache_lookup(
        self, key: bytes, schema: type[SchemaT], validate: Callable[[SchemaT], None] | None
    ) -> JudgeReply[SchemaT] | None:
        with self._cache_lock:
            content = self._cache.get(key)
            if content is None:
                return None
            self._cache.move_to_end(key)
        try:
            # Parsed again: each caller gets its own instance, checked by its own validator.
            parsed = _parse(content, schema, validate)
        except _InvalidOutput:
            return None
        with self._cache_lock:
            self._cache_hits += 1
        return JudgeReply(
            parsed=parsed,
            content=content,
            model=self.model,
            calls=0,
            prompt_tokens=0,
            completion_tokens=0,
            cost=0.0,
            cached=True,
        )

    def _land(self, key: bytes, flight: _Flight, task: asyncio.Task[JudgeReply[Any]]) -> None:
        if self._flights.get(key) is flight:
            del self._flights[key]
        if task.cancelled() or task.exception() is not None:
            return  # errors are never cached: the next identical request calls again
        content = task.result().content
        with self._cache_lock:
            self._cache[key] = content
            self._cache.move_to_end(key)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)

    async def _acomplete(
        self,
        system: str,
        user: str,
        schema: type[SchemaT],
        name: str,
        validate: Callable[[SchemaT], None] | None,
    ) -> JudgeReply[SchemaT]:
        schema_json = _schema_json(schema, sort_keys=False)
        messages: list[dict[str, str]] = [{"role": "user", "content": user}]
        prompt_tokens = completion_tokens = 0
        costs: list[float | None] = []
        error = ""
        for attempt in range(2):
            response = await self._call_with_fallback(system, messages, schema, schema_json, name)
            usage = getattr(response, "usage", None)
            prompt_tokens += int(getattr(usage, "prompt_tokens", 0) or 0)
            completion_tokens += int(getattr(usage, "completion_tokens", 0) or 0)
            costs.append(_cost(response))
            content = _content_of(response)
            try:
                parsed = _parse(content, schema, validate)
            except _InvalidOutput as exc:
                error = str(exc)
                if attempt == 0:
                    messages = [
                        {"role": "user", "content": user},
                        {"role": "assistant", "content": (content or "")[:_MAX_ECHO_CHARS]},
                        {"role": "user", "content": _repair_prompt(error, name, schema_json)},
                    ]
                continue
            cost = None if any(c is None for c in costs) else float(sum(c for c in costs if c))
            return JudgeReply(
                parsed=parsed,
                content=content or "",
                model=self.model,
                calls=attempt + 1,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                cost=cost,
            )
        raise InvalidJudgeOutputError(
            f"judge {self.model!r} answered {name!r} with output that does not fit the schema, "
            f"even after one repair retry: {self._scrub(error)}"
        )

    async def _call_with_fallback(
        self,
        system: str,
        messages: list[dict[str, str]],
        schema: type[BaseModel],
        schema_json: str,
        name: str,
    ) -> Any:
        await _litellm_async()  # before _response_format, which needs litellm
        mode = self._mode
        while True:
            try:
                return await self._call_with_retries(
                    _system_prompt(system, mode, name, schema_json),
                    messages,
                    _response_format(mode, schema, name),
                )
            except _ResponseFormatRejected as exc:
                next_mode = _FALLBACK[mode]
                if next_mode is None:
                    raise JudgeError(
                        f"judge {self.model!r} rejected the request: {self._scrub(str(exc))}"
                    ) from exc.__cause__
                with self._mode_lock:
                    self._mode = next_mode
                mode = next_mode

    async def _call_with_retries(
        self,
        system: str,
        messages: list[dict[str, str]],
        response_format: dict[str, Any] | None,
    ) -> Any:
        import tenacity

        litellm = await _litellm_async()
        kwargs: dict[str, Any] = {"temperature": 0, **self._kwargs}
        kwargs.update(
            model=self.model,
            messages=[{"role": "system", "content": system}, *messages],
            timeout=self._timeout,
            num_retries=0,
            max_retries=0,
        )
        if response_format is not None:
            kwargs["response_format"] = response_format

        retrying = tenacity.AsyncRetrying(
            stop=tenacity.stop_after_attempt(self._max_retries + 1),
            wait=self._backoff,
            retry=tenacity.retry_if_exception(_is_retryable),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    if self.out_of_process:
                        from ._judge_process import shared_process

                        child = shared_process()
                        await child.wait_ready()  # its start-up is not the call's time
                        call = child.acompletion(kwargs)
                    else:
                        call = litellm.acompletion(**kwargs)
                    started = time.perf_counter()
                    try:
                        # A backstop in case a provider ignores litellm's timeout.
                        response = await asyncio.wait_for(call, timeout=self._timeout + 5.0)
                    except Exception as exc:
                        self._record_call(time.perf_counter() - started, None, exc)
                        raise
                    self._record_call(time.perf_counter() - started, response, None)
                    return response
        except Exception as exc:  # noqa: BLE001 - every failure is mapped to a JudgeError
            raise self._map_error(exc, response_format) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _record_call(self, duration: float, response: Any, error: BaseException | None) -> None:
        """Record one call with the GenAI client metrics of the configured instance."""
        telemetry = _state.telemetry
        if telemetry is None:
            return
        try:
            attrs: dict[str, Any] = {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": self._provider_name(),
                "gen_ai.request.model": self.model,
            }
            input_tokens = output_tokens = 0
            if error is not None:
                attrs["error.type"] = _CALL_ERROR_TYPES.get(_classify(error), "judge_error")
            else:
                model = getattr(response, "model", None)
                if isinstance(model, str) and model:
                    attrs["gen_ai.response.model"] = model
                usage = getattr(response, "usage", None)
                input_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
                output_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
            telemetry.record_judge_call(attrs, duration, input_tokens, output_tokens)
        except Exception:
            pass  # metrics must never fail a judge call

    def _provider_name(self) -> str:
        """``gen_ai.provider.name`` of the judge: the conventions' name for litellm's provider
        prefix (``openai/...`` -> ``openai``, ``bedrock/...`` -> ``aws.bedrock``)."""
        name = self._provider
        if name is None:
            prefix = self.model.split("/", 1)[0] if "/" in self.model else ""
            if not prefix:
                try:
                    prefix = str(_litellm().get_llm_provider(self.model)[1])
                except Exception:
                    prefix = "unknown"
            name = self._provider = _PROVIDER_NAMES.get(prefix, prefix)
        return name

    def _backoff(self, retry_state: Any) -> float:
        # Exponential with full-size jitter, written out because tenacity's
        # wait_exponential_jitter changed its arguments between the versions we support.
        exponent = max(0, int(retry_state.attempt_number) - 1)
        base = self._retry_backoff * (2**exponent)
        return float(min(base + random.uniform(0, self._retry_backoff), _MAX_BACKOFF))

    def _map_error(self, exc: BaseException, response_format: dict[str, Any] | None) -> Exception:
        kind = _classify(exc)
        detail = self._scrub(_describe(exc))
        where = f"judge {self.model!r}"
        if kind == "timeout":
            return JudgeTimeoutError(f"{where} did not answer within {self._timeout:g} s: {detail}")
        if kind == "rate_limited":
            return JudgeRateLimitedError(
                f"{where} was rate limited (HTTP 429) after {self._max_retries} retries: {detail}"
            )
        if kind == "unavailable":
            return JudgeUnavailableError(
                f"{where} was unavailable after {self._max_retries} retries: {detail}"
            )
        if response_format is not None and _rejects_response_format(exc):
            rejected = _ResponseFormatRejected(detail)
            rejected.__cause__ = exc
            return rejected
        return JudgeError(f"{where} failed: {detail}")

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text[:_MAX_ERROR_CHARS]


class _ResponseFormatRejected(Exception):
    """The provider refused the ``response_format`` (internal: triggers the fallback)."""


def resolve_judge(model: str | Judge | None) -> Judge:
    """Return the judge to use, resolved at call time.

    Args:
        model: a ``Judge``, a litellm model string, or ``None`` for the default: the judge set
            with ``tracescore.configure(judge=...)``, else ``TRACESCORE_JUDGE_MODEL``.

    Returns:
        A ``Judge``. The same string resolves to the same ``Judge`` object within a process, so
        a provider's structured-output fallback is learnt once.

    Raises:
        NoJudgeConfiguredError: ``model`` is ``None`` and no default judge is configured.
        ConfigurationError: ``model`` is neither a string nor a ``Judge``, or is empty.

    Example:
        >>> resolve_judge("openai/gpt-4o-mini").model
        'openai/gpt-4o-mini'
    """
    if isinstance(model, Judge):
        return model
    if isinstance(model, str):
        return _judge_for(model)
    if model is not None:
        check_model_spec(model)
    default = _state.default_judge
    if isinstance(default, Judge):
        return default
    if isinstance(default, str) and default.strip():
        return _judge_for(default)
    env_model = _state.env_judge_model()
    if env_model:
        return _judge_for(env_model)
    raise NoJudgeConfiguredError(
        "no judge model configured for an LLM-judged scorer: pass model= to the scorer factory "
        "(e.g. model='openai/gpt-4o-mini'), configure(judge=...), or set TRACESCORE_JUDGE_MODEL"
    )


def check_model_spec(model: object) -> None:
    """Fail early when a factory's ``model=`` cannot name a judge.

    Raises:
        ConfigurationError: ``model`` is not ``None``, a ``Judge`` or a non-empty string.
    """
    if model is None or isinstance(model, Judge):
        return
    if isinstance(model, str) and model.strip():
        return
    raise ConfigurationError(
        "model must be a litellm model string such as 'openai/gpt-4o-mini', a tracescore.Judge, "
        f"or None for the configured judge; got {type(model).__name__} {_short_repr(model)}"
    )


_judges_by_model: dict[str, Judge] = {}
_judges_lock = threading.Lock()


def _judge_for(model: str) -> Judge:
    key = model.strip()
    with _judges_lock:
        judge = _judges_by_model.get(key)
        if judge is None:
            judge = _judges_by_model[key] = Judge(model)
        return judge


async def _litellm_async() -> ModuleType:
    if "litellm" in sys.modules:
        return _litellm()
    # The first import takes seconds: keep the judge loop's other tasks (timeouts) running.
    return await asyncio.to_thread(_litellm)


def _litellm() -> ModuleType:
    import litellm

    # litellm prints "Give Feedback / Get Help" banners to stdout on every failed call; judge
    # failures are reported through tracescore's exceptions instead.
    litellm.suppress_debug_info = True
    return litellm


def _check_schema_name(name: str) -> None:
    if (
        not isinstance(name, str)
        or not 0 < len(name) <= 64
        or not all(c.isascii() and (c.isalnum() or c in "_-") for c in name)
    ):
        raise ConfigurationError(
            f"judge schema name must be 1-64 ASCII letters, digits, '_' or '-', got {name!r}"
        )


def _response_format(
    mode: _ResponseMode, schema: type[BaseModel], name: str
) -> dict[str, Any] | None:
    if mode == "json_object":
        return {"type": "json_object"}
    if mode == "none":
        return None
    # Building the strict schema costs as much as a tenth of a judge call's CPU: do it once per
    # (schema, name) and hand each call its own copy (litellm may mutate what it is given).
    return copy.deepcopy(_strict_response_format(schema, name))


@functools.lru_cache(maxsize=256)
def _schema_json(schema: type[BaseModel], sort_keys: bool) -> str:
    """The schema as JSON text, computed once per schema class."""
    return json.dumps(schema.model_json_schema(), ensure_ascii=False, sort_keys=sort_keys)


@functools.lru_cache(maxsize=256)
def _strict_response_format(schema: type[BaseModel], name: str) -> dict[str, Any]:
    from litellm.llms.base_llm.base_utils import type_to_response_format_param

    # litellm makes the pydantic schema acceptable to strict structured outputs
    # (additionalProperties: false, every property required); only the name is ours.
    response_format = type_to_response_format_param(schema)
    if response_format is None:  # pragma: no cover - only for a None schema
        raise ConfigurationError("judge schema must be a pydantic model class")
    response_format["json_schema"]["name"] = name
    return response_format


def _system_prompt(system: str, mode: _ResponseMode, name: str, schema_json: str) -> str:
    if mode == "json_schema":
        return f"{system}\n\nAnswer with a single JSON object that follows the requested schema."
    return (
        f"{system}\n\nAnswer with a single JSON object and nothing else: no prose, no code fence."
        f" It must match the JSON schema below.\nSchema name: {name}\nJSON schema:\n{schema_json}"
    )


def _repair_prompt(error: str, name: str, schema_json: str) -> str:
    return (
        f"Your previous answer could not be used: {error[:_MAX_ERROR_CHARS]}\n"
        "Answer again with a single JSON object only, matching this JSON schema exactly.\n"
        f"Schema name: {name}\nJSON schema:\n{schema_json}"
    )


def _content_of(response: Any) -> str | None:
    try:
        content = response.choices[0].message.content
    except (AttributeError, IndexError, TypeError):
        return None
    return content if isinstance(content, str) else None


def _parse(
    content: str | None,
    schema: type[SchemaT],
    validate: Callable[[SchemaT], None] | None,
) -> SchemaT:
    if content is None or not content.strip():
        raise _InvalidOutput("the answer was empty")
    try:
        data = json.loads(content)
    except ValueError:
        import json_repair

        data = json_repair.loads(content)
    if not isinstance(data, dict):
        raise _InvalidOutput("the answer is not a JSON object")
    from pydantic import ValidationError

    try:
        parsed = schema.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}"
            for err in exc.errors(include_url=False, include_input=False)
        )
        raise _InvalidOutput(f"the answer does not match the schema: {problems}") from None
    if validate is not None:
        try:
            validate(parsed)
        except ValueError as exc:
            raise _InvalidOutput(str(exc)) from None
    return parsed


_UNPRICED: set[str] = set()


def _cost(response: Any) -> float | None:
    # litellm has usually priced the response already; computing it again costs ~0.5 ms, and
    # raising for an unpriced model ~1.3 ms, on every call.
    hidden = getattr(response, "_hidden_params", None)
    if isinstance(hidden, dict) and isinstance(hidden.get("response_cost"), (int, float)):
        return float(hidden["response_cost"])
    model = str(getattr(response, "model", "") or "")
    if model in _UNPRICED:
        return None
    try:
        value = _litellm().completion_cost(completion_response=response)
    except Exception:  # noqa: BLE001 - litellm raises for models it has no price for
        if model and len(_UNPRICED) < 1024:
            _UNPRICED.add(model)
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _status_code(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


_MISSING_CREDENTIALS = "missing credentials"


def _classify(exc: BaseException) -> str:
    from litellm import exceptions as errors

    from ._judge_process import RemoteJudgeError

    if isinstance(exc, RemoteJudgeError):  # classified in the judge process already
        return exc.kind
    if isinstance(exc, (errors.Timeout, asyncio.TimeoutError, TimeoutError)):
        return "timeout"
    status = _status_code(exc)
    if isinstance(exc, (errors.AuthenticationError, errors.PermissionDeniedError)) or status in (
        401, 403
    ) or _MISSING_CREDENTIALS in str(exc).lower():
        # litellm reports a missing key as a 500 "Missing credentials": retrying cannot help.
        return "error"
    if isinstance(exc, errors.RateLimitError) or status == 429:
        return "rate_limited"
    if isinstance(
        exc,
        (
            errors.APIConnectionError,
            errors.InternalServerError,
            errors.ServiceUnavailableError,
            errors.BadGatewayError,
        ),
    ) or (status is not None and status >= 500):
        return "unavailable"
    return "error"


def _is_retryable(exc: BaseException) -> bool:
    return _classify(exc) in ("rate_limited", "unavailable")


def _rejects_response_format(exc: BaseException) -> bool:
    from ._judge_process import RemoteJudgeError

    if isinstance(exc, RemoteJudgeError):
        return exc.rejects_response_format
    status = _status_code(exc)
    if status is not None and status != 400:
        return False
    from litellm import exceptions as errors

    if status is None and not isinstance(exc, errors.BadRequestError):
        return False
    text = str(exc).lower()
    return "response_format" in text or "json_schema" in text or "json schema" in text


def _describe(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if type(exc).__name__ not in text else text


def _secret_values(kwargs: dict[str, Any]) -> list[str]:
    secrets: list[str] = []
    for key, value in kwargs.items():
        lowered = key.lower()
        if lowered in _HEADER_KWARGS and isinstance(value, dict):
            secrets.extend(str(v) for v in value.values() if str(v))
        elif any(marker in lowered for marker in _SECRET_MARKERS) and value:
            secrets.append(str(value))
    # Longest first, so a secret containing another is replaced whole.
    return sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True)


def _is_secret_kwarg(name: str) -> bool:
    lowered = name.lower()
    if lowered in _HEADER_KWARGS:
        return True
    # "max_tokens" and friends are request parameters, not credentials.
    return any(marker in lowered for marker in _SECRET_MARKERS) and not lowered.endswith("_tokens")


def _key_prefix(model: str, kwargs: dict[str, Any]) -> bytes:
    """The part of a cache key fixed per judge: model, api_base and request parameters."""
    params = {k: v for k, v in {"temperature": 0, **kwargs}.items() if not _is_secret_kwarg(k)}
    api_base = kwargs.get("api_base") or kwargs.get("base_url")
    text = json.dumps([model, api_base, params], sort_keys=True, ensure_ascii=False, default=repr)
    return text.encode("utf-8", "surrogatepass")


def _shared(reply: JudgeReply[Any], parsed: Any) -> JudgeReply[Any]:
    """``reply`` as seen by a caller that made no call of its own."""
    return JudgeReply(
        parsed=parsed,
        content=reply.content,
        model=reply.model,
        calls=0,
        prompt_tokens=0,
        completion_tokens=0,
        cost=0.0,
        cached=True,
    )


def _redact_url(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<invalid url>"
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _short_repr(value: object) -> str:
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a broken __repr__ must not hide the real error
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."


# -- the judge's event loop ---------------------------------------------------------------------
_loop: asyncio.AbstractEventLoop | None = None
_loop_thread: threading.Thread | None = None
_loop_lock = threading.Lock()


def _judge_loop() -> asyncio.AbstractEventLoop:
    """The event loop every judge call runs on, started on first use in a daemon thread."""
    global _loop, _loop_thread
    with _loop_lock:
        if _loop is None or _loop_thread is None or not _loop_thread.is_alive():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="tracescore-judge", daemon=True)
            thread.start()
            _loop, _loop_thread = loop, thread
        return _loop


async def _on_judge_loop(coro: Coroutine[Any, Any, T]) -> T:
    loop = _judge_loop()
    if asyncio.get_running_loop() is loop:
        return await coro
    # Cancelling the caller's task cancels the judge-side task too (run_coroutine_threadsafe
    # chains the futures).
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))


def run_blocking(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the judge loop and wait for it, from synchronous code or from inside
    another running event loop (the calling thread blocks; its loop is not re-entered).

    Raises:
        RuntimeError: called from a task already running on the judge loop (it would wait on
            itself); use ``await`` there instead.
    """
    loop = _judge_loop()
    try:
        running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        coro.close()
        raise RuntimeError(
            "Scorer.run() was called from a scorer step; make the step 'async def' and use "
            "'await scorer.arun(...)' instead"
        )
    future = asyncio.run_coroutine_threadsafe(coro, loop)
    try:
        return future.result()
    except BaseException:
        future.cancel()
        raise


def _stop_judge_loop(timeout: float = 2.0) -> None:
    """Cancel what is left on the judge loop and stop it (at interpreter exit).

    Registered when this module is imported, which ``import tracescore`` does before
    ``configure()`` registers its own exit flush: exit handlers run last-in first-out, so the
    final flush still has a judge.
    """
    global _loop, _loop_thread
    with _loop_lock:
        loop, thread = _loop, _loop_thread
        _loop = _loop_thread = None
    if loop is None or thread is None or not thread.is_alive():
        return

    async def cancel_pending() -> None:
        litellm = sys.modules.get("litellm")
        close_clients = getattr(litellm, "close_litellm_async_clients", None)
        if close_clients is not None:
            # The HTTP clients were created on this loop: close them here, not from another.
            await asyncio.wait_for(close_clients(), timeout=timeout / 2)
            await asyncio.sleep(0.01)  # lets the closed transports finish closing
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout / 2)

    with contextlib.suppress(Exception):  # best effort at exit
        asyncio.run_coroutine_threadsafe(cancel_pending(), loop).result(timeout=timeout)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=timeout)
    if not thread.is_alive():
        loop.close()


def _stop_judge_process() -> None:
    """Stop the out-of-process judge, if one was started (last, after the final flush)."""
    module = sys.modules.get("tracescore._judge_process")
    if module is not None:
        with contextlib.suppress(Exception):
            module.close_shared_process()


atexit.register(_stop_judge_process)
atexit.register(_stop_judge_loop)
