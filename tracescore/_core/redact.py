"""Keeping credentials out of everything tracescore sends or writes: one module, every path out.

Span attributes (captured inputs, outputs, documents, tool arguments and results, exception
messages and status descriptions), score explanations, tracescore's own log records, prompts to
the judge and judge error messages all pass through here. Four kinds of rule apply:

- **key names** (``is_secret_key``): a value under a name such as ``api_key``, ``openai_key``,
  ``*secret*``, ``*password*``/``passwd``, ``*token*`` (not ``max_tokens``), ``authorization``,
  ``cookie``/``set-cookie``, ``x-api-key``, ``private_key`` or ``credential(s)`` becomes
  ``[REDACTED]``, in structures (``redact_structure`` and ``tracescore._core.serialize``) and in
  free text (``name=value``, ``name: value``, ``"name": "value"``);
- **value patterns** for well-known credential formats: provider keys (OpenAI/Anthropic
  ``sk-...``, AWS ``AKIA...``, GitHub ``ghp_``/``github_pat_``, Google ``AIza...``, Slack
  ``xox?-``, Stripe ``sk_live_``, Hugging Face ``hf_``, ...), ``Bearer <token>`` (kept as
  ``Bearer [REDACTED]``), the password of a URL (``scheme://user:[REDACTED]@host``), JWTs and
  PEM private keys;
- **credential words in prose**: a value after ``token``, ``password``, ``secret``,
  ``credential``, ``api key`` ... ("auth failed with token X", "the password is X") when it
  looks like a credential (a digit, a symbol or an inner capital; "the token limit" is prose);
- **exact values** of every credential tracescore knows: the judges' litellm arguments
  (``remember_judge_kwargs``) and the providers' key variables in the environment
  (``tracescore._setup.env.credential_values``). Values shorter than ``MIN_SECRET_LENGTH`` are not
  matched by value: replacing every ``"abc"`` would mangle ordinary text.

Disguised credentials are found too: a text that is not ASCII or holds a ``%``, ``&`` or
``\\`` is searched a second time as a person reads it (``plain_text``: invisible characters
such as zero-width spaces and soft hyphens removed, NFKC applied, dashes and Cyrillic or Greek
look-alikes in words of mixed scripts read as ASCII, percent escapes, HTML entities and
backslash escapes decoded, up to three rounds for encodings inside encodings); what the rules
find there is mapped back and the span of the original text is replaced.

Users add their own patterns and a callback (``configure(redact_patterns=..., redact=...)``,
env ``TRACESCORE_REDACT_PATTERNS``). A callback that raises redacts the whole text it was given
(logged once, counted in the redactor's ``callback_failures``). Those patterns and that
callback belong to one runtime's ``Redactor`` (``configure()``'s is ``PROCESS``; a service has
its own); the credentials tracescore knows are redacted by all of them.

Cost: linear in the text, whatever the text (issue 22). Each rule starts with a literal searched
at C speed and runs only when its literal is in the text; names are found from the words secret
names are made of (``pass``, ``secret``, ``key``, ``token``, ...), so a text full of ``:`` and
``=`` (JSON) costs no more than prose; a PEM header with no end redacts the rest of the text;
the matches examined in Python are bounded per text (past the bound the rest of the text is
``[REDACTED]``, counted in the redactor's ``overflows`` and logged once). Strings shorter than
``MIN_SECRET_LENGTH`` are skipped. The second search of a disguised text is linear too: each
decoding step is one pass (character folding block by block at C speed, one regular-expression
pass per encoding), and mapping a match back walks one block or one decoded run.
``benchmarks/bench_redaction.py`` measures typical spans and 1 MiB adversarial, typical and
encoded texts.

Only the standard library is imported (and ``_env``, itself standard library only): the
decorators' hot path imports this module.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import functools
import itertools
import logging
import re
import threading
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from tracescore._setup import env as _env

__all__ = [
    "MAX_NAME_LENGTH",
    "MAX_TEXT_LENGTH",
    "MIN_SECRET_LENGTH",
    "REDACTED",
    "PROCESS",
    "Redactor",
    "active",
    "bounded_text",
    "configure",
    "is_secret_key",
    "redact_mapping",
    "redact_structure",
    "redact_text",
    "refresh_environment",
    "remember",
    "remember_judge_kwargs",
    "using",
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

    Case-insensitive; camelCase, ``-``, ``.`` and spaces count as ``_``; read as a person
    reads it (``plain_text``: invisible characters, compatibility forms and encodings
    undone). Secret: ``*_key``
    (``api_key``, ``openai_key``; not structural keys such as ``sort_key``), ``apikey``,
    ``*secret*``, ``*password*``, ``passwd``, ``passphrase``, ``*token*`` (not ``max_tokens``
    or ``token_count``), ``authorization``, ``auth``, ``*cookie*``, ``*credential*``,
    ``bearer``, ``jwt``.

    Args:
        key: the name.

    Returns:
        True when values under that name must not leave the process.

    Examples:
        >>> is_secret_key("openai_key"), is_secret_key("X-Api-Key"), is_secret_key("max_tokens")
        (True, True, False)
    """
    if not key or len(key) > 128:
        return False
    if _disguised(key):  # "pass\u200bword", "ｐａｓｓｗｏｒｄ", "api%5Fkey" read as what they are
        key = plain_text(key)
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

# Each rule is a small regular expression that starts with a literal (its "needle"); each of
# its alternatives has one named group, the secret, and ``backs`` says how many characters
# before that group belong to the secret too. A rule runs only on texts that contain one of its
# needles (``needle in text``:
# C speed, ~1 ns per character or less), and each search jumps between occurrences of its
# literal start with the regex engine's prefix search instead of trying the rule at every
# position. So the cost stays linear in the text whatever the text (issue 22: ``benchmarks/
# bench_redaction.py`` measures runs of one character, PEM headers with no end, prose):
#
# - no rule scans further than a few hundred characters past its start unless it matches, and
#   a name around a credential word is read at most 64 characters either side;
# - the matches examined in Python are bounded per text (``_BUDGET_BASE`` plus one per
#   ``_BUDGET_PER`` characters): a text with more candidates than any real text holds has its
#   rest replaced by ``[REDACTED]`` (counted in the redactor's ``overflows``, logged once)
#   instead of costing seconds;
# - a PEM private key's end is found with one forward search; a header with no end redacts the
#   rest of the text (a truncated key is still key material).
_BODY = r"[A-Za-z0-9_\-]"
_ALNUM = r"[A-Za-z0-9]"

