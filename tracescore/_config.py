"""``configure()``, ``ScoringRule``, ``force_flush()``, ``shutdown()``: the one setup entry point.

Each option resolves as: argument > ``TRACESCORE_*`` env > the standard ``OTEL_*`` env > default.
A bad explicit argument raises ``ConfigurationError``; a bad environment value logs a warning
and falls back to the default.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import math
import os
import re
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter

from . import _destinations, _env, _handoff, _input_caps, _signals, _state
from . import _semconv as sc
from ._errors import ConfigurationError
from ._export import ExportProcessor, Spool
from ._export.scrub import Scrubber
from ._exporters import exporter_from_env
from ._judge import Judge
from ._processor import ScoringSpanProcessor
from ._rules import ScoringRule
from ._stats import Stats
from ._telemetry import Telemetry
from ._writers.callback import ScoreEvent

logger = logging.getLogger("tracescore")

__version__ = "0.1.0"

_OI_PROJECT = sc.OPENINFERENCE_PROJECT_NAME



class _SwitchProcessor(SpanProcessor):
    """Added once to a provider; ``configure()`` swaps its target, since a provider's
    processors cannot be removed."""

    def __init__(self) -> None:
        self._target: SpanProcessor | None = None
        # The target's on_start, bound once (it runs for every span); None when the target
        # says it does nothing there. Its on_end is bound by the ``target`` setter.
        self._on_start: Any = None

    @property
    def target(self) -> SpanProcessor | None:
        """The processor spans go to now (None: nowhere)."""
        return self._target

    @target.setter
    def target(self, target: SpanProcessor | None) -> None:
        self._target = target
        self._on_start = (None if target is None or getattr(target, "starts_nothing", False)
                          else target.on_start)
        # The provider calls ``on_end`` for every span: the target's own method, set on this
        # instance, takes the call directly (no hop through this processor).
        if target is None:
            self.__dict__.pop("on_end", None)
        else:
            self.on_end = target.on_end  # type: ignore[method-assign]

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        on_start = self._on_start
        if on_start is not None:
            on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        # Reached only with no target (a target's on_end replaces this one on the instance).
        return None

    def shutdown(self) -> None:
        target = self.target
        if target is not None:
            target.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        target = self.target
        return True if target is None else target.force_flush(timeout_millis)


_switches: weakref.WeakKeyDictionary[Any, _SwitchProcessor] = weakref.WeakKeyDictionary()
_owned_provider: TracerProvider | None = None
_current: Tracescore | None = None
_config_lock = threading.Lock()
_atexit_registered = False


class Tracescore:
    """A configured tracescore: what ``configure()`` returns.

    Attributes:
        tracer_provider: the provider the decorators create spans with.
        exporter_description: where spans go (``file tracescore-traces.jsonl``, ``OTLP ...``,
            ``custom exporter``, or ``none``).
        rules: the scoring rules in force.
    """

    def __init__(
        self,
        provider: TracerProvider,
        processor: ScoringSpanProcessor,
        exporter_description: str,
        rules: Sequence[ScoringRule],
        flush_timeout: float,
    ) -> None:
        self.tracer_provider = provider
        self.processor = processor
        self.exporter_description = exporter_description
        self.rules = tuple(rules)
        self.flush_timeout = flush_timeout
        self._shut = False
        # Where scores go besides the spans (log records' provider, Phoenix); set by configure().
        self.destinations = _destinations.Destinations()

    def stats(self) -> Stats:
        """A snapshot of the counters (spans exported, scores attached, skips, errors)."""
        s = self.processor.stats
        snapshot = Stats(**vars(s))
        snapshot.not_sent = {**snapshot.not_sent, **self.destinations.not_sent()}
        return snapshot

    def force_flush(self, timeout_millis: int | None = None) -> bool:
        """See ``tracescore.force_flush``."""
        if timeout_millis is None:
            # The default deadline starts once the judge's start-up (litellm's import, begun
            # by configure()) is over: a short script's first flush must not spend its 10 s on
            # a 4-6 s import and lose its scores to carrier spans (issue 12).
            _wait_for_preload()
        ms = int(self.flush_timeout * 1000) if timeout_millis is None else timeout_millis
        deadline = time.monotonic() + max(ms, 0) / 1000
        ok = self.processor.force_flush(ms)
        pending = self.processor.pending_jobs()
        left = max(0.0, deadline - time.monotonic()) * 1000
        ok = self.destinations.force_flush(left) and ok
        if pending:
            logger.warning(
                "tracescore.force_flush: %d score(s) still pending after %.1f s; their spans "
                "were exported without them and the scores follow on 'evaluation' carrier spans "
                "if they finish. Give the flush more time (force_flush(timeout_millis=...), "
                "configure(flush_timeout=...) or TRACESCORE_FLUSH_TIMEOUT). The application is "
                "unaffected.", pending, ms / 1000)
        return ok

    def shutdown(self, timeout_millis: int | None = None) -> None:
        """See ``tracescore.shutdown``."""
        if self._shut:
            return
        self._shut = True
        ms = int(self.flush_timeout * 1000) if timeout_millis is None else timeout_millis
        deadline = time.monotonic() + max(ms, 0) / 1000
        self.processor.shutdown(ms)
        # What is left of the one deadline (issue 22): a destination still sending then is cut
        # off and what it had not sent is counted (stats().not_sent).
        self.destinations.shutdown(max(0.0, deadline - time.monotonic()) * 1000)


@dataclass(frozen=True)
class _ExportSettings:
    """Where spans come from and go: the provider and the export processor's exporter."""

    service_name: str | None
    tracer_provider: TracerProvider | None
    exporter: SpanExporter | None  # None: chosen from the environment
    export: bool  # False: ``exporter=False``, nothing is exported
    queue_bytes: int
    batch_bytes: int
    retry: bool
    retry_dir: str | None
    retry_max_bytes: int
    retry_max_age: float
    redact_foreign: bool = True  # redact other instrumentations' spans on the export path


