"""The option table of ``configure()`` and of ``tracescore serve``'s file: one declaration each.

Every option is a field of a frozen option group (``ContentOptions``, ``LimitsOptions``,
``ExportOptions``, ``RedactionOptions``, ``OutputOptions``) whose ``option(...)`` metadata
declares, once, its environment variable, its default, its largest value and its key in the
service's file (``<section>.<field>``, or none: in process only), as OpenInference's
``TraceConfig`` fields carry their variable and default and logfire's ``ConfigParam`` does.
``configure()`` takes the groups; the service's YAML/TOML sections of the same names validate
into the very same classes (pydantic reads stdlib dataclasses) and refuse the in-process-only
fields; ``resolve()`` fills the ``None`` fields from the table; docs/configuration.md's tables
are tested against it (``rows()``). The few options whose default differs in the service (it
sits behind the Collector) say so in the same declaration (``serve_default``).

Only the standard library and ``_env`` are imported: ``import tracescore`` stays light.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from tracescore._core.errors import ConfigurationError
from tracescore._setup import env as _env

__all__ = ["ContentOptions", "ExportOptions", "LimitsOptions", "Option", "OutputOptions",
           "RedactionOptions", "SERVE_EXPORT_DEFAULTS"]

# pydantic (tracescore serve) reads this on each group: unknown fields in a file are errors.
_STRICT: dict[str, Any] = {"extra": "forbid"}

_SAME: Any = object()  # serve_default: the service's default is the application's
_MIB = 1024 * 1024
_GIB = 1024 * _MIB
_DAY = 86_400.0


@dataclass(frozen=True)
class Option:
    """One option of the table, declared once.

    Attributes:
        env: the environment variable that sets it when no value is given (None: none).
        default: the value when neither is given (None: none, or what ``shown`` says).
        kind: how the variable is read: ``bool``, ``int``, ``float`` (positive numbers),
            ``ms`` (milliseconds in the variable, seconds in the option), ``str``, ``url``
            (http/https), ``capture`` (the GenAI content-capture modes) or ``adds`` (the
            variable's values are added to the option's by its user); ``object`` for options
            no variable can hold.
        maximum: the largest value, in the option's unit; past it a value warns once and the
            maximum applies (docs/configuration.md, "Maxima").
        serve: whether the service's file takes it (key ``<section>.<field>``).
        serve_default: the service's default where it differs from ``default``.
        shown: how the docs write the default (else derived from ``default``).
        group: the option group's keyword (``limits``), set by the table.
        name: the field's name, set by the table.
    """

    env: str | None = None
    default: Any = None
    kind: str = "object"
    maximum: float | None = None
    serve: bool = True
    serve_default: Any = _SAME
    shown: str | None = None
    group: str = ""
    name: str = ""

    @property
    def serve_key(self) -> str | None:
        """The key in the service's file (``limits.max_concurrency``), or None."""
        return f"{self.group}.{self.name}" if self.serve and self.group else None

    def default_for(self, serve: bool) -> Any:
        """The default in process, or in the service (``serve``)."""
        return self.serve_default if serve and self.serve_default is not _SAME else self.default

    def from_env(self, serve: bool = False) -> Any:
        """The environment's value, else the default (in process, or the service's); a bad
        value warns once and the default applies."""
        default = self.default_for(serve)
        if self.env is None or self.kind in ("object", "adds"):
            return default
        return _READ[self.kind](self, default)


def _number(option: Option, default: Any, integer: bool, scale: float = 1.0) -> Any:
    missing = math.nan if default is None else default * scale
    maximum = None if option.maximum is None else option.maximum * scale
    value = _env.read_positive(str(option.env), missing, integer=integer, maximum=maximum)
    if isinstance(value, float) and math.isnan(value):
        return None
    if scale != 1.0:
        return float(value) / scale
    return int(value) if integer else float(value)


_READ: dict[str, Callable[[Option, Any], Any]] = {
    "bool": lambda o, d: _env.read_bool(str(o.env), d),
    "int": lambda o, d: _number(o, d, integer=True),
    "float": lambda o, d: _number(o, d, integer=False),
    "ms": lambda o, d: _number(o, d, integer=False, scale=1000.0),
    "str": lambda o, d: _env.read_str(str(o.env), d),
    "url": lambda o, d: _env.read_url(str(o.env)) or d,
    "capture": lambda o, d: _env.read_capture(str(o.env), d),
}


