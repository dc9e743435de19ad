"""Keeping credentials out of everything tracescore sends or writes: one module, every path out.

Span attributes (captured inputs, outputs, documents, tool arguments and results, exception
messages and status descriptions), score explanations, tracescore's own log records, prompts to
the judge and judge error messages all pass through here. Three kinds of rule apply:

- **key names** (``is_secret_key``): a value under a name such as ``api_key``, ``openai_key``,
  ``*secret*``, ``*password*``/``passwd``, ``*token*`` (not ``max_tokens``), ``authorization``,
  ``cookie``/``set-cookie``, ``x-api-key``, ``private_key`` or ``credential(s)`` becomes
  ``[REDACTED]``, in structures (``redact_structure`` and ``tracescore._serialize``) and in
  free text (``name=value``, ``name: value``, ``"name": "value"``);
- **value patterns** for well-known credential formats: provider keys (OpenAI/Anthropic
  ``sk-...``, AWS ``AKIA...``, GitHub ``ghp_``/``github_pat_``, Google ``AIza...``, Slack
  ``xox?-``, Stripe ``sk_live_``, Hugging Face ``hf_``, ...), ``Bearer <token>`` (kept as
  ``Bearer [REDACTED]``), the password of a URL (``scheme://user:[REDACTED]@host``), JWTs and
  PEM private keys;
- **exact values** of every credential tracescore knows: the judges' litellm arguments
  (``remember_judge_kwargs``) and the providers' key variables in the environment
  (``tracescore._env.credential_values``). Values shorter than ``MIN_SECRET_LENGTH`` are not
  matched by value: replacing every ``"abc"`` would mangle ordinary text.

Users add their own patterns and a callback (``configure(redact_patterns=..., redact=...)``,
env ``TRACESCORE_REDACT_PATTERNS``). A callback that raises redacts the whole text it was given
(logged once, counted in ``callback_failures``).

Cost: all built-in rules are one compiled regular expression whose every alternative starts
with a literal character, so the regex engine skips ahead with a character-set test instead of
trying each rule at each position; strings shorter than ``MIN_SECRET_LENGTH`` skip the regex.
``benchmarks/bench_redaction.py`` measures the cost per span.

Only the standard library is imported (and ``_env``, itself standard library only): the
decorators' hot path imports this module.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from . import _env

__all__ = [
    "MIN_SECRET_LENGTH",
    "REDACTED",
    "callback_failures",
    "configure",
    "is_secret_key",
    "redact_mapping",
    "redact_structure",
    "redact_text",
    "refresh_environment",
    "remember",
    "remember_judge_kwargs",
]

logger = logging.getLogger("tracescore")

REDACTED = "[REDACTED]"
# Shorter strings skip the regex, and shorter known values are not matched by value.
MIN_SECRET_LENGTH = 8
# Known values kept at most (judges are few; this bounds a process creating judges in a loop).
_MAX_KNOWN = 512
_MAX_DEPTH = 12
_MAX_ITEMS = 1_000

# --- Key names ---------------------------------------------------------------------------------

# Substrings of a normalised name (lower case, camelCase split, "-", " ", "." as "_").
_SECRET_PARTS = ("password", "passwd", "passphrase", "secret", "apikey", "api_key", "access_key",
                 "private_key", "credential", "authorization", "cookie", "bearer")
_SECRET_NAMES = frozenset({"auth", "pwd", "pass", "jwt", "session_key", "x_api_key"})
# "<something>_key" names a secret, except these structural keys (a dict's sort key is no key).
_PLAIN_KEY_PREFIXES = frozenset({
    "sort", "primary", "foreign", "partition", "cache", "group", "dedup", "dedupe",
    "idempotency", "routing", "lookup", "hash", "range", "row", "dict", "map", "index",
    "unique", "composite", "join", "shard", "match", "public", "order", "message",
    "translation", "i18n", "label", "object",
})
# "*token*" names a secret, except counts and limits of tokens (max_tokens, token_count).
_PLAIN_TOKEN_WORDS = frozenset({"tokens", "count", "counts", "limit", "limits", "usage", "type",
                                "length", "len", "num", "number", "budget", "estimate", "max",
                                "min", "ids", "id", "index", "logprobs", "tokenizer"})
_TOKEN_COUNT_WORDS = frozenset({"max", "min", "num", "total", "prompt", "completion", "input",
                                "output", "cached", "reasoning"})
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEPARATORS = re.compile(r"[-\s.]+")


@functools.lru_cache(maxsize=8192)
def is_secret_key(key: str) -> bool:
    """Whether a mapping key, argument, header or variable name names a secret.

    Case-insensitive; camelCase, ``-``, ``.`` and spaces count as ``_``. Secret: ``*_key``
    (``api_key``, ``openai_key``; not structural keys such as ``sort_key``), ``apikey``,
    ``*secret*``, ``*password*``, ``passwd``, ``passphrase``, ``*token*`` (not ``max_tokens``
    or ``token_count``), ``authorization``, ``auth``, ``*cookie*``, ``*credential*``,
    ``bearer``, ``jwt``.

    Args:
        key: the name.

    Returns:
        True when values under that name must not leave the process.

    Example:
        >>> is_secret_key("openai_key"), is_secret_key("X-Api-Key"), is_secret_key("max_tokens")
        (True, True, False)
    """
    if not key or len(key) > 128:
        return False
    norm = _SEPARATORS.sub("_", _CAMEL.sub("_", key)).lower().strip("_")
    if norm in _SECRET_NAMES or any(part in norm for part in _SECRET_PARTS):
        return True
    words = [w for w in norm.split("_") if w]
    if not words:
        return False
    if norm.endswith("_auth") or norm.endswith("auth_header"):
        return True
    last = words[-1]
    if last == "key" and len(words) > 1 and words[-2] not in _PLAIN_KEY_PREFIXES:
        return True
    if last.endswith("key") and last[:-3] in ("api", "secret", "access", "private", "auth",
                                              "session", "signing", "encryption", "master"):
        return True
    for i, word in enumerate(words):
        if ("token" in word and word not in _PLAIN_TOKEN_WORDS
                and not word.endswith("tokens") and not word.startswith("tokeni")):
            # "access_token" is a secret; "token_count" and "max_token" are numbers.
            return not (any(w in _PLAIN_TOKEN_WORDS for w in words[i + 1:])
                        or any(w in _TOKEN_COUNT_WORDS for w in words[:i]))
    return False


# --- Value patterns ----------------------------------------------------------------------------

# Each alternative of the one regular expression starts with a literal "anchor" character chosen
# to be rare in ordinary text ("-", "_", ":", "=", "A", "B", "J", "x"), and checks the
# characters before it with a fixed-width lookbehind. The regex engine then jumps between
# candidate positions with one character-set test instead of trying every rule at every
# position (measured: 16 KB of prose in ~0.1 ms instead of ~1.7 ms when rules started with
# common letters). Each alternative has exactly one named group, the secret; ``_SPECS`` says how
# many characters before the group belong to the secret too ("back").
_BODY = r"[A-Za-z0-9_\-]"
_ALNUM = r"[A-Za-z0-9]"


def _anchored(prefix: str, anchor: int, group: str, body: str) -> str:
    """An alternative for ``prefix`` followed by ``body``, starting at ``prefix[anchor]``, not
    preceded by a letter, digit or ``_`` (so ``task-...`` is no ``sk-`` key)."""
    head = prefix[: anchor + 1]
    return (re.escape(prefix[anchor]) + f"(?<={re.escape(head)})"
            + f"(?<![A-Za-z0-9_]{re.escape(head)})" + re.escape(prefix[anchor + 1:])
            + f"(?P<{group}>{body})")


# (prefix, anchor index, body): the whole match, prefix included, becomes [REDACTED].
_PROVIDER_KEYS = [
    # OpenAI (sk-, sk-proj-, sk-svcacct-), Anthropic (sk-ant-), OpenRouter (sk-or-), DeepSeek.
    ("sk-", 2, _BODY + "{16,}"),
    # Stripe secret and restricted keys.
    ("sk_live_", 2, _ALNUM + "{10,}"), ("sk_test_", 2, _ALNUM + "{10,}"),
    ("rk_live_", 2, _ALNUM + "{10,}"),
    # AWS access key ids.
    ("AKIA", 0, "[0-9A-Z]{16}"), ("ASIA", 0, "[0-9A-Z]{16}"), ("AROA", 0, "[0-9A-Z]{16}"),
    ("AIDA", 0, "[0-9A-Z]{16}"),
    # GitHub (personal, OAuth, user-to-server, server-to-server, refresh; fine-grained).
    ("ghp_", 3, _ALNUM + "{20,}"), ("gho_", 3, _ALNUM + "{20,}"), ("ghu_", 3, _ALNUM + "{20,}"),
    ("ghs_", 3, _ALNUM + "{20,}"), ("ghr_", 3, _ALNUM + "{20,}"),
    ("github_pat_", 6, "[A-Za-z0-9_]{20,}"),
    # GitLab, Google API keys, Slack, Hugging Face, Groq, xAI, Perplexity, Replicate, npm, PyPI.
    ("glpat-", 5, _BODY + "{20,}"),
    ("AIza", 0, _BODY + "{30,}"),
    ("xoxa-", 0, r"[A-Za-z0-9\-]{10,}"), ("xoxb-", 0, r"[A-Za-z0-9\-]{10,}"),
    ("xoxp-", 0, r"[A-Za-z0-9\-]{10,}"), ("xoxr-", 0, r"[A-Za-z0-9\-]{10,}"),
    ("xoxs-", 0, r"[A-Za-z0-9\-]{10,}"), ("xapp-", 0, r"[A-Za-z0-9\-]{10,}"),
    ("hf_", 2, _ALNUM + "{20,}"),
    ("gsk_", 3, _ALNUM + "{20,}"),
    ("xai-", 0, _ALNUM + "{20,}"),
    ("pplx-", 3, _ALNUM + "{20,}"),
    ("r8_", 2, _ALNUM + "{20,}"),
    ("npm_", 3, _ALNUM + "{30,}"),
    ("pypi-", 4, _BODY + "{40,}"),
    # JSON Web Tokens: base64url '{"' header, payload and (possibly empty) signature.
    ("eyJ", 2, r"[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*"),
    # PEM private keys, the whole block.
    ("-----BEGIN", 0,
     r"[A-Z ]{0,20} PRIVATE KEY-----[\s\S]{0,20000}?-----END[A-Z ]{0,20} PRIVATE KEY-----"),
]
_TOKEN68 = r"[A-Za-z0-9\-._~+/]{8,}=*"
# (regex, back): the named group is redacted, with "back" characters before it.
_SPECS: dict[str, tuple[str, int]] = {}
for _i, (_prefix, _anchor, _body) in enumerate(_PROVIDER_KEYS):
    _SPECS[f"p{_i}"] = (_anchored(_prefix, _anchor, f"p{_i}", _body), len(_prefix))
_SPECS.update({
    # "Bearer <token>" keeps "Bearer " (lower-case "bearer x" is caught as a header value).
    "b1": (r"B(?<![A-Za-z0-9_]B)earer\s+(?P<b1>" + _TOKEN68 + ")", 0),
    "b2": (r"B(?<![A-Za-z0-9_]B)EARER\s+(?P<b2>" + _TOKEN68 + ")", 0),
    # Basic credentials are base64; the lookahead wants a digit, "+", "/" or "=" in them so that
    # prose ("Basic authentication") is left alone.
    "b3": (r"B(?<![A-Za-z0-9_]B)asic\s+(?P<b3>(?=[A-Za-z0-9+/]*[0-9+/=])[A-Za-z0-9+/]{8,}={0,2})",
           0),
    # The password of a URL's user info: scheme://user:[REDACTED]@host.
    "u": (r"://[^\s:/?#@\"'<>\\]{0,256}:(?P<u>[^\s/?#@\"'<>\\]{1,256})@", 0),
})
# name=value, name: value and "name": "value" in free text, matched at the separator; the name
# before it is read back and checked with is_secret_key. A value under another name is searched
# on its own (it may hold a key of a known format).
_SCHEME_WORDS = r"(?:Bearer|bearer|BEARER|Basic|basic|BASIC|Token|token|Digest)"
_VALUE = (r"(?:\\?[\"'])?(?:" + _SCHEME_WORDS
          + r"\s+)?(?P<{g}>[^\s\"'\\,;&<>()\[\]{{}}]{{1,4096}})")
_SPECS["kv1"] = (r"=[ \t]{0,4}" + _VALUE.format(g="kv1"), 0)
_SPECS["kv2"] = (r":[ \t]{0,4}" + _VALUE.format(g="kv2"), 0)
# The name before a separator, matched on the reversed text (one anchored attempt instead of a
# search over the 72 characters before the separator).
_NAME_REVERSED = re.compile(r"[ \t]{0,4}[\"']?\\?([A-Za-z0-9_.\-]{1,64})")
# Characters already anchoring a rule: a known value anchored on one of them adds no candidate
# positions to the scan.
_ANCHORS = "-_:=ABJx"


def _known_alternative(index: int, value: str) -> tuple[str, tuple[str, int]]:
    """The alternative matching ``value`` exactly, anchored on its rarest character."""
    def rarity(c: str) -> int:
        if c in _ANCHORS:
            return 0
        if c.isdigit() or c.isupper() or not c.isalnum():
            return 1 if not c.isspace() else 3
        return 2
    anchor = min(range(len(value)), key=lambda i: (rarity(value[i]), i))
    name = f"k{index}"
    head = value[: anchor + 1]
    regex = (re.escape(value[anchor]) + f"(?<={re.escape(head)})"
             + f"(?P<{name}>{re.escape(value[anchor + 1:])})")
    return name, (regex, anchor + 1)


class _Rules:
    """The compiled state, swapped whole so that readers never see half an update."""

    __slots__ = ("regex", "back", "extra", "callback")

    def __init__(self, regex: re.Pattern[str], back: dict[str, int],
                 extra: re.Pattern[str] | None, callback: Callable[[str], str] | None) -> None:
        self.regex = regex
        self.back = back
        self.extra = extra
        self.callback = callback


_lock = threading.Lock()
_judge_values: dict[str, None] = {}  # insertion-ordered set, oldest dropped first
_env_values: frozenset[str] = frozenset()
_env_loaded = False
_extra_sources: tuple[str, ...] = ()
_callback: Callable[[str], str] | None = None
_rules: _Rules | None = None
# Set while tracescore logs the callback's failure (see _call_user).
_own_message = threading.local()
# How often a user callback raised or returned a non-string (its text was then redacted whole).
callback_failures = 0
_callback_warned = False
# The benchmark's switch (benchmarks/bench_redaction.py measures against a run without
# redaction). Not an option: nothing in tracescore sets it.
enabled = True


def _compile() -> _Rules:
    specs = dict(_SPECS)
    # Longest first: a known value containing another is redacted whole.
    known = sorted({*_judge_values, *_env_values}, key=len, reverse=True)
    for i, value in enumerate(known):
        name, spec = _known_alternative(i, value)
        specs[name] = spec
    regex = re.compile("|".join(regex for regex, _ in specs.values()))
    back = {name: b for name, (_, b) in specs.items()}
    extra = re.compile("|".join(f"(?:{p})" for p in _extra_sources)) if _extra_sources else None
    return _Rules(regex, back, extra, _callback)


def _current() -> _Rules:
    rules = _rules
    if rules is None:
        with _lock:
            if not _env_loaded:
                _load_environment()
            rules = _rules
            if rules is None:
                rules = _set_rules()
    return rules


def _set_rules() -> _Rules:
    global _rules
    rules = _compile()
    _rules = rules
    return rules


def _load_environment() -> bool:
    global _env_values, _env_loaded
    values = frozenset(v for v in _env.credential_values(is_secret_key)
                       if len(v) >= MIN_SECRET_LENGTH)
    _env_loaded = True
    if values == _env_values:
        return False
    _env_values = values
    return True


def refresh_environment() -> None:
    """Re-read the providers' key variables (``tracescore._env.credential_values``) so that
    their exact values are redacted. Called by ``configure()`` and before a judge error is
    described; cheap when nothing changed."""
    with _lock:
        if _load_environment() or _rules is None:
            _set_rules()


def remember(values: Iterable[Any]) -> None:
    """Redact these exact values wherever they appear from now on (strings of at least
    ``MIN_SECRET_LENGTH`` characters; others are ignored).

    Args:
        values: credentials tracescore was given (a judge's API key, header values).
    """
    fresh = [v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET_LENGTH
             and v not in _judge_values]
    if not fresh:
        return
    with _lock:
        for value in fresh:
            _judge_values[value] = None
        while len(_judge_values) > _MAX_KNOWN:
            del _judge_values[next(iter(_judge_values))]
        if not _env_loaded:
            _load_environment()
        _set_rules()


def credential_values_of(kwargs: Mapping[str, Any]) -> list[str]:
    """The credentials in a judge's litellm arguments: values of secret-named arguments, every
    header value, and the bare token of ``Authorization: Bearer X`` (and of other schemes)."""
    found: list[str] = []

    def add(value: Any) -> None:
        if isinstance(value, (bytes, bytearray)):
            value = bytes(value).decode("utf-8", errors="replace")
        if not isinstance(value, str) or not value.strip():
            return
        value = value.strip()
        found.append(value)
        scheme, _, rest = value.partition(" ")
        if rest.strip() and re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]{0,20}", scheme):
            found.append(rest.strip())  # "Bearer X": X alone is a secret too

    for name, value in kwargs.items():
        lowered = str(name).lower()
        if lowered in ("headers", "extra_headers") and isinstance(value, Mapping):
            for header_value in value.values():
                add(header_value)
        elif is_secret_key(str(name)) or is_judge_secret_kwarg(lowered):
            if isinstance(value, Mapping):
                for inner in value.values():
                    add(inner)
            else:
                add(value)
        elif lowered in ("api_base", "base_url") and isinstance(value, str):
            match = re.search(r"://[^/@\s]*:([^/@\s]+)@", value)
            if match:
                add(match.group(1))
    return found


def is_judge_secret_kwarg(name: str) -> bool:
    """Whether a litellm argument ``name`` may hold a credential: secret-named arguments and
    the header arguments (``max_tokens`` and friends are request parameters).

    Example:
        >>> is_judge_secret_kwarg("api_key"), is_judge_secret_kwarg("max_tokens")
        (True, False)
    """
    lowered = name.lower()
    if lowered in ("headers", "extra_headers"):
        return True
    return is_secret_key(lowered) or (
        any(m in lowered for m in ("key", "token", "secret", "password", "credential", "auth"))
        and not lowered.endswith("_tokens") and "max_token" not in lowered
    )


def remember_judge_kwargs(kwargs: Mapping[str, Any]) -> None:
    """``remember`` the credentials in a judge's litellm arguments (see
    ``credential_values_of``)."""
    remember(credential_values_of(kwargs))


def configure(patterns: Sequence[str | re.Pattern[str]] | None,
              callback: Callable[[str], str] | None) -> None:
    """Set the user's extra rules (``tracescore.configure(redact_patterns=..., redact=...)``).

    Args:
        patterns: regular expressions whose every match becomes ``[REDACTED]``, added to the
            built-in rules; None or empty for none. Env ``TRACESCORE_REDACT_PATTERNS`` adds
            more (see ``tracescore._env.redact_patterns``).
        callback: called with every text after the built-in rules, returns the text to use.
            When it raises or returns something else than a string, the whole text becomes
            ``[REDACTED]``.

    Raises:
        ValueError: a pattern does not compile (the message names it).
    """
    global _extra_sources, _callback
    sources: list[str] = []
    for pattern in [*(patterns or ()), *_env.redact_patterns()]:
        source = pattern.pattern if isinstance(pattern, re.Pattern) else str(pattern)
        try:
            re.compile(source)
        except re.error as exc:
            raise ValueError(f"redact pattern {source!r} is not a regular expression: {exc}") \
                from None
        sources.append(source)
    with _lock:
        _extra_sources = tuple(sources)
        _callback = callback
        _load_environment()
        _set_rules()


def _spans(rules: _Rules, text: str, pos: int, endpos: int, out: list[tuple[int, int]]) -> None:
    """Append to ``out`` the ``[start, end)`` spans of ``text[pos:endpos]`` to redact."""
    back = rules.back
    for match in rules.regex.finditer(text, pos, endpos):
        group = match.lastgroup
        if group is None:  # pragma: no cover - every alternative has its group
            continue
        start, end = match.span(group)
        if group[0] == "k" and group[1] == "v":
            # The name before the separator, read backwards with one anchored match.
            at = match.start()
            name = _NAME_REVERSED.match(text[max(0, at - 72):at][::-1])
            if name is None or not is_secret_key(name.group(1)[::-1]):
                # Not a secret name: the value may still hold a credential of its own.
                if end - start >= MIN_SECRET_LENGTH:
                    _spans(rules, text, start, end, out)
                continue
        out.append((start - back[group], end))


def _apply(text: str, spans: list[tuple[int, int]]) -> str:
    spans.sort()
    pieces: list[str] = []
    cursor = 0
    for start, end in spans:
        if end <= cursor:
            continue
        if start > cursor:
            pieces.append(text[cursor:start])
        elif pieces and pieces[-1] is REDACTED:
            cursor = end  # overlapping spans become one marker
            continue
        pieces.append(REDACTED)
        cursor = end
    pieces.append(text[cursor:])
    return "".join(pieces)


def redact_text(text: str) -> str:
    """``text`` with every credential the rules find replaced by ``[REDACTED]``.

    Args:
        text: any text: an attribute value, a log message, a prompt, an error message.

    Returns:
        The redacted text (the same object when nothing was found and no callback is set).
        Never raises: if a rule fails, the whole text is ``[REDACTED]``.

    Example:
        >>> redact_text("curl -H 'Authorization: Bearer abcdefgh12345'")
        "curl -H 'Authorization: Bearer [REDACTED]'"
    """
    if not enabled:
        return text
    rules = _rules or _current()
    if len(text) >= MIN_SECRET_LENGTH:
        try:
            # One search first: most texts hold no candidate at all, and a search that finds
            # none costs a third of setting up the walk over matches.
            first = rules.regex.search(text)
            if first is not None:
                spans: list[tuple[int, int]] = []
                _spans(rules, text, first.start(), len(text), spans)
                if spans:
                    text = _apply(text, spans)
            if rules.extra is not None:
                text = rules.extra.sub(REDACTED, text)
        except Exception:  # noqa: BLE001 - redaction must never break the caller
            return REDACTED
    if rules.callback is not None and text and not getattr(_own_message, "active", False):
        return _call_user(rules.callback, text)
    return text


# redact_name's memory: the redacted form of names seen under the rules in force.
# One tuple (rules, memory), read and replaced whole: a reader never pairs one rules' memory
# with another's rules.
_names: tuple[_Rules | None, dict[str, str]] = (None, {})
_NAMES_MAX = 1_024


def redact_name(name: str) -> str:
    """``redact_text`` for a name (a mapping key, an argument name): the same result,
    remembered for up to 1,024 names of at most 64 characters while the rules stay the same
    and no callback is set (names repeat on every call; values do not).

    Example:
        >>> redact_name("question")
        'question'
    """
    rules = _rules
    if rules is None or rules.callback is not None or not enabled or len(name) > 64:
        return redact_text(name)
    global _names
    names_rules, names = _names
    if names_rules is not rules:
        names = {}
        _names = (rules, names)
    known = names.get(name)
    if known is None:
        known = redact_text(name)
        # Into this rules' memory, not whatever _names is now: configure() on another thread
        # may have swapped the rules (and the memory) while the name was being redacted.
        if len(names) < _NAMES_MAX:
            names[name] = known
    return known


def _call_user(callback: Callable[[str], str], text: str) -> str:
    global callback_failures, _callback_warned
    try:
        result = callback(text)
        if isinstance(result, str):
            return result
        raise TypeError(f"the redact callback returned {type(result).__name__}, not str")
    except Exception:  # noqa: BLE001 - a user's callback must not break instrumentation
        callback_failures += 1
        if not _callback_warned:
            _callback_warned = True
            # Not exc_info: the traceback would quote the text we are keeping out. The message
            # is ours and constant: the log filter must not hand it to the failing callback.
            _own_message.active = True
            try:
                logger.warning("tracescore: the redact callback raised or returned a non-string; "
                               "the text it was given is recorded as [REDACTED] (logged once; "
                               "your code is unaffected)")
            finally:
                _own_message.active = False
        return REDACTED


def redact_structure(value: Any, _depth: int = 0) -> Any:
    """A copy of ``value`` fit to be shown: values under secret names become ``[REDACTED]``
    and every string goes through ``redact_text``.

    Mappings become dicts and lists/tuples lists; namedtuples, dataclasses and pydantic models
    become dicts of their fields and ``functools.partial`` objects a dict of their function
    name, arguments and keywords, so that no ``repr`` shows a secret field. Numbers, booleans
    and None are kept, also under secret names (``max_tokens=100`` is no secret). Beyond a
    depth of 12 or 1,000 items per container the rest is cut with a marker. Never raises.

    Args:
        value: anything (a scorer's input, output, tool calls).

    Returns:
        The redacted copy (strings, numbers, dicts, lists; other objects as they were).
    """
    try:
        return _structure(value, _depth)
    except Exception:  # noqa: BLE001 - a hostile object must not break scoring
        return REDACTED


def redact_mapping(mapping: Mapping[Any, Any]) -> dict[Any, Any]:
    """``redact_structure`` for keyword arguments: always a dict, one redacted entry per
    entry (an entry that cannot be read is ``[REDACTED]``). Never raises."""
    out: dict[Any, Any] = {}
    try:
        items = list(mapping.items())
    except Exception:  # noqa: BLE001 - a hostile mapping: nothing of it goes out
        return out
    for key, value in items:
        out[key] = REDACTED if _secret_value(key, value) else redact_structure(value, 1)
    return out


def _secret_value(name: Any, value: Any) -> bool:
    return (isinstance(name, str) and not (value is None or isinstance(value, (bool, int, float)))
            and is_secret_key(name))


def _structure(value: Any, depth: int) -> Any:
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return redact_text(bytes(value).decode("utf-8", errors="replace"))
    if depth >= _MAX_DEPTH:
        return f"<{type(value).__name__}: max depth>"
    fields = fields_of(value)
    if fields is not None:
        value = fields
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        for i, (k, v) in enumerate(value.items()):
            if i >= _MAX_ITEMS:
                out["..."] = f"{len(value) - i} more items"
                break
            out[k] = REDACTED if _secret_value(k, v) else _structure(v, depth + 1)
        return out
    if isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)[:_MAX_ITEMS]
        if is_secret_pair(items):
            return [items[0], REDACTED]
        return [_structure(v, depth + 1) for v in items]
    return value


def is_secret_pair(items: Sequence[Any]) -> bool:
    """Whether ``items`` is a ``(name, value)`` pair whose name is secret, as in a header list
    ``[("Authorization", "Bearer ...")]``."""
    return (len(items) == 2 and isinstance(items[0], str)
            and _secret_value(items[0], items[1]))


def fields_of(value: Any) -> dict[str, Any] | None:
    """The named fields of a namedtuple, dataclass, pydantic model or ``functools.partial``
    (for a partial: ``func``, ``args``, ``keywords``), or None for anything else. Reads the
    fields without calling ``repr``, which would show secret fields. Never raises."""
    try:
        if isinstance(value, tuple) and hasattr(type(value), "_fields"):
            names: tuple[str, ...] = getattr(type(value), "_fields", ())
            return dict(zip(names, value, strict=False))
        if isinstance(value, functools.partial):
            func = value.func
            name = getattr(func, "__qualname__", None) or type(func).__qualname__
            return {"func": str(name), "args": list(value.args),
                    "keywords": dict(value.keywords)}
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {f.name: getattr(value, f.name, None) for f in dataclasses.fields(value)}
        dump = getattr(value, "model_dump", None)  # pydantic v2 models
        if callable(dump) and not isinstance(value, type):
            dumped = dump(mode="json")
            return dumped if isinstance(dumped, dict) else None
    except Exception:  # noqa: BLE001 - exotic objects fall back to their repr (redacted)
        return None
    return None


class _LogFilter(logging.Filter):
    """Redacts tracescore's own log records: the message with its arguments, the formatted
    exception (whose chain may quote a provider's error body) and the stack."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
            redacted = redact_text(message)
            if redacted != message or record.args:
                record.msg, record.args = redacted, None
            if record.exc_info and record.exc_info[1] is not None:
                text = logging.Formatter().formatException(record.exc_info)
                # Handlers format exc_text when it is set; drop exc_info so that none formats
                # the raw exception again.
                record.exc_text, record.exc_info = redact_text(text), None
            elif record.exc_text:
                record.exc_text = redact_text(record.exc_text)
            if record.stack_info:
                record.stack_info = redact_text(record.stack_info)
        except Exception:  # noqa: BLE001 - a log line must never break the caller
            record.msg, record.args, record.exc_info, record.exc_text = REDACTED, None, None, None
        return True


_log_filter = _LogFilter()
if not any(isinstance(f, _LogFilter) for f in logger.filters):
    logger.addFilter(_log_filter)
