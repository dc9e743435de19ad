"""One logical judge call: the request, its retries, the structured-output fallback and the
repair of an answer that does not fit.

Layered from the outside in: ``Caller.complete`` asks once more when the answer does not
validate (the repair retry, counted in ``JudgeReply.calls``); ``_call_with_fallback`` steps
down the structured-output modes when the provider rejects one; ``_call_with_retries`` retries
HTTP 429, 5xx and connection errors with exponential backoff and jitter (tenacity; litellm's own
retries are off), waiting what a ``Retry-After`` header asks instead when there is one (at most
``MAX_RETRY_AFTER`` seconds and never longer than ``timeout``), bounds each attempt by
``timeout``, records the metrics, and maps the last failure to tracescore's exceptions.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from tracescore._core.errors import InvalidJudgeOutputError
from tracescore._core.redact import redact_text
from tracescore._pipeline import waits as _waits
from tracescore._setup import env as _env

from . import limit, metrics, output
from .failures import ResponseFormatRejected, connection_refused, is_retryable, map_error
from .reply import JudgeReply, SchemaT
from .scrub import Scrubber, redact_url
from .transport import Route, prepare, start_call

if TYPE_CHECKING:
    from pydantic import BaseModel

logger = logging.getLogger("tracescore")

_MAX_BACKOFF = 20.0
# The longest wait a Retry-After header can ask for (also bounded by the judge's timeout).
MAX_RETRY_AFTER = 60.0
# A backstop in case a provider ignores litellm's timeout: seconds past ``timeout``.
_TIMEOUT_GRACE = 5.0


class Caller:
    """Makes a judge's calls: one per ``complete``, plus the retries it needs.

    Args:
        model: the litellm model string.
        kwargs: the judge's own litellm arguments (merged over ``temperature=0``).
        timeout: seconds per attempt.
        max_retries: retries after the first attempt for 429/5xx/connection errors.
        retry_backoff: base of the exponential backoff, in seconds.
        out_of_process: make the calls in the judge child process; may be changed later.
        transport: ``auto``, ``direct`` or ``litellm`` (``transport.Route``).
        max_reply_length: characters of an answer that are parsed; a longer one is invalid
            output (repair retry, then ``InvalidJudgeOutputError``). Default
            ``TRACESCORE_JUDGE_MAX_REPLY_LENGTH``, else 65536.
        response_format: ``"auto"`` or the structured-output mode fixed up front
            (``output.ModeFallback``).
        max_concurrency: the judge's own limit on calls in flight: None for automatic, 0 for
            none, else the limit (``limit.CallLimit``).
    """

    def __init__(
        self,
        model: str,
        kwargs: Mapping[str, Any],
        *,
        timeout: float,
        max_retries: int,
        retry_backoff: float,
        out_of_process: bool,
        max_reply_length: int | None = None,
        response_format: str = "auto",
        transport: str = "auto",
        max_concurrency: int | None = None,
    ) -> None:
        self.model = model
        self.max_reply_length = (
            _env.judge_max_reply_length() if max_reply_length is None else max_reply_length
        )
        self.timeout = timeout
        self.max_retries = max_retries
        self.retry_backoff = retry_backoff
        self.out_of_process = out_of_process
        self._kwargs = dict(kwargs)
        self.scrub = Scrubber(self._kwargs)
        self._modes = output.ModeFallback(response_format, model)
        self.route = Route(model, self._kwargs, transport)
        api_base = limit.api_base_of(model, self._kwargs)
        self.endpoint = redact_url(api_base) if api_base else None
        key = self._kwargs.get("api_key")
        self.limit = limit.CallLimit(
            model, api_base, max_concurrency,
            {"Authorization": f"Bearer {key}"} if isinstance(key, str) and key else None)
        self._refused = False

    async def complete(
        self,
        system: str,
        user: str,
        schema: type[SchemaT],
        name: str,
        validate: Callable[[SchemaT], None] | None,
    ) -> JudgeReply[SchemaT]:
        """Ask for one structured answer, and once more with the error when it does not fit.

        Raises:
            InvalidJudgeOutputError: the answer did not validate, even after the repair retry.
            JudgeError: the request failed (a subclass says how).
        """
        schema_text = output.schema_json(schema, sort_keys=False)
        messages: list[dict[str, str]] = [{"role": "user", "content": user}]
        prompt_tokens = completion_tokens = 0
        costs: list[float | None] = []
        error = ""
        for attempt in range(2):
            response = await self._call_with_fallback(system, messages, schema, schema_text, name)
            usage = getattr(response, "usage", None)
            prompt_tokens += int(getattr(usage, "prompt_tokens", 0) or 0)
            completion_tokens += int(getattr(usage, "completion_tokens", 0) or 0)
            costs.append(metrics.cost(response))
            content = output.content_of(response)
            try:
                parsed = await output.parse_async(
                    content, schema, validate, self.max_reply_length
                )
            except output.InvalidOutput as exc:
                error = str(exc)
                if attempt == 0:
                    messages = [
                        {"role": "user", "content": user},
                        {"role": "assistant", "content": (content or "")[: output.MAX_ECHO_CHARS]},
                        {"role": "user", "content": output.repair_prompt(error, name, schema_text)},
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
            f"even after one repair retry: {self.scrub(error)}"
        )

    async def _call_with_fallback(
        self,
        system: str,
        messages: list[dict[str, str]],
        schema: type[BaseModel],
        schema_text: str,
        name: str,
    ) -> Any:
        # While the judge has not learnt the response format, one call probes and the others
        # wait in begin() for its answer (output.ModeFallback).
        ticket = await self._modes.begin()
        mode = ticket.mode
        refused: list[tuple[output.ResponseMode, bool, str]] = []
        try:
            while True:
                try:
                    response = await self._call_with_retries(
                        output.system_prompt(system, mode, name, schema_text),
                        messages,
                        output.response_format(mode, schema, name),
                    )
                except ResponseFormatRejected as exc:
                    if ticket.reprobe and mode == ticket.mode:
                        # Asked again after a fallback and still refused: this call goes on
                        # in the mode the judge uses.
                        self._modes.still_refused(mode)
                        mode = self._modes.current
                        continue
                    next_mode = self._modes.next_mode(mode)
                    if next_mode is None:
                        raise self._modes.exhausted(
                            self.model, mode, self.scrub(str(exc))
                        ) from exc.__cause__
                    logger.debug("tracescore judge %r: %s refused (%s), trying %s: %s",
                                 self.model, output.describe_mode(mode), exc.why,
                                 output.describe_mode(next_mode), self.scrub(str(exc))[:300])
                    # A 5xx naming the format counts only once the same call without it is
                    # answered: until then the judge's mode does not change.
                    refused.append((mode, exc.final, exc.why))
                    mode = next_mode
                    continue
                if ticket.reprobe and mode == ticket.mode:
                    self._modes.restored(mode)
                else:
                    self._modes.answered(mode, refused)
                return response
        finally:
            self._modes.end(ticket)

    async def _call_with_retries(
        self,
        system: str,
        messages: list[dict[str, str]],
        response_format: dict[str, Any] | None,
    ) -> Any:
        import tenacity

        await prepare(self.route, self.out_of_process)
        kwargs = self._request(system, messages, response_format)
        retrying = tenacity.AsyncRetrying(
            stop=tenacity.stop_after_attempt(self.max_retries + 1),
            wait=self._backoff,
            # A refusal of the response format is deterministic, even as a 5xx: fall back now.
            retry=tenacity.retry_if_exception(
                lambda exc: is_retryable(exc, response_format is not None)
            ),
            reraise=True,
        )
        waits = _waits.current.get()
        queued = 0.0
        try:
            async for attempt in retrying:
                with attempt:
                    # Each attempt takes a place among the judge's calls in flight (the backoff
                    # between attempts does not hold one); the wait for it is not timed.
                    queue_started = time.monotonic()
                    await self.limit.acquire()
                    queued = time.monotonic() - queue_started
                    try:
                        call = await start_call(kwargs, self.out_of_process, self.route)
                        started = time.perf_counter()
                        if waits is not None:
                            waits.server_started(f"judge {self.model!r}")
                        try:
                            response = await asyncio.wait_for(
                                call, timeout=self.timeout + _TIMEOUT_GRACE
                            )
                        except Exception as exc:
                            metrics.record_call(self.model, time.perf_counter() - started, None,
                                                exc, self.route.name)
                            raise
                    finally:
                        self.limit.release()
                        if waits is not None:
                            waits.server_ended()
                    metrics.record_call(self.model, time.perf_counter() - started, response, None,
                                        self.route.name)
                    self._refused = False
                    return response
        except Exception as exc:  # noqa: BLE001 - every failure is mapped to a JudgeError
            mapped = map_error(
                exc,
                model=self.model,
                timeout=self.timeout,
                max_retries=self.max_retries,
                scrub=self.scrub,
                sent_response_format=response_format is not None,
                endpoint=self.endpoint,
                queued=queued,
            )
            if connection_refused(exc) and not self._refused:
                self._refused = True
                logger.warning("tracescore judge %r: connection refused at %s: its calls fail "
                               "at once (not retried) until the server answers; the scored "
                               "code is unaffected", self.model, self.endpoint or "its api_base")
            raise mapped from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _request(self, system: str, messages: list[dict[str, str]],
                 response_format: dict[str, Any] | None) -> dict[str, Any]:
        """The keyword arguments of one chat-completions call (litellm's names)."""
        kwargs: dict[str, Any] = {"temperature": 0, **self._kwargs}
        kwargs.update(
            model=self.model,
            # The last gate before the provider: whatever built the prompt, no credential
            # tracescore knows or recognises leaves in it (tracescore._core.redact).
            messages=[{"role": m["role"], "content": redact_text(m["content"])}
                      for m in [{"role": "system", "content": system}, *messages]],
            timeout=self.timeout,
            num_retries=0,
            max_retries=0,
        )
        if response_format is not None:
            kwargs["response_format"] = response_format
        return kwargs

    def _backoff(self, retry_state: Any) -> float:
        outcome = getattr(retry_state, "outcome", None)
        exc = outcome.exception() if outcome is not None and outcome.failed else None
        asked = retry_after(exc) if exc is not None else None
        if asked is not None:
            # The provider said when to come back: sooner only earns another 429. Bounded, so
            # a hostile or broken header cannot park the job (nor past the attempt timeout).
            wait = min(asked, MAX_RETRY_AFTER, self.timeout)
            logger.debug("tracescore judge %r: retrying after %.1f s (Retry-After)",
                         self.model, wait)
            return wait
        # Exponential with full-size jitter, written out because tenacity's
        # wait_exponential_jitter changed its arguments between the versions we support.
        exponent = max(0, int(retry_state.attempt_number) - 1)
        base = self.retry_backoff * (2**exponent)
        wait = float(min(base + random.uniform(0, self.retry_backoff), _MAX_BACKOFF))
        logger.debug("tracescore judge %r: retrying after %.1f s (backoff)", self.model, wait)
        return wait


def retry_after(exc: BaseException) -> float | None:
    """Seconds a failed call's ``Retry-After`` (or ``retry-after-ms``) response header asks to
    wait, or None when there is none or it cannot be read.

    The header is read from what litellm attaches to its exceptions (``litellm_response_headers``,
    ``response.headers``, ``headers``). Its value is seconds (RFC 9110 §10.2.3) or an HTTP date;
    a negative or unreadable value counts as none.

    Examples:
        >>> class Limited(Exception):
        ...     headers = {"Retry-After": "2"}
        >>> retry_after(Limited())
        2.0
    """
    for headers in _header_sources(exc):
        try:
            lowered = {str(k).lower(): str(v) for k, v in dict(headers).items()}
        except Exception:  # noqa: BLE001 - headers of an unknown shape: look elsewhere
            continue
        millis = _seconds(lowered.get("retry-after-ms"))
        if millis is not None:
            return millis / 1000
        seconds = _seconds(lowered.get("retry-after"))
        if seconds is not None:
            return seconds
        raw = lowered.get("retry-after")
        if raw:
            try:
                when = email.utils.parsedate_to_datetime(raw)
            except (TypeError, ValueError, IndexError):
                continue
            return max(0.0, when.timestamp() - time.time())
    return None


def _header_sources(exc: BaseException) -> list[Any]:
    found = []
    for value in (getattr(exc, "litellm_response_headers", None),
                  getattr(getattr(exc, "response", None), "headers", None),
                  getattr(exc, "headers", None)):
        if value:
            found.append(value)
    return found


def _seconds(raw: str | None) -> float | None:
    if raw is None:
        return None
    try:
        value = float(raw.strip())
    except ValueError:
        return None
    return value if value >= 0 and value == value and value != float("inf") else None
