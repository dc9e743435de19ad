"""One logical judge call: the request, its retries, the structured-output fallback and the
repair of an answer that does not fit.

Layered from the outside in: ``Caller.complete`` asks once more when the answer does not
validate (the repair retry, counted in ``JudgeReply.calls``); ``_call_with_fallback`` steps
down the structured-output modes when the provider rejects one; ``_call_with_retries`` retries
HTTP 429, 5xx and connection errors with exponential backoff and jitter (tenacity; litellm's own
retries are off), bounds each attempt by ``timeout``, records the metrics, and maps the last
failure to tracescore's exceptions.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from tracescore._errors import InvalidJudgeOutputError, JudgeError

from . import metrics, output
from .failures import ResponseFormatRejected, is_retryable, map_error
from .loading import load_litellm_async
from .reply import JudgeReply, SchemaT
from .scrub import Scrubber
from .transport import start_call

if TYPE_CHECKING:
    from pydantic import BaseModel

_MAX_BACKOFF = 20.0
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
    ) -> None:
        self.model = model
        self.timeout = timeout
        self.max_retries = max_retries
        self.retry_backoff = retry_backoff
        self.out_of_process = out_of_process
        self._kwargs = dict(kwargs)
        self.scrub = Scrubber(self._kwargs)
        self._modes = output.ModeFallback()

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
                parsed = output.parse(content, schema, validate)
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
        await load_litellm_async()  # before response_format(), which needs litellm
        mode = self._modes.current
        while True:
            try:
                return await self._call_with_retries(
                    output.system_prompt(system, mode, name, schema_text),
                    messages,
                    output.response_format(mode, schema, name),
                )
            except ResponseFormatRejected as exc:
                next_mode = self._modes.fall_back(mode)
                if next_mode is None:
                    raise JudgeError(
                        f"judge {self.model!r} rejected the request: {self.scrub(str(exc))}"
                    ) from exc.__cause__
                mode = next_mode

    async def _call_with_retries(
        self,
        system: str,
        messages: list[dict[str, str]],
        response_format: dict[str, Any] | None,
    ) -> Any:
        import tenacity

        await load_litellm_async()
        kwargs: dict[str, Any] = {"temperature": 0, **self._kwargs}
        kwargs.update(
            model=self.model,
            messages=[{"role": "system", "content": system}, *messages],
            timeout=self.timeout,
            num_retries=0,
            max_retries=0,
        )
        if response_format is not None:
            kwargs["response_format"] = response_format

        retrying = tenacity.AsyncRetrying(
            stop=tenacity.stop_after_attempt(self.max_retries + 1),
            wait=self._backoff,
            retry=tenacity.retry_if_exception(is_retryable),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    call = await start_call(kwargs, self.out_of_process)
                    started = time.perf_counter()
                    try:
                        response = await asyncio.wait_for(
                            call, timeout=self.timeout + _TIMEOUT_GRACE
                        )
                    except Exception as exc:
                        metrics.record_call(self.model, time.perf_counter() - started, None, exc)
                        raise
                    metrics.record_call(self.model, time.perf_counter() - started, response, None)
                    return response
        except Exception as exc:  # noqa: BLE001 - every failure is mapped to a JudgeError
            raise map_error(
                exc,
                model=self.model,
                timeout=self.timeout,
                max_retries=self.max_retries,
                scrub=self.scrub,
                sent_response_format=response_format is not None,
            ) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _backoff(self, retry_state: Any) -> float:
        # Exponential with full-size jitter, written out because tenacity's
        # wait_exponential_jitter changed its arguments between the versions we support.
        exponent = max(0, int(retry_state.attempt_number) - 1)
        base = self.retry_backoff * (2**exponent)
        return float(min(base + random.uniform(0, self.retry_backoff), _MAX_BACKOFF))
