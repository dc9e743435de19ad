"""Keeping secrets out of what tracescore shows: error messages, reprs and cache keys.

A ``Judge`` takes litellm arguments as they are, keys, tokens and headers among them. Their
values must never reach an exception message, a repr or a log line; and a cache key is
computed without them, so rotating a key does not empty the cache.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

# Keeps exception messages and repair prompts bounded whatever the provider sends back.
MAX_ERROR_CHARS = 500

_SECRET_MARKERS = ("key", "token", "secret", "password", "credential", "auth")
_HEADER_KWARGS = frozenset({"headers", "extra_headers"})


class Scrubber:
    """Replaces the secret values of a judge's litellm arguments with ``***`` in a text.

    Secret values are those of arguments whose name mentions a key, token, secret, password,
    credential or auth, and every header value; values shorter than 4 characters are left
    alone (replacing them would mangle ordinary words).

    Args:
        kwargs: the judge's litellm arguments.

    Example:
        >>> Scrubber({"api_key": "sk-SECRET"})("bad key sk-SECRET")
        'bad key ***'
    """

    def __init__(self, kwargs: Mapping[str, Any]) -> None:
        secrets: list[str] = []
        for key, value in kwargs.items():
            lowered = key.lower()
            if lowered in _HEADER_KWARGS and isinstance(value, dict):
                secrets.extend(str(v) for v in value.values() if str(v))
            elif any(marker in lowered for marker in _SECRET_MARKERS) and value:
                secrets.append(str(value))
        # Longest first, so a secret containing another is replaced whole.
        self._secrets = sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        """``text`` without the secrets, cut to ``MAX_ERROR_CHARS`` characters."""
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text[:MAX_ERROR_CHARS]


def is_secret_kwarg(name: str) -> bool:
    """Whether the litellm argument ``name`` may hold a credential (``api_key``, headers, ...).

    Example:
        >>> is_secret_kwarg("api_key"), is_secret_kwarg("max_tokens")
        (True, False)
    """
    lowered = name.lower()
    if lowered in _HEADER_KWARGS:
        return True
    # "max_tokens" and friends are request parameters, not credentials.
    return any(marker in lowered for marker in _SECRET_MARKERS) and not lowered.endswith("_tokens")


def redact_url(url: str) -> str:
    """``url`` without its user info, query and fragment (where credentials hide).

    Example:
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
