"""The direct transport: judge calls sent straight to an OpenAI chat-completions endpoint.

Most judges speak the OpenAI chat-completions protocol (OpenAI, Azure OpenAI, vLLM, llama.cpp's
server, LM Studio, llamafile, TGI and many hosted APIs). For them litellm's generality is pure
cost: ~8 ms of CPU and ~3,000 imported modules per process for what is one JSON POST. This
module sends that POST itself, through one ``aiohttp`` client session per event loop (in
practice the one tracescore loop), with keep-alive connections pooled per host.

It does only the transport: the caller (``calls.Caller``) keeps the retries, the structured-
output fallback, the repair retry, the metrics and the scrubbing, exactly as for litellm. A
failed call raises ``DirectError``, a ``RemoteJudgeError`` classified here by HTTP status, so
``failures`` maps it without litellm. A reply is a ``ChatResponse`` priced from litellm's own
table (``prices``) once per model.

Measured on the 2-core machine (``benchmarks/bench_judge_transport.py``): aiohttp spends
~0.5 ms of CPU per call, httpx ~1.5 ms, litellm ~3-8 ms.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tracescore._setup import env as _env

from . import prices
from .failures import RemoteJudgeError

if TYPE_CHECKING:
    import aiohttp

# Provider prefixes whose litellm provider is a plain OpenAI chat-completions endpoint:
# prefix -> (env var of the base URL, env var of the key, default base URL or None).
OPENAI_COMPATIBLE: dict[str, tuple[tuple[str, ...], tuple[str, ...], str | None]] = {
    "openai": (("OPENAI_BASE_URL", "OPENAI_API_BASE"), ("OPENAI_API_KEY",),
               "https://api.openai.com/v1"),
    "hosted_vllm": (("HOSTED_VLLM_API_BASE",), ("HOSTED_VLLM_API_KEY",), None),
    "lm_studio": (("LM_STUDIO_API_BASE",), ("LM_STUDIO_API_KEY",), None),
    "llamafile": (("LLAMAFILE_API_BASE",), ("LLAMAFILE_API_KEY",), "http://127.0.0.1:8080/v1"),
    "azure": (("AZURE_API_BASE",), ("AZURE_API_KEY",), None),
}

# Judge arguments that go into the request body as they are (OpenAI's names).
BODY_ARGS = frozenset({
    "temperature", "top_p", "max_tokens", "max_completion_tokens", "seed", "stop",
    "presence_penalty", "frequency_penalty", "logit_bias", "user", "reasoning_effort",
    "service_tier", "logprobs", "top_logprobs",
})
# Judge arguments the transport itself reads.
CONNECTION_ARGS = frozenset({
    "api_base", "base_url", "api_key", "extra_headers", "headers", "organization",
    "api_version", "extra_body",
})
# What the caller adds to every call (litellm's names); handled or ignored here.
CALL_ARGS = frozenset({"model", "messages", "response_format", "timeout", "num_retries",
                       "max_retries"})

# Prices per model, read once per process (None: unpriced).
_PRICES: dict[str, Any] = {}
_UNKNOWN = object()

# The longest error body quoted in an exception (the provider's message is what matters).
_MAX_ERROR_BODY = 2000


@dataclass
class ChatMessage:
    """The assistant's message of a choice."""

    content: str | None


@dataclass
class ChatChoice:
    """One choice of a chat completion."""

    message: ChatMessage


@dataclass
class ChatUsage:
    """Token counts of a chat completion."""

    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class ChatResponse:
    """The parts of a chat completion the judge reads, with its USD cost (None: unpriced).

    Both the direct transport and the judge child process answer with this shape; it pickles
    small and needs neither litellm nor the ``openai`` SDK to read.
    """

    choices: list[ChatChoice]
    usage: ChatUsage
    model: str = ""
    cost: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class DirectError(RemoteJudgeError):
    """A failed direct call, classified by HTTP status; keeps the response headers so a
    ``Retry-After`` is honoured (``calls.retry_after`` reads ``.headers``)."""

    def __init__(self, message: str, kind: str, rejects_response_format: bool,
                 status_code: int | None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message, kind, rejects_response_format, status_code)
        self.headers = dict(headers or {})

    def __reduce__(self) -> tuple[Any, ...]:
        return (DirectError, (str(self), self.kind, self.rejects_response_format,
                              self.status_code, self.headers))