# (literal start, body): the whole match, start included, becomes [REDACTED]. A start is not
# taken when a letter, digit or "_" precedes it (``task-...`` holds no ``sk-`` key).
_PROVIDER_KEYS: list[tuple[str, str]] = [
    # OpenAI (sk-, sk-proj-, sk-svcacct-), Anthropic (sk-ant-), OpenRouter (sk-or-), DeepSeek.
    ("sk-", _BODY + "{16,}"),
    # Stripe secret and restricted keys.
    ("sk_live_", _ALNUM + "{10,}"), ("sk_test_", _ALNUM + "{10,}"),
    ("rk_live_", _ALNUM + "{10,}"),
    # AWS access key ids.
    ("AKIA", "[0-9A-Z]{16}"), ("ASIA", "[0-9A-Z]{16}"), ("AROA", "[0-9A-Z]{16}"),
    ("AIDA", "[0-9A-Z]{16}"),
    # GitHub (personal, OAuth, user-to-server, server-to-server, refresh; fine-grained).
    ("ghp_", _ALNUM + "{20,}"), ("gho_", _ALNUM + "{20,}"), ("ghu_", _ALNUM + "{20,}"),
    ("ghs_", _ALNUM + "{20,}"), ("ghr_", _ALNUM + "{20,}"),
    ("github_pat_", "[A-Za-z0-9_]{20,}"),
    # GitLab, Google API keys, Slack, Hugging Face, Groq, xAI, Perplexity, Replicate, npm, PyPI.
    ("glpat-", _BODY + "{20,}"),
    ("AIza", _BODY + "{30,}"),
    ("xoxa-", r"[A-Za-z0-9\-]{10,}"), ("xoxb-", r"[A-Za-z0-9\-]{10,}"),
    ("xoxp-", r"[A-Za-z0-9\-]{10,}"), ("xoxr-", r"[A-Za-z0-9\-]{10,}"),
    ("xoxs-", r"[A-Za-z0-9\-]{10,}"), ("xapp-", r"[A-Za-z0-9\-]{10,}"),
    ("hf_", _ALNUM + "{20,}"),
    ("gsk_", _ALNUM + "{20,}"),
    ("xai-", _ALNUM + "{20,}"),
    ("pplx-", _ALNUM + "{20,}"),
    ("r8_", _ALNUM + "{20,}"),
    ("npm_", _ALNUM + "{30,}"),
    ("pypi-", _BODY + "{40,}"),
    # JSON Web Tokens: base64url '{"' header, payload and (possibly empty) signature.
    ("eyJ", r"[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*"),
]
_TOKEN68 = r"[A-Za-z0-9\-._~+/]{8,}=*"
# A value stops at white space, quotes and brackets; after a separator its first character is
# none of the separators.
_VALUE_STOP = r"\s\"'\\,;&<>()\[\]{}"
_VALUE_SCAN = 512  # a value under a secret name longer than this is followed to its end
_SCHEME = re.compile(r"(?:Bearer|bearer|BEARER|Basic|basic|BASIC|Token|token|Digest)\Z")
# Names and credential words are found from the words secret names are made of (lower case),
# searched in the lower-cased text: "name=value", "name: value", '"name": "value"' whose name
# is_secret_key accepts, and a credential word in prose followed by a value that looks like a
# credential ("auth failed with token X", "the password is X"). A text full of ":" or "="
# (JSON) costs nothing more: only these words are candidates.
_NAME_WORDS = {
    # word: what may not follow it (counts and limits of tokens, keywords, authors, passages
    # are no credentials: a dump of token counts costs no budget).
    "pass": "(?!age|ed\\b|es\\b|ing|ive)", "secret": "", "key": "(?![sw])",
    "token": "(?![si])", "auth": "(?!ors?\\b)", "cookie": "", "credential": "", "bearer": "",
    "pwd": "", "jwt": "",
}
_PROSE_WORDS = frozenset({"token", "password", "passwd", "passphrase", "pass", "secret",
                          "credential", "credentials", "pwd", "apikey", "api_key", "api-key"})
_KEY_QUALIFIERS = frozenset({"api", "access", "secret", "private"})
_NAME_AHEAD = re.compile(r"[A-Za-z0-9_.\-]{0,64}")
_AFTER_NAME = re.compile(r"\\?[\"']?[ \t]{0,4}[:=][ \t]{0,4}\\?[\"']?(?P<s>[^" + _VALUE_STOP
                         + r"=:][^" + _VALUE_STOP + r"]{0," + str(_VALUE_SCAN - 1) + "})")
_PROSE_AFTER = re.compile(r"(?:[ \t]+(?:is|was|of|=|:))?[ \t]+(?P<s>[^" + _VALUE_STOP
                          + r"]{6,256})")
_PREVIOUS_WORD = re.compile(r"[ _\-]([a-z]{1,16})")
_WORD_SEARCH = [(word, re.compile(word + after).search) for word, after in _NAME_WORDS.items()]
_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}


class _Rule:
    """One rule: runs when a needle is in the text; ``backs`` says, per named group, how many
    characters before it belong to the secret; ``kind`` says what a match means."""

    __slots__ = ("needles", "search", "backs", "kind")

    def __init__(self, needles: Sequence[str], regex: str, backs: dict[str, int],
                 kind: str) -> None:
        self.needles = tuple(needles)
        self.search = re.compile(regex).search
        self.backs = backs
        self.kind = kind


def _anchor(prefix: str) -> int:
    """Where a key's start is searched from: its first "-" or "_", else its first capital
    (rare in text, so the search jumps far between candidates)."""
    for i, c in enumerate(prefix):
        if c in "-_":
            return i
    return next((i for i, c in enumerate(prefix) if c.isupper()), 0)


def _key_families() -> list[_Rule]:
    """The provider keys, ``Bearer`` and ``Basic``: one rule per anchor character, guarded by
    the characters that may come before it, so a long run of it costs one test per position."""
    families: dict[str, list[tuple[str, str, int, str]]] = {}
    keys = [(prefix, f"(?P<p{i}>{body})") for i, (prefix, body) in enumerate(_PROVIDER_KEYS)]
    # "Bearer <token>" keeps "Bearer " (lower-case "bearer x" is caught as a header value).
    # Basic credentials are base64; the lookahead wants a digit, "+", "/" or "=" in them so that
    # prose ("Basic authentication") is left alone.
    keys += [("Bearer", r"[ \t]{1,16}(?P<b1>" + _TOKEN68 + ")"),
             ("BEARER", r"[ \t]{1,16}(?P<b2>" + _TOKEN68 + ")"),
             ("Basic", r"[ \t]{1,16}(?P<b3>(?=[A-Za-z0-9+/]{0,256}[0-9+/=])"
                       r"[A-Za-z0-9+/]{8,}={0,2})")]
    for prefix, body in keys:
        at = _anchor(prefix)
        group = body[body.index("<") + 1:body.index(">")]
        families.setdefault(prefix[at], []).append((prefix, body, at, group))
    rules: list[_Rule] = []
    for char, members in families.items():
        before = {prefix[at - 1] for prefix, _, at, _ in members if at > 0}
        if before:
            chars = "".join(sorted(before))
            guard = f"(?<=[{re.escape(chars)}]{re.escape(char)})"
        else:
            guard = f"(?<![A-Za-z0-9_]{re.escape(char)})"
        alternatives = []
        backs: dict[str, int] = {}
        for prefix, body, at, group in members:
            head = re.escape(prefix[: at + 1])
            check = f"(?<={head})(?<![A-Za-z0-9_]{head})" if at > 0 else ""
            alternatives.append(check + re.escape(prefix[at + 1:]) + body)
            backs[group] = len(prefix) if group.startswith("p") else 0
        rules.append(_Rule([char], re.escape(char) + guard + "(?:" + "|".join(alternatives)
                           + ")", backs, "plain"))
    return rules