@dataclass(frozen=True)
class _ContentSettings:
    """What the decorators put on spans; published to ``_state`` for their hot path."""

    capture: bool
    max_length: int
    disabled: bool


@dataclass(frozen=True)
class _ScoringSettings:
    """The scoring engine: rules, judge, limits and deadlines."""

    rules: tuple[ScoringRule, ...]
    judge: Judge | None
    score_timeout: float
    max_concurrency: int
    max_queue_size: int
    max_held_spans: int | None
    flush_timeout: float
    job_timeout: float
    on_score: Callable[[ScoreEvent], Any] | None
    meter_provider: Any
    logger_provider: Any


def _positive(name: str, value: Any, from_env: Callable[[], Any], integer: bool = False) -> Any:
    """An explicit positive number, checked; ``None`` takes the environment's (or default)."""
    if value is None:
        return from_env()
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ConfigurationError(f"configure({name}={value!r}) takes a positive, finite number")
    if integer and int(value) != value:
        raise ConfigurationError(f"configure({name}={value!r}) takes a positive integer")
    return int(value) if integer else float(value)


def _resolve_judge(judge: Any) -> Judge | None:
    if judge is None:
        model = _env.judge_model()
        return Judge(model) if model else None
    if isinstance(judge, Judge):
        return judge
    if isinstance(judge, str) and judge.strip():
        return Judge(judge.strip())
    raise ConfigurationError(
        "configure(judge=...) takes a litellm model string such as 'openai/gpt-4o-mini' or a "
        "tracescore.Judge(...)"
    )


def _resolve_export(service_name: Any, tracer_provider: Any, exporter: Any,
                    durability: dict[str, Any] | None = None) -> _ExportSettings:
    if service_name is not None and (not isinstance(service_name, str) or not service_name):
        raise ConfigurationError("configure(service_name=...) takes a non-empty string")
    if tracer_provider is not None and not isinstance(tracer_provider, TracerProvider):
        raise ConfigurationError(
            "configure(tracer_provider=...) takes an opentelemetry.sdk.trace.TracerProvider"
        )
    if exporter is not None and exporter is not False and not isinstance(exporter, SpanExporter):
        raise ConfigurationError(
            "configure(exporter=...) takes an OTel SpanExporter, False, or nothing"
        )
    given = durability or {}
    retry = given.get("export_retry")
    if retry is not None and not isinstance(retry, bool):
        raise ConfigurationError("configure(export_retry=...) takes True or False")
    redact_foreign = given.get("redact_foreign_spans")
    if redact_foreign is not None and not isinstance(redact_foreign, bool):
        raise ConfigurationError("configure(redact_foreign_spans=...) takes True or False")
    retry_dir = given.get("export_retry_dir")
    if retry_dir is not None and not isinstance(retry_dir, (str, os.PathLike)):
        raise ConfigurationError("configure(export_retry_dir=...) takes a folder path")
    return _ExportSettings(
        service_name=service_name,
        tracer_provider=tracer_provider,
        exporter=exporter or None,
        export=exporter is not False,
        queue_bytes=_positive("export_queue_bytes", given.get("export_queue_bytes"),
                              _env.export_queue_bytes, integer=True),
        batch_bytes=_positive("export_batch_bytes", given.get("export_batch_bytes"),
                              _env.export_batch_bytes, integer=True),
        retry=_env.export_retry() if retry is None else retry,
        retry_dir=_env.export_retry_dir() if retry_dir is None else os.fspath(retry_dir),
        retry_max_bytes=_positive("export_retry_max_bytes", given.get("export_retry_max_bytes"),
                                  _env.export_retry_max_bytes, integer=True),
        retry_max_age=_positive("export_retry_max_age", given.get("export_retry_max_age"),
                                _env.export_retry_max_age),
        redact_foreign=(_env.redact_foreign_spans() if redact_foreign is None
                        else redact_foreign),
    )


