"""Running a target over the items of one ``run_evals`` call and scoring each output.

Each item's output becomes a ``ScoringRequest``, the same form online scoring reads from spans,
and every scorer runs on it through the shared call site (``_scoring``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from tracescore._core import semconv as sc
from tracescore._core.serialize import to_json
from tracescore._offline.evals.data import EvalItem
from tracescore._offline.evals.results import EvalItemResult, ItemScore, ItemStatus, TargetError
from tracescore._offline.evals.specs import RunTally, ScorerSpec
from tracescore._pipeline.fingerprint import evaluator_version
from tracescore._pipeline.request import ScoringRequest
from tracescore._pipeline.runtime import Runtime
from tracescore._pipeline.scoring import (
    ScorerOutcome,
    evaluation_attributes,
    label_for,
    run_scorer,
    scorer_kwargs,
)

# Every item is evaluated: the sample rate stamped on eval events (so that aggregates over
# online and eval scores re-weight correctly) is 1.
_EVAL_SAMPLE_RATE = 1.0
# Items whose full result (input, output, every score) a run keeps for its result and reports;
# past it only their outcomes are counted (``RunTally``), so memory stays bounded.
KEPT_RESULTS = 10_000


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


class EvalRun:
    """One ``arun_evals`` call's state: its items, scorers and target, and the runtime it is
    for (``runtime``: its content settings; ``tracer``: that runtime's, or None untraced)."""

    def __init__(
        self,
        *,
        items: Iterable[EvalItem],
        total: int | None = None,
        specs: list[ScorerSpec],
        target: Callable[..., Any],
        concurrency: int,
        on_item_complete: Callable[..., Any] | None,
        name: str,
        experiment_id: str,
        tracer: trace.Tracer | None,
        runtime: Runtime,
    ) -> None:
        self.items = iter(items)
        self.total = total
        self.specs = specs
        self.target = target
        self.target_is_async = _is_async(target)
        self.concurrency = concurrency
        self.on_item_complete = on_item_complete
        self.name = name
        self.experiment_id = experiment_id
        self.tracer = tracer
        # The content settings of the runtime the run is for (the caller's: a local runtime
        # inside its activate() block), as a decorated call reads them.
        self.capture = runtime.capture
        self.max_length = runtime.max_length
        self.pool: ThreadPoolExecutor | None = None
        # By item index: items finish in any order; the report lists them in data order. A
        # run over a file of millions of rows keeps the first ``KEPT_RESULTS`` in full and
        # every item's outcome in ``tally`` (bounded memory).
        self.results: dict[int, EvalItemResult] = {}
        self.tally = RunTally(specs)

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
            sc.OPENINFERENCE_SPAN_KIND: sc.OI_KIND_CHAIN,
            sc.TRACESCORE_EXPERIMENT_NAME: self.name,
            sc.TRACESCORE_EXPERIMENT_ID: self.experiment_id,
            sc.TRACESCORE_EXPERIMENT_ITEM_INDEX: item.index,
        }
        if item.id is not None:
            attrs[sc.TRACESCORE_EXPERIMENT_ITEM_ID] = item.id
        if self.capture:
            attrs[sc.INPUT_VALUE] = to_json(item.input, self.max_length)
            attrs[sc.INPUT_MIME_TYPE] = sc.MIME_JSON
            if item.ground_truth is not None:
                attrs[sc.TRACESCORE_EXPERIMENT_ITEM_GROUND_TRUTH] = to_json(
                    item.ground_truth, self.max_length
                )
            if item.metadata:
                attrs[sc.OI_METADATA] = to_json(item.metadata, self.max_length)
        return attrs

    async def run_item(self, item: EvalItem, parent: Any) -> EvalItemResult:
        span: Span | None = None
        if self.tracer is not None:
            span = self.tracer.start_span(
                f"{sc.ITEM_SPAN_PREFIX} {self.name}",
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
                attributes = evaluation_attributes(
                    spec.id, outcome, label=label, sample_rate=_EVAL_SAMPLE_RATE
                )
                # Provenance (issue 12): the same evaluator version as online scores carry.
                attributes[sc.TRACESCORE_EVALUATOR_VERSION] = evaluator_version(spec.scorer)
                span.add_event(sc.GEN_AI_EVALUATION_RESULT_EVENT, attributes)
        return scores

    async def notify(self, result: EvalItemResult) -> None:
        if self.on_item_complete is None:
            return
        out = self.on_item_complete(result.item, result.output, result.scores)
        if inspect.isawaitable(out):
            await out

    async def run_all(self, parent: Any, bar: Any) -> None:
        order = self.items
        failures = 0

        async def worker() -> None:
            nonlocal failures
            # One shared iterator (a data file read a row at a time): next() never awaits, so
            # workers cannot take the same item.
            for item in order:
                result = await self.run_item(item, parent)
                self.tally.add(result)
                if item.index < KEPT_RESULTS:
                    self.results[item.index] = result
                await self.notify(result)
                if bar is not None:
                    if result.error is not None or any(
                        s.status == "error" for s in result.scores.values()
                    ):
                        failures += 1
                        bar.set_postfix(errors=failures, refresh=False)
                    bar.update(1)

        workers = self.concurrency if self.total is None else min(self.concurrency,
                                                                   max(self.total, 1))
        tasks = [asyncio.create_task(worker()) for _ in range(workers)]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            # One worker raised (an on_item_complete callback) or the run was cancelled: stop
            # the others before propagating.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise




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
    row states what each item offers; a custom scorer may read it without declaring it).
    Tool calls are passed only when the request has some: a target that returns OpenAI
    messages carries its calls in the output, where the scorer reads them (an empty list
    passed here would win over them and read as "no tool was called"). Calls the item states
    itself (``scorer_inputs={"tool_calls": [...]}``) are the request's too and always pass."""
    kwargs = scorer_kwargs(request, scorer)
    if not request.tool_calls and "tool_calls" not in request.extra:
        kwargs.pop("tool_calls", None)
    kwargs.setdefault("ground_truth", item.ground_truth)
    if item.context is not None:
        kwargs["context"] = list(item.context)
    return kwargs