def _fixed_rules() -> list[_Rule]:
    # PEM private keys first: the header here, the end found by _PEM_END; a header with no end
    # redacts the rest, which later rules then skip.
    rules = [_Rule(["-----BEGIN"], r"-----BEGIN(?P<s>[A-Z ]{0,20} PRIVATE KEY-----)",
                   {"s": 10}, "pem")]
    rules += _key_families()
    # The password of a URL's user info: scheme://user:[REDACTED]@host.
    rules.append(_Rule(["://"], r"://[^\s:/?#@\"'<>\\]{0,256}:(?P<s>[^\s/?#@\"'<>\\]{1,256})@",
                       {"s": 0}, "plain"))
    return rules


_FIXED_RULES = _fixed_rules()
_PEM_END = re.compile(r"-----END[A-Z ]{0,20} PRIVATE KEY-----")
_VALUE_REST = re.compile(r"[^" + _VALUE_STOP + r"]*")
_SCHEME_VALUE = re.compile(r"[ \t]{1,16}(" + _TOKEN68 + ")")
_SECRET_SYMBOLS = frozenset("0123456789-_+/=.~!@#$%^&*")


def _looks_secret(value: str) -> bool:
    """Whether a word after a credential word in prose looks like a credential: a digit or a
    symbol in it, or a capital after its first letter ("limit", "Tomorrow" do not)."""
    stripped = value.rstrip(".!?")
    if len(stripped) < 6:
        return False
    return any(c in _SECRET_SYMBOLS for c in stripped) or any(c.isupper() for c in stripped[1:])


# Words after a credential word that are documentation, not credentials ("set OPENAI_API_KEY or
# pass api_key", "pass --judge MODEL", "pass strict_mode=True", "pass ScoringRule(...)"): the name
# of a secret (letters joined by "_", no digit: a credential has digits or mixed case), a command
# line option, a keyword argument (a lower-case name and "="; base64 padding follows mixed case),
# or a name called with "(". The rules for names ("api_key=...") and formats still apply to
# what follows.
_NAME_WORD = re.compile(r"[a-z]+(?:_[a-z]+)+|[A-Z]+(?:_[A-Z]+)+")
_OPTION_WORD = re.compile(r"--?[a-z][a-z0-9-]*")
_KEYWORD_WORD = re.compile(r"[a-z][a-z0-9_]*=")
_CALLED_WORD = re.compile(r"(?:[A-Z][a-z]+)+\(|[a-z_][a-z0-9_.]*\(")


def _is_documentation(text: str, start: int, end: int) -> bool:
    """Whether the word ``text[start:end]`` after a credential word in prose is documentation
    (see above) rather than a credential."""
    word = text[start:end]
    return ((_NAME_WORD.fullmatch(word) is not None and is_secret_key(word))
            or _OPTION_WORD.fullmatch(word) is not None
            or _KEYWORD_WORD.match(word) is not None
            or _CALLED_WORD.fullmatch(text, start, end + 1) is not None)


def _known_rules(values: Sequence[str]) -> list[_Rule]:
    """Exact values, longest first (a known value containing another is redacted whole). Each
    is its own needle: ``value in text`` is a C-speed search, where one alternation of many
    values would try each at every position."""
    return [_Rule([v], f"(?P<s>{re.escape(v)})", {"s": 0}, "plain") for v in values]


class _Rules:
    """The compiled state, swapped whole so that readers never see half an update."""

    __slots__ = ("rules", "plain", "unconditional", "needles", "extra", "callback")

    def __init__(self, rules: list[_Rule], extra: re.Pattern[str] | None,
                 callback: Callable[[str], str] | None) -> None:
        self.rules = rules
        # (needle, rule) pairs: a plain loop over them is the cheapest test on short texts.
        self.plain = [(n, r) for r in rules for n in r.needles]
        self.unconditional = [r for r in rules if not r.needles]
        # Every needle, for ``_quiet``; None when a rule runs on every text.
        self.needles = None if self.unconditional else tuple(n for n, _ in self.plain)
        self.extra = extra
        self.callback = callback


class _Known:
    """The credentials this process knows, redacted by every ``Redactor`` (``configure()``'s and
    each service's): the judges' litellm arguments (``remember``) and the providers' key
    variables in the environment. Process-wide on purpose: a key the process holds is a secret
    wherever it shows up, whichever runtime writes the text. ``version`` changes with the set, so
    a redactor recompiles its rules on its next text."""

    __slots__ = ("env_loaded", "env_values", "judge_values", "lock", "version")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.judge_values: dict[str, None] = {}  # insertion-ordered set, oldest dropped first
        self.env_values: frozenset[str] = frozenset()
        self.env_loaded = False
        self.version = 0

    def load_environment(self) -> bool:
        """Read the environment's provider keys; True when they changed. Holds ``lock``."""
        values = frozenset(v for v in _env.credential_values(is_secret_key)
                           if len(v) >= MIN_SECRET_LENGTH)
        self.env_loaded = True
        if values == self.env_values:
            return False
        self.env_values = values
        self.version += 1
        return True

    def values(self) -> list[str]:
        """Every known value, longest first (a known value containing another is redacted
        whole). Holds ``lock``."""
        if not self.env_loaded:
            self.load_environment()
        return sorted({*self.judge_values, *self.env_values}, key=len, reverse=True)


_KNOWN = _Known()
# Set while tracescore logs a callback's failure (see Redactor._call_user): a re-entrancy guard
# of the thread, not configuration.
_own_message = threading.local()
# The benchmark's switches (benchmarks/bench_redaction.py measures against a run without
# redaction, and without the second search of disguised texts). Not options: nothing in
# tracescore sets them.
enabled = True
undisguise = True
_NAMES_MAX = 1_024
# The longest text ``Redactor.unchanged`` remembers (kinds, names, models, ids: the values that
# come back on every span), and how many of each it keeps before it starts again.
UNCHANGED_TEXT_CHARS = 64
UNCHANGED_MAX = 4_096


def note_clean(memory: set[str], text: str) -> None:
    """Add ``text`` to one of ``Redactor.unchanged``'s sets, emptied first when it holds
    ``UNCHANGED_MAX`` (ids, questions and times fill it too: it starts again)."""
    if len(memory) >= UNCHANGED_MAX:
        memory.clear()
    memory.add(text)