def unsupported(model: str, kwargs: dict[str, Any]) -> str | None:
    """Why the direct transport cannot make this judge's calls, or None when it can.

    Args:
        model: the litellm model string.
        kwargs: the judge's litellm arguments.

    Examples:
        >>> unsupported("openai/gpt-4o-mini", {"temperature": 0})
        >>> unsupported("anthropic/claude-3-5-haiku", {})
        "provider 'anthropic' does not speak the OpenAI chat-completions protocol"
    """
    prefix = model.split("/", 1)[0] if "/" in model else ""
    if prefix not in OPENAI_COMPATIBLE:
        what = f"provider {prefix!r}" if prefix else "a model without a provider prefix"
        return f"{what} does not speak the OpenAI chat-completions protocol"
    others = sorted(set(kwargs) - BODY_ARGS - CONNECTION_ARGS - CALL_ARGS)
    if others:
        return f"litellm arguments {', '.join(others)} need litellm"
    base_envs, _, default = OPENAI_COMPATIBLE[prefix]
    if not (kwargs.get("api_base") or kwargs.get("base_url") or default
            or any(_env.provider_setting(name) for name in base_envs)):
        return f"provider {prefix!r} needs an api_base"
    if prefix == "azure" and not (kwargs.get("api_version")
                                  or _env.provider_setting("AZURE_API_VERSION")):
        return "Azure OpenAI needs an api_version"
    return None


class DirectClient:
    """Makes one judge's calls over the shared session of the loop it runs on.

    Args:
        model: the litellm model string (``openai/<name>``, ``azure/<deployment>``, ...).
        kwargs: the judge's litellm arguments (``api_base``, ``api_key``, ``extra_headers``,
            body parameters such as ``temperature``); ``unsupported`` must have passed them.
    """

    def __init__(self, model: str, kwargs: dict[str, Any]) -> None:
        prefix, name = model.split("/", 1)
        base_envs, key_envs, default = OPENAI_COMPATIBLE[prefix]
        base = (kwargs.get("api_base") or kwargs.get("base_url")
                or next((v for e in base_envs if (v := _env.provider_setting(e))), None) or default)
        key = kwargs.get("api_key") or next(
            (v for e in key_envs if (v := _env.provider_setting(e))), None)
        self.model = model
        self.name = name
        # The hosted APIs refuse a call without a key: say so at once instead of sending it.
        self.missing_key = None
        if prefix == "openai" and not key and base == default:
            self.missing_key = (f"Missing credentials (no API key for {model!r}): set "
                                f"{' or '.join(key_envs)} or pass api_key")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if prefix == "azure":
            version = kwargs.get("api_version") or _env.provider_setting("AZURE_API_VERSION")
            self.url = (f"{str(base).rstrip('/')}/openai/deployments/{name}/chat/completions"
                        f"?api-version={version}")
            if key:
                headers["api-key"] = str(key)
        else:
            self.url = f"{str(base).rstrip('/')}/chat/completions"
            if key:
                headers["Authorization"] = f"Bearer {key}"
        if kwargs.get("organization"):
            headers["OpenAI-Organization"] = str(kwargs["organization"])
        for extra in (kwargs.get("headers"), kwargs.get("extra_headers")):
            if isinstance(extra, dict):
                headers.update({str(k): str(v) for k, v in extra.items()})
        self.headers = headers
        extra_body = kwargs.get("extra_body")
        self.extra_body: dict[str, Any] = dict(extra_body) if isinstance(extra_body, dict) else {}

    async def acompletion(self, call: dict[str, Any]) -> ChatResponse:
        """POST one chat completion.

        Args:
            call: the arguments the caller would give ``litellm.acompletion`` (``messages``,
                ``response_format``, ``timeout`` in seconds, body parameters).

        Returns:
            The completion, priced.

        Raises:
            DirectError: HTTP error status, connection failure, timeout or unreadable reply,
                classified (``timeout``, ``rate_limited``, ``unavailable``, ``error``).
        """
        if self.missing_key is not None:
            raise DirectError(f"AuthenticationError: {self.missing_key}", "error", False, None)
        import aiohttp

        body: dict[str, Any] = {"model": self.name, "messages": call["messages"]}
        body.update({k: v for k, v in call.items() if k in BODY_ARGS})
        if call.get("response_format") is not None:
            body["response_format"] = call["response_format"]
        body.update(self.extra_body)
        data = json.dumps(body, ensure_ascii=False).encode()
        timeout = float(call.get("timeout") or 600.0)
        price = _PRICES.get(self.model, _UNKNOWN)
        if price is _UNKNOWN:
            # The table is ~3.5 MB of JSON: read once per model per process, off the loop.
            price = _PRICES[self.model] = await asyncio.to_thread(prices.lookup, self.model)
        session = session_for_loop()
        try:
            async with session.post(self.url, data=data, headers=self.headers,
                                    timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
                raw = await resp.read()
                status, headers = resp.status, dict(resp.headers)
        except (asyncio.TimeoutError, TimeoutError):
            raise DirectError(f"Timeout: no answer within {timeout:g} s", "timeout", False,
                              None) from None
        except aiohttp.ClientConnectorError as exc:
            # Said plainly: aiohttp's own text names a TLS context ("ssl:default") even for
            # plain HTTP, and "Connect call failed" for a refused connection.
            os_error = exc.os_error
            what = ("Connection refused" if isinstance(os_error, ConnectionRefusedError)
                    else (os_error.strerror or type(os_error).__name__))
            raise DirectError(f"APIConnectionError: cannot connect to {exc.host}:{exc.port}: "
                              f"{what}", "unavailable", False, None) from None
        except aiohttp.ClientError as exc:
            raise DirectError(f"APIConnectionError: {type(exc).__name__}: {exc}", "unavailable",
                              False, None) from None
        if status >= 400:
            raise _http_error(status, raw, headers)
        try:
            payload = json.loads(raw)
            return _response(payload, price)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):
            raise DirectError(f"APIError: the reply is not a chat completion "
                              f"({raw[:200]!r})", "unavailable", False, status) from None

