"""``local_runtime()``: tracescore configured but not installed, as logfire's
``configure(local=True)``.

A ``LocalRuntime`` has its own tracer provider, scoring processor, exporter and redactor,
built as ``configure()`` builds the process's, and touches nothing process-wide: not the global
tracer provider, not the runtime ``configure()`` fills (nor its redaction patterns), not the
global meter or logger provider.
Decorated calls and ``tracescore.span`` blocks use it inside ``with runtime.activate():`` (or
``with runtime:``); everywhere else they use the process's configuration as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator

from tracescore._core import semconv as sc
from tracescore._core.errors import ConfigurationError
from tracescore._core.stats import Stats
from tracescore._judge import Judge
from tracescore._pipeline.rules import ScoringRule
from tracescore._pipeline.runtime import Runtime
from tracescore._setup import env as _env
from tracescore._setup.options import (
    ContentOptions,
    ExportOptions,
    LimitsOptions,
    OutputOptions,
    RedactionOptions,
)
from tracescore._version import __version__

from ._exporter import InMemoryScoreExporter

__all__ = ["LocalRuntime", "local_runtime"]


class LocalRuntime:
    """A tracescore configuration that is not installed: what ``local_runtime()`` returns.

    Attributes:
        exporter: where its spans go, with their scores (an ``InMemoryScoreExporter`` unless
            another exporter was given).
        tracer_provider: its own SDK ``TracerProvider``; never set as the global provider.
        rules: its scoring rules.
    """

    def __init__(self, *, scoring: Sequence[ScoringRule] = (), judge: str | Judge | None = None,
                 exporter: SpanExporter | None = None,
                 on_score: Callable[[Any], Any] | None = None,
                 content: ContentOptions | None = None, limits: LimitsOptions | None = None,
                 redaction: RedactionOptions | None = None,
                 output: OutputOptions | None = None, service_name: str = "tracescore-local",
                 id_generator: IdGenerator | None = None) -> None:
        # Here, not at module level: the builders import the pipeline (and OTel's SDK parts).
        from opentelemetry._logs import NoOpLoggerProvider
        from opentelemetry.metrics import NoOpMeterProvider

        from tracescore._setup.config import build_scoring, export_processor

        rules = tuple(scoring)
        for rule in rules:
            if not isinstance(rule, ScoringRule):
                raise ConfigurationError(
                    f"local_runtime(scoring=[...]) takes ScoringRule objects, got "
                    f"{type(rule).__name__}")
        if exporter is not None and not isinstance(exporter, SpanExporter):
            raise ConfigurationError("local_runtime(exporter=...) takes an OTel SpanExporter")
        if judge is not None and not isinstance(judge, (str, Judge)):
            raise ConfigurationError("local_runtime(judge=...) takes a litellm model string or "
                                     "a tracescore.Judge")
        redaction = redaction if redaction is not None else RedactionOptions()
        if not isinstance(redaction, RedactionOptions):
            raise ConfigurationError(
                "local_runtime(redaction=...) takes a tracescore.RedactionOptions(...), got "
                f"{type(redaction).__name__}")
        output = output if output is not None else OutputOptions()
        if not isinstance(output, OutputOptions):
            raise ConfigurationError("local_runtime(output=...) takes a tracescore.OutputOptions")
        for name in ("phoenix_url", "console"):
            if getattr(output, name) is not None:
                raise ConfigurationError(
                    f"local_runtime(output=OutputOptions({name}=...)): a local runtime has its "
                    "log records and metrics only (logger_provider, meter_provider)")
        self.rules = rules
        self.exporter: Any = (InMemoryScoreExporter(deterministic_times=True)
                              if exporter is None else exporter)
        self.tracer_provider = TracerProvider(
            resource=Resource.create({SERVICE_NAME: service_name}), id_generator=id_generator,
            shutdown_on_exit=False)
        self._closed = False
        self._runtime = Runtime()
        try:  # its own patterns and callback (and the environment's), as configure()'s
            self._runtime.redactor.configure(
                list(redaction.patterns) if redaction.patterns is not None else None,
                redaction.callback)
        except ValueError as exc:
            raise ConfigurationError(f"RedactionOptions(patterns=...): {exc}") from None
        resolved_limits = (limits or LimitsOptions()).resolve()
        flush_timeout = float(resolved_limits.flush_timeout or 0)
        self._flush_ms = int(flush_timeout * 1000)
        # No retry spool: a test's exporter either takes a batch or the test fails.
        downstream = export_processor(self.exporter, ExportOptions(retry=False).resolve(),
                                      redaction.resolve(), redactor=self._runtime.redactor)
        self._processor, telemetry = build_scoring(
            self._runtime, [rule.compile() for rule in rules], resolved_limits,
            downstream=downstream, flush_timeout=flush_timeout,
            meter_provider=output.meter_provider or NoOpMeterProvider(),
            logger_provider=output.logger_provider or NoOpLoggerProvider(), on_score=on_score,
            count_usage=True)
        self.tracer_provider.add_span_processor(self._processor)
        self._runtime.install(
            tracer=self.tracer_provider.get_tracer(sc.INSTRUMENTATION_SCOPE, __version__),
            content=(content or ContentOptions()).resolve(), limits=resolved_limits,
            judge=Judge(judge) if isinstance(judge, str) else judge,
            processor=self._processor, telemetry=telemetry, disabled=_env.disabled())

    @contextmanager
    def activate(self) -> Iterator[LocalRuntime]:
        """Make this runtime current for a ``with`` block: decorated calls, ``tracescore.span``
        blocks and ``tracescore.run_evals`` started inside it (in this thread or task, and in
        the tasks it starts) go to this runtime's provider, rules and exporter, with its
        content and redaction settings. Blocks nest; the process's configuration is untouched
        and applies again after the block.

        Examples:
            >>> with local.activate():
            ...     answer("What is the capital of France?")
        """
        with self._runtime.activate():
            yield self

    def force_flush(self, timeout_millis: int | None = None) -> bool:
        """Wait for pending scores, then export; True when everything got out in time.

        Args:
            timeout_millis: the deadline; default its ``limits``' ``flush_timeout``
                (``TRACESCORE_FLUSH_TIMEOUT``, else 10 s).
        """
        if self._closed:
            return True
        ms = self._flush_ms if timeout_millis is None else timeout_millis
        return bool(self._processor.force_flush(ms))

    def shutdown(self, timeout_millis: int | None = None) -> None:
        """Flush as ``force_flush`` does, then stop this runtime's scoring and export. Spans
        already exported stay readable in ``exporter``. Calling it again does nothing."""
        if self._closed:
            return
        self._closed = True
        self._processor.shutdown(self._flush_ms if timeout_millis is None else timeout_millis)
        self._runtime.stop_scoring()

    def spans(self) -> list[ReadableSpan]:
        """The finished spans, in export order (flushes first)."""
        self.force_flush()
        return list(self.exporter.get_finished_spans())

    def scores(self, span: ReadableSpan | None = None) -> dict[str, list[float | None]]:
        """Score values by scorer id, of ``span`` or of every span (flushes first; needs the
        default ``InMemoryScoreExporter``)."""
        self.force_flush()
        return self.exporter.scores(span)  # type: ignore[no-any-return]

    def stats(self) -> Stats:
        """A snapshot of this runtime's counters (spans exported, scores attached, ...)."""
        return Stats(**vars(self._processor.stats))

    def __enter__(self) -> LocalRuntime:
        self._block = self.activate()
        return self._block.__enter__()

    def __exit__(self, *exc: object) -> None:
        """Leave the block and shut down (the spans stay readable)."""
        try:
            self._block.__exit__(None, None, None)
        finally:
            self.shutdown()