class Redactor:
    """One runtime's redaction: the built-in rules and the process's known credentials, plus
    the user's patterns and callback of that runtime, with its counters. ``configure()``'s
    runtime holds ``PROCESS``; ``tracescore serve`` builds one of its own, so a service's
    patterns never change what ``configure()``'s runtime redacts, nor the other way round.

    The module's functions (``redact_text``, ``redact_name``, ...) use the redactor current in
    the calling context (``active()``): the one a ``using()`` block set (a service's export
    thread and log forwarder, its scoring jobs), else ``PROCESS``.

    Attributes:
        callback_failures: how often the user's callback raised or returned a non-string (its
            text was then redacted whole).
        overflows: how often a text held more candidates than redaction examines (its rest
            was then redacted whole).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sources: tuple[str, ...] = ()
        self._callback: Callable[[str], str] | None = None
        self._rules: _Rules | None = None
        self._version = -1
        # redact_name's memory of the names seen under the rules in force: one tuple
        # (rules, memory), read and replaced whole, so that a reader never pairs one rules'
        # memory with another's rules.
        self._names: tuple[_Rules | None, dict[str, str]] = (None, {})
        # ``unchanged``'s memory, the same way: (rules, names, texts).
        self._unchanged: tuple[_Rules | None, set[str], set[str]] = (None, set(), set())
        self.callback_failures = 0
        self.overflows = 0
        self._callback_warned = False
        self._overflow_warned = False

    def configure(self, patterns: Sequence[str | re.Pattern[str]] | None,
                  callback: Callable[[str], str] | None) -> None:
        """Set this redactor's extra rules (``tracescore.configure(redaction=...)``, a service
        file's ``redaction.patterns``).

        Args:
            patterns: regular expressions whose every match becomes ``[REDACTED]``, added to
                the built-in rules; None or empty for none. Env ``TRACESCORE_REDACT_PATTERNS``
                adds more (see ``tracescore._setup.env.redact_patterns``).
            callback: called with every text after the built-in rules, returns the text to
                use. When it raises or returns something else than a string, the whole text
                becomes ``[REDACTED]``.

        Raises:
            ValueError: a pattern does not compile (the message names it).
        """
        sources: list[str] = []
        for pattern in [*(patterns or ()), *_env.redact_patterns()]:
            source = pattern.pattern if isinstance(pattern, re.Pattern) else str(pattern)
            try:
                re.compile(source)
            except re.error as exc:
                raise ValueError(f"redact pattern {source!r} is not a regular expression: "
                                 f"{exc}") from None
            sources.append(source)
        with _KNOWN.lock:
            _KNOWN.load_environment()
        with self._lock:
            self._sources = tuple(sources)
            self._callback = callback
            self._compile()

    def rules(self) -> _Rules:
        """The compiled rules, recompiled when the process's known credentials changed."""
        rules = self._rules
        if rules is not None and self._version == _KNOWN.version:
            return rules
        with self._lock:
            return self._compile()

    def _compile(self) -> _Rules:
        with _KNOWN.lock:
            known = _KNOWN.values()
            version = _KNOWN.version
        extra = (re.compile("|".join(f"(?:{p})" for p in self._sources)) if self._sources
                 else None)
        # Known values first: a known value that holds a key of a known format is redacted
        # whole.
        rules = _Rules([*_known_rules(known), *_FIXED_RULES], extra, self._callback)
        self._rules, self._version = rules, version
        return rules

    def redact_text(self, text: str) -> str:
        """See the module's ``redact_text``."""
        if not enabled:
            return text
        rules = self._rules
        if rules is None or self._version != _KNOWN.version:
            rules = self.rules()
        size = len(text)
        if size >= MIN_SECRET_LENGTH:
            # A short text found clean under these rules before is answered from memory
            # (``unchanged``'s, shared with the export path): the same questions, answers and
            # arguments come back call after call.
            memory = self._unchanged
            if size <= UNCHANGED_TEXT_CHARS and memory[0] is rules and text in memory[2]:
                return text
            try:
                found = text
                if not _quiet(rules, text):
                    found = _scan(self, rules, text)
                if rules.extra is not None:
                    found = rules.extra.sub(REDACTED, found)
            except Exception:  # noqa: BLE001 - redaction must never break the caller
                return REDACTED
            if found == text and size <= UNCHANGED_TEXT_CHARS:
                texts = self._memory(rules)
                if texts is not None:
                    note_clean(texts, text)
            text = found
        if rules.callback is not None and text and not getattr(_own_message, "active", False):
            return self._call_user(rules.callback, text)
        return text

    def redact_name(self, name: str) -> str:
        """See the module's ``redact_name``."""
        rules = self._rules
        if (rules is None or self._version != _KNOWN.version or rules.callback is not None
                or not enabled or len(name) > 64):
            return self.redact_text(name)
        names_rules, names = self._names
        if names_rules is not rules:
            names = {}
            self._names = (rules, names)
        known = names.get(name)
        if known is None:
            known = self.redact_text(name)
            # Into this rules' memory, not whatever _names is now: configure() on another
            # thread may have swapped the rules (and the memory) while the name was redacted.
            if len(names) < _NAMES_MAX:
                names[name] = known
        return known

    def unchanged(self) -> tuple[set[str], set[str]] | None:
        """The export path's memory under the rules in force (``tracescore._export.scrub``):
        attribute names known to name no secret and to hold no credential, and short texts
        (``UNCHANGED_TEXT_CHARS`` at most) known to hold none. Both sets are new whenever the
        rules change (a pattern configured, a credential learned); None when a callback is set
        (it may change any text, and differently each time), so that nothing is remembered."""
        rules = self.rules()
        if self._memory(rules) is None:
            return None
        memory = self._unchanged
        return memory[1], memory[2]

    def _memory(self, rules: _Rules) -> set[str] | None:
        """The short texts known clean under ``rules`` (a new memory when they changed); None
        when nothing may be remembered (a callback is set)."""
        if rules.callback is not None or not enabled or not undisguise:
            return None
        memory = self._unchanged
        if memory[0] is not rules:
            memory = (rules, set(), set())
            self._unchanged = memory
        return memory[2]

    def overflowed(self, size: int) -> None:
        """Count a text cut at the bound (``_find``); warn the first time."""
        self.overflows += 1
        if not self._overflow_warned:
            self._overflow_warned = True
            logger.warning("tracescore: a text of %d characters holds more candidate "
                           "credentials than redaction examines; from there on it is recorded "
                           "as [REDACTED] (logged once; your code is unaffected)", size)

    def _call_user(self, callback: Callable[[str], str], text: str) -> str:
        try:
            result = callback(text)
            if isinstance(result, str):
                return result
            raise TypeError(f"the redact callback returned {type(result).__name__}, not str")
        except Exception:  # noqa: BLE001 - a user's callback must not break instrumentation
            self.callback_failures += 1
            if not self._callback_warned:
                self._callback_warned = True
                # Not exc_info: the traceback would quote the text we are keeping out. The
                # message is ours and constant: the log filter must not hand it to the failing
                # callback.
                _own_message.active = True
                try:
                    logger.warning("tracescore: the redact callback raised or returned a "
                                   "non-string; the text it was given is recorded as "
                                   "[REDACTED] (logged once; your code is unaffected)")
                finally:
                    _own_message.active = False
            return REDACTED


#: ``configure()``'s redactor (``RUNTIME.redactor``), and the one used outside any ``using()``.
PROCESS = Redactor()
_active: ContextVar[Redactor | None] = ContextVar("tracescore_redactor", default=None)


def active() -> Redactor:
    """The redactor of the calling context: the one a ``using()`` block set, else
    ``PROCESS``."""
    return _active.get() or PROCESS


@contextlib.contextmanager
def using(redactor: Redactor) -> Iterator[Redactor]:
    """Make ``redactor`` the current one for a ``with`` block (on this thread or task, and the
    tasks it starts): a service's export thread and log forwarder redact with its own."""
    token = _active.set(redactor)
    try:
        yield redactor
    finally:
        _active.reset(token)


def use_for_task(redactor: Redactor | None) -> None:
    """Make ``redactor`` current for the rest of the calling task (an engine's job consumer:
    asyncio gives each task its own context); None: ``PROCESS``."""
    _active.set(redactor)