def option(env: str | None = None, default: Any = None, kind: str = "object", *,
           maximum: float | None = None, serve: bool = True, serve_default: Any = _SAME,
           shown: str | None = None) -> Any:
    """A group field declared in the table: ``None`` by default ("the environment's, else
    the default"), the rest in its metadata (see ``Option``)."""
    return dataclasses.field(default=None, metadata={"option": Option(
        env=env, default=default, kind=kind, maximum=maximum, serve=serve,
        serve_default=serve_default, shown=shown)})


def check_positive(group: str, name: str, value: Any, integer: bool = False) -> None:
    """Raise ``ConfigurationError`` unless ``value`` is None or a positive finite number."""
    if value is None:
        return
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or not math.isfinite(value) or value <= 0):
        raise ConfigurationError(f"{group}({name}={value!r}) takes a positive, finite number")
    if integer and int(value) != value:
        raise ConfigurationError(f"{group}({name}={value!r}) takes a positive integer")


def _flag(group: str, name: str, value: Any) -> None:
    if value is not None and not isinstance(value, bool):
        raise ConfigurationError(f"{group}({name}=...) takes True or False")


def _path(group: str, name: str, options: Any, what: str) -> None:
    value = getattr(options, name)
    if value is None:
        return
    if not isinstance(value, (str, os.PathLike)):
        raise ConfigurationError(f"{group}({name}=...) takes a {what} path")
    object.__setattr__(options, name, os.fspath(value))


def _checked(options: Any) -> None:
    """The checks every group shares, from the table: numbers positive (integers where the
    variable is one) and within their maximum, switches True or False."""
    group = type(options).__name__
    for entry in fields(type(options)):
        value = getattr(options, entry.name)
        if value is None:
            continue
        if entry.kind in ("int", "float"):
            check_positive(group, entry.name, value, integer=entry.kind == "int")
        elif entry.kind == "ms" and (isinstance(value, bool) or not isinstance(value, (int, float))
                                     or not math.isfinite(value) or value < 0):
            raise ConfigurationError(f"{group}({entry.name}={value!r}) takes seconds >= 0")
        elif entry.kind in ("bool", "capture"):
            _flag(group, entry.name, value)
        if entry.maximum is not None:
            object.__setattr__(options, entry.name, _env.clamp(
                f"{group}({entry.name}=...)", value, entry.maximum))


def _resolve(options: Any, serve: bool) -> Any:
    """A copy of ``options`` with each None field filled from the table: the environment's
    value, else the default (the service's, with ``serve``)."""
    changes = {}
    for entry in fields(type(options)):
        if getattr(options, entry.name) is None:
            value = entry.from_env(serve)
            if value is not None:
                changes[entry.name] = value
    return dataclasses.replace(options, **changes) if changes else options


@dataclass(frozen=True, kw_only=True)
class ContentOptions:
    """What the decorators record on spans. Scoring always sees the full values in process.

    Args:
        capture: put inputs, outputs and documents on spans. Default
            ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``, else True.
            ``configure(capture_content=...)`` is the same switch.
        max_length: characters kept per captured value. Default
            ``TRACESCORE_MAX_CONTENT_LENGTH``, else 16384.
        price_file: a JSON (or TOML) file of model prices, ``{"models": {"<model>": {"input":
            <USD per million input tokens>, "output": ..., "cache_read": ..., "cache_write":
            ...}}}``, whose entries are added to (and take precedence over) the price table
            tracescore ships, for the cost on ``@tracescore.llm`` spans
            (``gen_ai.usage.cost``, docs/decorators.md). Default
            ``TRACESCORE_PRICE_FILE``, else none (the shipped table only).

    A number past its maximum (docs/configuration.md, "Maxima") warns once and the maximum
    applies. In process only (the service records no content of its own).

    Raises:
        ConfigurationError: a value of the wrong type or out of range.

    Examples:
        >>> tracescore.configure(content=tracescore.ContentOptions(max_length=4096))
    """

    __pydantic_config__: ClassVar[dict[str, Any]] = _STRICT
    keyword: ClassVar[str] = "content"

    capture: bool | None = option("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", True,
                                  "capture", serve=False)
    max_length: int | None = option("TRACESCORE_MAX_CONTENT_LENGTH", 16_384, "int",
                                    maximum=16 * _MIB, serve=False)
    price_file: str | None = option("TRACESCORE_PRICE_FILE", None, "str", serve=False,
                                    shown="none (the shipped table)")

    def __post_init__(self) -> None:
        _checked(self)
        _path("ContentOptions", "price_file", self, "file")

    def resolve(self) -> ContentOptions:
        """Every field filled: the value given, else the environment's, else the default
        (``price_file`` may stay None: the shipped price table only)."""
        return _resolve(self, serve=False)  # type: ignore[no-any-return]