def _resolve_content(capture_content: Any, max_content_length: Any) -> _ContentSettings:
    if capture_content is not None and not isinstance(capture_content, bool):
        raise ConfigurationError("configure(capture_content=...) takes True or False")
    return _ContentSettings(
        capture=_env.capture_content() if capture_content is None else capture_content,
        max_length=_positive(
            "max_content_length", max_content_length, _env.max_content_length, integer=True
        ),
        disabled=_env.disabled(),
    )


def _resolve_scoring(
    *,
    scoring: Any,
    judge: Any,
    score_timeout: Any,
    max_concurrency: Any,
    max_queue_size: Any,
    max_held_spans: Any,
    flush_timeout: Any,
    job_timeout: Any,
    on_score: Any,
    meter_provider: Any,
    logger_provider: Any,
) -> _ScoringSettings:
    rules = tuple(scoring or ())
    for rule in rules:
        if not isinstance(rule, ScoringRule):
            raise ConfigurationError(
                f"configure(scoring=[...]) takes ScoringRule objects, got {type(rule).__name__}"
            )
    if on_score is not None and not callable(on_score):
        raise ConfigurationError("configure(on_score=...) takes a callable")
    return _ScoringSettings(
        rules=rules,
        judge=_resolve_judge(judge),
        score_timeout=_positive("score_timeout", score_timeout, _env.score_timeout),
        max_concurrency=_positive(
            "max_concurrency", max_concurrency, _env.max_concurrency, integer=True
        ),
        max_queue_size=_positive(
            "max_queue_size", max_queue_size, _env.max_queue_size, integer=True
        ),
        # Each held span waits on at least one queued job, so the queue bounds held spans
        # already; a cap of its own (None: none) only matters when it is smaller.
        max_held_spans=_positive(
            "max_held_spans", max_held_spans, _env.max_held_spans, integer=True
        ),
        flush_timeout=_positive("flush_timeout", flush_timeout, _env.flush_timeout),
        job_timeout=_positive("job_timeout", job_timeout, _env.job_timeout),
        on_score=on_score,
        meter_provider=meter_provider,
        logger_provider=logger_provider,
    )


def _build_export(settings: _ExportSettings) -> tuple[SpanProcessor | None, str]:
    """The export processor (None with ``exporter=False``) and where it sends spans."""
    if not settings.export:
        return None, "none"
    if settings.exporter is None:
        chosen, description = exporter_from_env()
    else:
        chosen = settings.exporter
        description = f"custom exporter {type(chosen).__name__}"
    spool = (Spool(settings.retry_dir, settings.retry_max_bytes, settings.retry_max_age)
             if settings.retry else None)
    processor = ExportProcessor(
        chosen,
        queue_bytes=settings.queue_bytes,
        batch_bytes=settings.batch_bytes,
        max_batch_spans=_env.bsp_max_export_batch_size(),
        schedule_delay=_env.bsp_schedule_delay(),
        max_queue_spans=_env.bsp_max_queue_size(),
        spool=spool,
        scrub=Scrubber(foreign=settings.redact_foreign),
    )
    return processor, description


def _provider_for(settings: _ExportSettings) -> TracerProvider:
    """The user's provider, or ours (reused while its resource is unchanged). Holds the lock."""
    global _owned_provider
    if settings.tracer_provider is not None:
        return settings.tracer_provider
    attrs: dict[str, Any] = {}
    if settings.service_name is not None:
        attrs[SERVICE_NAME] = settings.service_name
    resource = Resource.create(attrs)
    named = settings.service_name is not None or _env.service_name() is not None
    if named and _OI_PROJECT not in resource.attributes:
        # Phoenix files traces under this resource attribute, not service.name.
        name = resource.attributes.get(SERVICE_NAME)
        resource = resource.merge(Resource({_OI_PROJECT: str(name)}))
    if _owned_provider is not None and _owned_provider.resource == resource:
        return _owned_provider
    provider = TracerProvider(resource=resource)
    _owned_provider = provider
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        trace.set_tracer_provider(provider)
    return provider


def _switch_for(provider: TracerProvider) -> _SwitchProcessor:
    switch = _switches.get(provider)
    if switch is None:
        switch = _SwitchProcessor()
        provider.add_span_processor(switch)
        _switches[provider] = switch
    return switch


