"""``run_evals``/``arun_evals``: run a target over a dataset, score every output, decide a verdict.

Modelled on the semantics of Mastra's ``runEvals`` (data items with an input and an optional
ground truth, a list of scorers, any target, bounded concurrency, a per-item callback, and a mean
score per scorer), with what CI needs on top: thresholds, gates, a three-way verdict, per-item
errors that are reported instead of averaged, and, when tracescore is configured, one span per
experiment and per item carrying the scores as ``gen_ai.evaluation.result`` events.

Scorers stay pure: this module calls their ``arun`` and never looks inside them.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import logging
import math
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from . import _config, _state
from . import _semconv as sc
from ._errors import ConfigurationError
from ._evals_data import EvalItem, load_items
from ._evals_results import (
    EvalItemResult,
    EvalResult,
    ItemScore,
    ItemStatus,
    ScorerSummary,
    TargetError,
    Verdict,
)
from ._request import ScoringRequest
from ._scorer import as_scorer
from ._scoring import (
    ScorerOutcome,
    evaluation_attributes,
    label_for,
    run_scorer,
    scorer_kwargs,
)
from ._serialize import to_json

__all__ = [
    "EvalItem",
    "EvalItemResult",
    "EvalResult",
    "ItemScore",
    "ScorerSummary",
    "TargetError",
    "arun_evals",
    "run_evals",
]

logger = logging.getLogger("tracescore")

# Span and attribute names of experiments. They belong in ``_semconv`` (all names in one
# module); they live here until that module, owned elsewhere, takes them over.
EXPERIMENT_SPAN_PREFIX = "experiment"
ITEM_SPAN_PREFIX = "eval_item"
TRACESCORE_EXPERIMENT_NAME = "tracescore.experiment.name"
TRACESCORE_EXPERIMENT_ID = "tracescore.experiment.id"
TRACESCORE_EXPERIMENT_ITEMS = "tracescore.experiment.items"
TRACESCORE_EXPERIMENT_CONCURRENCY = "tracescore.experiment.concurrency"
TRACESCORE_EXPERIMENT_VERDICT = "tracescore.experiment.verdict"
TRACESCORE_EXPERIMENT_TARGET_ERRORS = "tracescore.experiment.target_errors"
TRACESCORE_EXPERIMENT_SCORE_PREFIX = "tracescore.experiment.score."  # + scorer id: the mean
TRACESCORE_EXPERIMENT_ITEM_INDEX = "tracescore.experiment.item.index"
TRACESCORE_EXPERIMENT_ITEM_ID = "tracescore.experiment.item.id"
TRACESCORE_EXPERIMENT_ITEM_GROUND_TRUTH = "tracescore.experiment.item.ground_truth"
OI_KIND_CHAIN = "CHAIN"
OI_METADATA = "metadata"

# Every item is evaluated: the sample rate stamped on eval events (so that aggregates over
# online and eval scores re-weight correctly) is 1.
_EVAL_SAMPLE_RATE = 1.0


# -- the scorers of a run -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Spec:
    scorer: Any
    id: str
    threshold: float | None
    gate: bool
    higher_is_better: bool
    scale: float

    @property
    def required(self) -> float | None:
        """What each item's label and the mean are compared with: a gate's best score, else
        the threshold."""
        if self.gate:
            return self.scale if self.higher_is_better else 0.0
        return self.threshold


def _is_scorer(obj: Any) -> bool:
    return callable(getattr(obj, "arun", None)) and bool(getattr(obj, "id", None))


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigurationError(f"{what} must be a finite number, got {value!r}")
    return float(value)


def _specs(scorers: Any, gates: Any) -> list[_Spec]:
    if isinstance(scorers, (str, bytes, Mapping)) or not isinstance(scorers, (list, tuple)):
        raise ConfigurationError(
            "run_evals(scorers=[...]) takes a list of scorers or of "
            "{'scorer': scorer, 'threshold': 0.7}"
        )
    if gates is None:
        gates = []
    if isinstance(gates, (str, bytes, Mapping)) or not isinstance(gates, (list, tuple)):
        raise ConfigurationError("run_evals(gates=[...]) takes a list of scorers")
    entries: list[tuple[Any, float | None]] = []
    for i, entry in enumerate(scorers):
        where = f"scorers[{i}]"
        if isinstance(entry, Mapping):
            unknown = sorted(set(entry) - {"scorer", "threshold"})
            if unknown or "scorer" not in entry:
                extra = f"; unknown {', '.join(map(repr, unknown))}" if unknown else ""
                raise ConfigurationError(
                    f"{where}: write {{'scorer': scorer, 'threshold': 0.7}} "
                    f"(threshold optional){extra}"
                )
            scorer = entry["scorer"]
            threshold = entry.get("threshold")
            if threshold is not None:
                threshold = _number(threshold, f"{where} threshold")
        else:
            scorer, threshold = entry, None
        if not _is_scorer(scorer):
            raise ConfigurationError(
                f"{where}: expected a scorer from tracescore.scorers (an object with an id and "
                f"arun()), got {type(scorer).__name__}"
            )
        entries.append((scorer, threshold))
    gate_objects = []
    for i, gate in enumerate(gates):
        if not _is_scorer(gate):
            raise ConfigurationError(
                f"gates[{i}]: expected a scorer from tracescore.scorers, got {type(gate).__name__}"
            )
        gate_objects.append(gate)

    specs: list[_Spec] = []
    seen: dict[str, Any] = {}

    def add(scorer: Any, threshold: float | None, gate: bool) -> None:
        try:
            scorer = as_scorer(scorer)
        except TypeError as exc:
            raise ConfigurationError(str(exc)) from exc
        scorer_id = str(scorer.id)
        if scorer_id in seen:
            raise ConfigurationError(
                f"two scorers have the id {scorer_id!r}: results are keyed by scorer id, so "
                "each id may appear once (a scorer listed in scorers and gates counts once)"
            )
        seen[scorer_id] = scorer
        scale = getattr(scorer, "scale", 1.0)
        specs.append(
            _Spec(
                scorer=scorer,
                id=scorer_id,
                threshold=threshold,
                gate=gate,
                higher_is_better=bool(getattr(scorer, "higher_is_better", True)),
                scale=float(scale) if isinstance(scale, (int, float)) else 1.0,
            )
        )

    gate_ids = {id(g) for g in gate_objects}
    for scorer, threshold in entries:
        add(scorer, threshold, id(scorer) in gate_ids)
    listed = {id(s) for s, _ in entries}
    for gate in gate_objects:
        if id(gate) not in listed:
            add(gate, None, True)
    if not specs:
        raise ConfigurationError("run_evals needs at least one scorer (scorers=[...] or gates)")
    return specs


def _check_needs(specs: list[_Spec], items: list[EvalItem]) -> None:
    """Refuse a run in which a scorer cannot score a single item for want of a data key."""
    has_truth = any(item.ground_truth is not None for item in items)
    for spec in specs:
        if getattr(spec.scorer, "requires_ground_truth", False) and not has_truth:
            raise ConfigurationError(
                f"scorer {spec.id!r} compares with a ground truth, but no data item has "
                "'ground_truth'"
            )
        for name in getattr(spec.scorer, "run_inputs", ()) or ():
            if not any(name in item.scorer_inputs for item in items):
                raise ConfigurationError(
                    f"scorer {spec.id!r} needs {name!r} for each item: add "
                    f"'scorer_inputs': {{{name!r}: ...}} to the data items, or give it to the "
                    "scorer factory"
                )


# -- verdict ------------------------------------------------------------------------------------


def _fmt(value: float) -> str:
    return f"{value:.4g}"


def _summarise(spec: _Spec, results: list[EvalItemResult]) -> ScorerSummary:
    outcomes = [r.scores[spec.id] for r in results]
    values = [o.score for o in outcomes if o.status == "scored" and o.score is not None]
    counts = Counter(o.status for o in outcomes)
    error_types = Counter(o.error_type or "scorer_error" for o in outcomes if o.status == "error")
    # fsum: exactly rounded, so the mean does not depend on the order items finished in.
    mean = math.fsum(values) / len(values) if values else None
    problems: list[str] = []
    who = f"gate {spec.id}" if spec.gate else spec.id
    required = spec.required
    if mean is None:
        if spec.gate or required is not None:
            problems.append(f"{who}: no item could be scored")
    elif required is not None and label_for(mean, required, spec.higher_is_better) != sc.LABEL_PASS:
        if spec.gate:
            problems.append(
                f"{who}: mean {_fmt(mean)} instead of {_fmt(required)} (a gate must reach its "
                "best score on every item)"
            )
        elif spec.higher_is_better:
            problems.append(f"{who}: mean {_fmt(mean)} is below the threshold {_fmt(required)}")
        else:
            problems.append(
                f"{who}: mean {_fmt(mean)} is above the threshold {_fmt(required)} "
                "(lower is better)"
            )
    if error_types:
        detail = ", ".join(f"{k}: {v}" for k, v in sorted(error_types.items()))
        problems.append(f"{who}: failed on {counts['error']} item(s) ({detail})")
    if spec.gate and counts["skipped"]:
        problems.append(f"{who}: {counts['skipped']} item(s) not judged because the target raised")
    return ScorerSummary(
        scorer_id=spec.id,
        mean=mean,
        scored=counts["scored"],
        not_scorable=counts["not_scorable"],
        errors=counts["error"],
        skipped=counts["skipped"],
        error_types=dict(sorted(error_types.items())),
        threshold=required,
        gate=spec.gate,
        higher_is_better=spec.higher_is_better,
        scale=spec.scale,
        passed=not problems,
        problems=tuple(problems),
    )


def _verdict(
    summaries: list[ScorerSummary], results: list[EvalItemResult]
) -> tuple[Verdict, tuple[str, ...]]:
    failed = [p for s in summaries if s.gate for p in s.problems]
    scored = [p for s in summaries if not s.gate for p in s.problems]
    errors = Counter(r.error.type for r in results if r.error is not None)
    if errors:
        detail = ", ".join(f"{k}: {v}" for k, v in sorted(errors.items()))
        scored.append(
            f"the target raised on {sum(errors.values())} of {len(results)} item(s) ({detail})"
        )
    if failed:
        return "failed", tuple(failed + scored)
    if scored:
        return "scored", tuple(scored)
    return "passed", ()


# -- running ------------------------------------------------------------------------------------


def _join(items: list[Any]) -> Any:
    if items and all(isinstance(i, str) for i in items):
        return "".join(items)
    return items


def _call_sync(target: Callable[[Any], Any], value: Any) -> Any:
    out = target(value)
    if inspect.isgenerator(out):
        # A streaming target: score what it yielded (strings joined), as spans record it.
        out = _join(list(out))
    return out


def _is_async(target: Any) -> bool:
    if inspect.iscoroutinefunction(target) or inspect.isasyncgenfunction(target):
        return True
    call = getattr(target, "__call__", None)  # noqa: B004 - callable objects with async __call__
    return inspect.iscoroutinefunction(call) or inspect.isasyncgenfunction(call)


class _Run:
    """One ``arun_evals`` call's state."""

    def __init__(
        self,
        *,
        items: list[EvalItem],
        specs: list[_Spec],
        target: Callable[..., Any],
        concurrency: int,
        on_item_complete: Callable[..., Any] | None,
        name: str,
        experiment_id: str,
        tracer: trace.Tracer | None,
    ) -> None:
        self.items = items
        self.specs = specs
        self.target = target
        self.target_is_async = _is_async(target)
        self.concurrency = concurrency
        self.on_item_complete = on_item_complete
        self.name = name
        self.experiment_id = experiment_id
        self.tracer = tracer
        self.capture = _state.capture_content
        self.max_length = _state.max_content_length
        self.pool: ThreadPoolExecutor | None = None
        self.results: list[EvalItemResult | None] = [None] * len(items)

    async def call_target(self, value: Any) -> Any:
        if self.target_is_async:
            out = self.target(value)
        else:
            if self.pool is None:
                # One thread per item in flight: a blocking target overlaps up to
                # ``concurrency`` calls, and may itself call asyncio.run().
                self.pool = ThreadPoolExecutor(
                    max_workers=self.concurrency, thread_name_prefix="tracescore-eval"
                )
            # The copied context carries the item span into the thread, so the target's own
            # spans become its children.
            ctx = contextvars.copy_context()
            loop = asyncio.get_running_loop()
            out = await loop.run_in_executor(self.pool, ctx.run, _call_sync, self.target, value)
        if inspect.isawaitable(out):
            out = await out
        if inspect.isasyncgen(out):
            out = _join([chunk async for chunk in out])
        return out

    def item_attributes(self, item: EvalItem) -> dict[str, Any]:
        attrs: dict[str, Any] = {
            sc.OPENINFERENCE_SPAN_KIND: OI_KIND_CHAIN,
            TRACESCORE_EXPERIMENT_NAME: self.name,
            TRACESCORE_EXPERIMENT_ID: self.experiment_id,
            TRACESCORE_EXPERIMENT_ITEM_INDEX: item.index,
        }
        if item.id is not None:
            attrs[TRACESCORE_EXPERIMENT_ITEM_ID] = item.id
        if self.capture:
            attrs[sc.INPUT_VALUE] = to_json(item.input, self.max_length)
            attrs[sc.INPUT_MIME_TYPE] = sc.MIME_JSON
            if item.ground_truth is not None:
                attrs[TRACESCORE_EXPERIMENT_ITEM_GROUND_TRUTH] = to_json(
                    item.ground_truth, self.max_length
                )
            if item.metadata:
                attrs[OI_METADATA] = to_json(item.metadata, self.max_length)
        return attrs

    async def run_item(self, item: EvalItem, parent: Any) -> EvalItemResult:
        span: Span | None = None
        if self.tracer is not None:
            span = self.tracer.start_span(
                f"{ITEM_SPAN_PREFIX} {self.name}",
                context=parent,
                kind=SpanKind.INTERNAL,
                attributes=self.item_attributes(item),
            )
        started = time.perf_counter()
        output: Any = None
        error: TargetError | None = None
        scores: dict[str, ItemScore]
        try:
            use = (
                trace.use_span(
                    span, end_on_exit=False, record_exception=False, set_status_on_exception=False
                )
                if span is not None
                else contextlib.nullcontext()
            )
            with use:
                try:
                    output = await self.call_target(item.input)
                except Exception as exc:
                    error = TargetError.from_exception(exc)
                    if span is not None:
                        span.record_exception(exc)
                        description = f"{error.type}: {error.message}"[:1024]
                        span.set_status(Status(StatusCode.ERROR, description))
                        span.set_attribute(sc.ERROR_TYPE, error.type)
                if error is None:
                    if span is not None and self.capture:
                        span.set_attribute(sc.OUTPUT_VALUE, to_json(output, self.max_length))
                        span.set_attribute(sc.OUTPUT_MIME_TYPE, sc.MIME_JSON)
                    scores = await self.score(item, output, span)
                else:
                    why = f"not scored: the target raised {error.type}: {error.message}"
                    scores = {s.id: ItemScore(s.id, "skipped", None, None, why) for s in self.specs}
        finally:
            if span is not None:
                span.end()
        trace_id = span_id = None
        if span is not None:
            ctx = span.get_span_context()
            trace_id, span_id = f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}"
        return EvalItemResult(
            item=item,
            output=output,
            error=error,
            scores=scores,
            duration=time.perf_counter() - started,
            trace_id=trace_id,
            span_id=span_id,
        )

    async def score(self, item: EvalItem, output: Any, span: Span | None) -> dict[str, ItemScore]:
        request = _request_for(item, output, span)
        # The scorers of one item run at once; each one's judge calls go through its arun().
        outcomes: list[ScorerOutcome] = await asyncio.gather(
            *(run_scorer(spec.scorer, _item_kwargs(request, item, spec.scorer))
              for spec in self.specs)
        )
        scores: dict[str, ItemScore] = {}
        for spec, outcome in zip(self.specs, outcomes, strict=True):
            label = None
            if outcome.error_type is None:
                label = label_for(outcome.score, spec.required, spec.higher_is_better)
            status: ItemStatus
            if outcome.error_type is not None:
                status = "error"
            elif outcome.score is None:
                status = "not_scorable"
            else:
                status = "scored"
            scores[spec.id] = ItemScore(
                scorer_id=spec.id,
                status=status,
                score=outcome.score,
                label=label,
                reason=outcome.explanation,
                error_type=outcome.error_type,
                result=outcome.result,
            )
            if span is not None:
                span.add_event(
                    sc.GEN_AI_EVALUATION_RESULT_EVENT,
                    evaluation_attributes(
                        spec.id, outcome, label=label, sample_rate=_EVAL_SAMPLE_RATE
                    ),
                )
        return scores

    async def notify(self, result: EvalItemResult) -> None:
        if self.on_item_complete is None:
            return
        out = self.on_item_complete(result.item, result.output, result.scores)
        if inspect.isawaitable(out):
            await out

    async def run_all(self, parent: Any, bar: Any) -> None:
        order: Iterator[int] = iter(range(len(self.items)))
        failures = 0

        async def worker() -> None:
            nonlocal failures
            # One shared iterator: next() never awaits, so workers cannot take the same item.
            for index in order:
                result = await self.run_item(self.items[index], parent)
                self.results[index] = result
                await self.notify(result)
                if bar is not None:
                    if result.error is not None or any(
                        s.status == "error" for s in result.scores.values()
                    ):
                        failures += 1
                        bar.set_postfix(errors=failures, refresh=False)
                    bar.update(1)

        tasks = [
            asyncio.create_task(worker()) for _ in range(min(self.concurrency, len(self.items)))
        ]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            # One worker raised (an on_item_complete callback) or the run was cancelled: stop
            # the others before propagating.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise


