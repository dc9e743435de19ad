"""``configure()``, ``ScoringRule``, ``force_flush()``, ``shutdown()``: the one setup entry point.

Each option resolves as: argument > ``TRACESCORE_*`` env > the standard ``OTEL_*`` env > default.
A bad explicit argument raises ``ConfigurationError``; a bad environment value logs a warning
and falls back to the default.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import logging
import os
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter

from tracescore._core import semconv as sc
from tracescore._core.errors import ConfigurationError
from tracescore._core.stats import Stats
from tracescore._export import ExportProcessor, Spool
from tracescore._export.exporters import FileSpanExporter, exporter_from_env
from tracescore._export.scrub import Scrubber
from tracescore._instrument import conversation as _conversation
from tracescore._instrument import usage as _usage
from tracescore._judge import Judge
from tracescore._pipeline.processor import ScoringSpanProcessor
from tracescore._pipeline.rules import CompiledRule, ScoringRule
from tracescore._pipeline.runtime import RUNTIME, Runtime
from tracescore._setup import console as _console
from tracescore._setup import env as _env
from tracescore._setup import options as _options
from tracescore._setup import signals as _signals
from tracescore._setup.options import (
    ContentOptions,
    ExportOptions,
    LimitsOptions,
    OutputOptions,
    RedactionOptions,
)
from tracescore._version import __version__
from tracescore._writers import destinations as _destinations
from tracescore._writers.callback import ScoreEvent
from tracescore._writers.instruments import Telemetry

logger = logging.getLogger("tracescore")


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
        # Spans of other instrumentations started inside tracescore.conversation(...) get its
        # ids too (tracescore's own spans have them from their start).
        conversation = _conversation.current()
        if conversation:
            _add_conversation(span, conversation)
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


def _add_conversation(span: Any, conversation: Any) -> None:
    try:
        present = span.attributes or {}
        for key, value in conversation.items():
            if key not in present:
                span.set_attribute(key, value)
    except Exception:
        logger.debug("tracescore could not add the conversation to a span; the span is "
                     "otherwise unaffected", exc_info=True)


_switches: weakref.WeakKeyDictionary[Any, _SwitchProcessor] = weakref.WeakKeyDictionary()
_owned_provider: TracerProvider | None = None
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
        # The local file spans go to when it is the default (counted at exit), else None.
        self.file_path: str | None = None
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
        # Jobs of spans that ended during the flush may be pending too: only a missed flush
        # exported spans without their scores.
        if pending and not ok:
            logger.warning(
                "tracescore.force_flush: %d score(s) still pending after %.1f s; their spans "
                "were exported without them and the scores follow on 'evaluation' carrier spans "
                "if they finish. Give the flush more time (force_flush(timeout_millis=...), "
                "LimitsOptions(flush_timeout=...) or TRACESCORE_FLUSH_TIMEOUT). The application "
                "is unaffected.", pending, ms / 1000)
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
        if self.file_path is not None:
            counts = self.processor.stats
            RUNTIME.console.tally.add_spans(self.file_path, counts.spans_exported,
                                            sum(counts.spans_dropped.values()))


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


def _group(name: str, value: Any, flat: dict[str, Any]) -> Any:
    """The option group ``name`` from its keyword argument and the deprecated flat keywords
    that moved into it (a field given both ways is an error)."""
    cls = _options.GROUPS[name]
    if value is None:
        value = cls()
    elif not isinstance(value, cls):
        raise ConfigurationError(
            f"configure({name}=...) takes a tracescore.{cls.__name__}(...), "
            f"got {type(value).__name__}")
    moved = {field: flat[old] for old, (group, field) in _options.FLAT_NAMES.items()
             if group == name and flat.get(old) is not None}
    for field in moved:
        if getattr(value, field) is not None:
            raise ConfigurationError(
                f"configure(): {field} is given both in {name}={cls.__name__}(...) and as a "
                "flat keyword; keep the first")
    return dataclasses.replace(value, **moved) if moved else value


def _check_flat(flat: dict[str, Any]) -> None:
    """Unknown keywords are a TypeError, as for any function; known old ones warn."""
    for old in flat:
        if old not in _options.FLAT_NAMES:
            raise TypeError(f"configure() got an unexpected keyword argument {old!r}")
    for old in flat:
        group, field = _options.FLAT_NAMES[old]
        cls = _options.GROUPS[group].__name__
        warnings.warn(
            f"configure({old}=...) is deprecated and will be removed in the next release: "
            f"pass configure({group}=tracescore.{cls}({field}=...)) (docs/configuration.md)",
            DeprecationWarning, stacklevel=3)


def _check_target(service_name: Any, tracer_provider: Any, exporter: Any) -> None:
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


def _build_export(exporter: Any, options: ExportOptions, redaction: RedactionOptions
                  ) -> tuple[SpanProcessor | None, str, str | None]:
    """The export processor (None with ``exporter=False``), where it sends spans, and the
    local file's path when spans go to the default file."""
    if exporter is False:
        return None, "none", None
    file_path = None
    if exporter is None:
        chosen, description = exporter_from_env()
        if isinstance(chosen, FileSpanExporter):
            file_path = str(chosen.path)
    else:
        chosen = exporter
        description = f"custom exporter {type(chosen).__name__}"
    return export_processor(chosen, options, redaction, price=True), description, file_path