@dataclass(frozen=True, kw_only=True)
class LimitsOptions:
    """How much scoring may take: time, concurrency, queue, held spans, what one scorer run is
    given, and how long a flush waits.

    Args:
        score_timeout: seconds a sampled span is held for its scores before it is exported
            anyway (later scores go out on a carrier span). Default
            ``TRACESCORE_SCORE_TIMEOUT``, else 30.
        job_timeout: seconds one scoring job (one scorer on one span) may run before it is
            cancelled; its event then carries ``error.type=timeout``. Judge time does not
            count: a call waiting in a judge's own queue (``Judge(max_concurrency=...)``) or at
            its server, each call being bounded by ``Judge(timeout=...)``. Default
            ``TRACESCORE_JOB_TIMEOUT``, else 300.
        max_concurrency: scoring jobs running at once. Default ``TRACESCORE_MAX_CONCURRENCY``,
            else 8.
        max_queue_size: scoring jobs accepted at once (queued plus running); past it jobs are
            skipped and counted (``stats().skipped_queue_full``), never waited for. Default
            ``TRACESCORE_MAX_QUEUE_SIZE``, else 1000.
        max_held_spans: spans held for their scores at once; past it new sampled spans are
            exported unscored and counted. Default ``TRACESCORE_MAX_HELD_SPANS``, else bounded
            by ``max_queue_size`` only.
        max_scoring_length: characters a scorer (and its judge) is given per input, output,
            ground truth or other value; the cut is stated in the explanation. Default
            ``TRACESCORE_MAX_SCORING_LENGTH``, else 50000.
        max_scoring_documents: documents (and tool calls) a scorer is given per request.
            Default ``TRACESCORE_MAX_SCORING_DOCUMENTS``, else 32.
        max_scoring_document_length: characters per document (and tool call). Default
            ``TRACESCORE_MAX_SCORING_DOCUMENT_LENGTH``, else 8000.
        flush_timeout: seconds ``force_flush()``, ``shutdown()``, the exit hook and the
            SIGTERM flush wait by default; in the service, the drain at SIGTERM. Default
            ``TRACESCORE_FLUSH_TIMEOUT``, else 10 (the service: 20).

    A number past its maximum (docs/configuration.md, "Maxima") warns once and the maximum
    applies.

    Raises:
        ConfigurationError: a value is not a positive number (or integer where one is needed).

    Examples:
        >>> tracescore.configure(limits=tracescore.LimitsOptions(max_concurrency=4))
    """

    __pydantic_config__: ClassVar[dict[str, Any]] = _STRICT
    keyword: ClassVar[str] = "limits"

    score_timeout: float | None = option("TRACESCORE_SCORE_TIMEOUT", 30.0, "float",
                                         maximum=_DAY)
    job_timeout: float | None = option("TRACESCORE_JOB_TIMEOUT", 300.0, "float", maximum=_DAY)
    max_concurrency: int | None = option("TRACESCORE_MAX_CONCURRENCY", 8, "int", maximum=1_024)
    max_queue_size: int | None = option("TRACESCORE_MAX_QUEUE_SIZE", 1_000, "int",
                                        maximum=1_000_000)
    max_held_spans: int | None = option("TRACESCORE_MAX_HELD_SPANS", None, "int",
                                        maximum=1_000_000, shown="bounded by `max_queue_size`")
    # What one scorer run is given (tracescore._pipeline.input_caps): ~12k tokens per text and
    # 32 documents of ~2k tokens, so one judge prompt stays well under 100k tokens.
    max_scoring_length: int | None = option("TRACESCORE_MAX_SCORING_LENGTH", 50_000, "int",
                                            maximum=16 * _MIB)
    max_scoring_documents: int | None = option("TRACESCORE_MAX_SCORING_DOCUMENTS", 32, "int",
                                               maximum=10_000)
    max_scoring_document_length: int | None = option(
        "TRACESCORE_MAX_SCORING_DOCUMENT_LENGTH", 8_000, "int", maximum=16 * _MIB)
    # The service drains trace completeness, scoring and export at SIGTERM: more time.
    flush_timeout: float | None = option("TRACESCORE_FLUSH_TIMEOUT", 10.0, "float",
                                         maximum=3_600.0, serve_default=20.0)

    def __post_init__(self) -> None:
        _checked(self)

    def resolve(self, *, serve: bool = False) -> LimitsOptions:
        """Every field filled (``max_held_spans`` may stay None: no cap of its own); with
        ``serve``, the service's defaults where they differ."""
        return _resolve(self, serve)  # type: ignore[no-any-return]