def refresh_environment() -> None:
    """Re-read the providers' key variables (``tracescore._setup.env.credential_values``) so that
    their exact values are redacted. Called by ``configure()`` and before a judge error is
    described; cheap when nothing changed."""
    with _KNOWN.lock:
        _KNOWN.load_environment()


def remember(values: Iterable[Any]) -> None:
    """Redact these exact values wherever they appear from now on, by every redactor (strings of
    at least ``MIN_SECRET_LENGTH`` characters; others are ignored).

    Args:
        values: credentials tracescore was given (a judge's API key, header values).
    """
    known = _KNOWN.judge_values
    fresh = [v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET_LENGTH
             and v not in known]
    if not fresh:
        return
    with _KNOWN.lock:
        for value in fresh:
            known[value] = None
        while len(known) > _MAX_KNOWN:
            del known[next(iter(known))]
        _KNOWN.version += 1


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

    Examples:
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
    """``PROCESS.configure(patterns, callback)``: the extra rules of ``configure()``'s runtime
    (see ``Redactor.configure``).

    Raises:
        ValueError: a pattern does not compile (the message names it).
    """
    PROCESS.configure(patterns, callback)


# Matches examined in Python per text at most: a constant plus one per this many characters.
# Prose holds one candidate (a "name: value", a "key=value", a credential word before a value)
# per few hundred characters; a text past the bound was made to be expensive.
_BUDGET_BASE = 256
_BUDGET_PER = 128


class _Overflow(Exception):
    """A text holds more candidates than the budget: its rest from ``at`` is redacted."""

    def __init__(self, at: int) -> None:
        self.at = at


def _matches(rule: _Rule, text: str, out: list[tuple[int, int]], budget: list[int],
             limit: int) -> None:
    """Append to ``out`` the ``[start, end)`` spans of ``text`` before ``limit`` that ``rule``
    redacts."""
    search = rule.search
    match = search(text, 0, limit)
    while match is not None:
        budget[0] -= 1
        if budget[0] < 0:
            raise _Overflow(match.start())
        group = match.lastgroup or "s"
        start, end = match.span(group)
        back = rule.backs.get(group, 0)
        resume = match.end()
        if rule.kind == "pem":
            closing = _PEM_END.search(text, end)
            if closing is None:
                out.append((start - back, len(text)))
                return
            end = resume = closing.end()
        out.append((start - back, end))
        match = search(text, max(resume, match.start() + 1), limit)


def _merged(spans: list[tuple[int, int]]) -> tuple[list[int], list[int]]:
    """``spans`` sorted and merged: (starts, ends)."""
    starts: list[int] = []
    ends: list[int] = []
    for start, end in sorted(spans):
        if ends and start <= ends[-1]:
            ends[-1] = max(ends[-1], end)
        else:
            starts.append(start)
            ends.append(end)
    return starts, ends


def _named_values(text: str, low: str, search: Callable[..., re.Match[str] | None],
                  out: list[tuple[int, int]], budget: list[int], limit: int,
                  covered: tuple[list[int], list[int]] = ([], [])) -> None:
    """Append to ``out`` the values under secret names found by ``search`` (a credential word
    in ``low``, ``text`` lower-cased and of the same length), and the values after such a word
    used in prose; up to ``limit``, skipping what ``covered`` (merged spans already redacted)
    holds."""
    starts, ends = covered
    hit = search(low, 0, limit)
    while hit is not None:
        at = hit.start()
        if starts:
            i = bisect.bisect_right(starts, at) - 1
            if i >= 0 and at < ends[i]:
                hit = search(low, ends[i], limit)
                continue
        budget[0] -= 1
        if budget[0] < 0:
            raise _Overflow(at)
        # The whole name around the word: up to 64 name characters either side.
        head = _NAME_AHEAD.match(low[max(0, at - 64):at][::-1]).end()  # type: ignore[union-attr]
        start = at - head
        end = _NAME_AHEAD.match(text, at).end()  # type: ignore[union-attr]
        name = text[start:end].rstrip(".-")
        resume = max(end, at + 1)
        value = _AFTER_NAME.match(text, start + len(name))
        if value is not None and is_secret_key(name):
            v_start, v_end = value.span("s")
            if _SCHEME.match(text, v_start, v_end):
                # "Authorization: Bearer X": the scheme stays, X goes.
                token = _SCHEME_VALUE.match(text, v_end)
                if token is not None:
                    v_start, v_end = token.span(1)
            v_end = max(v_end, _VALUE_REST.match(text, v_end).end())  # type: ignore[union-attr]
            if text[v_start:v_end].strip(".\u2026"):  # "api_key=..." is a placeholder
                out.append((v_start, v_end))
            resume = v_end
        else:
            bare = name.lower()
            prose = bare in _PROSE_WORDS
            if not prose and bare == "key" and start > 0:
                before = _PREVIOUS_WORD.match(low[max(0, start - 18):start][::-1])
                prose = before is not None and before.group(1)[::-1] in _KEY_QUALIFIERS
            if prose:
                value = _PROSE_AFTER.match(text, start + len(name))
                if value is not None:
                    v_start, v_end = value.span("s")
                    candidate = text[v_start:v_end].rstrip(".!?,")
                    if (_looks_secret(candidate)
                            and not _is_documentation(text, v_start, v_start + len(candidate))):
                        v_end = v_start + len(candidate)
                        out.append((v_start, v_end))
                        resume = v_end
        hit = search(low, resume, limit)


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


# --- Disguised credentials ---------------------------------------------------------------------