def _price(span: Any) -> Any:
    return _usage.cost_attributes(span, RUNTIME.price_file)


def export_processor(exporter: SpanExporter, options: ExportOptions,
                     redaction: RedactionOptions, *, price: bool = False,
                     redactor: Any = None) -> ExportProcessor:
    """tracescore's export processor for ``exporter`` with resolved ``options`` (in process
    and in ``tracescore serve``); every batch is redacted on its thread, other
    instrumentations' spans (the service: received spans) unless ``redaction.foreign_spans``
    is False. ``price``: other instrumentations' model-call spans with token counts and no
    cost get their cost from tracescore's price table there too (``configure()``).
    ``redactor``: the runtime's (a service's own); None: ``configure()``'s."""
    spool = (Spool(options.retry_dir, int(options.retry_max_bytes or 0),
                   float(options.retry_max_age or 0)) if options.retry else None)
    return ExportProcessor(
        exporter,
        queue_bytes=int(options.queue_bytes or 0),
        batch_bytes=int(options.batch_bytes or 0),
        max_batch_spans=int(options.max_batch_spans or 0),
        schedule_delay=float(options.schedule_delay or 0.0),
        max_queue_spans=options.max_queue_spans,
        spool=spool,
        scrub=Scrubber(foreign=redaction.foreign_spans is not False,
                       price=_price if price else None, redactor=redactor),
    )


def _provider_for(service_name: str | None, tracer_provider: Any) -> TracerProvider:
    """The user's provider, or ours (reused while its resource is unchanged). Holds the lock."""
    global _owned_provider
    if tracer_provider is not None:
        return tracer_provider  # type: ignore[no-any-return]
    attrs: dict[str, Any] = {}
    if service_name is not None:
        attrs[SERVICE_NAME] = service_name
    resource = Resource.create(attrs)
    named = service_name is not None or _env.service_name() is not None
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