# --- Scoring engine wiring ---------------------------------------------------------------------
# The one place that constructs the processor, worker and telemetry from resolved settings; the
# engine's owners rewire it when its constructors change.


def _build_scoring(
    settings: _ScoringSettings, export_processor: SpanProcessor | None,
    destinations: _destinations.Destinations | None = None,
) -> tuple[ScoringSpanProcessor, Telemetry]:
    compiled = [rule.compile() for rule in settings.rules]
    dest = destinations or _destinations.Destinations(logger_provider=settings.logger_provider)
    # The gauges read the processor, which needs the telemetry first.
    holder: list[ScoringSpanProcessor] = []
    telemetry = Telemetry(
        # tracescore's own provider when configure() made one (metrics go where logs go).
        meter_provider=(dest.meter_provider if dest.meter_provider is not None
                        else settings.meter_provider),
        logger_provider=dest.logger_provider,
        queue_size=lambda: holder[0].pending_jobs() if holder else 0,
        held_spans=lambda: holder[0].held_spans() if holder else 0,
        version=__version__,
    )
    processor = ScoringSpanProcessor(
        export_processor,
        compiled,
        score_timeout=settings.score_timeout,
        max_concurrency=settings.max_concurrency,
        max_queue_size=settings.max_queue_size,
        job_timeout=settings.job_timeout,
        flush_timeout=settings.flush_timeout,
        max_held_spans=settings.max_held_spans,
        on_score=settings.on_score,
        telemetry=telemetry,
        writers=dest.writers,
    )
    holder.append(processor)
    return processor, telemetry


# --- End of scoring engine wiring --------------------------------------------------------------


def _publish(
    content: _ContentSettings,
    scoring: _ScoringSettings,
    provider: TracerProvider,
    processor: ScoringSpanProcessor,
    telemetry: Telemetry,
) -> None:
    """Hand the new configuration to the decorators and the judge (plain attribute writes)."""
    _state.default_judge = scoring.judge
    _state.capture_content = content.capture
    _state.max_content_length = content.max_length
    _state.tracer = provider.get_tracer(sc.INSTRUMENTATION_SCOPE, __version__)
    _handoff.picks = processor.trace_picks
    _handoff.wanted = bool(scoring.rules)
    _state.telemetry = telemetry
    _state.disabled = content.disabled


def _register_exit_hooks() -> None:
    global _atexit_registered
    if _atexit_registered:
        return
    atexit.register(_at_exit)
    # threading's exit hooks run before atexit's, and among them the one that stops every
    # ThreadPoolExecutor (asyncio's default executor included): judge calls still pending at
    # exit need it, so flush from a threading hook registered after it. That hook runs before
    # the non-daemon threads are joined, which may still end spans: it only flushes, and the
    # atexit hook (after the joins) shuts down.
    register = getattr(threading, "_register_atexit", None)
    if register is not None:
        with contextlib.suppress(RuntimeError):  # interpreter already shutting down
            register(_flush_at_exit)
    _atexit_registered = True


def _retire(previous: Tracescore | None) -> None:
    # Only once the new processor is in place: spans ending meanwhile reach it instead of an
    # export processor that is shutting down.
    if previous is None:
        return
    try:
        previous.shutdown(int(min(previous.flush_timeout, 5.0) * 1000))
    except Exception:
        logger.warning(
            "tracescore: shutting down the previous configuration failed", exc_info=True
        )


