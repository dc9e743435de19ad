"""``Judge``: a litellm model string plus how to call it.

This is the judge's public surface: the options and their validation, ``acomplete`` (one
structured answer) and the request cache's counters. The work happens in the package's other
modules (see ``tracescore._judge``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tracescore._core import loop as _loop
from tracescore._core.errors import ConfigurationError
from tracescore._core.suppress import suppressed
from tracescore._setup import env as _env

from .cache import JudgeCacheInfo, RequestCache
from .calls import Caller
from .limit import api_base_of, check_max_concurrency, is_local
from .output import check_response_format, check_schema_name, parse, schema_json
from .reply import JudgeReply, SchemaT
from .scrub import redact_url, short_repr

DEFAULT_TIMEOUT = 60.0
# A model on one's own machine (often a CPU) takes tens of seconds a call, a 1.5B one up to
# 150 s on two loaded cores; waiting for a place in tracescore's queue is not counted.
DEFAULT_LOCAL_TIMEOUT = 300.0
# Tokens a local judge may generate per call unless max_tokens is given: a judge's JSON answer
# takes a few hundred.
DEFAULT_LOCAL_MAX_TOKENS = 1024
DEFAULT_MAX_RETRIES = 3
DEFAULT_RETRY_BACKOFF = 1.0
DEFAULT_CACHE_SIZE = 1024

# litellm arguments the judge owns: a user passing them would break structured output.
_RESERVED_KWARGS = frozenset(
    {"model", "messages", "response_format", "stream", "n", "tools", "tool_choice", "num_retries"}
)


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
        timeout: seconds per attempt, counted from when the call is sent (waiting for a
            place among the judge's calls in flight is not counted). Default 60, or 300 for a
            local server (``api_base`` on a loopback or private address, see
            ``max_concurrency``).
        max_retries: retries after the first attempt for 429/5xx/connection errors. Default 3.
        retry_backoff: base of the exponential backoff in seconds (1, 2, 4, ... plus up to the
            same amount of random jitter, capped at 20 s). Default 1.
        cache_size: how many answers the request cache holds (least recently used ones are
            dropped first); 0 disables the cache and the sharing of calls in flight.
            Default 1024.
        out_of_process: run the litellm calls in a child process (``python -m
            tracescore._judge.process``, one per application process, started on first use)
            so their CPU work does not compete with the application's threads for the GIL.
            Default ``TRACESCORE_JUDGE_OUT_OF_PROCESS`` (``true``/``false``), else False.
        response_format: the structured output asked for. ``"auto"`` (default) starts with
            ``json_schema`` and, when a server refuses it (HTTP 400, 422, or a 5xx naming the
            response format, as llama.cpp's server answers), steps down to ``json_object``
            (with the schema attached for servers that constrain decoding with it, then
            without), then to no ``response_format`` with JSON asked for in the prompt; the
            mode a judge settles on is remembered and logged at debug level. A refusal is
            never retried as an outage. ``"json_schema"``, ``"json_object"`` or ``"none"``
            fix the mode up front (no probing calls; a refusal is then a ``JudgeError``):
            ``"json_object"`` suits llama.cpp, Ollama and vLLM servers, ``"none"`` servers
            that take no ``response_format`` at all.
        transport: how calls reach the model: ``"direct"`` (tracescore's own HTTP client for
            the OpenAI chat-completions protocol: no litellm import, ~0.1x its CPU per call),
            ``"litellm"``, or ``"auto"``: direct for ``openai/...``, ``hosted_vllm/...``,
            ``lm_studio/...`` and ``llamafile/...`` models whose arguments it understands,
            litellm for the rest (``tracescore._judge.transport``; Azure is direct only when
            asked for). Default ``TRACESCORE_JUDGE_TRANSPORT``, else ``"auto"``.
        max_concurrency: this judge's own limit on calls in flight; the others wait in
            tracescore's queue (first come, first served), where waiting counts neither against
            ``timeout`` nor against ``configure(job_timeout=...)``. ``None`` (automatic): no
            limit for a hosted API (``configure(max_concurrency=...)`` bounds the scoring jobs);
            for a local server (``api_base`` on a loopback or private address, ``localhost``,
            ``*.local``, ``host.docker.internal``, or an ``ollama/`` model), the slot count it
            reports (llama.cpp's ``llama-server``: ``GET /props``), no limit for vLLM, else 1.
            ``0``: no limit of the judge's own. Default ``TRACESCORE_JUDGE_MAX_CONCURRENCY``
            (an int >= 0), else automatic.
            A local server's calls also get ``max_tokens=1024`` unless ``max_tokens`` or
            ``max_completion_tokens`` is given: a small model may otherwise generate until its
            context is full, and such a server keeps generating after the call timed out.
        **litellm_kwargs: passed to ``litellm.acompletion`` as they are (``api_base``,
            ``api_key``, ``extra_headers``, ``temperature`` to override 0, ...). Values of secret
            arguments (keys, tokens, headers) never appear in reprs or in tracescore's error
            messages. litellm's provider env vars (``OPENAI_API_KEY``, ...) keep working.

    Raises:
        ConfigurationError: ``model`` is not a non-empty string, a numeric option is out of
            range, ``response_format`` is not one of the four modes, or a keyword tracescore
            controls (``messages``, ``stream``, ...) was passed.

    Examples:
        >>> judge = Judge("openai/gpt-4o-mini", timeout=30)
        >>> judge.model
        'openai/gpt-4o-mini'
    """

    def __init__(
        self,
        model: str,
        *,
        timeout: float | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        retry_backoff: float = DEFAULT_RETRY_BACKOFF,
        cache_size: int = DEFAULT_CACHE_SIZE,
        out_of_process: bool | None = None,
        response_format: str = "auto",
        transport: str | None = None,
        max_concurrency: int | None = None,
        **litellm_kwargs: Any,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigurationError(
                "Judge model must be a non-empty litellm model string such as "
                f"'openai/gpt-4o-mini', got {type(model).__name__} {short_repr(model)}"
            )
        max_concurrency = check_max_concurrency(max_concurrency)
        if max_concurrency is None:
            max_concurrency = _env.judge_max_concurrency()
        local = is_local(api_base_of(model.strip(), litellm_kwargs))
        if timeout is None:
            timeout = DEFAULT_LOCAL_TIMEOUT if local else DEFAULT_TIMEOUT
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
            out_of_process = _env.judge_out_of_process()
        check_response_format(response_format)
        self.model: str = model.strip()
        self._kwargs: dict[str, Any] = dict(litellm_kwargs)
        if local and not {"max_tokens", "max_completion_tokens"} & set(self._kwargs):
            # A small model under a JSON grammar may emit whitespace or repeat an item until its
            # context is full, holding a one-slot server for minutes, past the call's timeout
            # (the server keeps generating after the client gives up).
            self._kwargs["max_tokens"] = DEFAULT_LOCAL_MAX_TOKENS
        self._caller = Caller(
            self.model,
            self._kwargs,
            timeout=float(timeout),
            max_retries=max_retries,
            retry_backoff=float(retry_backoff),
            out_of_process=out_of_process,
            response_format=response_format,
            transport=_env.judge_transport() if transport is None else transport,
            max_concurrency=max_concurrency,
        )
        self._cache = RequestCache(self.model, self._kwargs, cache_size) if cache_size else None

    @property
    def out_of_process(self) -> bool:
        """Whether the calls run in the judge child process."""
        return self._caller.out_of_process

    @out_of_process.setter
    def out_of_process(self, value: bool) -> None:
        self._caller.out_of_process = value

    @property
    def transport(self) -> str:
        """The transport this judge's calls take: ``"direct"`` or ``"litellm"``."""
        return self._caller.route.name

    @property
    def timeout(self) -> float:
        """Seconds allowed per attempt."""
        return self._caller.timeout

    @property
    def max_concurrency(self) -> int | None:
        """This judge's limit on calls in flight: an int, or None for no limit of its own.
        An automatic limit is known after the first call (before it, None for a local
        server that has not been asked yet)."""
        return self._caller.limit.limit

    @property
    def max_retries(self) -> int:
        """Retries after the first attempt for 429/5xx/connection errors."""
        return self._caller.max_retries

    @property
    def retry_backoff(self) -> float:
        """Base of the exponential backoff, in seconds."""
        return self._caller.retry_backoff

    @property
    def cache_size(self) -> int:
        """How many answers the request cache holds; 0 when it is disabled."""
        return 0 if self._cache is None else self._cache.maxsize

    def cache_info(self) -> JudgeCacheInfo:
        """Hits, misses, bound and current size of the request cache.

        Examples:
            >>> Judge("openai/gpt-4o-mini").cache_info()
            JudgeCacheInfo(hits=0, misses=0, maxsize=1024, currsize=0)
        """
        if self._cache is None:
            return JudgeCacheInfo(0, 0, 0, 0)
        return self._cache.info()

    def cache_clear(self) -> None:
        """Forget every cached answer and reset the counters (calls in flight go on)."""
        if self._cache is not None:
            self._cache.clear()

    def __repr__(self) -> str:
        parts = [f"model={self.model!r}"]
        api_base = self._kwargs.get("api_base") or self._kwargs.get("base_url")
        if isinstance(api_base, str):
            parts.append(f"api_base={redact_url(api_base)!r}")
        parts.append(f"timeout={self.timeout!r}")
        parts.append(f"max_retries={self.max_retries!r}")
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
        The call runs on the tracescore loop, whatever loop the caller awaits it from.

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
        check_schema_name(name)
        return await _loop.on_loop(self._acomplete_suppressed(system, user, schema, name, validate))

    async def _acomplete_suppressed(
        self,
        system: str,
        user: str,
        schema: type[SchemaT],
        name: str,
        validate: Callable[[SchemaT], None] | None,
    ) -> JudgeReply[SchemaT]:
        # Runs on the tracescore loop, in that task's context: the suppression covers litellm's
        # HTTP calls and nothing of the caller's.
        with suppressed():
            if self._cache is None:
                return await self._caller.complete(system, user, schema, name, validate)
            key = self._cache.key(system, user, name, schema_json(schema, sort_keys=True))
            return await self._cache.answer(
                key,
                lambda: self._caller.complete(system, user, schema, name, validate),
                lambda content: parse(content, schema, validate),
            )
