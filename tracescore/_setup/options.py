"""The option groups of ``configure()`` and of ``tracescore serve``'s file: one schema.

Each group is a frozen dataclass whose fields default to ``None``, meaning "the environment
variable, else the default" (see ``docs/configuration.md``). ``configure(content=...,
limits=..., export=..., redaction=...)`` takes them, and the service's YAML/TOML sections of
the same names validate into the very same classes (pydantic reads stdlib dataclasses), so an
option has one name, one check, one environment variable and one default wherever it is set.
``resolve()`` fills the ``None`` fields. The service's own defaults for a few export fields
(``SERVE_EXPORT_DEFAULTS``) are the one documented difference.

Only the standard library and ``_env`` are imported: ``import tracescore`` stays light.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from tracescore._core.errors import ConfigurationError
from tracescore._setup import env as _env

__all__ = ["ContentOptions", "ExportOptions", "LimitsOptions", "RedactionOptions",
           "SERVE_EXPORT_DEFAULTS"]

# pydantic (tracescore serve) reads this on each group: unknown fields in a file are errors.
_STRICT: dict[str, Any] = {"extra": "forbid"}


def check_positive(group: str, name: str, value: Any, integer: bool = False) -> None:
    """Raise ``ConfigurationError`` unless ``value`` is None or a positive finite number."""
    if value is None:
        return
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or not math.isfinite(value) or value <= 0):
        raise ConfigurationError(f"{group}({name}={value!r}) takes a positive, finite number")
    if integer and int(value) != value:
        raise ConfigurationError(f"{group}({name}={value!r}) takes a positive integer")


# The largest value of each numeric option: the maximum of its environment variable (the
# schedule delay in seconds here, milliseconds there). Past it a value warns once and the
# maximum applies (docs/configuration.md, "Maxima").
_E = _env.MAXIMA
MAXIMA: dict[tuple[str, str], float] = {
    ("ContentOptions", "max_length"): _E[_env.TRACESCORE_MAX_CONTENT_LENGTH],
    ("LimitsOptions", "score_timeout"): _E[_env.TRACESCORE_SCORE_TIMEOUT],
    ("LimitsOptions", "job_timeout"): _E[_env.TRACESCORE_JOB_TIMEOUT],
    ("LimitsOptions", "max_concurrency"): _E[_env.TRACESCORE_MAX_CONCURRENCY],
    ("LimitsOptions", "max_queue_size"): _E[_env.TRACESCORE_MAX_QUEUE_SIZE],
    ("LimitsOptions", "max_held_spans"): _E[_env.TRACESCORE_MAX_HELD_SPANS],
    ("LimitsOptions", "max_scoring_length"): _E[_env.TRACESCORE_MAX_SCORING_LENGTH],
    ("LimitsOptions", "max_scoring_documents"): _E[_env.TRACESCORE_MAX_SCORING_DOCUMENTS],
    ("LimitsOptions", "max_scoring_document_length"):
        _E[_env.TRACESCORE_MAX_SCORING_DOCUMENT_LENGTH],
    ("ExportOptions", "queue_bytes"): _E[_env.TRACESCORE_EXPORT_QUEUE_BYTES],
    ("ExportOptions", "max_queue_spans"): _E[_env.OTEL_BSP_MAX_QUEUE_SIZE],
    ("ExportOptions", "batch_bytes"): _E[_env.TRACESCORE_EXPORT_BATCH_BYTES],
    ("ExportOptions", "max_batch_spans"): _E[_env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE],
    ("ExportOptions", "schedule_delay"): _E[_env.OTEL_BSP_SCHEDULE_DELAY] / 1000,
    ("ExportOptions", "retry_max_bytes"): _E[_env.TRACESCORE_EXPORT_RETRY_MAX_BYTES],
    ("ExportOptions", "retry_max_age"): _E[_env.TRACESCORE_EXPORT_RETRY_MAX_AGE],
    ("configure", "flush_timeout"): _E[_env.TRACESCORE_FLUSH_TIMEOUT],
}


def bounded(group: str, name: str, value: Any) -> Any:
    """``value`` (checked already), or the option's maximum with a warning when past it."""
    maximum = MAXIMA.get((group, name))
    if value is None or maximum is None:
        return value
    return _env.clamp(f"{group}({name}=...)", value, maximum)