@dataclass(frozen=True, kw_only=True)
class ExportOptions:
    """The export path of spans (tracescore's export processor, in place of the SDK's
    ``BatchSpanProcessor``): queue, batches, retries on disk, the flush at SIGTERM.

    Args:
        queue_bytes: bytes of ended spans waiting for export at most (their encoded size plus
            1 KiB each); past it new spans are dropped and counted
            (``stats().spans_dropped["queue_full"]``). Default
            ``TRACESCORE_EXPORT_QUEUE_BYTES``, else 64 MiB (the service: 128 MiB).
        max_queue_spans: spans waiting for export at most, on top of the byte bound. Default
            ``OTEL_BSP_MAX_QUEUE_SIZE``, else none.
        batch_bytes: encoded bytes of one export request at most; a span alone larger is cut
            to fit. Default ``TRACESCORE_EXPORT_BATCH_BYTES``, else 3 MiB.
        max_batch_spans: spans per export request at most. Default
            ``OTEL_BSP_MAX_EXPORT_BATCH_SIZE``, else 512 (the service: 2048).
        schedule_delay: seconds a span may wait for a fuller batch. Default
            ``OTEL_BSP_SCHEDULE_DELAY`` (milliseconds there), else 5 (the service: 0, so a
            pass-through span waits for no timer).
        retry: keep batches the exporter failed on disk and retry them in order with backoff;
            False drops them (counted as ``export_failed``). Default
            ``TRACESCORE_EXPORT_RETRY``, else True.
        retry_dir: the folder in which a private retry folder is made on the first failure.
            Default ``TRACESCORE_EXPORT_RETRY_DIR``, else the system's temporary folder.
        retry_max_bytes: disk bytes of failed batches kept at most. Default
            ``TRACESCORE_EXPORT_RETRY_MAX_BYTES``, else 512 MiB.
        retry_max_age: seconds a failed batch is retried before it is dropped. Default
            ``TRACESCORE_EXPORT_RETRY_MAX_AGE``, else 3600.
        flush_on_sigterm: when SIGTERM has its default disposition (as under ``docker stop``
            and Kubernetes, which would kill the process with nothing flushed), install a
            handler in the main thread that shuts tracescore down within
            ``LimitsOptions.flush_timeout`` and then dies of SIGTERM as the default would. A
            handler installed by anyone else is never replaced; False removes tracescore's.
            Default ``TRACESCORE_FLUSH_ON_SIGTERM``, else True. In process only (the service
            always drains at SIGTERM).

    A number past its maximum (docs/configuration.md, "Maxima") warns once and the maximum
    applies.

    Raises:
        ConfigurationError: a value of the wrong type or out of range.

    Examples:
        >>> tracescore.configure(export=tracescore.ExportOptions(retry=False))
    """

    __pydantic_config__: ClassVar[dict[str, Any]] = _STRICT
    keyword: ClassVar[str] = "export"

    # The service sits behind the Collector and adds no latency of its own: more spans in
    # flight, fuller requests, and a span sent as soon as the export thread is free.
    queue_bytes: int | None = option("TRACESCORE_EXPORT_QUEUE_BYTES", 64 * _MIB, "int",
                                     maximum=16 * _GIB, serve_default=128 * _MIB)
    max_queue_spans: int | None = option("OTEL_BSP_MAX_QUEUE_SIZE", None, "int",
                                         maximum=10_000_000)
    # Below gRPC's default 4 MiB message limit (the Collector's too), with room for the
    # resource; the retry spool reads a batch back only up to 64 MiB.
    batch_bytes: int | None = option("TRACESCORE_EXPORT_BATCH_BYTES", 3 * _MIB, "int",
                                     maximum=64 * _MIB)
    max_batch_spans: int | None = option("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512, "int",
                                         maximum=100_000, serve_default=2048)
    schedule_delay: float | None = option("OTEL_BSP_SCHEDULE_DELAY", 5.0, "ms",
                                          maximum=3_600.0, serve_default=0.0)
    retry: bool | None = option("TRACESCORE_EXPORT_RETRY", True, "bool")
    retry_dir: str | None = option("TRACESCORE_EXPORT_RETRY_DIR", None, "str",
                                   shown="the system's temporary folder")
    retry_max_bytes: int | None = option("TRACESCORE_EXPORT_RETRY_MAX_BYTES", 512 * _MIB, "int",
                                         maximum=1024 * _GIB)
    retry_max_age: float | None = option("TRACESCORE_EXPORT_RETRY_MAX_AGE", 3_600.0, "float",
                                         maximum=7 * _DAY)
    flush_on_sigterm: bool | None = option("TRACESCORE_FLUSH_ON_SIGTERM", True, "bool",
                                           serve=False)

    def __post_init__(self) -> None:
        _checked(self)
        _path("ExportOptions", "retry_dir", self, "folder")

    def resolve(self, *, serve: bool = False) -> ExportOptions:
        """Every field filled; with ``serve``, the service's defaults where they differ."""
        return _resolve(self, serve)  # type: ignore[no-any-return]