def _progress_bar(progress: bool | None, total: int, name: str) -> Any:
    show = sys.stderr.isatty() if progress is None else bool(progress)
    if not show:
        return None
    try:
        from tqdm import tqdm  # type: ignore[import-untyped, unused-ignore]
    except ImportError:
        logger.warning("tracescore: no progress bar (tqdm is not installed)")
        return None
    return tqdm(total=total, desc=name, unit="item", file=sys.stderr, dynamic_ncols=True)


def _tracer() -> trace.Tracer | None:
    instance = _config.current()
    if instance is None or _state.disabled:
        return None
    return instance.tracer_provider.get_tracer(sc.INSTRUMENTATION_SCOPE, _config.__version__)


async def arun_evals(
    *,
    data: Any,
    scorers: Any,
    target: Callable[..., Any],
    concurrency: int = 1,
    gates: Any = None,
    on_item_complete: Callable[..., Any] | None = None,
    experiment_name: str | None = None,
    progress: bool | None = None,
) -> EvalResult:
    """The async form of ``run_evals``, with the same arguments, result and errors.

    Example:
        >>> result = await tracescore.arun_evals(data=data, scorers=[scorer], target=agent)
    """
    items, source = load_items(data)
    specs = _specs(scorers, gates)
    _check_needs(specs, items)
    if not callable(target):
        raise ConfigurationError(
            f"run_evals(target=...) takes a callable (sync or async), got {type(target).__name__}"
        )
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigurationError(
            f"run_evals(concurrency={concurrency!r}) takes an integer >= 1 (items in flight)"
        )
    if on_item_complete is not None and not callable(on_item_complete):
        raise ConfigurationError("run_evals(on_item_complete=...) takes a callable")
    if experiment_name is None:
        experiment_name = str(getattr(target, "__qualname__", None) or type(target).__name__)
    elif not isinstance(experiment_name, str) or not experiment_name.strip():
        raise ConfigurationError("run_evals(experiment_name=...) takes a non-empty string")
    if progress is not None and not isinstance(progress, bool):
        raise ConfigurationError("run_evals(progress=...) takes True, False or None")

    experiment_id = uuid.uuid4().hex
    tracer = _tracer()
    run = _Run(
        items=items,
        specs=specs,
        target=target,
        concurrency=concurrency,
        on_item_complete=on_item_complete,
        name=experiment_name,
        experiment_id=experiment_id,
        tracer=tracer,
    )
    started_at = datetime.now(timezone.utc)
    started = time.perf_counter()
    root: Span | None = None
    parent: Any = None
    if tracer is not None:
        root = tracer.start_span(
            f"{EXPERIMENT_SPAN_PREFIX} {experiment_name}",
            kind=SpanKind.INTERNAL,
            attributes={
                sc.OPENINFERENCE_SPAN_KIND: OI_KIND_CHAIN,
                TRACESCORE_EXPERIMENT_NAME: experiment_name,
                TRACESCORE_EXPERIMENT_ID: experiment_id,
                TRACESCORE_EXPERIMENT_ITEMS: len(items),
                TRACESCORE_EXPERIMENT_CONCURRENCY: concurrency,
            },
        )
        parent = trace.set_span_in_context(root)
    bar = _progress_bar(progress, len(items), experiment_name)
    finished = False
    try:
        await run.run_all(parent, bar)
        finished = True
    finally:
        if bar is not None:
            bar.close()
        if run.pool is not None:
            # Threads cannot be interrupted: after a failure, queued calls are dropped and
            # running ones are left to finish on their own.
            run.pool.shutdown(wait=finished, cancel_futures=not finished)
        if root is not None and not finished:
            root.set_status(Status(StatusCode.ERROR, "the evaluation run was interrupted"))
            root.end()

    results = [r for r in run.results if r is not None]
    trace_id = None
    try:
        summaries = [_summarise(spec, results) for spec in specs]
        verdict, reasons = _verdict(summaries, results)
        duration = time.perf_counter() - started
        target_errors = sum(1 for r in results if r.error is not None)
        if root is not None:
            for s in summaries:
                if s.mean is not None:
                    root.set_attribute(TRACESCORE_EXPERIMENT_SCORE_PREFIX + s.scorer_id, s.mean)
            root.set_attribute(TRACESCORE_EXPERIMENT_VERDICT, verdict)
            root.set_attribute(TRACESCORE_EXPERIMENT_TARGET_ERRORS, target_errors)
            trace_id = f"{root.get_span_context().trace_id:032x}"
    finally:
        if root is not None:
            root.end()
    return EvalResult(
        scores={s.scorer_id: s.mean for s in summaries},
        summary={
            "total_items": len(items),
            "target_errors": target_errors,
            "duration_seconds": duration,
            "scorers": {s.scorer_id: s.as_dict() for s in summaries},
        },
        verdict=verdict,
        reasons=reasons,
        items=tuple(results),
        scorers={s.scorer_id: s for s in summaries},
        experiment_name=experiment_name,
        experiment_id=experiment_id,
        started_at=started_at,
        source=source,
        trace_id=trace_id,
    )