def _bound_fields(options: Any) -> None:
    """Clamp every numeric field of a frozen option group to its maximum, in place."""
    group = type(options).__name__
    for field in dataclasses.fields(options):
        value = getattr(options, field.name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            object.__setattr__(options, field.name, bounded(group, field.name, value))


def _flag(group: str, name: str, value: Any) -> None:
    if value is not None and not isinstance(value, bool):
        raise ConfigurationError(f"{group}({name}=...) takes True or False")


def _fill(options: Any, defaults: dict[str, Callable[[], Any]]) -> Any:
    """A copy of ``options`` with each None field that has a default source filled from it."""
    changes = {name: source() for name, source in defaults.items()
               if getattr(options, name) is None}
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
    applies.

    Raises:
        ConfigurationError: a value of the wrong type or out of range.

    Examples:
        >>> tracescore.configure(content=tracescore.ContentOptions(max_length=4096))
    """

    __pydantic_config__: ClassVar[dict[str, Any]] = _STRICT

    capture: bool | None = None
    max_length: int | None = None
    price_file: str | None = None

    def __post_init__(self) -> None:
        _flag("ContentOptions", "capture", self.capture)
        check_positive("ContentOptions", "max_length", self.max_length, integer=True)
        _bound_fields(self)
        if self.price_file is not None:
            if not isinstance(self.price_file, (str, os.PathLike)):
                raise ConfigurationError("ContentOptions(price_file=...) takes a file path")
            object.__setattr__(self, "price_file", os.fspath(self.price_file))

    def resolve(self) -> ContentOptions:
        """Every field filled: the value given, else the environment's, else the default
        (``price_file`` may stay None: the shipped price table only)."""
        return _fill(self, {"capture": _env.capture_content,
                            "max_length": _env.max_content_length,
                            "price_file": _env.price_file})


@dataclass(frozen=True, kw_only=True)
class LimitsOptions:
    """How much scoring may take: time, concurrency, queue, held spans, and what one scorer
    run is given.

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

    A number past its maximum (docs/configuration.md, "Maxima") warns once and the maximum
    applies.

    Raises:
        ConfigurationError: a value is not a positive number (or integer where one is needed).

    Examples:
        >>> tracescore.configure(limits=tracescore.LimitsOptions(max_concurrency=4))
    """

    __pydantic_config__: ClassVar[dict[str, Any]] = _STRICT

    score_timeout: float | None = None
    job_timeout: float | None = None
    max_concurrency: int | None = None
    max_queue_size: int | None = None
    max_held_spans: int | None = None
    max_scoring_length: int | None = None
    max_scoring_documents: int | None = None
    max_scoring_document_length: int | None = None

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            check_positive("LimitsOptions", field.name, getattr(self, field.name),
                      integer=field.name.startswith("max_"))
        _bound_fields(self)

    def resolve(self) -> LimitsOptions:
        """Every field filled (``max_held_spans`` may stay None: no cap of its own)."""
        return _fill(self, {
            "score_timeout": _env.score_timeout,
            "job_timeout": _env.job_timeout,
            "max_concurrency": _env.max_concurrency,
            "max_queue_size": _env.max_queue_size,
            "max_held_spans": _env.max_held_spans,
            "max_scoring_length": _env.max_scoring_length,
            "max_scoring_documents": _env.max_scoring_documents,
            "max_scoring_document_length": _env.max_scoring_document_length,
        })


@dataclass(frozen=True, kw_only=True)
class ExportOptions:
    """The export path of spans (tracescore's export processor, in place of the SDK's
    ``BatchSpanProcessor``): queue, batches, retries on disk.

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

    A number past its maximum (docs/configuration.md, "Maxima") warns once and the maximum
    applies.

    Raises:
        ConfigurationError: a value of the wrong type or out of range.

    Examples:
        >>> tracescore.configure(export=tracescore.ExportOptions(retry=False))
    """

    __pydantic_config__: ClassVar[dict[str, Any]] = _STRICT

    queue_bytes: int | None = None
    max_queue_spans: int | None = None
    batch_bytes: int | None = None
    max_batch_spans: int | None = None
    schedule_delay: float | None = None
    retry: bool | None = None
    retry_dir: str | None = None
    retry_max_bytes: int | None = None
    retry_max_age: float | None = None

    def __post_init__(self) -> None:
        for name in ("queue_bytes", "max_queue_spans", "batch_bytes", "max_batch_spans",
                     "retry_max_bytes"):
            check_positive("ExportOptions", name, getattr(self, name), integer=True)
        check_positive("ExportOptions", "retry_max_age", self.retry_max_age)
        delay = self.schedule_delay
        if delay is not None and (isinstance(delay, bool) or not isinstance(delay, (int, float))
                                  or not math.isfinite(delay) or delay < 0):
            raise ConfigurationError(
                f"ExportOptions(schedule_delay={delay!r}) takes seconds >= 0")
        _flag("ExportOptions", "retry", self.retry)
        if self.retry_dir is not None:
            if not isinstance(self.retry_dir, (str, os.PathLike)):
                raise ConfigurationError("ExportOptions(retry_dir=...) takes a folder path")
            object.__setattr__(self, "retry_dir", os.fspath(self.retry_dir))
        _bound_fields(self)

    def resolve(self, defaults: dict[str, Any] | None = None) -> ExportOptions:
        """Every field filled; ``defaults`` (e.g. ``SERVE_EXPORT_DEFAULTS``) come before the
        environment for the fields they name."""
        given = self
        if defaults:
            given = dataclasses.replace(self, **{k: v for k, v in defaults.items()
                                                 if getattr(self, k) is None})
        return _fill(given, {
            "queue_bytes": _env.export_queue_bytes,
            "max_queue_spans": _env.bsp_max_queue_size,
            "batch_bytes": _env.export_batch_bytes,
            "max_batch_spans": _env.bsp_max_export_batch_size,
            "schedule_delay": _env.bsp_schedule_delay,
            "retry": _env.export_retry,
            "retry_dir": _env.export_retry_dir,
            "retry_max_bytes": _env.export_retry_max_bytes,
            "retry_max_age": _env.export_retry_max_age,
        })


#: The service's export defaults where they differ from an application's: a collector-side
#: service takes more spans in flight (128 MiB), sends fuller requests (2048 spans) and sends a
#: span as soon as the export thread is free (0 s), since it adds no latency of its own.
#: A value in the file or the environment's wins over these.
SERVE_EXPORT_DEFAULTS: dict[str, Any] = {"queue_bytes": 128 * 1024 * 1024,
                                         "max_batch_spans": 2048, "schedule_delay": 0.0}


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
            on your threads. Default: none.
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

    patterns: Sequence[str | re.Pattern[str]] | None = None
    callback: Callable[[str], str] | None = None
    foreign_spans: bool | None = None

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
        _flag("RedactionOptions", "foreign_spans", self.foreign_spans)

    def resolve(self) -> RedactionOptions:
        """``foreign_spans`` filled (the patterns from the environment are added by the
        redactor itself, on top of these)."""
        return _fill(self, {"foreign_spans": _env.redact_foreign_spans})


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
    "export_queue_bytes": ("export", "queue_bytes"),
    "export_batch_bytes": ("export", "batch_bytes"),
    "export_retry": ("export", "retry"),
    "export_retry_dir": ("export", "retry_dir"),
    "export_retry_max_bytes": ("export", "retry_max_bytes"),
    "export_retry_max_age": ("export", "retry_max_age"),
    "redact_patterns": ("redaction", "patterns"),
    "redact": ("redaction", "callback"),
    "redact_foreign_spans": ("redaction", "foreign_spans"),
}

GROUPS: dict[str, type] = {"content": ContentOptions, "limits": LimitsOptions,
                           "export": ExportOptions, "redaction": RedactionOptions}