def local_runtime(*, scoring: Sequence[ScoringRule] = (), judge: str | Judge | None = None,
                  exporter: SpanExporter | None = None,
                  on_score: Callable[[Any], Any] | None = None,
                  content: ContentOptions | None = None, limits: LimitsOptions | None = None,
                  redaction: RedactionOptions | None = None,
                  output: OutputOptions | None = None, service_name: str = "tracescore-local",
                  id_generator: IdGenerator | None = None) -> LocalRuntime:
    """tracescore configured but not installed (as logfire's ``configure(local=True)``): a
    ``LocalRuntime`` with its own tracer provider, scoring processor and exporter.

    ``configure()`` sets up the process; this sets up a runtime beside it that decorated code
    uses only inside ``with runtime.activate():`` (or ``with runtime:``, which also shuts it
    down at the end). Nothing process-wide changes: not the global tracer, meter or logger
    provider, not ``configure()``'s configuration, which keeps getting every span outside such
    blocks. Several local runtimes may live in one process (and be active at once in different
    threads or tasks); each sees only its own spans and scores. For tests that must not share
    state, and for scoring one part of a program by other rules. Its LLM scorers are judged
    by the judge their factory was given (``model=``), else its own ``judge``, else
    ``TRACESCORE_JUDGE_MODEL``: its scoring jobs read this runtime, not ``configure()``'s.
    ``tracescore.run_evals`` called inside the block is this runtime's too (its experiment and
    item spans, scores, content capture). It redacts with its own ``redaction`` options.

    Args:
        scoring: its ``ScoringRule``s, as ``configure(scoring=...)`` takes them.
        judge: the default judge of its LLM scorers given no ``model=``, as
            ``configure(judge=...)``: a litellm model string or a ``tracescore.Judge`` (e.g.
            ``ScriptedJudge.as_judge()``). Default ``TRACESCORE_JUDGE_MODEL``; never
            ``configure()``'s judge.
        exporter: where its spans go; default a new ``InMemoryScoreExporter`` (with
            ``deterministic_times``), read with ``scores()``/``spans()``.
        on_score: called with each ``ScoreEvent``, as ``configure(on_score=...)``.
        content: ``ContentOptions`` as ``configure(content=...)``; default the environment's.
        limits: ``LimitsOptions`` as ``configure(limits=...)``, ``flush_timeout`` included
            (what ``force_flush()``/``shutdown()`` wait by default); default the environment's.
        redaction: ``RedactionOptions`` as ``configure(redaction=...)``: its ``patterns`` (with
            ``TRACESCORE_REDACT_PATTERNS``'s) and ``callback`` on top of the built-in credential
            rules, and ``foreign_spans``. They apply to this runtime only: to what decorated
            code records inside its ``activate()`` blocks, its scoring jobs and its exporter;
            ``configure()``'s patterns never apply here, nor these there. Default the
            environment's patterns only.
        output: ``OutputOptions`` with its ``logger_provider`` (score log records) and
            ``meter_provider`` (score metrics); default none of either: a no-op provider, not
            the global one. ``phoenix_url`` and ``console`` apply to ``configure()`` only.
        service_name: its resource's ``service.name``; default ``"tracescore-local"``.
        id_generator: its provider's id generator (``SequentialIdGenerator()`` for
            comparable ids); default random ids.

    Returns:
        A ``LocalRuntime``.

    Raises:
        ConfigurationError: a rule is not a ``ScoringRule``, ``judge`` is neither a string nor
            a ``Judge``, ``exporter`` is not a ``SpanExporter``, ``redaction`` is not a
            ``RedactionOptions`` (or a pattern from the environment does not compile),
            ``output`` is not an ``OutputOptions`` or sets ``phoenix_url`` or ``console``.

    Examples:
        >>> with tracescore.testing.local_runtime(scoring=[tracescore.ScoringRule(
        ...         scorer=create_content_similarity_scorer(), on="agent",
        ...         ground_truth="app.expected")]) as local:
        ...     answer("What is the capital of France?")
        >>> local.scores()
        {'content-similarity': [1.0]}
    """
    return LocalRuntime(scoring=scoring, judge=judge, exporter=exporter, on_score=on_score,
                        content=content, limits=limits, redaction=redaction, output=output,
                        service_name=service_name, id_generator=id_generator)