def run_evals(
    *,
    data: Any,
    scorers: Any,
    target: Callable[..., Any],
    concurrency: int = 1,
    gates: Any = None,
    on_item_complete: Callable[..., Any] | None = None,
    experiment_name: str | None = None,
    progress: bool | None = None,
) -> EvalResult:
    """Run ``target`` on every data item, score each output, and decide a verdict.

    Semantics follow Mastra's ``runEvals``: each item's input goes to the target, the target's
    return value is scored by every scorer, and ``scores`` holds each scorer's mean. On top of
    that, for CI:

    - **Means** are unrounded, over the items a scorer *scored*. An item the scorer could not
      score (not scorable), failed on (a judge timeout, invalid judge output, ...) or skipped
      (the target raised) is left out of the mean and counted in ``summary``; a failure is never
      averaged in as 0.
    - **Thresholds** (``{"scorer": s, "threshold": 0.7}``) are compared with the mean:
      ``mean >= threshold``, or ``mean <= threshold`` for scorers where lower is better
      (``higher_is_better=False``, e.g. hallucination).
    - **Gates** must reach their best score on every item: a mean of ``scale`` (1.0 by default;
      0 for lower-is-better scorers), with no failed or skipped item and at least one scored.
    - **Verdict**: ``failed`` when a gate is not met; else ``scored`` when a threshold is
      missed (or no item could be scored), a scorer failed on any item, or the target raised on
      any item; else ``passed``. ``result.reasons`` says why.

    The target is called with the item's ``input`` as its single positional argument, whatever
    its type (a dict input arrives as one dict, not as keyword arguments). ``async def`` targets
    (and callables returning awaitables) are awaited on the run's event loop; sync targets run
    in a pool of ``concurrency`` threads so blocking calls overlap. A generator's chunks are
    joined (strings) or listed. A target that raises gets its error recorded on the item;
    its scorers are skipped.

    Every scorer gets ``input``, ``output`` and ``ground_truth`` (None when the item has none),
    plus the item's ``context`` when it has one and its ``scorer_inputs``. A context scorer
    with no context of its own judges the item's ``context``.

    When tracescore is configured (``configure()`` was called), the run is one span
    ``experiment {experiment_name}`` (attributes ``tracescore.experiment.name``/``.id``, and at
    the end ``.verdict`` and ``tracescore.experiment.score.<scorer id>`` means), each item one
    child span ``eval_item {experiment_name}`` (``tracescore.experiment.item.index``, input,
    output and ground truth as content capture allows) under which the target's own spans
    nest, and every score a ``gen_ai.evaluation.result`` event on the item span with the same
    attributes as online scores (``tracescore.sample_rate`` 1). The configuration's own
    scoring rules keep scoring the target's spans as configured; ``run_evals``' scorers only run
    here. The spans leave through the configured exporter like any others (the exit hook
    flushes them; ``tracescore eval`` flushes before it exits). Unconfigured, nothing is traced.

    Call it from synchronous code (tests, scripts). Inside a running event loop it runs on a
    helper thread and blocks the caller; use ``await arun_evals(...)`` there.

    Args:
        data: a list of items ``{"input": ..., "ground_truth": ... (optional), "metadata":
            {...} (optional), "context": [...] (optional), "scorer_inputs": {...} (optional),
            "id": ... (optional)}``, or a path to a ``.jsonl``, ``.json`` or ``.csv`` file of
            them (CSV: one column per key; ``metadata``, ``context`` and ``scorer_inputs``
            cells hold JSON).
        scorers: a list of scorers, or of ``{"scorer": scorer, "threshold": 0.7}``.
        target: any callable taking one argument, sync or async (a ``@tracescore.agent`` is
            the common case).
        concurrency: items in flight at once, >= 1. Default 1. Results do not depend on it:
            items are reported in data order and means are exactly rounded sums (``fsum``).
        gates: scorers that must reach their best score on every item. A scorer may be in
            both lists: it runs once, as a gate, and its threshold no longer applies. Default
            none.
        on_item_complete: called as ``on_item_complete(item, output, scores)`` when an item is
            done (``EvalItem``, the output or None, scorer id -> ``ItemScore``); sync or async.
            An exception it raises stops the run and propagates.
        experiment_name: names the run in spans and reports. Default: the target's
            ``__qualname__``.
        progress: show a tqdm progress bar on stderr. Default None: only when stderr is a
            terminal.

    Returns:
        An ``EvalResult``: ``scores``, ``summary``, ``verdict``, ``passed``, ``reasons``,
        ``items``.

    Raises:
        ConfigurationError: malformed data (the message names the item or row), a missing data
            file, a non-scorer in ``scorers``/``gates``, two scorers with one id, a scorer
            needing a ground truth when no item has one, a bad ``concurrency``, ...

    Example:
        >>> from tracescore.scorers import create_content_similarity_scorer
        >>> result = tracescore.run_evals(
        ...     data=[{"input": "What is the capital of France?", "ground_truth": "Paris"}],
        ...     scorers=[{"scorer": create_content_similarity_scorer(), "threshold": 0.8}],
        ...     target=lambda question: "Paris",
        ... )
        >>> result.verdict, result.scores
        ('passed', {'content-similarity': 1.0})
    """
    coro = arun_evals(
        data=data,
        scorers=scorers,
        target=target,
        concurrency=concurrency,
        gates=gates,
        on_item_complete=on_item_complete,
        experiment_name=experiment_name,
        progress=progress,
    )
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    # Called from inside an event loop (a notebook, an async test): asyncio.run() cannot nest,
    # so run on a helper thread, in a copy of the caller's context (its current span).
    box: dict[str, Any] = {}
    ctx = contextvars.copy_context()

    def runner() -> None:
        try:
            box["result"] = ctx.run(asyncio.run, coro)
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=runner, name="tracescore-run-evals", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    result: EvalResult = box["result"]
    return result


def _request_for(item: EvalItem, output: Any, span: Span | None) -> ScoringRequest:
    """One dataset item and the target's output as the request every scorer is run on, the
    same form online scoring reads from spans."""
    ctx = span.get_span_context() if span is not None else None
    return ScoringRequest(
        input=item.input,
        output=output,
        documents=tuple(item.context or ()),
        ground_truth=item.ground_truth,
        extra=dict(item.scorer_inputs),
        trace_id=ctx.trace_id if ctx is not None else 0,
        span_id=ctx.span_id if ctx is not None else 0,
        span_name=getattr(span, "name", "") or "",
        kind="agent",
    )


def _item_kwargs(request: ScoringRequest, item: EvalItem, scorer: Any) -> dict[str, Any]:
    """The scorer's arguments for one item: as online (``scorer_kwargs``), except that every
    scorer sees the item's ground truth and, when the item has one, its context (a dataset
    row states what each item offers; a custom scorer may read it without declaring it)."""
    kwargs = scorer_kwargs(request, scorer)
    kwargs.setdefault("ground_truth", item.ground_truth)
    if item.context is not None:
        kwargs["context"] = list(item.context)
    return kwargs