# A credential can be written so that a pattern no longer sees it while a person still reads it:
# with invisible characters inside (zero-width spaces and joiners, soft hyphens, directional
# marks, variation selectors, tag characters), in compatibility forms (fullwidth "ｓｋ－",
# mathematical letters, ligatures: NFKC folds them), or encoded (percent escapes "%73k-", HTML
# entities "&#115;k-", backslash escapes "\u0073k-"), one inside another. Such a text is searched
# again in plain form: each decoding step is a layer that knows where each of its characters
# came from, so what the rules find there is mapped back and the span of the ORIGINAL text is
# replaced (a character decoded from several, such as an escape, maps back to all of them).
# Plain texts skip all of it: an ASCII text without "%", "&" or "\" costs three substring tests.
_INVISIBLE_RANGES = (
    # Format characters (Unicode category Cf): soft hyphen, Arabic and Syriac marks, Mongolian
    # vowel separator, zero-width space and joiners, directional marks and isolates, word
    # joiner, invisible operators, byte order mark, interlinear annotation, Egyptian
    # hieroglyph, shorthand and musical format controls, language tag and tag characters.
    (0x00AD, 0x00AD), (0x0600, 0x0605), (0x061C, 0x061C), (0x06DD, 0x06DD), (0x070F, 0x070F),
    (0x0890, 0x0891), (0x08E2, 0x08E2), (0x180E, 0x180E), (0x200B, 0x200F), (0x202A, 0x202E),
    (0x2060, 0x2064), (0x2066, 0x206F), (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB), (0x110BD, 0x110BD),
    (0x110CD, 0x110CD), (0x13430, 0x1343F), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001), (0xE0020, 0xE007F),
    # Combining marks that show nothing: grapheme joiner, variation selectors.
    (0x034F, 0x034F), (0x180B, 0x180D), (0x180F, 0x180F), (0xFE00, 0xFE0F), (0xE0100, 0xE01EF),
    # Letters that render as nothing: the Hangul fillers.
    (0x115F, 0x1160), (0x3164, 0x3164), (0xFFA0, 0xFFA0),
    # Lone surrogates (a Python string holds no pair): no character at all, shown as "?".
    (0xD800, 0xDFFF),
)
_INVISIBLE = "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in _INVISIBLE_RANGES)
_INVISIBLE_SEARCH = re.compile(f"[{_INVISIBLE}]").search
_INVISIBLE_RUN = re.compile(f"[{_INVISIBLE}]+")
_SHORT = 4_096
_DELETE: dict[int, None] = {c: None for a, b in _INVISIBLE_RANGES for c in range(a, b + 1)}
# Each starts with its literal, outside any group, so that the regex engine jumps between
# occurrences of it instead of trying every position.
_PERCENT_RUN = re.compile(r"%[0-9A-Fa-f]{2}(?:%[0-9A-Fa-f]{2})*")
# Numeric references without their ";" are read by browsers too; a named one needs it (no name
# without one stands for a character of a key, and "&page=2" in a URL is no entity).
_ENTITY = r"(?:#[0-9]{1,7};?|#[xX][0-9A-Fa-f]{1,6};?|[A-Za-z][A-Za-z0-9]{1,31};)"
_ENTITY_RUN = re.compile(f"&{_ENTITY}(?:&{_ENTITY})*")
_ESCAPE = r"\\(?:u[0-9A-Fa-f]{4}|x[0-9A-Fa-f]{2}|U[0-9A-Fa-f]{8})"
_ESCAPE_RUN = re.compile(f"{_ESCAPE}(?:{_ESCAPE})*")
# Rounds of decoding at most: "%2526%2523115%253B" (percent, percent, entity) takes two.
_MAX_ROUNDS = 3
# Per non-ASCII character met, its NFKC form (bounded: a text of every code point is no reason
# to hold them all).
_FOLDED: dict[str, str] = {}
_FOLDED_MAX = 65_536


class _Layer:
    """One decoding step from a source text to ``text``: the replaced runs (their starts and
    ends in both); the characters between runs are copied one for one."""

    __slots__ = ("text", "_starts", "_ends", "_source_starts", "_source_ends")

    def __init__(self, source: str, runs: Sequence[tuple[int, int, str]]) -> None:
        pieces: list[str] = []
        self._starts: list[int] = []
        self._ends: list[int] = []
        self._source_starts: list[int] = []
        self._source_ends: list[int] = []
        cursor = length = 0
        for start, end, replacement in runs:
            pieces.append(source[cursor:start])
            pieces.append(replacement)
            length += start - cursor
            self._starts.append(length)
            length += len(replacement)
            self._ends.append(length)
            self._source_starts.append(start)
            self._source_ends.append(end)
            cursor = end
        pieces.append(source[cursor:])
        self.text = "".join(pieces) if runs else source

    def back(self, start: int, end: int) -> tuple[int, int]:
        """The span of the source that ``text[start:end]`` (not empty) was decoded from."""
        return self._source(start)[0], self._source(end - 1)[1]

    def _source(self, at: int) -> tuple[int, int]:
        i = bisect.bisect_right(self._starts, at) - 1
        if i < 0:
            return at, at + 1
        if at < self._ends[i]:  # inside a decoded run: all of its source
            return self._source_starts[i], self._source_ends[i]
        source = self._source_ends[i] + at - self._ends[i]
        return source, source + 1


# Characters NFKC leaves alone that read as ASCII in a key: dashes and minus signs, and the
# Cyrillic and Greek letters drawn like Latin ones (a subset of Unicode's confusables). They are
# read as ASCII only next to an ASCII letter, digit or "_" (in a word of mixed scripts, such as
# "ѕk-proj-..."): prose in Russian or Greek, or English with dashes, is not rewritten whole.
_LOOKALIKES = {
    **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2043\u2212\ufe58", "-"),
    **dict(zip("\u0430\u0435\u043e\u0440\u0441\u0443\u0445\u0455\u0456\u0458\u04bb"
               "\u0410\u0412\u0415\u041a\u041c\u041d\u041e\u0420\u0421\u0422\u0425"
               "\u0391\u0392\u0395\u0396\u0397\u0399\u039a\u039c\u039d\u039f\u03a1"
               "\u03a4\u03a5\u03a7\u03bf",
               "aeopcyxsijhABEKMHOPCTXABEZHIKMNOPTYXo", strict=True)),
}


_LOOKALIKE_TABLE = {ord(k): v for k, v in _LOOKALIKES.items()}
_LOOK = "".join(_LOOKALIKES)
# A look-alike next to an ASCII word character; the class comes first so that the engine
# jumps between look-alikes.
_MIXED_SEARCH = re.compile(f"[{_LOOK}](?:(?=[A-Za-z0-9_])|(?<=[A-Za-z0-9_].))").search
_MIXED_REACH = 64  # characters read as ASCII around each such meeting, either side
# One quick test for the characters that may fold in an NFKC-normal text: invisible ones of the
# Basic Multilingual Plane, and anything beyond that plane (a class of many ranges is searched
# several times slower: the exact one runs only after this one found something).
_SUSPECT_SEARCH = re.compile(
    "[" + "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in _INVISIBLE_RANGES
                  if b < 0x10000) + "\U00010000-\U0010ffff]").search


def _fold(char: str) -> str:
    """``char`` in its NFKC form."""
    folded = _FOLDED.get(char)
    if folded is None:
        folded = unicodedata.normalize("NFKC", char)
        if len(_FOLDED) < _FOLDED_MAX:
            _FOLDED[char] = folded
    return folded


# A folding layer is made block by block, each block translated at C speed; a position is
# mapped back within its block alone, so the cost stays linear in the text however many
# characters are removed or expanded.
_BLOCK = 128
_MAX_FOLD = 3


class _Folded:
    """``source`` with each character replaced by what ``table`` (``str.translate``) gives,
    possibly nothing or several characters; positions map back character by character."""

    __slots__ = ("text", "_source", "_table", "_widths", "_starts")

    def __init__(self, source: str, table: dict[int, str | None]) -> None:
        blocks = [source[i:i + _BLOCK].translate(table) for i in range(0, len(source), _BLOCK)]
        self.text = "".join(blocks)
        self._source = source
        self._table = table
        self._widths: dict[str, int] | None = None
        self._starts = list(itertools.accumulate(map(len, blocks), initial=0))

    def back(self, start: int, end: int) -> tuple[int, int]:
        """The span of the source that ``text[start:end]`` (not empty) was made from."""
        return self._source_of(start), self._source_of(end - 1) + 1

    def _source_of(self, at: int) -> int:
        block = bisect.bisect_right(self._starts, at) - 1  # empty blocks are skipped
        offset = at - self._starts[block]
        base = block * _BLOCK
        widths = self._widths
        if widths is None:  # how many characters each translated one becomes (others: one)
            widths = self._widths = {chr(k): len(v or "") for k, v in self._table.items()}
        for i, char in enumerate(self._source[base:base + _BLOCK]):
            offset -= widths.get(char, 1)
            if offset < 0:
                return base + i
        return min(base + _BLOCK, len(self._source)) - 1