def build_scoring(
    runtime: Runtime,
    rules: Sequence[CompiledRule],
    limits: LimitsOptions,
    *,
    downstream: SpanProcessor | None,
    flush_timeout: float,
    meter_provider: Any,
    logger_provider: Any,
    writers: Sequence[Any] = (),
    on_score: Callable[[ScoreEvent], Any] | None = None,
    trace_buffer: Any = None,
    defer: Callable[[ReadableSpan], bool] | None = None,
    phoenix: Callable[[Telemetry], Any] | None = None,
    count_usage: bool = False,
) -> tuple[ScoringSpanProcessor, Telemetry]:
    """The scoring processor and its telemetry for ``runtime`` (``configure()`` and
    ``tracescore serve`` both build theirs here). The telemetry's gauges read the processor
    ``runtime`` holds; ``phoenix`` makes the Phoenix writer, which counts in the telemetry;
    ``count_usage``: other instrumentations' model calls are counted in its token and cost
    metrics (``configure()``'s, whose provider they end on)."""
    telemetry = Telemetry(
        meter_provider=meter_provider,
        logger_provider=logger_provider,
        queue_size=lambda: runtime.processor.pending_jobs() if runtime.processor else 0,
        held_spans=lambda: runtime.processor.held_spans() if runtime.processor else 0,
        version=__version__,
    )
    chain = list(writers)
    if phoenix is not None:
        chain.append(phoenix(telemetry))
    processor = ScoringSpanProcessor(
        downstream,
        rules,
        score_timeout=float(limits.score_timeout or 0),
        max_concurrency=int(limits.max_concurrency or 0),
        max_queue_size=int(limits.max_queue_size or 0),
        job_timeout=limits.job_timeout,
        flush_timeout=flush_timeout,
        max_held_spans=limits.max_held_spans,
        on_score=on_score,
        telemetry=telemetry,
        writers=chain,
        trace_buffer=trace_buffer,
        readers=runtime.readers,
        ending=runtime.ending,
        defer=defer,
        runtime=runtime,
        count_usage=count_usage,
    )
    return processor, telemetry


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
    on_score: Callable[[ScoreEvent], Any] | None = None,
    content: ContentOptions | None = None,
    limits: LimitsOptions | None = None,
    export: ExportOptions | None = None,
    redaction: RedactionOptions | None = None,
    output: OutputOptions | None = None,
    **deprecated: Any,
) -> Tracescore:
    """Set tracescore up: spans, scoring rules, judge and export. Keyword arguments only.

    Calling it again replaces the previous configuration: the new one takes over, then the
    previous one is flushed and shut down (within ``min(flush_timeout, 5 s)``). Every option
    resolves as: argument > ``TRACESCORE_*`` env > the standard ``OTEL_*`` env > default; each
    option, its variable, its default and its key in ``tracescore serve``'s file are listed
    once in docs/configuration.md (the option table).

    Args:
        service_name: ``service.name`` of the resource. Default: ``OTEL_SERVICE_NAME``, else
            ``unknown_service``. ``OTEL_RESOURCE_ATTRIBUTES`` is honoured.
        judge: the default judge of LLM scorers given no ``model=``: a litellm model string
            (``"openai/gpt-4o-mini"``) or ``tracescore.Judge(model, **litellm_kwargs)``.
            Default ``TRACESCORE_JUDGE_MODEL``; none: LLM scorers record ``error.type=no_judge``.
        scoring: the ``ScoringRule`` list. Default: none (spans only).
        tracer_provider: an SDK ``TracerProvider`` to add tracescore's processor to (the
            global provider is then left alone; its other processors see spans before their
            scores). Default: a new provider, set globally if no SDK provider is set yet.
        exporter: any OTel ``SpanExporter``; False exports nothing. Default: OTLP when
            ``OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT`` is set (protocol from
            ``OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL``: ``http/protobuf`` default, or ``grpc``),
            else OTLP/JSON lines appended to ``tracescore-traces.jsonl``
            (``TRACESCORE_EXPORT_FILE``).
        capture_content: inputs, outputs and documents on spans, as
            ``ContentOptions(capture=...)``. Default
            ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``, else True.
        on_score: a callback given every ``ScoreEvent`` on the scoring thread (keep it fast;
            its exceptions are logged).
        content: ``tracescore.ContentOptions``: what the decorators record on spans.
        limits: ``tracescore.LimitsOptions``: deadlines (``flush_timeout`` among them),
            concurrency, queue and held-span bounds of scoring, what one scorer run is given.
        export: ``tracescore.ExportOptions``: export queue, batches, retries on disk, the flush
            at SIGTERM.
        redaction: ``tracescore.RedactionOptions``: text removed wherever tracescore sends it.
        output: ``tracescore.OutputOptions``: log records, metrics, Phoenix, the console.
        **deprecated: the flat keywords of earlier releases (``flush_timeout=``,
            ``meter_provider=``, ``max_concurrency=``, ...; docs/configuration.md lists where
            each moved). They work for one more release and warn (``DeprecationWarning``).

    Returns:
        The configured ``Tracescore`` instance.

    Raises:
        ConfigurationError: an explicit argument is invalid (the message says what to pass).
        TypeError: an unknown keyword argument.

    Examples:
        >>> tracescore.configure(
        ...     service_name="support-bot", judge="openai/gpt-4o-mini",
        ...     scoring=[tracescore.ScoringRule(scorer=create_answer_relevancy_scorer(),
        ...                                     on="agent", sample_rate=0.1)],
        ...     limits=tracescore.LimitsOptions(max_concurrency=4))
    """
    _check_flat(deprecated)
    given = {"content": content, "limits": limits, "export": export, "redaction": redaction,
             "output": output}
    settings = _settings(
        {name: _group(name, value, deprecated) for name, value in given.items()},
        service_name=service_name, judge=judge, scoring=scoring,
        tracer_provider=tracer_provider, exporter=exporter, capture_content=capture_content,
        on_score=on_score)
    return _install(settings)


