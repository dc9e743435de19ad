"""Keeping secrets out of what the judge shows: error messages, reprs and cache keys.

A ``Judge`` takes litellm arguments as they are, keys, tokens and headers among them. Their
values must never reach an exception message, a repr or a log line; and a cache key is
computed without them, so rotating a key does not empty the cache. The rules themselves live in
``tracescore._core.redact`` (one module for every path out); this module applies them to the judge.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from tracescore._core import redact as _redact

# Keeps exception messages and repair prompts bounded whatever the provider sends back.
MAX_ERROR_CHARS = 500


class Scrubber:
    """Removes credentials from a text about a judge call (an error message, a reply echoed
    back): the judge's own litellm credentials (values of secret-named arguments, every header
    value and the bare token of ``Authorization: Bearer X``), the providers' key variables in
    the environment (re-read first: litellm reads them at call time too), and every pattern of
    ``tracescore._core.redact``.

    Args:
        kwargs: the judge's litellm arguments; their credentials are also redacted everywhere
            else from now on (``tracescore._core.redact.remember_judge_kwargs``).

    Examples:
        >>> Scrubber({"api_key": "sk-SECRET-VALUE"})("bad key sk-SECRET-VALUE")
        'bad key [REDACTED]'
    """

    def __init__(self, kwargs: Mapping[str, Any]) -> None:
        _redact.remember_judge_kwargs(kwargs)

    def __call__(self, text: str) -> str:
        """``text`` without credentials, cut to ``MAX_ERROR_CHARS`` characters."""
        # An error is rare and its message may quote a key set after configure(): re-read.
        _redact.refresh_environment()
        return _redact.redact_text(text)[:MAX_ERROR_CHARS]


def is_secret_kwarg(name: str) -> bool:
    """Whether the litellm argument ``name`` may hold a credential (``api_key``, headers, ...).

    Examples:
        >>> is_secret_kwarg("api_key"), is_secret_kwarg("max_tokens")
        (True, False)
    """
    return _redact.is_judge_secret_kwarg(name)


def redact_url(url: str) -> str:
    """``url`` without its user info, query and fragment (where credentials hide).

    Examples:
        >>> redact_url("https://user:pw@example.com/v1?key=x")
        'https://***@example.com/v1'
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<invalid url>"
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def short_repr(value: object) -> str:
    """A repr of ``value`` for an error message: at most 60 characters, never raising."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a broken __repr__ must not hide the real error
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."