def _unicode_layers(text: str) -> list[_Layer | _Folded]:
    """``text`` with invisible characters removed, NFKC applied character by character and
    look-alike characters in words of mixed scripts read as ASCII: up to two layers."""
    layers: list[_Layer | _Folded] = []
    table: dict[int, str | None] = {}
    # Most non-ASCII text is NFKC already and holds no invisible character: no set of it.
    if not unicodedata.is_normalized("NFKC", text):
        for char in set(text):
            if not char.isascii():
                folded = _fold(char)
                # A form of more than 3 characters (U+FDFA is 18) is no character of a key:
                # left alone, so a text cannot grow more than 3 times when folded.
                if folded != char and len(folded) <= _MAX_FOLD:
                    table[ord(char)] = folded
    one_for_one = all(len(v) == 1 for v in table.values())  # type: ignore[arg-type]
    if (table or _SUSPECT_SEARCH(text) is not None) and _INVISIBLE_SEARCH(text) is not None:
        if len(text) <= _SHORT and one_for_one:
            # A short text: folded one for one, then its few runs of invisible characters
            # removed (cheaper there than translating it block by block).
            if table:
                layers.append(_Layer(text.translate(table), ()))
                text = layers[-1].text
            layers.append(_Layer(text, [(m.start(), m.end(), "")
                                        for m in _INVISIBLE_RUN.finditer(text)]))
        else:
            table.update(_DELETE)  # every invisible character goes (what folds to one too)
            layers.append(_Folded(text, table))
    elif not one_for_one:
        layers.append(_Folded(text, table))  # "ﬁ" is "fi": positions move
    elif table:
        layers.append(_Layer(text.translate(table), ()))  # one for one: positions unchanged
    current = layers[-1].text if layers else text
    meeting = _MIXED_SEARCH(current)
    if meeting is not None:
        pieces: list[str] = []
        done = 0
        while meeting is not None:
            start = max(done, meeting.start() - _MIXED_REACH)
            end = meeting.end() + _MIXED_REACH
            pieces.append(current[done:start])
            pieces.append(current[start:end].translate(_LOOKALIKE_TABLE))
            done = min(end, len(current))
            meeting = _MIXED_SEARCH(current, done)
        pieces.append(current[done:])
        layers.append(_Layer("".join(pieces), ()))  # one for one: positions unchanged
    return layers


def _percent(run: str) -> str:
    return bytes.fromhex(run.replace("%", "")).decode("utf-8", errors="replace")


def _entities(run: str) -> str:
    import html  # on first use: the decorators' hot path imports this module

    return html.unescape(run)


def _escapes(run: str) -> str:
    try:
        text = run.encode("ascii").decode("unicode_escape")
        # "\ud83d\ude00": a pair of UTF-16 halves is one character.
        return text.encode("utf-16", "surrogatepass").decode("utf-16", errors="replace")
    except (UnicodeError, ValueError):
        return run


# Control characters read as nothing: a terminal's escape sequence (CSI "\x1b[0m", OSC
# "\x1b]0;title\x07", a two-character escape) whole, and runs of the other C0 controls but tab,
# newline and carriage return, and DEL ("sk-proj-AB\x00CD..." is "sk-proj-ABCD...").
_CONTROL_SEARCH = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]").search
# The bytes of an ASCII text that are no control character (deleted at C speed: what is left
# is a control character; a regular expression took ten times as long).
_PLAIN = bytes([9, 10, 13, *range(0x20, 0x7F)])
_CONTROL_RUN = re.compile(
    "\x1b(?:\\[[0-?]{0,64}[ -/]{0,16}[@-~]|\\][^\x07\x1b]{0,256}(?:\x07|\x1b\\\\)?|[@-Z\\\\-_])?"
    "|[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f]+")


_DECODERS: tuple[tuple[str, re.Pattern[str], Callable[[str], str]], ...] = (
    ("%", _PERCENT_RUN, _percent),
    ("&", _ENTITY_RUN, _entities),
    ("\\", _ESCAPE_RUN, _escapes),
)


def _disguised(text: str) -> bool:
    """Whether ``text`` may hold a disguised credential (else it is searched once, as it is)."""
    return (not text.isascii() or "%" in text or "&" in text or "\\" in text
            or (not text.isprintable() and bool(text.encode("ascii").translate(None, _PLAIN))))


def _decodings(text: str) -> list[list[_Layer | _Folded]]:
    """The plain forms of ``text``, one per round of decoding (Unicode, percent escapes,
    entities, backslash escapes) that changed something, each as its layers in order."""
    out: list[list[_Layer | _Folded]] = []
    layers: list[_Layer | _Folded] = []
    current = text
    fresh = True  # folding again what was folded changes nothing: only what a decoder made
    for _ in range(_MAX_ROUNDS):
        before = len(layers)
        if fresh and not current.isascii():
            layers.extend(_unicode_layers(current))
            current = layers[-1].text if layers else current
        unfolded = len(layers)
        if _CONTROL_SEARCH(current) is not None:
            runs = [(m.start(), m.end(), "") for m in _CONTROL_RUN.finditer(current)]
            if runs:
                layers.append(_Layer(current, runs))
                current = layers[-1].text
        for needle, pattern, decode in _DECODERS:
            if needle in current:
                runs = []
                seen: dict[str, str] = {}  # texts repeat their escapes ("%20", "&amp;")
                for match in pattern.finditer(current):
                    run = match.group()
                    decoded = seen.get(run)
                    if decoded is None:
                        decoded = decode(run)
                        if len(seen) < 4_096:
                            seen[run] = decoded
                    if decoded != run:
                        runs.append((match.start(), match.end(), decoded))
                if runs:
                    layers.append(_Layer(current, runs))
                    current = layers[-1].text
        if len(layers) == before:
            break
        fresh = len(layers) > unfolded
        out.append(list(layers))
    return out


def plain_text(text: str) -> str:
    """``text`` as a person reads it: invisible characters removed, NFKC applied, percent
    escapes, HTML entities and backslash escapes decoded (up to three rounds).

    Example:
        >>> plain_text("ｓｋ&#45;pro%6A")
        'sk-proj'
    """
    if not _disguised(text):
        return text
    decodings = _decodings(text)
    return decodings[-1][-1].text if decodings else text


_WORDS = tuple(word for word, _ in _WORD_SEARCH)
_DISGUISE_MARKS = ("%", "&", "\\")


def _quiet(rules: _Rules, text: str) -> bool:
    """True when no rule can find anything in ``text``: an ASCII text holding none of the
    rules' needles, none of the credential words in any case and nothing a disguise is made
    of. Most texts are; they skip ``_find`` (whose own tests are these, and more). False
    whenever unsure."""
    needles = rules.needles
    if needles is None or not text.isascii():
        return False
    for needle in needles:
        if needle in text:
            return False
    low = text.lower()
    for word in _WORDS:
        if word in low:
            return False
    for mark in _DISGUISE_MARKS:
        if mark in text:
            return False
    return text.isprintable() or not text.encode("ascii").translate(None, _PLAIN)