def configure(
    *,
    service_name: str | None = None,
    judge: str | Judge | None = None,
    scoring: Sequence[ScoringRule] | None = None,
    tracer_provider: TracerProvider | None = None,
    exporter: SpanExporter | bool | None = None,
    capture_content: bool | None = None,
    max_content_length: int | None = None,
    score_timeout: float | None = None,
    max_concurrency: int | None = None,
    max_queue_size: int | None = None,
    flush_timeout: float | None = None,
    on_score: Callable[[ScoreEvent], Any] | None = None,
    max_held_spans: int | None = None,
    meter_provider: Any = None,
    logger_provider: Any = None,
    job_timeout: float | None = None,
    flush_on_sigterm: bool | None = None,
    max_scoring_length: int | None = None,
    max_scoring_documents: int | None = None,
    max_scoring_document_length: int | None = None,
    export_queue_bytes: int | None = None,
    export_batch_bytes: int | None = None,
    export_retry: bool | None = None,
    export_retry_dir: str | os.PathLike[str] | None = None,
    export_retry_max_bytes: int | None = None,
    export_retry_max_age: float | None = None,
    phoenix_url: str | bool | None = None,
    redact_patterns: Sequence[str | re.Pattern[str]] | None = None,
    redact: Callable[[str], str] | None = None,
    redact_foreign_spans: bool | None = None,
) -> Tracescore:
    """Set tracescore up: spans, scoring rules, judge and export. Keyword arguments only.

    Calling it again replaces the previous configuration: the new one takes over, then the
    previous one is flushed and shut down (within ``min(flush_timeout, 5 s)``).

    Args:
        service_name: ``service.name`` of the resource. Default: ``OTEL_SERVICE_NAME``, else
            ``unknown_service``. ``OTEL_RESOURCE_ATTRIBUTES`` is honoured.
        judge: the default judge of LLM scorers that were not given ``model=``: a litellm model
            string (``"openai/gpt-4o-mini"``) or ``tracescore.Judge(model, **litellm_kwargs)``.
            Default: ``TRACESCORE_JUDGE_MODEL``; none means LLM scorers record
            ``error.type=no_judge``.
        scoring: the ``ScoringRule`` list. Default: none (spans only).
        tracer_provider: an existing SDK ``TracerProvider`` to add tracescore's processor to;
            the global provider is then left alone. Note that the provider's other processors
            see spans before their scores are attached. Default: tracescore creates a provider
            and sets it as the global one if no SDK provider is set yet.
        exporter: any OTel ``SpanExporter``; ``False`` exports nothing. Default: OTLP when
            ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set
            (protocol from ``OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL``: ``http/protobuf`` default,
            ``grpc``), else OTLP/JSON lines appended to ``tracescore-traces.jsonl`` (path from
            ``TRACESCORE_EXPORT_FILE``).
        capture_content: put inputs, outputs and documents on spans. Default:
            ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``, else True. Scoring sees the
            full values either way.
        max_content_length: characters kept per captured value. Default
            ``TRACESCORE_MAX_CONTENT_LENGTH``, else 16384.
        score_timeout: seconds a sampled span is held for its scores before it is exported
            anyway (later scores go out on a carrier span). Default ``TRACESCORE_SCORE_TIMEOUT``,
            else 30.
        max_concurrency: scoring jobs running at once. Default ``TRACESCORE_MAX_CONCURRENCY``,
            else 8.
        max_queue_size: scoring jobs accepted at once (queued plus running); past it jobs are
            skipped and counted, never waited for. Default ``TRACESCORE_MAX_QUEUE_SIZE``, else
            1000.
        flush_timeout: seconds ``force_flush()``/``shutdown()``/the exit hook wait by default.
            Default ``TRACESCORE_FLUSH_TIMEOUT``, else 10.
        on_score: a callback receiving every ``ScoreEvent`` on the scoring thread (keep it
            fast; exceptions are logged).
        max_held_spans: spans held for their scores at once; past it new sampled spans are
            exported unscored and the skips counted. Default ``TRACESCORE_MAX_HELD_SPANS``,
            else bounded by ``max_queue_size`` (every held span waits on a queued job).
        meter_provider: where score metrics and self-metrics go (docs/monitoring.md,
            "Metrics"). Default: the global ``MeterProvider`` when one is set; else, when spans
            are exported where the environment says (no ``exporter=``), a provider of
            tracescore's own (not set globally) that exports every ``OTEL_METRIC_EXPORT_INTERVAL``
            (60 s) and at each flush to OTLP from the same ``OTEL_EXPORTER_OTLP_[METRICS_]*``
            variables, or to ``tracescore-metrics.jsonl`` next to the span file
            (``TRACESCORE_METRICS=false`` or ``OTEL_METRICS_EXPORTER=none``: none); else none.
        logger_provider: where each score is also emitted as a ``gen_ai.evaluation.result``
            log record carrying the scored span's trace and span ids, stamped at its end.
            Default: the global SDK ``LoggerProvider`` when one is set; else, when spans are
            exported where the environment says (no ``exporter=``), a provider of tracescore's
            own (not set globally) that sends the records to OTLP from the same
            ``OTEL_EXPORTER_OTLP_[LOGS_]*`` variables, or to ``tracescore-logs.jsonl`` next to
            the span file; else none.
        job_timeout: seconds one scoring job (every judge call and retry of one scorer on one
            span) may run before it is cancelled, freeing its place among ``max_concurrency``;
            its event then carries ``error.type=timeout`` (on a carrier span when the scored
            span already went out). Time the job waits in a judge's queue
            (``Judge(max_concurrency=...)``) does not count. A scorer that blocks its thread
            instead of awaiting cannot be cancelled. Default ``TRACESCORE_JOB_TIMEOUT``, else 300.
        flush_on_sigterm: when SIGTERM has its default disposition (as under ``docker stop``
            and Kubernetes, which would kill the process with nothing flushed), install a
            handler in the main thread that shuts tracescore down within ``flush_timeout`` and
            then dies of SIGTERM as the default would. A SIGTERM handler installed by anyone
            else is never replaced. ``False`` removes tracescore's handler. Default
            ``TRACESCORE_FLUSH_ON_SIGTERM``, else True.
        max_scoring_length: characters a scorer (and so its judge) is given per input,
            output, ground truth or other named value; the rest is cut and the cut stated in the
            score's explanation. Default ``TRACESCORE_MAX_SCORING_LENGTH``, else 50000.
        max_scoring_documents: documents (and tool calls) a scorer is given per request, the
            first ones kept. Default ``TRACESCORE_MAX_SCORING_DOCUMENTS``, else 32.
        max_scoring_document_length: characters a scorer is given per document (and per tool
            call). Default ``TRACESCORE_MAX_SCORING_DOCUMENT_LENGTH``, else 8000.
        export_queue_bytes: bytes of ended spans waiting for export at most (their encoded
            size plus 1 KiB each); past it new spans are dropped and counted
            (``stats().spans_dropped["queue_full"]``). Default ``TRACESCORE_EXPORT_QUEUE_BYTES``,
            else 64 MiB. ``OTEL_BSP_MAX_QUEUE_SIZE``, when set, caps the span count as well.
        export_batch_bytes: encoded bytes of one export request at most; a span alone larger is
            cut to fit and carries ``tracescore.export.truncated``. Default
            ``TRACESCORE_EXPORT_BATCH_BYTES``, else 3 MiB (gRPC's default limit is 4 MiB).
        export_retry: keep batches the exporter failed (backend down, timeouts) on disk and
            retry them in order with backoff; ``False`` drops them (counted as
            ``export_failed``). Default ``TRACESCORE_EXPORT_RETRY``, else True.
        export_retry_dir: the folder in which a private retry folder is made on the first
            failure (removed at shutdown). Default ``TRACESCORE_EXPORT_RETRY_DIR``, else the
            system's temporary folder.
        export_retry_max_bytes: disk bytes of failed batches kept at most; past it the oldest
            go. Default ``TRACESCORE_EXPORT_RETRY_MAX_BYTES``, else 512 MiB.
        export_retry_max_age: seconds a failed batch is retried before it is dropped. Default
            ``TRACESCORE_EXPORT_RETRY_MAX_AGE``, else 3600.
        phoenix_url: Arize Phoenix's base URL (e.g. ``"http://127.0.0.1:6006"``): every score
            is also posted there as a span annotation (a column, a filter and a summary in
            Phoenix), in batches from a thread of its own; failures are logged and counted
            (``tracescore.phoenix.annotations``). ``False`` turns it off. Default
            ``TRACESCORE_PHOENIX_URL``, else off.
        redact_patterns: regular expressions (strings or compiled) whose every match is
            replaced by ``[REDACTED]`` wherever tracescore sends or writes text (spans, score
            explanations, log records, judge prompts, error messages), on top of the built-in
            rules (README "Secrets"). ``TRACESCORE_REDACT_PATTERNS`` (one expression or a JSON
            array of them) adds more. Default: none.
        redact: a function ``(text: str) -> str`` applied to every such text after the
            built-in rules, e.g. to remove customer ids. If it raises or returns something
            else than a string, that text is recorded as ``[REDACTED]`` (logged once). Keep it
            fast: it runs on your threads, once per recorded value. Default: none.
        redact_foreign_spans: every span tracescore exports is redacted on the export thread
            (name, span, event and link attributes, status, resource; docs/security.md);
            tracescore's own spans always, other instrumentations' spans on the same provider
            unless this is ``False``. Default ``TRACESCORE_REDACT_FOREIGN_SPANS``, else True.

    Returns:
        The configured ``Tracescore`` instance.

    Raises:
        ConfigurationError: an explicit argument is invalid (the message says what to pass).

    Example:
        >>> tracescore.configure(
        ...     service_name="support-bot",
        ...     judge="openai/gpt-4o-mini",
        ...     scoring=[tracescore.ScoringRule(scorer=create_answer_relevancy_scorer(),
        ...                                     on="agent", sample_rate=0.1)],
        ... )
    """
    global _current

    _configure_redaction(redact_patterns, redact)
    if flush_on_sigterm is not None and not isinstance(flush_on_sigterm, bool):
        raise ConfigurationError("configure(flush_on_sigterm=...) takes True or False")
    export = _resolve_export(service_name, tracer_provider, exporter, {
        "export_queue_bytes": export_queue_bytes,
        "export_batch_bytes": export_batch_bytes,
        "export_retry": export_retry,
        "export_retry_dir": export_retry_dir,
        "export_retry_max_bytes": export_retry_max_bytes,
        "export_retry_max_age": export_retry_max_age,
        "redact_foreign_spans": redact_foreign_spans,
    })
    content = _resolve_content(capture_content, max_content_length)
    caps = _input_caps.InputCaps(
        max_length=_positive("max_scoring_length", max_scoring_length,
                             _env.max_scoring_length, integer=True),
        max_documents=_positive("max_scoring_documents", max_scoring_documents,
                                _env.max_scoring_documents, integer=True),
        max_document_length=_positive("max_scoring_document_length",
                                      max_scoring_document_length,
                                      _env.max_scoring_document_length, integer=True),
    )
    scoring_settings = _resolve_scoring(
        scoring=scoring,
        judge=judge,
        score_timeout=score_timeout,
        max_concurrency=max_concurrency,
        max_queue_size=max_queue_size,
        max_held_spans=max_held_spans,
        flush_timeout=flush_timeout,
        job_timeout=job_timeout,
        on_score=on_score,
        meter_provider=meter_provider,
        logger_provider=logger_provider,
    )
    export_processor, description = _build_export(export)
    phoenix = _destinations.resolve_phoenix_url(phoenix_url)

    with _config_lock:
        previous = _current
        if previous is not None:
            _handoff.wanted = False
        provider = _provider_for(export)
        telemetry_holder: list[Telemetry] = []
        destinations = _destinations.build(
            resource=provider.resource, logger_provider=scoring_settings.logger_provider,
            export_from_env=export.export and export.exporter is None,
            phoenix_url=phoenix, telemetry_holder=telemetry_holder,
            meter_provider=scoring_settings.meter_provider)
        processor, telemetry = _build_scoring(scoring_settings, export_processor, destinations)
        telemetry_holder.append(telemetry)
        _switch_for(provider).target = processor
        _publish(content, scoring_settings, provider, processor, telemetry)
        _input_caps.current = caps
        from ._readers import _log_stash  # here to keep this edit local

        _log_stash.attach()  # GenAI content in log records (EVENT_ONLY): see _log_stash
        rules = scoring_settings.rules
        if any(getattr(rule.scorer, "uses_judge", False) for rule in rules):
            _preload_judge(_judge_needs(scoring_settings.judge, rules))
        instance = Tracescore(
            provider, processor, description, rules, scoring_settings.flush_timeout
        )
        instance.destinations = destinations
        _current = instance
        _register_exit_hooks()
        _signals.update(
            _env.flush_on_sigterm() if flush_on_sigterm is None else flush_on_sigterm,
            _stop_on_sigterm,
            scoring_settings.flush_timeout,
        )
        _retire(previous)
    logger.debug(
        "tracescore configured: export to %s, %d scoring rule(s)", description, len(rules)
    )
    return instance