@dataclass(frozen=True, kw_only=True)
class RedactionOptions:
    """Text removed wherever tracescore sends or writes it (spans, score explanations, log
    records, judge prompts, error messages), on top of the built-in credential rules.

    Args:
        patterns: regular expressions (strings or compiled) whose every match becomes
            ``[REDACTED]``. ``TRACESCORE_REDACT_PATTERNS`` (one expression or a JSON array)
            adds more. Default: none.
        callback: a function ``(text: str) -> str`` applied to every such text after the
            built-in rules, e.g. to remove customer ids. If it raises or returns something
            else than a string, that text is recorded as ``[REDACTED]``. Keep it fast: it runs
            on your threads. Default: none. In process only (a file cannot hold a function).
        foreign_spans: every span tracescore exports is redacted on the export thread (name,
            span, event and link attributes, status, resource; docs/security.md): tracescore's
            own spans always, other instrumentations' spans on the same provider (the service:
            the spans it receives) unless this is False. Default
            ``TRACESCORE_REDACT_FOREIGN_SPANS``, else True.

    Raises:
        ConfigurationError: a pattern does not compile, or ``callback`` is not callable.

    Examples:
        >>> tracescore.configure(redaction=tracescore.RedactionOptions(patterns=[r"cust-\\d+"]))
    """

    __pydantic_config__: ClassVar[dict[str, Any]] = _STRICT
    keyword: ClassVar[str] = "redaction"

    patterns: Sequence[str | re.Pattern[str]] | None = option(
        "TRACESCORE_REDACT_PATTERNS", None, "adds", shown="none")
    callback: Callable[[str], str] | None = option(serve=False, shown="none")
    foreign_spans: bool | None = option("TRACESCORE_REDACT_FOREIGN_SPANS", True, "bool")

    def __post_init__(self) -> None:
        patterns = self.patterns
        if isinstance(patterns, (str, re.Pattern)):
            patterns = (patterns,)
        if patterns is not None:
            patterns = tuple(patterns)
            for pattern in patterns:
                if isinstance(pattern, str):
                    try:
                        re.compile(pattern)
                    except re.error as exc:
                        raise ConfigurationError(
                            f"RedactionOptions(patterns=...): {pattern!r} does not compile: "
                            f"{exc}") from None
                elif not isinstance(pattern, re.Pattern):
                    raise ConfigurationError(
                        "RedactionOptions(patterns=...) takes regular expressions (strings or "
                        "compiled)")
            object.__setattr__(self, "patterns", patterns)
        if self.callback is not None and not callable(self.callback):
            raise ConfigurationError(
                "RedactionOptions(callback=...) takes a function (text: str) -> str")
        _checked(self)

    def resolve(self, *, serve: bool = False) -> RedactionOptions:
        """``foreign_spans`` filled (the patterns from the environment are added by the
        redactor itself, on top of these)."""
        return _resolve(self, serve)  # type: ignore[no-any-return]