def _find(owner: Redactor, rules: _Rules, text: str) -> list[tuple[int, int]]:
    """The ``[start, end)`` spans of ``text`` the rules redact (a cut is counted on ``owner``)."""
    spans: list[tuple[int, int]] = []
    size = len(text)
    budget = [_BUDGET_BASE + size // _BUDGET_PER]
    cut = size  # where the first candidate left unexamined by some rule starts
    # From where the text is redacted to its end (a PEM key with no end): later rules stop there.
    limit = size

    def run(rule: _Rule) -> None:
        nonlocal cut, limit
        try:
            _matches(rule, text, spans, budget, limit)
        except _Overflow as overflow:
            # Each rule examined everything before its first unexamined candidate: from the
            # earliest of those on, the text is cut.
            cut = min(cut, overflow.at)
        if spans and spans[-1][1] == size:
            limit = min(limit, spans[-1][0])

    for needle, rule in rules.plain:
        if needle in text:
            run(rule)
    for rule in rules.unconditional:
        run(rule)
    low = text.lower()
    if len(low) != size:
        # Lower-casing changed the offsets (a few non-ASCII letters): ASCII case only.
        low = text.translate(_ASCII_LOWER)
    # What the rules above already redact (a PEM block's "PRIVATE KEY" lines): names found
    # in there are skipped without a look.
    covered = _merged(spans)
    for word, search in _WORD_SEARCH:
        if word in low:
            try:
                _named_values(text, low, search, spans, budget, min(limit, cut), covered)
            except _Overflow as overflow:
                cut = min(cut, overflow.at)
    if cut < size:
        owner.overflowed(size)
        spans.append((cut, size))
    return spans


def _scan(owner: Redactor, rules: _Rules, text: str) -> str:
    spans = _find(owner, rules, text)
    if undisguise and _disguised(text):
        # Searched again as a person reads it; what is found there is mapped back.
        for layers in _decodings(text):
            decoded = layers[-1].text
            found = _find(owner, rules, decoded)
            if rules.extra is not None:  # the user's patterns too ("ACME%2D12345678")
                found += [m.span() for m in rules.extra.finditer(decoded) if m.end() > m.start()]
            for start, end in found:
                for layer in reversed(layers):
                    start, end = layer.back(start, end)
                spans.append((start, end))
    return _apply(text, spans) if spans else text


def redact_text(text: str) -> str:
    """``text`` with every credential the rules find replaced by ``[REDACTED]``.

    Args:
        text: any text: an attribute value, a log message, a prompt, an error message.

    Returns:
        The redacted text (the same object when nothing was found and no callback is set).
        Never raises: if a rule fails, the whole text is ``[REDACTED]``.

    Examples:
        >>> redact_text("curl -H 'Authorization: Bearer abcdefgh12345'")
        "curl -H 'Authorization: Bearer [REDACTED]'"
    """
    return (_active.get() or PROCESS).redact_text(text)


# Caps on the strings tracescore writes from what it was given (feedback, ids, scorer names,
# reasons), on every signal: span attributes and events, score log records, metric attributes.
MAX_NAME_LENGTH = 256
"""Characters kept of a name, label or id (scorer and feedback names, labels, annotators,
conversation, session, user and response ids, agent names on metrics, ``error.type``)."""
MAX_TEXT_LENGTH = 4_096
"""Characters kept of a free text (a score's or a feedback's explanation)."""
_CUT_MARK = "...[truncated {} chars]"
_SURROGATES = re.compile("[\ud800-\udfff]")


def bounded_text(value: Any, limit: int = MAX_NAME_LENGTH) -> str:
    """``value`` as tracescore writes a string it was given: as text, redacted, cut to
    ``limit`` characters (ending with ``...[truncated N chars]`` when cut), lone surrogates
    (which OTLP encoders refuse) as U+FFFD. Only what can survive the cut is searched (plus
    512 characters, so that a credential the cut would halve is redacted whole), so a
    10 MB value costs no more than the cap. Never raises.

    Args:
        value: a string (anything else is converted with ``str``).
        limit: characters kept, at least 32; ``MAX_NAME_LENGTH`` (256) by default,
            ``MAX_TEXT_LENGTH`` (4,096) for free texts.

    Examples:
        >>> bounded_text("x" * 300)[-27:]
        'xxxx...[truncated 44 chars]'
    """
    try:
        text = value if isinstance(value, str) else str(value)
    except Exception:  # noqa: BLE001 - a hostile __str__
        return REDACTED
    limit = max(limit, 32)
    size = len(text)
    if size > limit:
        text = redact_text(text[: limit + 512])
    else:
        # Names repeat from call to call: short ones are remembered.
        text = redact_name(text) if size <= 64 else redact_text(text)
    if size > limit or len(text) > limit:
        mark = _CUT_MARK.format(size - limit)
        text = text[: limit - len(mark)] + mark
    if not text.isascii():
        text = _SURROGATES.sub("\ufffd", text)
    return text


def redact_name(name: str) -> str:
    """``redact_text`` for a name (a mapping key, an argument name): the same result,
    remembered for up to 1,024 names of at most 64 characters while the rules stay the same
    and no callback is set (names repeat on every call; values do not).

    Examples:
        >>> redact_name("question")
        'question'
    """
    return (_active.get() or PROCESS).redact_name(name)


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
        shown = redact_text(key) if isinstance(key, str) else key
        out[shown] = (REDACTED if shown is not key and shown != key or _secret_value(key, value)
                      else redact_structure(value, 1))
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
            key = redact_text(k) if isinstance(k, str) else k
            # A credential used as a key: what is filed under it is not shown either.
            out[key] = (REDACTED if key is not k and key != k or _secret_value(k, v)
                        else _structure(v, depth + 1))
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


# tracescore's own log records quote what they were given (a scorer's id, an exception's
# message): the message is cut to this many characters, a traceback or stack to _MAX_LOG_TRACE.
_MAX_LOG_MESSAGE = 16_384
_MAX_LOG_TRACE = 65_536


class _LogFilter(logging.Filter):
    """Redacts tracescore's own log records: the message with its arguments, the formatted
    exception (whose chain may quote a provider's error body) and the stack; cuts the message
    to 16,384 characters and the exception and stack to 65,536."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
            redacted = bounded_text(message, _MAX_LOG_MESSAGE)
            if redacted != message or record.args:
                record.msg, record.args = redacted, None
            if record.exc_info and record.exc_info[1] is not None:
                text = logging.Formatter().formatException(record.exc_info)
                # Handlers format exc_text when it is set; drop exc_info so that none formats
                # the raw exception again.
                record.exc_text, record.exc_info = bounded_text(text, _MAX_LOG_TRACE), None
            elif record.exc_text:
                record.exc_text = bounded_text(record.exc_text, _MAX_LOG_TRACE)
            if record.stack_info:
                record.stack_info = bounded_text(record.stack_info, _MAX_LOG_TRACE)
        except Exception:  # noqa: BLE001 - a log line must never break the caller
            record.msg, record.args, record.exc_info, record.exc_text = REDACTED, None, None, None
        return True


_log_filter = _LogFilter()
if not any(isinstance(f, _LogFilter) for f in logger.filters):
    logger.addFilter(_log_filter)
