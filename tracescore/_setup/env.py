"""The environment's parsers, and the variables that are no option of ``configure()``.

The variables of ``configure()``'s options (and of the service's file) are declared in the
option table, ``tracescore._setup.options``, with their defaults and maxima, and read through
the parsers here. Every other variable has a name constant, one documented default and one
reader function below; the rest of tracescore calls the reader instead of touching
``os.environ``, so a variable means the same thing everywhere. Readers parse at call time
(``configure()`` called again sees a changed environment) and never raise: a bad value logs
one warning per variable and value, then the default applies. Explicit arguments are checked
by their callers, not here.

This module imports only the standard library, so that any module of tracescore may use it.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
from collections.abc import Callable, Mapping

logger = logging.getLogger("tracescore")

# --- Names -------------------------------------------------------------------------------------

TRACESCORE_DISABLED = "TRACESCORE_DISABLED"
TRACESCORE_JUDGE_MODEL = "TRACESCORE_JUDGE_MODEL"
TRACESCORE_JUDGE_OUT_OF_PROCESS = "TRACESCORE_JUDGE_OUT_OF_PROCESS"
TRACESCORE_JUDGE_TRANSPORT = "TRACESCORE_JUDGE_TRANSPORT"
TRACESCORE_EXPORT_FILE = "TRACESCORE_EXPORT_FILE"
TRACESCORE_EXPORT_FILE_MAX_BYTES = "TRACESCORE_EXPORT_FILE_MAX_BYTES"
TRACESCORE_EXPORT_FILE_BACKUP_COUNT = "TRACESCORE_EXPORT_FILE_BACKUP_COUNT"
TRACESCORE_JUDGE_MAX_REPLY_LENGTH = "TRACESCORE_JUDGE_MAX_REPLY_LENGTH"
TRACESCORE_JUDGE_MAX_CONCURRENCY = "TRACESCORE_JUDGE_MAX_CONCURRENCY"
OTEL_SERVICE_NAME = "OTEL_SERVICE_NAME"
OTEL_SEMCONV_STABILITY_OPT_IN = "OTEL_SEMCONV_STABILITY_OPT_IN"
OTEL_EXPORTER_OTLP_ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
OTEL_EXPORTER_OTLP_PROTOCOL = "OTEL_EXPORTER_OTLP_PROTOCOL"
OTEL_EXPORTER_OTLP_TRACES_PROTOCOL = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
TRACESCORE_SERVE_CONFIG = "TRACESCORE_SERVE_CONFIG"

TRACESCORE_REDACT_PATTERNS = "TRACESCORE_REDACT_PATTERNS"
# The providers' credential variables (litellm reads these): their values are redacted
# wherever they appear. Any other variable whose name looks secret (see credential_values) is
# redacted too; this list names those whose names do not (none today) and documents the rest.
CREDENTIAL_VARIABLES = (
    "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_API_KEY", "AZURE_OPENAI_API_KEY",
    "AZURE_AD_TOKEN", "GEMINI_API_KEY", "GOOGLE_API_KEY", "VERTEX_CREDENTIALS",
    "COHERE_API_KEY", "CO_API_KEY", "MISTRAL_API_KEY", "GROQ_API_KEY", "TOGETHER_API_KEY",
    "TOGETHERAI_API_KEY", "HUGGINGFACE_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN",
    "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY_ID", "OPENROUTER_API_KEY",
    "DEEPSEEK_API_KEY", "XAI_API_KEY", "FIREWORKS_API_KEY", "FIREWORKS_AI_API_KEY",
    "PERPLEXITYAI_API_KEY", "REPLICATE_API_KEY", "REPLICATE_API_TOKEN", "VOYAGE_API_KEY",
    "DATABRICKS_TOKEN", "WATSONX_APIKEY", "NVIDIA_NIM_API_KEY", "CEREBRAS_API_KEY",
    "LITELLM_API_KEY", "LITELLM_MASTER_KEY",
)

# --- Defaults (one per setting; import these rather than repeating the numbers) ---------------

DEFAULT_DISABLED = False
DEFAULT_JUDGE_OUT_OF_PROCESS = False
# How a judge reaches its model: "auto" picks the direct HTTP client for OpenAI-protocol
# providers and litellm for the rest (tracescore._judge.transport).
JUDGE_TRANSPORTS = ("auto", "direct", "litellm")
DEFAULT_JUDGE_TRANSPORT = "auto"
DEFAULT_EXPORT_FILE = "tracescore-traces.jsonl"
# The file default rotates at this size and keeps this many older files (file.1 ... file.N):
# 50 MB x 5 files bounds it at 250 MB (about 120,000 spans of ~2 KB) whatever the uptime.
DEFAULT_EXPORT_FILE_MAX_BYTES = 50 * 1024 * 1024
DEFAULT_EXPORT_FILE_BACKUP_COUNT = 4
DEFAULT_OTLP_PROTOCOL = "http/protobuf"
# A verdict object is a few KB; past this a reply is runaway output (and JSON repair, which is
# worse than linear, would stall on it).
DEFAULT_JUDGE_MAX_REPLY_LENGTH = 65_536

OTLP_PROTOCOLS = ("http/protobuf", "grpc")

_GIB = 1024 * 1024 * 1024
# The largest value each numeric variable takes (the options' maxima are in the option table,
# tracescore._setup.options) (docs/configuration.md, "Maxima"). Past it a
# value warns once and the maximum applies: a number such as 1e23 would otherwise turn a bound
# off without a word (a memory bound larger than any machine's memory is no bound).
MAXIMA: dict[str, float] = {
    TRACESCORE_JUDGE_MAX_REPLY_LENGTH: 16 * 1024 * 1024,
    TRACESCORE_JUDGE_MAX_CONCURRENCY: 1_024,
    TRACESCORE_EXPORT_FILE_MAX_BYTES: 64 * _GIB,
    TRACESCORE_EXPORT_FILE_BACKUP_COUNT: 1_000,
}

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
# The GenAI semantic conventions' content-capturing modes; tracescore only has "on the span or
# not", so every mode that captures anything means on.
_CAPTURE_MODES: Mapping[str, bool] = {
    "no_content": False,
    "span_only": True,
    "event_only": True,
    "span_and_event": True,
}

_warned: set[tuple[str, str]] = set()
_warned_lock = threading.Lock()


def _raw(name: str) -> str:
    return os.environ.get(name, "").strip()


def _warn(name: str, raw: str, expected: str, default: object) -> None:
    # Once per variable and value: readers run on every configure(), and a log line repeated on
    # each call hides the other messages without telling anything new.
    with _warned_lock:
        if (name, raw) in _warned:
            return
        _warned.add((name, raw))
    logger.warning(
        "tracescore: ignoring %s=%r (expected %s); using %r", name, raw, expected, default
    )


def clamp(name: str, value: float, maximum: float, shown: str | None = None) -> float:
    """``value``, or ``maximum`` with a warning (once per setting and value) when it is past
    it (of the maximum's type).

    Args:
        name: how the user wrote the setting (a variable, ``ExportOptions(queue_bytes=...)``,
            ``receivers.max_request_bytes``), for the warning.
        value: the value given, already checked to be a positive finite number.
        maximum: the largest value the setting takes (``MAXIMA``).
        shown: how the warning writes the value given (default: its ``repr``).
    """
    if value <= maximum:
        return value
    # The maximum's type is the setting's: whole numbers for counts and bytes, floats for
    # seconds (ExportOptions(queue_bytes=1e23) gives an int).
    bounded = int(maximum) if isinstance(maximum, int) else float(maximum)
    shown = repr(value) if shown is None else shown
    with _warned_lock:
        key = (name, f"max:{shown}")
        first = key not in _warned
        _warned.add(key)
    if first:
        logger.warning("tracescore: %s is %s, past the largest value it takes; using %r "
                       "(docs/configuration.md, Maxima)", name, shown, bounded)
    return bounded


# --- Parsers -----------------------------------------------------------------------------------


def read_str(name: str, default: str | None = None) -> str | None:
    """Read a string variable, stripped.

    Args:
        name: the variable.
        default: returned when the variable is unset or blank.

    Returns:
        The stripped value, or ``default``.
    """
    return _raw(name) or default


def read_bool(name: str, default: bool) -> bool:
    """Read a boolean variable: ``true/false``, ``1/0``, ``yes/no``, ``on/off``, any case.

    Args:
        name: the variable.
        default: returned when the variable is unset, blank or not one of those words (the
            last with a warning).

    Returns:
        The parsed value, or ``default``.
    """
    raw = _raw(name)
    if not raw:
        return default
    lowered = raw.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    _warn(name, raw, "true or false", default)
    return default


def read_positive(name: str, default: float, *, integer: bool = False,
                  maximum: float | None = None) -> float:
    """Read a positive, finite number (an integer with ``integer=True``).

    Args:
        name: the variable.
        default: returned when the variable is unset, blank or not such a number (the last with
            a warning).
        integer: accept whole numbers only (``"8"`` and ``"8.0"``, not ``"8.5"``) and return
            an ``int``.
        maximum: the largest value taken (default: the variable's in ``MAXIMA``, if any).

    Returns:
        The parsed value (an ``int`` with ``integer=True``), or ``default``; a value past the
        variable's maximum (``MAXIMA``) is that maximum, with a warning.
    """
    raw = _raw(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0 and (not integer or value == int(value))):
        _warn(name, raw, "a positive integer" if integer else "a positive number", default)
        return default
    number = int(value) if integer else value
    if maximum is None:
        maximum = MAXIMA.get(name)
    return clamp(name, number, maximum) if maximum is not None else number


def read_enum(name: str, choices: tuple[str, ...], default: str) -> str:
    """Read a variable that takes one of a fixed set of values, case-insensitively.

    Args:
        name: the variable.
        choices: the accepted values, in lower case.
        default: returned when the variable is unset, blank or not a choice (the last with a
            warning).

    Returns:
        The matching choice (lower case), or ``default``.
    """
    raw = _raw(name)
    if not raw:
        return default
    lowered = raw.lower()
    if lowered in choices:
        return lowered
    _warn(name, raw, "one of " + ", ".join(choices), default)
    return default


# --- One reader per variable -------------------------------------------------------------------


def disabled() -> bool:
    """``TRACESCORE_DISABLED``: every decorator becomes a pass-through. Default False."""
    return read_bool(TRACESCORE_DISABLED, DEFAULT_DISABLED)


def judge_model() -> str | None:
    """``TRACESCORE_JUDGE_MODEL``: the default judge's litellm model string. Default None."""
    return read_str(TRACESCORE_JUDGE_MODEL)


def judge_out_of_process() -> bool:
    """``TRACESCORE_JUDGE_OUT_OF_PROCESS``: run judges in a child process. Default False."""
    return read_bool(TRACESCORE_JUDGE_OUT_OF_PROCESS, DEFAULT_JUDGE_OUT_OF_PROCESS)


def judge_transport() -> str:
    """``TRACESCORE_JUDGE_TRANSPORT``: ``auto``, ``direct`` or ``litellm``. Default ``auto``."""
    return read_enum(TRACESCORE_JUDGE_TRANSPORT, JUDGE_TRANSPORTS, DEFAULT_JUDGE_TRANSPORT)


def semconv_gen_ai_latest() -> bool:
    """``OTEL_SEMCONV_STABILITY_OPT_IN``: whether its comma-separated list holds
    ``gen_ai_latest_experimental`` (any case, spaces ignored). Default False.

    With it, tracescore's spans carry the latest GenAI conventions only: the provider is no
    longer also written under its older name ``gen_ai.system`` (docs/decorators.md).
    """
    raw = _raw(OTEL_SEMCONV_STABILITY_OPT_IN) or ""
    return "gen_ai_latest_experimental" in {part.strip().lower() for part in raw.split(",")}


def read_capture(name: str, default: bool) -> bool:
    """Read a content-capture switch (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``).

    Accepts a boolean word (see ``read_bool``) or a GenAI conventions mode, any case:
    ``NO_CONTENT`` is off; ``SPAN_ONLY``, ``EVENT_ONLY`` and ``SPAN_AND_EVENT`` are on. Unset
    or blank: ``default``. Anything else is off, with a warning: a value we cannot read may
    have been meant to keep private data in, so we fail closed.
    """
    raw = _raw(name)
    if not raw:
        return default
    lowered = raw.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    if lowered in _CAPTURE_MODES:
        return _CAPTURE_MODES[lowered]
    _warn(name, raw, "true, false, NO_CONTENT, SPAN_ONLY, EVENT_ONLY or SPAN_AND_EVENT", False)
    return False


def judge_max_reply_length() -> int:
    """``TRACESCORE_JUDGE_MAX_REPLY_LENGTH``: characters of a judge reply that are parsed; a
    longer reply is invalid output. Default 65536."""
    return int(read_positive(TRACESCORE_JUDGE_MAX_REPLY_LENGTH, DEFAULT_JUDGE_MAX_REPLY_LENGTH,
                             integer=True))


def judge_max_concurrency() -> int | None:
    """``TRACESCORE_JUDGE_MAX_CONCURRENCY``: calls in flight per judge: an int >= 1, ``0`` for
    no limit of the judge's own, or ``auto``. Default None (automatic: see
    ``tracescore._judge.limit``)."""
    raw = _raw(TRACESCORE_JUDGE_MAX_CONCURRENCY)
    if not raw or raw.lower() == "auto":
        return None
    # ASCII digits only: str.isdigit() also holds for "²", which int() refuses. A number too
    # long for int() (4,300 digits) is past the maximum whatever it is.
    if raw.isascii() and raw.isdigit():
        maximum = MAXIMA[TRACESCORE_JUDGE_MAX_CONCURRENCY]
        if len(raw) > 18:
            return int(clamp(TRACESCORE_JUDGE_MAX_CONCURRENCY, int(maximum) + 1, maximum,
                             f"a number of {len(raw)} digits"))
        return int(clamp(TRACESCORE_JUDGE_MAX_CONCURRENCY, int(raw), maximum))
    _warn(TRACESCORE_JUDGE_MAX_CONCURRENCY, raw, "an integer >= 0 or auto", "auto")
    return None


def export_file() -> str:
    """``TRACESCORE_EXPORT_FILE``: the local OTLP/JSON lines file. Default
    ``tracescore-traces.jsonl`` in the working directory."""
    return read_str(TRACESCORE_EXPORT_FILE) or DEFAULT_EXPORT_FILE


def export_file_max_bytes() -> int:
    """``TRACESCORE_EXPORT_FILE_MAX_BYTES``: size in bytes at which the local file rotates.
    Default 52428800 (50 MiB)."""
    return int(read_positive(TRACESCORE_EXPORT_FILE_MAX_BYTES, DEFAULT_EXPORT_FILE_MAX_BYTES,
                             integer=True))


def export_file_backup_count() -> int:
    """``TRACESCORE_EXPORT_FILE_BACKUP_COUNT``: rotated files kept besides the current one
    (``file.1`` newest ... ``file.N`` oldest). Default 4."""
    return int(read_positive(TRACESCORE_EXPORT_FILE_BACKUP_COUNT,
                             DEFAULT_EXPORT_FILE_BACKUP_COUNT, integer=True))


def service_name() -> str | None:
    """``OTEL_SERVICE_NAME`` (the SDK's resource reads it too; we only ask whether it is set).
    Default None."""
    return read_str(OTEL_SERVICE_NAME)


def otlp_traces_endpoint() -> str | None:
    """``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, else ``OTEL_EXPORTER_OTLP_ENDPOINT``; None when
    neither is set (then nothing is exported over OTLP)."""
    return read_str(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or read_str(OTEL_EXPORTER_OTLP_ENDPOINT)


def otlp_traces_protocol() -> str:
    """``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL``, else ``OTEL_EXPORTER_OTLP_PROTOCOL``:
    ``http/protobuf`` (default) or ``grpc``; anything else warns and uses the default."""
    name = (
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL
        if _raw(OTEL_EXPORTER_OTLP_TRACES_PROTOCOL)
        else OTEL_EXPORTER_OTLP_PROTOCOL
    )
    return read_enum(name, OTLP_PROTOCOLS, DEFAULT_OTLP_PROTOCOL)


_NOT_CREDENTIALS = frozenset({"PWD", "OLDPWD"})


def credential_values(is_secret_name: Callable[[str], bool]) -> list[str]:
    """The values of the credential variables: every one of ``CREDENTIAL_VARIABLES`` that is
    set, and every other variable whose name ``is_secret_name`` calls secret (``*_KEY``,
    ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ...). They are redacted wherever they appear
    (``tracescore._core.redact``); nothing else uses them.

    Args:
        is_secret_name: the key-name rule (``tracescore._core.redact.is_secret_key``).

    Returns:
        The non-blank values, stripped, in no particular order.
    """
    wanted = set(CREDENTIAL_VARIABLES)
    values: list[str] = []
    for name, value in list(os.environ.items()):
        if not value.strip() or name in _NOT_CREDENTIALS:
            continue
        try:
            secret = name in wanted or is_secret_name(name)
        except Exception:
            secret = False
        if secret:
            values.append(value.strip())
    return values


def redact_patterns() -> list[str]:
    """``TRACESCORE_REDACT_PATTERNS``: extra regular expressions whose matches are redacted.

    One expression, or a JSON array of them (``["ACME-[0-9]{8}", "tenant-[a-z]+"]``). A value
    that is neither (bad JSON, an expression that does not compile) warns and is ignored, so
    that a bad variable never stops the application. Default: none.
    """
    raw = _raw(TRACESCORE_REDACT_PATTERNS)
    if not raw:
        return []
    patterns: list[str]
    if raw.startswith("["):
        try:
            loaded = json.loads(raw)
        except ValueError:
            loaded = None
        if not isinstance(loaded, list) or not all(isinstance(p, str) for p in loaded):
            _warn(TRACESCORE_REDACT_PATTERNS, raw,
                  "a regular expression or a JSON array of them", [])
            return []
        patterns = loaded
    else:
        patterns = [raw]
    good: list[str] = []
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error:
            _warn(TRACESCORE_REDACT_PATTERNS, pattern, "a regular expression", "nothing")
            continue
        good.append(pattern)
    return good


# --- Where scores also go (issue 12): Phoenix annotations, OTLP log records --------------------

TRACESCORE_LOG_RECORDS = "TRACESCORE_LOG_RECORDS"
OTEL_EXPORTER_OTLP_LOGS_ENDPOINT = "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"
OTEL_EXPORTER_OTLP_LOGS_PROTOCOL = "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL"
DEFAULT_LOG_FILE_SUFFIX = "-logs"  # tracescore-traces.jsonl -> tracescore-logs.jsonl


def read_url(name: str) -> str | None:
    """Read an http:// or https:// URL (trailing ``/`` removed); anything else warns once and
    counts as unset. Default None."""
    value = read_str(name)
    if value is None:
        return None
    if not value.startswith(("http://", "https://")):
        _warn(name, value, "an http:// or https:// URL", None)
        return None
    return value.rstrip("/")


def log_records() -> bool:
    """``TRACESCORE_LOG_RECORDS``: ``false`` stops tracescore from making a ``LoggerProvider``
    of its own for the ``gen_ai.evaluation.result`` log records, e.g. for a backend with no
    OTLP logs endpoint (Arize Phoenix answers ``/v1/logs`` with HTTP 405). Default True."""
    return read_bool(TRACESCORE_LOG_RECORDS, True)


def otlp_logs_endpoint() -> str | None:
    """``OTEL_EXPORTER_OTLP_LOGS_ENDPOINT``, else ``OTEL_EXPORTER_OTLP_ENDPOINT``; None when
    neither is set (then score log records are not sent over OTLP)."""
    return read_str(OTEL_EXPORTER_OTLP_LOGS_ENDPOINT) or read_str(OTEL_EXPORTER_OTLP_ENDPOINT)


def otlp_logs_protocol() -> str:
    """``OTEL_EXPORTER_OTLP_LOGS_PROTOCOL``, else ``OTEL_EXPORTER_OTLP_PROTOCOL``:
    ``http/protobuf`` (default) or ``grpc``; anything else warns and uses the default."""
    name = (
        OTEL_EXPORTER_OTLP_LOGS_PROTOCOL
        if _raw(OTEL_EXPORTER_OTLP_LOGS_PROTOCOL)
        else OTEL_EXPORTER_OTLP_PROTOCOL
    )
    return read_enum(name, OTLP_PROTOCOLS, DEFAULT_OTLP_PROTOCOL)



# --- Score metrics where the log records go (issue 24) ----------------------------------------

TRACESCORE_METRICS = "TRACESCORE_METRICS"
OTEL_METRICS_EXPORTER = "OTEL_METRICS_EXPORTER"
OTEL_EXPORTER_OTLP_METRICS_ENDPOINT = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"
OTEL_EXPORTER_OTLP_METRICS_PROTOCOL = "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"
DEFAULT_METRICS_FILE_SUFFIX = "-metrics"  # tracescore-traces.jsonl -> tracescore-metrics.jsonl


def own_metrics() -> bool:
    """Whether tracescore may make a ``MeterProvider`` of its own for its metrics when the
    application has none: ``TRACESCORE_METRICS=false`` says no, and so does the standard
    ``OTEL_METRICS_EXPORTER=none``. Default True."""
    if (_raw(OTEL_METRICS_EXPORTER) or "").strip().lower() == "none":
        return False
    return read_bool(TRACESCORE_METRICS, True)


def otlp_metrics_endpoint() -> str | None:
    """``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT``, else ``OTEL_EXPORTER_OTLP_ENDPOINT``; None when
    neither is set (then metrics are not sent over OTLP)."""
    return (read_str(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT)
            or read_str(OTEL_EXPORTER_OTLP_ENDPOINT))


def otlp_metrics_protocol() -> str:
    """``OTEL_EXPORTER_OTLP_METRICS_PROTOCOL``, else ``OTEL_EXPORTER_OTLP_PROTOCOL``:
    ``http/protobuf`` (default) or ``grpc``; anything else warns and uses the default."""
    name = (
        OTEL_EXPORTER_OTLP_METRICS_PROTOCOL
        if _raw(OTEL_EXPORTER_OTLP_METRICS_PROTOCOL)
        else OTEL_EXPORTER_OTLP_PROTOCOL
    )
    return read_enum(name, OTLP_PROTOCOLS, DEFAULT_OTLP_PROTOCOL)

def serve_config() -> str | None:
    """``TRACESCORE_SERVE_CONFIG``: the configuration file of ``tracescore serve`` when
    ``--config`` is not given. Default None."""
    return read_str(TRACESCORE_SERVE_CONFIG)


def provider_setting(name: str) -> str | None:
    """A model provider's own variable (``OPENAI_API_KEY``, ``OPENAI_API_BASE``,
    ``AZURE_API_VERSION``, ...), read where litellm would read it, for judges that talk to the
    provider without litellm. Blank counts as unset. Default None.

    Args:
        name: the variable's name, as the provider's documentation (and litellm) spell it.
    """
    value = os.environ.get(name, "").strip()
    return value or None