@dataclass(frozen=True, kw_only=True)
class OutputOptions:
    """Where tracescore's other signals go besides the exported spans (score log records,
    metrics, Phoenix annotations) and what it says on the console. In process only: the
    service sends its log records and metrics to its exporter.

    Args:
        logger_provider: where each score is also emitted as a ``gen_ai.evaluation.result``
            log record carrying the scored span's trace and span ids. Default: the global SDK
            ``LoggerProvider`` when one is set; else, when spans are exported where the
            environment says (no ``exporter=``), a provider of tracescore's own (not set
            globally) sending to OTLP from the ``OTEL_EXPORTER_OTLP_[LOGS_]*`` variables, or to
            ``tracescore-logs.jsonl`` next to the span file (``TRACESCORE_LOG_RECORDS=false``:
            none); else none.
        meter_provider: where score metrics and self-metrics go (docs/monitoring.md). Default:
            the global ``MeterProvider`` when one is set; else, when spans are exported where
            the environment says, a provider of tracescore's own (not set globally) exporting
            every ``OTEL_METRIC_EXPORT_INTERVAL`` and at each flush to OTLP from the
            ``OTEL_EXPORTER_OTLP_[METRICS_]*`` variables, or to ``tracescore-metrics.jsonl``
            (``TRACESCORE_METRICS=false`` or ``OTEL_METRICS_EXPORTER=none``: none); else none.
        phoenix_url: Arize Phoenix's base URL (e.g. ``"http://127.0.0.1:6006"``): every score
            is also posted there as a span annotation, in batches from a thread of its own;
            failures are logged and counted. False turns it off. Default
            ``TRACESCORE_PHOENIX_URL``, else off.
        console: when spans go to the local file (no ``exporter=``, no OTLP endpoint), say on
            stderr where spans and scores go (once per process) and print a summary at exit
            with the ``tracescore view`` command that shows them. False keeps tracescore
            silent. Default ``TRACESCORE_CONSOLE``, else True.

    Raises:
        ConfigurationError: a value of the wrong type.

    Examples:
        >>> tracescore.configure(output=tracescore.OutputOptions(phoenix_url="http://127.0.0.1:6006"))
    """

    __pydantic_config__: ClassVar[dict[str, Any]] = _STRICT
    keyword: ClassVar[str] = "output"

    logger_provider: Any = option(serve=False, shown="the global one, else tracescore's own "
                                  "when exporting where the environment says")
    meter_provider: Any = option(serve=False, shown="the global one, else tracescore's own "
                                 "when exporting where the environment says")
    phoenix_url: str | bool | None = option("TRACESCORE_PHOENIX_URL", None, "url", serve=False,
                                            shown="off")
    console: bool | None = option("TRACESCORE_CONSOLE", True, "bool", serve=False)

    def __post_init__(self) -> None:
        url = self.phoenix_url
        if url is not None and url is not False and (
                not isinstance(url, str) or not url.startswith(("http://", "https://"))):
            raise ConfigurationError("OutputOptions(phoenix_url=...) takes Phoenix's base URL, "
                                     "e.g. 'http://127.0.0.1:6006', or False")
        if isinstance(url, str):
            object.__setattr__(self, "phoenix_url", url.rstrip("/"))
        _checked(self)

    def resolve(self) -> OutputOptions:
        """``phoenix_url`` and ``console`` filled (the providers stay None unless given)."""
        return _resolve(self, serve=False)  # type: ignore[no-any-return]


GROUPS: dict[str, type] = {cls.keyword: cls for cls in (  # type: ignore[attr-defined]
    ContentOptions, LimitsOptions, ExportOptions, RedactionOptions, OutputOptions)}


def fields(group: type) -> tuple[Option, ...]:
    """The table's entries of one option group, in field order."""
    return tuple(dataclasses.replace(f.metadata["option"], group=group.keyword,  # type: ignore[attr-defined]
                                     name=f.name) for f in dataclasses.fields(group))


