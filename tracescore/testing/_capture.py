"""``CaptureScores``: tracescore configured for a test, what the ``capscore`` fixture gives."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

import tracescore

from ._exporter import InMemoryScoreExporter
from ._ids import SequentialIdGenerator
from ._judge_server import ScriptedJudge

if TYPE_CHECKING:
    from tracescore._setup.config import Tracescore

__all__ = ["CaptureScores"]


class _KeepOpen(SpanExporter):
    """Forwards to the capture's exporter but keeps it open when a configuration shuts down,
    so one exporter collects across ``configure()`` calls within a test."""

    def __init__(self, target: SpanExporter) -> None:
        self._target = target

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self._target.export(spans)

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._target.force_flush(timeout_millis)


class CaptureScores:
    """tracescore configured for one test: spans and their scores kept in memory, sequential
    ids, and a scripted judge as the default judge.

    ``capscore`` (the pytest fixture) builds one, configured with no scoring rules; call
    ``configure()`` to add rules. Readers flush first, so scores still being judged are in.

    Args:
        judge: the ``ScriptedJudge`` to use as default judge; default: a new one, closed by
            ``close()``.
        flush_timeout_millis: how long readers wait for pending scores. Default 10 000.

    Attributes:
        exporter: the ``InMemoryScoreExporter`` every configuration exports to (its
            ``deterministic_times`` is on).
        judge: the ``ScriptedJudge``; script it with ``route``/``route_prompt``.
        id_generator: the ``SequentialIdGenerator`` of ``tracer_provider``.
        tracer_provider: the SDK ``TracerProvider`` the decorators create spans with; it is
            not set as the global provider.
        instance: what the last ``configure()`` returned.

    Examples:
        >>> capture = CaptureScores()
        >>> capture.configure(scoring=[tracescore.ScoringRule(scorer=scorer, on="agent")])
        >>> answer("What is the capital of France?")
        >>> capture.scores()
        {'answer-relevancy': [1.0]}
        >>> capture.close()
    """

    def __init__(
        self, judge: ScriptedJudge | None = None, *, flush_timeout_millis: int = 10_000
    ) -> None:
        self._owns_judge = judge is None
        self.judge = ScriptedJudge() if judge is None else judge
        self.flush_timeout_millis = flush_timeout_millis
        self.exporter = InMemoryScoreExporter(deterministic_times=True)
        self.id_generator = SequentialIdGenerator()
        self.tracer_provider = TracerProvider(
            id_generator=self.id_generator, shutdown_on_exit=False
        )
        self.instance: Tracescore | None = None
        self.configure()

    def configure(self, **kwargs: Any) -> Tracescore:
        """``tracescore.configure(**kwargs)`` with this capture's provider, exporter and judge.

        ``tracer_provider`` and ``exporter`` are fixed; ``judge`` defaults to
        ``self.judge.as_judge()``; everything else passes through. Calling it again replaces
        the configuration; the spans exported so far stay in ``exporter``.

        Raises:
            tracescore.ConfigurationError: ``tracer_provider`` or ``exporter`` was given.
        """
        for fixed in ("tracer_provider", "exporter"):
            if fixed in kwargs:
                raise tracescore.ConfigurationError(
                    f"CaptureScores.configure() sets {fixed}= itself; leave it out"
                )
        kwargs.setdefault("judge", self.judge.as_judge())
        self.instance = tracescore.configure(
            tracer_provider=self.tracer_provider, exporter=_KeepOpen(self.exporter), **kwargs
        )
        return self.instance

    def flush(self, timeout_millis: int | None = None) -> bool:
        """``tracescore.force_flush``: wait for pending scores and export; True if all got out."""
        ms = self.flush_timeout_millis if timeout_millis is None else timeout_millis
        return tracescore.force_flush(ms)

    # -- readers (each flushes first) ------------------------------------------------------
    def spans(self) -> list[ReadableSpan]:
        """The finished spans, in export order."""
        self.flush()
        return list(self.exporter.get_finished_spans())

    def span(self, name: str) -> ReadableSpan:
        """The one finished span called ``name`` (``AssertionError`` if not exactly one)."""
        self.flush()
        return self.exporter.span(name)

    def evaluation_events(self, span: ReadableSpan | None = None) -> list[dict[str, Any]]:
        """The ``gen_ai.evaluation.result`` events' attributes, of ``span`` or of every span."""
        self.flush()
        return self.exporter.evaluation_events(span)

    def scores(self, span: ReadableSpan | None = None) -> dict[str, list[float | None]]:
        """Score values by scorer id, of ``span`` or of every span (None: not scorable)."""
        self.flush()
        return self.exporter.scores(span)

    def spans_as_dicts(self, **kwargs: Any) -> list[dict[str, Any]]:
        """The finished spans as plain dicts with deterministic times; see
        ``InMemoryScoreExporter.spans_as_dicts``."""
        self.flush()
        return self.exporter.spans_as_dicts(**kwargs)

    # -- lifecycle -------------------------------------------------------------------------
    def close(self) -> None:
        """Shut tracescore down and release the provider (and the judge, if this owns it)."""
        try:
            tracescore.shutdown(self.flush_timeout_millis)
        finally:
            self.tracer_provider.shutdown()
            if self._owns_judge:
                self.judge.close()

    def __enter__(self) -> CaptureScores:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