@dataclasses.dataclass(frozen=True)
class _Settings:
    """One ``configure()`` call's options, checked and resolved."""

    service_name: str | None
    tracer_provider: TracerProvider | None
    exporter: Any
    rules: tuple[ScoringRule, ...]
    judge: Judge | None
    on_score: Callable[[ScoreEvent], Any] | None
    content: ContentOptions
    limits: LimitsOptions
    export: ExportOptions
    redaction: RedactionOptions
    output: OutputOptions


def _settings(groups: dict[str, Any], *, service_name: Any, judge: Any, scoring: Any,
              tracer_provider: Any, exporter: Any, capture_content: Any,
              on_score: Any) -> _Settings:
    """Check every argument (``ConfigurationError`` on the first bad one) and resolve every
    option from the option table."""
    if capture_content is not None:
        if not isinstance(capture_content, bool):
            raise ConfigurationError("configure(capture_content=...) takes True or False")
        if groups["content"].capture not in (None, capture_content):
            raise ConfigurationError(
                "configure(): capture_content and content=ContentOptions(capture=...) disagree")
        groups["content"] = dataclasses.replace(groups["content"], capture=capture_content)
    _configure_redaction(groups["redaction"])
    if on_score is not None and not callable(on_score):
        raise ConfigurationError("configure(on_score=...) takes a callable")
    _check_target(service_name, tracer_provider, exporter)
    rules = tuple(scoring or ())
    for rule in rules:
        if not isinstance(rule, ScoringRule):
            raise ConfigurationError(
                f"configure(scoring=[...]) takes ScoringRule objects, got {type(rule).__name__}"
            )
    content: ContentOptions = groups["content"].resolve()
    if content.price_file:
        if groups["content"].price_file is not None:
            _usage.price_table(content.price_file)  # a bad file given here: fail now
        else:
            _usage.prices_or_shipped(content.price_file)  # from the env: warn once
    return _Settings(
        service_name=service_name, tracer_provider=tracer_provider, exporter=exporter,
        rules=rules, judge=_resolve_judge(judge), on_score=on_score, content=content,
        limits=groups["limits"].resolve(), export=groups["export"].resolve(),
        redaction=groups["redaction"].resolve(), output=groups["output"].resolve())


def _install(s: _Settings) -> Tracescore:
    """Build the parts of resolved settings and put them in place of the previous ones."""
    downstream, description, file_path = _build_export(s.exporter, s.export, s.redaction)
    flush_seconds = float(s.limits.flush_timeout or 0)
    phoenix = s.output.phoenix_url or None
    with _config_lock:
        previous = RUNTIME.instance
        provider = _provider_for(s.service_name, s.tracer_provider)
        destinations = _destinations.build(
            resource=provider.resource, logger_provider=s.output.logger_provider,
            export_from_env=s.exporter is None, meter_provider=s.output.meter_provider)
        processor, telemetry = build_scoring(
            RUNTIME, [rule.compile() for rule in s.rules], s.limits,
            downstream=downstream, flush_timeout=flush_seconds,
            # tracescore's own provider when configure() made one (metrics go where logs go).
            meter_provider=(destinations.meter_provider
                            if destinations.meter_provider is not None
                            else s.output.meter_provider),
            logger_provider=destinations.logger_provider, on_score=s.on_score,
            writers=() if file_path is None else (_console.TallyWriter(RUNTIME.console.tally),),
            phoenix=(None if phoenix is None else destinations.phoenix_writer(str(phoenix))),
            count_usage=True)
        _switch_for(provider).target = processor
        RUNTIME.install(
            tracer=provider.get_tracer(sc.INSTRUMENTATION_SCOPE, __version__),
            content=s.content, limits=s.limits, judge=s.judge,
            processor=processor, telemetry=telemetry, disabled=_env.disabled())
        from tracescore._readers import _log_stash  # here to keep this edit local

        _log_stash.attach()  # GenAI content in log records (EVENT_ONLY): see _log_stash
        if any(getattr(rule.scorer, "uses_judge", False) for rule in s.rules):
            _preload_judge(_judge_needs(s.judge, s.rules))
        instance = Tracescore(provider, processor, description, s.rules, flush_seconds)
        instance.destinations = destinations
        instance.file_path = file_path
        RUNTIME.instance = instance
        RUNTIME.shut_down = None
        RUNTIME.console.enabled = bool(s.output.console)
        _register_exit_hooks()
        _signals.update(bool(s.export.flush_on_sigterm), _stop_on_sigterm, flush_seconds)
        _retire(previous)
    logger.debug(
        "tracescore configured: export to %s, %d scoring rule(s)", description, len(s.rules)
    )
    if file_path is not None:
        RUNTIME.console.announce(file_path)
    return instance