def _configure_redaction(patterns: Sequence[str | re.Pattern[str]] | None,
                         callback: Callable[[str], str] | None) -> None:
    """Check and set ``configure``'s redaction options; re-read the credential variables."""
    from . import _redact  # already imported by the decorators; here to keep this edit local

    if callback is not None and not callable(callback):
        raise ConfigurationError("configure(redact=...) takes a function (text: str) -> str")
    if isinstance(patterns, (str, re.Pattern)):
        patterns = [patterns]
    try:
        _redact.configure(patterns, callback)
    except ValueError as exc:
        raise ConfigurationError(f"configure(redact_patterns=...): {exc}") from None


_preloaded: set[str] = set()  # what was preloaded: "litellm", "direct", "process", "child-litellm"


def _wants_judge_process(default: Judge | None, rules: Sequence[ScoringRule]) -> bool:
    """Whether a judge of ``rules`` (or the default one) runs out of process."""
    judges = [getattr(rule.scorer, "model", None) for rule in rules] + [default]
    if any(isinstance(j, Judge) and j.out_of_process for j in judges):
        return True
    # A model string (or no model) becomes a Judge at run time, which reads the env var.
    return _env.judge_out_of_process() and any(not isinstance(j, Judge) for j in judges[:-1])


def _judge_needs(default: Judge | None, rules: Sequence[ScoringRule]) -> set[str]:
    """What the judges of ``rules`` will need: ``litellm`` (here), ``direct`` (here),
    ``process`` (the child) and ``child-litellm`` (litellm in the child)."""
    from ._judge.transport import choose

    needs: set[str] = set()
    for spec in [getattr(rule.scorer, "model", None) for rule in rules if
                 getattr(rule.scorer, "uses_judge", False)]:
        spec = default if spec is None else spec
        if isinstance(spec, Judge):
            transport, remote = spec.transport, spec.out_of_process
        else:  # a model string, resolved at run time with the environment's settings
            model = spec if isinstance(spec, str) else (_env.judge_model() or "")
            transport = choose(model.strip(), {}, _env.judge_transport())
            remote = _env.judge_out_of_process()
        if remote:
            needs.update(("process", "child-litellm") if transport == "litellm" else ("process",))
        else:
            needs.add(transport)
    return needs