#: The keywords of ``configure()`` that are no group, as the table declares them (the docs'
#: first table; their values are resolved by ``configure()`` itself).
TOP_LEVEL: tuple[Option, ...] = (
    Option(_env.OTEL_SERVICE_NAME, "unknown_service", "str", serve_default="tracescore-serve",
           name="service_name"),
    Option(_env.TRACESCORE_JUDGE_MODEL, None, "str", shown="none", name="judge"),
    Option(None, None, serve=True, shown="none (spans only)", name="scoring"),
    Option(None, None, serve=False, shown="a new global one", name="tracer_provider"),
    Option(_env.OTEL_EXPORTER_OTLP_ENDPOINT, None, serve=True, name="exporter",
           shown="OTLP when an endpoint is set, else `tracescore-traces.jsonl` (service: OTLP "
                 "when an endpoint is set, else required)"),
    Option("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", True, "capture", serve=False,
           name="capture_content"),
    Option(None, None, serve=False, shown="none", name="on_score"),
)

#: The key of each top-level keyword in the service's file, where it has one.
TOP_LEVEL_SERVE_KEYS: dict[str, str] = {"service_name": "service_name", "judge": "judge",
                                        "scoring": "rules", "exporter": "exporter"}


def table() -> Iterator[Option]:
    """Every option of every group, group by group."""
    for group in GROUPS.values():
        yield from fields(group)


def shown(entry: Option, serve: bool = False) -> str:
    """How the docs write an option's default (in process, or the service's)."""
    value = entry.default_for(serve)
    if entry.shown is not None and (not serve or entry.serve_default is _SAME):
        return entry.shown
    if isinstance(value, bool):
        return f"`{value}`"
    if isinstance(value, str):
        return f"`{value}`"
    if isinstance(value, int) and value >= _MIB and value % _MIB == 0:
        return f"{value // _MIB} MiB"
    if isinstance(value, float):
        return f"{value:g} s"
    return "none" if value is None else str(value)


#: The service's export defaults where they differ from an application's (from the table).
SERVE_EXPORT_DEFAULTS: dict[str, Any] = {entry.name: entry.serve_default
                                         for entry in fields(ExportOptions)
                                         if entry.serve_default is not _SAME}


#: The flat ``configure()`` keywords of earlier releases, by the group and field they moved to
#: (they still work for one release, with a ``DeprecationWarning``).
FLAT_NAMES: dict[str, tuple[str, str]] = {
    "max_content_length": ("content", "max_length"),
    "score_timeout": ("limits", "score_timeout"),
    "job_timeout": ("limits", "job_timeout"),
    "max_concurrency": ("limits", "max_concurrency"),
    "max_queue_size": ("limits", "max_queue_size"),
    "max_held_spans": ("limits", "max_held_spans"),
    "max_scoring_length": ("limits", "max_scoring_length"),
    "max_scoring_documents": ("limits", "max_scoring_documents"),
    "max_scoring_document_length": ("limits", "max_scoring_document_length"),
    "flush_timeout": ("limits", "flush_timeout"),
    "export_queue_bytes": ("export", "queue_bytes"),
    "export_batch_bytes": ("export", "batch_bytes"),
    "export_retry": ("export", "retry"),
    "export_retry_dir": ("export", "retry_dir"),
    "export_retry_max_bytes": ("export", "retry_max_bytes"),
    "export_retry_max_age": ("export", "retry_max_age"),
    "flush_on_sigterm": ("export", "flush_on_sigterm"),
    "redact_patterns": ("redaction", "patterns"),
    "redact": ("redaction", "callback"),
    "redact_foreign_spans": ("redaction", "foreign_spans"),
    "logger_provider": ("output", "logger_provider"),
    "meter_provider": ("output", "meter_provider"),
    "phoenix_url": ("output", "phoenix_url"),
    "console": ("output", "console"),
}


def doc_cells(entry: Option) -> tuple[str, str, str, str]:
    """The first four cells of an option's row in docs/configuration.md: name, environment
    variable, default (the service's too where it differs) and key in the service's file."""
    env = f"`{entry.env}`" if entry.env else ""
    if entry.kind == "ms":
        env += " (ms)"
    elif entry.kind == "adds":
        env += " (adds)"
    default = shown(entry)
    if entry.serve_default is not _SAME:
        default += f" (service: {shown(entry, serve=True)})"
    key = (TOP_LEVEL_SERVE_KEYS.get(entry.name) if not entry.group
           else entry.serve_key) if entry.serve else None
    return f"`{entry.name}`", env, default, f"`{key}`" if key else "in process only"
