"""What went wrong with a judge call: classifying litellm's failures and mapping them to
tracescore's exceptions.

Each failure gets one kind: ``timeout``, ``rate_limited`` and ``unavailable`` (both retried),
or ``error`` (never retried: authentication, other 4xx). Apart from the kinds, a server's
refusal of the ``response_format`` (``rejects_response_format``) is never retried: the caller
steps down to the next structured-output mode. The kinds become the exceptions of
``tracescore._core.errors`` and, through those, the ``error.type`` of evaluation events. A call made
in the child process comes back as a ``RemoteJudgeError`` classified there already.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any

from tracescore._core.errors import (
    JudgeError,
    JudgeRateLimitedError,
    JudgeTimeoutError,
    JudgeUnavailableError,
)

# classify()'s kinds -> the error.type of the events (ScoringError.error_type).
ERROR_TYPES = {"timeout": "timeout", "rate_limited": "rate_limited",
               "unavailable": "judge_unavailable", "error": "judge_error"}

_MISSING_CREDENTIALS = "missing credentials"


class RemoteJudgeError(Exception):
    """A judge call failed in the child process; carries the child's classification.

    Args:
        message: the failure, described (``describe``).
        kind: ``classify``'s kind.
        rejects_response_format: ``rejects_response_format``'s answer.
        status_code: the HTTP status, when there was one.
    """

    def __init__(self, message: str, kind: str, rejects_response_format: bool,
                 status_code: int | None) -> None:
        super().__init__(message)
        self.kind = kind
        self.rejects_response_format = rejects_response_format
        self.status_code = status_code

    def __reduce__(self) -> tuple[Any, ...]:
        # Exceptions unpickle as cls(*args): keep every field across the pipe.
        return (RemoteJudgeError,
                (str(self), self.kind, self.rejects_response_format, self.status_code))


class ResponseFormatRejected(Exception):
    """The provider refused the ``response_format``: the caller falls back to the next mode.

    Attributes:
        final: the refusal was HTTP 400/422 (a validator's answer); a 5xx naming the format is
            not final until the same call without the format is answered.
        why: the status, for the log (``HTTP 500 naming the response format``).
    """

    def __init__(self, message: str, final: bool = True, why: str = "") -> None:
        super().__init__(message)
        self.final = final
        self.why = why


def status_code(exc: BaseException) -> int | None:
    """The HTTP status a litellm exception carries, if any."""
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def classify(exc: BaseException) -> str:
    """The kind of a failed call: ``timeout``, ``rate_limited``, ``unavailable`` or ``error``.

    Imports litellm only for a failure that may be litellm's: a direct or child-process
    call's failure comes classified, so an application without litellm never imports it here.
    """
    if isinstance(exc, RemoteJudgeError):  # classified by the direct transport or the child
        return exc.kind
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return "timeout"
    if "litellm" not in sys.modules:  # then no litellm exception exists to test against
        return _kind_of_status(status_code(exc))
    from litellm import exceptions as errors

    if isinstance(exc, errors.Timeout):
        return "timeout"
    status = status_code(exc)
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


def _kind_of_status(status: int | None) -> str:
    if status in (401, 403):
        return "error"
    if status == 429:
        return "rate_limited"
    return "unavailable" if status is not None and status >= 500 else "error"


def is_retryable(exc: BaseException, sent_response_format: bool = False) -> bool:
    """Whether another attempt may succeed: rate limits and unavailability, but never a
    server's refusal of the ``response_format`` (when one was sent: the caller tries the next
    mode instead), nor a refused connection (nothing listens there: retrying only delays the
    error)."""
    if sent_response_format and rejects_response_format(exc):
        return False
    if connection_refused(exc):
        return False
    return classify(exc) in ("rate_limited", "unavailable")


_REFUSED_WORDS = ("connection refused", "connect call failed", "actively refused")


def connection_refused(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is a refused TCP connection: nothing listens at the
    judge's address. Reads the exception chain, so litellm's ``APIConnectionError`` around
    httpx's or aiohttp's error is recognised as well as the direct transport's.

    Examples:
        >>> connection_refused(ConnectionRefusedError(111, "Connection refused"))
        True
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionRefusedError):
            return True
        os_error = getattr(current, "os_error", None)  # aiohttp's ClientConnectorError
        if isinstance(os_error, ConnectionRefusedError):
            return True
        try:
            text = str(current).lower()
        except Exception:  # noqa: BLE001 - an exception that cannot say what it is
            text = ""
        if any(word in text for word in _REFUSED_WORDS):
            return True
        current = current.__cause__ or current.__context__
    return False


# Words that tie an error message to the structured-output request. A 5xx must name the
# request's fields; a 400/422 may also just say "schema" (Gemini's ``response_schema``, a
# validator's "invalid schema").
_FORMAT_WORDS = ("response_format", "json_schema", "json_object", "json schema", "responseformat")
_CLIENT_ERROR_WORDS = (*_FORMAT_WORDS, "schema")


def rejects_response_format(exc: BaseException) -> bool:
    """Whether ``exc`` is a server's refusal of the ``response_format`` (not of the prompt).

    That is an HTTP 400 or 422 (or litellm's ``BadRequestError`` without a status) whose
    message names the response format, ``json_schema``, ``json_object`` or the schema; or an
    HTTP 5xx whose message names the response format, ``json_schema`` or ``json_object``:
    llama.cpp's OpenAI-compatible server answers ``json_schema`` with HTTP 500 "Input should
    be 'text' or 'json_object'" (its request validation, not an outage). A 5xx that names none
    of them stays an outage (retried). A failure classified elsewhere (the child process, the
    direct transport) is read again from its status and message, so every transport falls
    back alike.
    """
    status = status_code(exc)
    if isinstance(exc, RemoteJudgeError):
        return exc.rejects_response_format or refuses_format(status, str(exc))
    if status is None:
        from litellm import exceptions as errors

        if not isinstance(exc, (errors.BadRequestError, errors.UnprocessableEntityError)):
            return False
        status = 400
    return refuses_format(status, _message_and_body(exc))


def _message_and_body(exc: BaseException) -> str:
    # litellm's message can be a bare "Error code: 422" when the server's ``error`` field is a
    # string (TGI's shape); the body it keeps says what was refused. Read for classifying only:
    # it never goes into a message.
    body = getattr(exc, "body", None)
    if isinstance(body, (dict, list)):
        body = repr(body)
    return f"{exc} {body}" if isinstance(body, str) else str(exc)


def refuses_format(status: int | None, message: str) -> bool:
    """Whether an HTTP ``status`` with error ``message`` refuses the response format
    (``rejects_response_format``'s rule, for a transport that has only these two).

    Examples:
        >>> refuses_format(500, "Input should be 'text' or 'json_object'")
        True
        >>> refuses_format(503, "upstream overloaded")
        False
    """
    if status is None:
        return False
    text = message.lower()
    if status >= 500:
        return any(word in text for word in _FORMAT_WORDS)
    if status in (400, 422):
        return any(word in text for word in _CLIENT_ERROR_WORDS)
    return False


def describe(exc: BaseException) -> str:
    """The exception's type and message, once each."""
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if type(exc).__name__ not in text else text


def map_error(
    exc: BaseException,
    *,
    model: str,
    timeout: float,
    max_retries: int,
    scrub: Callable[[str], str],
    sent_response_format: bool,
    endpoint: str | None = None,
    queued: float = 0.0,
) -> Exception:
    """The exception a failed call raises, its message free of secrets.

    Args:
        exc: what the last attempt raised.
        model: the judge's litellm model string, for the message.
        timeout: seconds per attempt, for the message.
        max_retries: retries made, for the message.
        scrub: removes the judge's secrets from a text.
        sent_response_format: the request had a ``response_format``, so a refusal of it
            (``rejects_response_format``: 400, 422 or 5xx naming it) means "fall back", not
            "fail" nor "retry".
        endpoint: the judge's base URL with any credentials removed, for the message.
        queued: seconds the last attempt waited in tracescore's queue before it was sent.

    Returns:
        A ``JudgeError`` subclass, or ``ResponseFormatRejected`` (its ``__cause__`` is ``exc``).
    """
    kind = classify(exc)
    detail = scrub(describe(exc))
    where = f"judge {model!r}"
    if sent_response_format and rejects_response_format(exc):
        # Before the kinds: a 5xx refusing the format is a fallback, not an outage.
        status = status_code(exc)
        final = status is None or status < 500
        rejected = ResponseFormatRejected(
            detail, final,
            f"HTTP {status or 400}" + ("" if final else " naming the response format"))
        rejected.__cause__ = exc
        return rejected
    if endpoint and endpoint.lower().startswith("http://"):
        # aiohttp names the default TLS context in every connection error, plain HTTP or not.
        detail = detail.replace(" ssl:default", "").replace(" ssl:None", "")
    if connection_refused(exc):
        at = f" at {endpoint}" if endpoint else ""
        return JudgeUnavailableError(
            f"{where}: connection refused{at}: nothing is listening there; is the judge's "
            "server running, and is the api_base right? (not retried)"
        )
    if kind == "timeout":
        sent = (f" It was sent after {queued:.0f} s in tracescore's queue, which does not "
                "count." if queued >= 1 else "")
        return JudgeTimeoutError(
            f"{where} did not answer within {timeout:g} s while the server worked on the call"
            f".{sent} Raise Judge(timeout=...) (the demo and CLI: --judge-timeout) for a slow "
            "model, or lower Judge(max_concurrency=...) when the server runs fewer calls at "
            f"once than tracescore sends: {detail}"
        )
    if kind == "rate_limited":
        return JudgeRateLimitedError(
            f"{where} was rate limited (HTTP 429) after {max_retries} retries: {detail}"
        )
    if kind == "unavailable":
        return JudgeUnavailableError(
            f"{where} was unavailable after {max_retries} retries: {detail}"
        )
    return JudgeError(f"{where} failed: {detail}")