def _preload_judge(needs: set[str] | bool = False) -> None:
    """Get the judges' start-up out of the way on a background thread, so the first sampled
    span's score does not pay it against ``score_timeout``: import litellm only for an
    in-process litellm judge (seconds, ~3,000 modules), the direct transport's aiohttp for a
    direct one (tens of ms); start the judge child for an out-of-process judge and have it
    import litellm only if one of them uses litellm. An application whose judges are all
    direct or out of process never imports litellm."""
    if isinstance(needs, bool):  # the older form: litellm here, and the child if True
        needs = {"litellm", "process", "child-litellm"} if needs else {"litellm"}
    todo = set(needs) - _preloaded
    if not todo:
        return
    _preloaded.update(todo)
    _preload_done.clear()

    def load() -> None:
        try:
            from ._judge import loading

            if "process" in todo or "child-litellm" in todo:
                from ._judge.process import shared_process

                child = shared_process()
                if "child-litellm" in todo:
                    from ._loop import run_blocking

                    run_blocking(child.wait_ready(litellm=True))
            if "litellm" in todo:
                loading.load_litellm()
            if "direct" in todo:
                import aiohttp  # noqa: F401 - the direct transport's client, imported early
        except Exception:
            logger.debug("tracescore could not preload the judge", exc_info=True)
        finally:
            _preload_done.set()

    threading.Thread(target=load, name="tracescore-preload", daemon=True).start()