def _response(payload: dict[str, Any], price: Any) -> ChatResponse:
    choices = payload.get("choices") or []
    message = choices[0].get("message") or {} if choices else {}
    content = message.get("content")
    usage = payload.get("usage") or {}
    prompt = int(usage.get("prompt_tokens") or 0)
    completion = int(usage.get("completion_tokens") or 0)
    details = usage.get("prompt_tokens_details") or {}
    cached = int(details.get("cached_tokens") or 0) if isinstance(details, dict) else 0
    model = str(payload.get("model") or "")
    return ChatResponse(
        choices=[ChatChoice(ChatMessage(content if isinstance(content, str) else None))],
        usage=ChatUsage(prompt, completion),
        model=model,
        cost=prices.cost(price, prompt, completion, cached) if price is not None else None,
    )


def _http_error(status: int, raw: bytes, headers: dict[str, str]) -> DirectError:
    text = raw[:_MAX_ERROR_BODY].decode("utf-8", "replace")
    try:
        error = json.loads(raw).get("error")
        message = error.get("message") if isinstance(error, dict) else error
        if isinstance(message, str) and message:
            text = message[:_MAX_ERROR_BODY]
    except (ValueError, AttributeError):
        pass
    lowered = text.lower()
    if status == 408:
        kind = "timeout"
    elif status in (401, 403) or "missing credentials" in lowered:
        kind = "error"
    elif status == 429:
        kind = "rate_limited"
    elif status >= 500:
        kind = "unavailable"
    else:
        kind = "error"
    rejects = status == 400 and ("response_format" in lowered or "json_schema" in lowered
                                 or "json schema" in lowered)
    return DirectError(f"HTTP {status}: {text}", kind, rejects, status, headers)


# -- the shared session ---------------------------------------------------------------------
_sessions: dict[asyncio.AbstractEventLoop, aiohttp.ClientSession] = {}


def session_for_loop() -> aiohttp.ClientSession:
    """The running loop's client session, created on first use: keep-alive connections
    pooled per host, shared by every direct judge on that loop."""
    import aiohttp

    loop = asyncio.get_running_loop()
    session = _sessions.get(loop)
    if session is None or session.closed:
        connector = aiohttp.TCPConnector(limit=0, limit_per_host=64, keepalive_timeout=30)
        # trust_env: HTTPS_PROXY/NO_PROXY apply as they do to litellm's httpx client.
        session = aiohttp.ClientSession(connector=connector, trust_env=True)
        _sessions[loop] = session
    return session


async def close_session() -> None:
    """Close the running loop's session (at exit, on that loop)."""
    session = _sessions.pop(asyncio.get_running_loop(), None)
    if session is not None and not session.closed:
        await session.close()


def has_session(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether ``loop`` has an open session to close."""
    session = _sessions.get(loop)
    return session is not None and not session.closed


def loaded() -> bool:
    """Whether aiohttp is imported (for tests and the start-up preload)."""
    return "aiohttp" in sys.modules