def _configure_redaction(options: RedactionOptions) -> None:
    """Set the redaction options; re-read the credential variables."""
    try:
        RUNTIME.redactor.configure(
            list(options.patterns) if options.patterns is not None else None, options.callback)
    except ValueError as exc:
        raise ConfigurationError(f"RedactionOptions(patterns=...): {exc}") from None


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
    from tracescore._judge.transport import choose

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
            from tracescore._judge import loading

            if "process" in todo or "child-litellm" in todo:
                from tracescore._judge.process import shared_process

                child = shared_process()
                if "child-litellm" in todo:
                    from tracescore._core.loop import run_blocking

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
    return RUNTIME.instance


def force_flush(timeout_millis: int | None = None) -> bool:
    """Wait for pending scores, export every held span, then flush the exporter.

    Args:
        timeout_millis: the deadline in milliseconds; default
            ``LimitsOptions.flush_timeout`` (``TRACESCORE_FLUSH_TIMEOUT``, else 10 s).

    Returns:
        True when every pending score came in and everything was exported in time; False when
        the deadline passed (held spans are exported anyway, with the scores they have) or
        tracescore is not configured.
    """
    instance = RUNTIME.instance
    if instance is None:
        return False
    return instance.force_flush(timeout_millis)


def shutdown(timeout_millis: int | None = None) -> None:
    """Flush as ``force_flush`` does, then stop the scoring worker and the exporter.

    After it, decorated functions still run; their spans are no longer scored or exported until
    ``configure()`` is called again.
    """
    with _config_lock:
        instance = RUNTIME.instance
        RUNTIME.instance = None
        if instance is not None:
            RUNTIME.shut_down = instance
    if instance is not None:
        instance.shutdown(timeout_millis)
        with _config_lock:
            if RUNTIME.instance is None:
                RUNTIME.stop_scoring()


def stats() -> Stats:
    """Counters of the current configuration: spans exported, scores attached, skips, errors.

    After ``shutdown()``, until the next ``configure()``: the final counters of the
    configuration it shut down (spans ended on its provider after it are counted in
    ``spans_dropped["shutdown"]``). Returns an all-zero ``Stats`` when tracescore was never
    configured.
    """
    instance = RUNTIME.instance or RUNTIME.shut_down
    return instance.stats() if instance is not None else Stats()


def _reinit_lock_after_fork() -> None:
    # A thread that held the lock in the parent does not exist in the child.
    global _config_lock
    _config_lock = threading.Lock()


# How long a fork() waits for a running judge preload at most.
_FORK_WAITS_FOR_PRELOAD = 30.0


def _finish_preload_before_fork() -> None:
    # A module the preload thread is importing when fork() happens stays half imported in the
    # child for good (aiohttp's ClientSession "from a partially initialized module"): every
    # judged score of the child then fails. The forking thread waits for the import instead.
    if not _preload_done.is_set():
        _preload_done.wait(_FORK_WAITS_FOR_PRELOAD)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_finish_preload_before_fork,
                        after_in_child=_reinit_lock_after_fork)


def _stop_on_sigterm(seconds: float) -> None:
    # On the SIGTERM handler's helper thread. Not through shutdown(): the interrupted main
    # thread may hold _config_lock (inside configure()).
    instance = RUNTIME.instance
    if instance is not None:
        logger.debug("tracescore: SIGTERM, shutting down within %.1f s", seconds)
        instance.shutdown(int(seconds * 1000))


def _flush_at_exit() -> None:
    _exit_hook(shutdown=False)


def _at_exit() -> None:
    _exit_hook(shutdown=True)


def _exit_hook(shutdown: bool) -> None:
    instance = RUNTIME.instance
    if instance is not None:
        _exit_flush(instance, shutdown)
    if shutdown:
        # Last: the counts are complete once the exporter has shut down.
        RUNTIME.console.print_summary()


def _exit_flush(instance: Tracescore, shutdown: bool) -> None:
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