# Set while no preload is running. A flush with the default deadline waits for a running one
# first, at most this long (litellm's import took 4-6 s on a loaded 2-core machine).
_preload_done = threading.Event()
_preload_done.set()
_PRELOAD_GRACE = 60.0
_flush_waiting_for_preload = threading.Event()  # observable by tests: a flush is waiting


def _wait_for_preload() -> None:
    if _preload_done.is_set():
        return
    _flush_waiting_for_preload.set()
    try:
        _preload_done.wait(_PRELOAD_GRACE)
    finally:
        _flush_waiting_for_preload.clear()



def current() -> Tracescore | None:
    """The instance the last ``configure()`` returned, or None."""
    return _current


def force_flush(timeout_millis: int | None = None) -> bool:
    """Wait for pending scores, export every held span, then flush the exporter.

    Args:
        timeout_millis: the deadline in milliseconds; default ``flush_timeout`` of
            ``configure()`` (``TRACESCORE_FLUSH_TIMEOUT``, else 10 s).

    Returns:
        True when every pending score came in and everything was exported in time; False when
        the deadline passed (held spans are exported anyway, with the scores they have) or
        tracescore is not configured.
    """
    instance = _current
    if instance is None:
        return False
    return instance.force_flush(timeout_millis)


def shutdown(timeout_millis: int | None = None) -> None:
    """Flush as ``force_flush`` does, then stop the scoring worker and the exporter.

    After it, decorated functions still run; their spans are no longer scored or exported until
    ``configure()`` is called again.
    """
    global _current
    with _config_lock:
        instance = _current
        _current = None
        _handoff.wanted = False
    if instance is not None:
        instance.shutdown(timeout_millis)
        with _config_lock:
            if _current is None:
                _state.telemetry = None


def stats() -> Stats:
    """Counters of the current configuration: spans exported, scores attached, skips, errors.

    Returns an all-zero ``Stats`` when tracescore is not configured.
    """
    instance = _current
    return instance.stats() if instance is not None else Stats()


def _reinit_lock_after_fork() -> None:
    # A thread that held the lock in the parent does not exist in the child.
    global _config_lock
    _config_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reinit_lock_after_fork)


def _stop_on_sigterm(seconds: float) -> None:
    # On the SIGTERM handler's helper thread. Not through shutdown(): the interrupted main
    # thread may hold _config_lock (inside configure()).
    instance = _current
    if instance is not None:
        logger.debug("tracescore: SIGTERM, shutting down within %.1f s", seconds)
        instance.shutdown(int(seconds * 1000))


def _flush_at_exit() -> None:
    _exit_hook(shutdown=False)


def _at_exit() -> None:
    _exit_hook(shutdown=True)


def _exit_hook(shutdown: bool) -> None:
    instance = _current
    if instance is None:
        return
    try:
        # When this flush misses its deadline on something stuck, the shutdown that follows
        # (ours, or the SDK provider's own exit hook, which passes no deadline) gets a second,
        # not another deadline: the processor remembers the miss (ScoringSpanProcessor.shutdown).
        if shutdown:
            instance.shutdown()
        else:
            instance.force_flush()
    except Exception:
        logger.debug("tracescore exit flush failed", exc_info=True)
