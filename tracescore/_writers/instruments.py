"""Score metrics, self-metrics and log-based score events.

Everything goes through the OpenTelemetry API, so whatever ``MeterProvider`` and
``LoggerProvider`` the application configures (globally or passed to ``configure()``) exports
it; with none configured the API's no-op providers make every call here nearly free.

Metrics (instrument names are tracescore's own: the GenAI conventions define the
``gen_ai.evaluation.result`` event but no evaluation metric yet):

- ``tracescore.evaluation.score`` (histogram, ``1``): ``gen_ai.evaluation.name``,
  ``gen_ai.evaluation.score.label``, ``gen_ai.agent.name``, ``gen_ai.operation.name``; recorded
  in the scored span's context, so an exemplar-aware reader links each bucket to a trace.
- ``tracescore.scoring.jobs`` (counter, ``{job}``): ``gen_ai.evaluation.name``,
  ``gen_ai.agent.name``, ``gen_ai.operation.name``,
  ``tracescore.outcome`` (``scored``, ``not_scorable``, ``error``, ``skipped``, ``dropped``:
  accepted but never finished because tracescore shut down), ``error.type``,
  ``tracescore.skip.reason``.
- ``tracescore.scoring.duration`` (histogram, ``s``): ``gen_ai.evaluation.name``,
  ``tracescore.outcome``.
- ``tracescore.judge.token.usage`` (counter, ``{token}``): ``gen_ai.evaluation.name``,
  ``gen_ai.token.type`` (``input``/``output``), ``tracescore.judge.model``.
- ``tracescore.judge.cost`` (counter, ``USD``): ``gen_ai.evaluation.name``,
  ``tracescore.judge.model``.
- ``tracescore.scoring.queue.size`` and ``tracescore.spans.held`` (gauges).
- ``tracescore.phoenix.annotations`` (counter, ``{annotation}``): ``tracescore.outcome``
  (``sent``, ``failed``, ``dropped``): the Phoenix annotation writer's deliveries.

Bounded cardinality: ``gen_ai.agent.name`` and ``gen_ai.operation.name`` come from the scored
span's attributes, which any instrumentation may fill with anything. Per scorer id, the first
``MAX_DIMENSION_VALUES`` (20) distinct values of each are kept; later new values are recorded
as ``_other`` (and a span without the attribute as ``_none``), so one scorer adds at most
21 x 21 label-operation combinations whatever the traffic.
- ``tracescore.spans.exported`` (counter, ``{span}``): spans the exporter accepted.
- ``tracescore.spans.dropped`` (counter, ``{span}``): spans that will never reach the backend,
  by ``tracescore.drop.reason`` (``queue_full``, ``export_failed``, ``too_large``,
  ``shutdown``; see ``Stats.spans_dropped``).

Every judge call (each HTTP attempt, retries included) is also recorded with the GenAI client
metrics of the OpenTelemetry semantic conventions, so dashboards built for model calls show the
judge's too (told apart by the instrumentation scope ``tracescore``):

- ``gen_ai.client.operation.duration`` (histogram, ``s``): ``gen_ai.operation.name`` (``chat``),
  ``gen_ai.provider.name``, ``gen_ai.request.model``, ``gen_ai.response.model``, ``error.type``
  (tracescore's classification: ``timeout``, ``rate_limited``, ``judge_unavailable``, ...).
- ``gen_ai.client.token.usage`` (histogram, ``{token}``): the same, plus ``gen_ai.token.type``.

The application's own model calls (``@tracescore.llm`` spans whose result reported token usage)
go into the same ``gen_ai.client.token.usage`` histogram, with ``gen_ai.agent.name`` (the agent
span they ran in, ``_none`` outside one), ``gen_ai.operation.name``, ``gen_ai.request.model``,
``gen_ai.response.model``, ``gen_ai.provider.name`` and ``gen_ai.token.type``; their cost into

- ``tracescore.llm.cost`` (counter, ``USD``), by the same dimensions less the token type, and
- ``tracescore.llm.unpriced`` (counter, ``{call}``): calls with usage that could not be priced.

Agent and model names are bounded as above (20 distinct values each, then ``_other``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from tracescore._core import semconv as sc
from tracescore._core.redact import bounded_text

logger = logging.getLogger("tracescore")

OUTCOME: str = sc.TRACESCORE_OUTCOME
MAX_DIMENSION_VALUES = 20
OTHER = "_other"
NONE = "_none"
# Distinct model-call attribute sets remembered (``Telemetry._llm_attributes``).
_MAX_LLM_ATTRIBUTE_SETS = 1024
SKIP_REASON: str = sc.TRACESCORE_SKIP_REASON
DROP_REASON: str = sc.TRACESCORE_DROP_REASON
TOKEN_TYPE: str = sc.GEN_AI_TOKEN_TYPE
# The key of the application's model calls in the bounded dimensions (no scorer id has a NUL).
_LLM = "\0llm"


def create_instrument(meter: Any, spec: sc.Instrument,
                      observe: Callable[[], int] | None = None) -> Any:
    """The instrument ``spec`` describes, on ``meter``.

    Args:
        meter: an OTel ``Meter``.
        spec: the instrument's entry in ``tracescore._core.semconv.METRICS``.
        observe: for an observable instrument (``gauge``, ``observable_counter``), the callable
            read at each collection; an exception there records nothing that time.

    Returns:
        The instrument (``None``-like for observable ones: they need no handle).
    """
    kind = spec.kind
    if kind == "counter":
        return meter.create_counter(spec.name, unit=spec.unit, description=spec.description)
    if kind == "histogram":
        return meter.create_histogram(
            spec.name, unit=spec.unit, description=spec.description,
            explicit_bucket_boundaries_advisory=None if spec.buckets is None
            else list(spec.buckets),
        )
    if observe is None:
        raise ValueError(f"the observable instrument {spec.name} needs a callable to observe")
    read = observe

    def callback(options: Any) -> Iterable[metrics.Observation]:
        try:
            return [metrics.Observation(read())]
        except Exception:
            return []

    create = (meter.create_observable_gauge if kind == "gauge"
              else meter.create_observable_counter)
    return create(spec.name, callbacks=[callback], unit=spec.unit, description=spec.description)


class Telemetry:
    """The metric instruments and the event logger of one configuration.

    Args:
        meter_provider: where metrics go; default the global ``MeterProvider``.
        logger_provider: where ``gen_ai.evaluation.result`` log records go; default the global
            ``LoggerProvider`` (a no-op unless the application set one).
        queue_size: callable returning the scoring jobs pending (for the gauge).
        held_spans: callable returning the spans held for their scores (for the gauge).
    """

    def __init__(
        self,
        *,
        meter_provider: Any = None,
        logger_provider: Any = None,
        queue_size: Callable[[], int] = lambda: 0,
        held_spans: Callable[[], int] = lambda: 0,
        version: str = "",
    ) -> None:
        provider = meter_provider or metrics.get_meter_provider()
        meter = provider.get_meter(sc.INSTRUMENTATION_SCOPE, version)
        gauges = {"queue_size": queue_size, "held": held_spans}
        made = {
            key: create_instrument(meter, spec, gauges.get(key))
            for key, spec in sc.METRICS.items()
            if not key.startswith("serve_")
        }
        self.score = made["score"]
        self.jobs = made["jobs"]
        self.duration = made["duration"]
        self.tokens = made["tokens"]
        self.cost = made["cost"]
        self.spans_exported = made["spans_exported"]
        self.spans_dropped = made["spans_dropped"]
        self.client_duration = made["client_duration"]
        self.client_tokens = made["client_tokens"]
        self.llm_cost = made["llm_cost"]
        self.llm_unpriced = made["llm_unpriced"]
        self.annotations = made["annotations"]
        self._dimension_lock = threading.Lock()
        self._dimension_values: dict[tuple[str, str], set[str]] = {}
        # Model-call metric attributes by their raw values (``_llm_attributes``).
        self._llm_attrs: dict[tuple[Any, ...], tuple[dict[str, Any], ...]] = {}
        self._logger_provider = logger_provider
        self._event_logger: Any = None

    def _logger(self) -> Any:
        if self._event_logger is None:
            from opentelemetry import _logs

            provider = self._logger_provider or _logs.get_logger_provider()
            self._event_logger = provider.get_logger(sc.INSTRUMENTATION_SCOPE)
        return self._event_logger

    def record_judge_call(self, attributes: dict[str, Any], duration_s: float,
                          input_tokens: int = 0, output_tokens: int = 0) -> None:
        """Record one judge call (one HTTP attempt) with the GenAI client metrics.

        Args:
            attributes: ``gen_ai.operation.name``, ``gen_ai.provider.name``,
                ``gen_ai.request.model`` and, when known, ``gen_ai.response.model`` and
                ``error.type``.
            duration_s: wall time of the call in seconds.
            input_tokens, output_tokens: the usage the response reported (0: none).
        """
        try:
            # Model names come from the configuration and from the judge's reply.
            attributes = {k: bounded_text(v) if isinstance(v, str) else v
                          for k, v in attributes.items()}
            self.client_duration.record(duration_s, attributes)
            for token_type, count in (("input", input_tokens), ("output", output_tokens)):
                if count:
                    self.client_tokens.record(count, {**attributes, TOKEN_TYPE: token_type})
        except Exception:
            logger.debug("tracescore could not record judge call metrics", exc_info=True)

    def record_llm_call(self, usage: Any, spent: tuple[float, float] | None, *,
                        agent: Any = None, request_model: Any = None,
                        provider: Any = None) -> None:
        """Record one of the application's model calls: its tokens in
        ``gen_ai.client.token.usage`` and its cost in ``tracescore.llm.cost`` (or, when it
        could not be priced, one ``tracescore.llm.unpriced``), by the agent it ran in.

        Args:
            usage: the call's ``tracescore._instrument.usage.Usage``.
            spent: its ``(input, output)`` cost in USD, or None when not priced.
            agent: the name of the agent span around the call; ``_none`` when there is none.
            request_model, provider: the decorator's ``model=`` and ``provider=``, if given.
        """
        try:
            attrs, inputs, outputs = self._llm_attributes(agent, request_model, usage.model,
                                                          provider)
            if usage.input_tokens is not None:
                self.client_tokens.record(usage.input_tokens, inputs)
            if usage.output_tokens is not None:
                self.client_tokens.record(usage.output_tokens, outputs)
            if spent is not None:
                self.llm_cost.add(spent[0] + spent[1], attrs)
            elif usage.input_tokens is not None or usage.output_tokens is not None:
                self.llm_unpriced.add(1, attrs)
        except Exception:
            logger.debug("tracescore could not record model call metrics", exc_info=True)

    def _llm_attributes(self, agent: Any, request_model: Any, response_model: Any,
                        provider: Any) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        """The metric attributes of a model call (and those of its input and output token
        counts), made once per distinct set of values: every model call of an application
        repeats a few of them, and making them redacts and bounds each value."""
        key = (agent, request_model, response_model, provider)
        try:
            made = self._llm_attrs.get(key)
        except TypeError:  # an unhashable value (a list attribute): made every time
            key, made = None, None
        if made is not None:
            return made
        attrs: dict[str, Any] = {
            sc.GEN_AI_OPERATION_NAME: sc.OPERATION_CHAT,
            sc.GEN_AI_AGENT_NAME: self.bounded(_LLM, sc.GEN_AI_AGENT_NAME, agent),
        }
        if request_model:
            attrs[sc.GEN_AI_REQUEST_MODEL] = self.bounded(
                _LLM, sc.GEN_AI_REQUEST_MODEL, request_model)
        if response_model:
            attrs[sc.GEN_AI_RESPONSE_MODEL] = self.bounded(
                _LLM, sc.GEN_AI_RESPONSE_MODEL, response_model)
        if provider:
            attrs[sc.GEN_AI_PROVIDER_NAME] = self.bounded(_LLM, sc.GEN_AI_PROVIDER_NAME, provider)
        made = (attrs, {**attrs, TOKEN_TYPE: "input"}, {**attrs, TOKEN_TYPE: "output"})
        if key is not None:
            if len(self._llm_attrs) >= _MAX_LLM_ATTRIBUTE_SETS:
                self._llm_attrs.clear()
            self._llm_attrs[key] = made
        return made

    def record_export(self, outcome: str, spans: int) -> None:
        """Count spans the exporter accepted (``outcome="exported"``) or dropped for the cause
        ``outcome`` (``queue_full``, ``export_failed``, ``too_large``, ``shutdown``)."""
        try:
            if outcome == "exported":
                self.spans_exported.add(spans)
            else:
                self.spans_dropped.add(spans, {DROP_REASON: outcome})
        except Exception:
            logger.debug("tracescore could not record export metrics", exc_info=True)

    def record_dropped(self, scorer_id: str, count: int) -> None:
        """Count scoring jobs accepted that never finished because tracescore shut down."""
        self.jobs.add(count, {sc.GEN_AI_EVALUATION_NAME: bounded_text(scorer_id),
                              OUTCOME: "dropped"})

    def record_skip(self, scorer_id: str, reason: str) -> None:
        """Count a job that was not run (``queue_full``, ``rate_limited``, ``budget``, ...)."""
        self.jobs.add(1, {sc.GEN_AI_EVALUATION_NAME: bounded_text(scorer_id),
                          OUTCOME: "skipped", SKIP_REASON: bounded_text(reason)})

    def bounded(self, scorer_id: str, dimension: str, value: Any) -> str:
        """``value`` as a metric dimension of ``scorer_id``: itself while fewer than
        ``MAX_DIMENSION_VALUES`` distinct values were seen for that scorer and dimension (or it
        is one of them), else ``_other``; ``_none`` when missing. Redacted and cut to
        ``MAX_NAME_LENGTH`` characters first, as every string tracescore writes."""
        if value is None or value == "":
            return NONE
        text = bounded_text(value)
        with self._dimension_lock:
            seen = self._dimension_values.setdefault((scorer_id, dimension), set())
            if text in seen:
                return text
            if len(seen) >= MAX_DIMENSION_VALUES:
                return OTHER
            seen.add(text)
            return text

    def record_annotations(self, outcome: str, count: int) -> None:
        """Count Phoenix annotations by ``outcome`` (``sent``, ``failed``, ``dropped``)."""
        try:
            self.annotations.add(count, {OUTCOME: outcome})
        except Exception:
            logger.debug("tracescore could not record annotation metrics", exc_info=True)

    def record_score(self, event: Any, duration_s: float, *, end_time: int = 0,
                     agent: Any = None, operation: Any = None) -> None:
        """Record one finished job: its outcome, score, duration, tokens and cost, and emit the
        log-based ``gen_ai.evaluation.result`` event tied to the scored span.

        Args:
            event: the ``ScoreEvent``.
            duration_s: the job's wall time in seconds.
            end_time: the scored span's end in ns since the epoch (the log record's timestamp);
                0 when unknown (the record is then stamped when it is emitted).
            agent: the scored span's ``gen_ai.agent.name``, when it has one.
            operation: its ``gen_ai.operation.name`` (or the kind tracescore read).
        """
        try:
            name = bounded_text(event.scorer_id)
            dims = {sc.GEN_AI_EVALUATION_NAME: name,
                    sc.GEN_AI_AGENT_NAME: self.bounded(name, sc.GEN_AI_AGENT_NAME, agent),
                    sc.GEN_AI_OPERATION_NAME: self.bounded(name, sc.GEN_AI_OPERATION_NAME,
                                                           operation)}
            if event.error_type is not None:
                outcome = "error"
                self.jobs.add(1, {**dims, OUTCOME: outcome,
                                  sc.ERROR_TYPE: bounded_text(event.error_type)})
            elif event.score is None:
                outcome = "not_scorable"
                self.jobs.add(1, {**dims, OUTCOME: outcome})
            else:
                outcome = "scored"
                self.jobs.add(1, {**dims, OUTCOME: outcome})
                attrs = dict(dims)
                if event.label is not None:
                    attrs[sc.GEN_AI_EVALUATION_SCORE_LABEL] = event.label
                # In the scored span's context: the SDK's exemplar reservoir keeps its trace and
                # span ids, so a dashboard's exemplar links the bucket to the trace.
                self.score.record(event.score, attrs, context=_span_context(event))
            self.duration.record(duration_s, {sc.GEN_AI_EVALUATION_NAME: name, OUTCOME: outcome})
            result = event.result
            model = getattr(result, "judge_model", None)
            if model:
                base = {sc.GEN_AI_EVALUATION_NAME: name,
                        sc.TRACESCORE_JUDGE_MODEL: bounded_text(model)}
                for token_type, count in (("input", getattr(result, "input_tokens", 0)),
                                          ("output", getattr(result, "output_tokens", 0))):
                    if count:
                        self.tokens.add(int(count), {**base, TOKEN_TYPE: token_type})
                cost = getattr(result, "cost", None)
                if cost:
                    self.cost.add(float(cost), base)
            self._emit_log(event, end_time)
        except Exception:
            logger.debug("tracescore could not record score telemetry", exc_info=True)

    def _emit_log(self, event: Any, end_time: int = 0) -> None:
        if self._logger_provider is None:
            from opentelemetry import _logs

            provider = _logs.get_logger_provider()
            # Until the application sets a LoggerProvider the API hands out a proxy or a no-op:
            # building a record for it would be work for nothing on every score.
            if isinstance(provider, _logs.NoOpLoggerProvider) or type(provider).__name__ == (
                "ProxyLoggerProvider"
            ):
                return
        # The GenAI conventions' form of the score: an event (a log record with an event name)
        # in the scored span's trace, stamped when the scored operation ended. Keyword emit:
        # opentelemetry-sdk >= 1.38 (the dependency floor).
        self._logger().emit(
            timestamp=end_time or None,
            event_name=sc.GEN_AI_EVALUATION_RESULT_EVENT,
            attributes=event.attributes,
            context=_span_context(event),
        )


def _span_context(event: Any) -> Any:
    """A context whose current span is the scored span (non-recording, from its ids); None for
    a score without a span (``run_evals`` without tracing)."""
    if not event.trace_id or not event.span_id:
        return None
    return trace.set_span_in_context(
        NonRecordingSpan(
            SpanContext(event.trace_id, event.span_id, is_remote=False,
                        trace_flags=TraceFlags(TraceFlags.SAMPLED))
        )
    )
