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
import contextvars
import itertools
import logging
import threading
import time
import uuid
from collections.abc import Callable, Coroutine
from datetime import datetime, timezone
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from tracescore._core import semconv as sc
from tracescore._core.errors import ConfigurationError
from tracescore._offline.evals.data import EvalItem, stream_items
from tracescore._offline.evals.results import (
    EvalItemResult,
    EvalResult,
    ItemScore,
    ScorerSummary,
    TargetError,
)
from tracescore._offline.evals.run import EvalRun
from tracescore._offline.evals.specs import build_specs, check_needs, decide_verdict, summarise
from tracescore._offline.progress import progress_bar
from tracescore._pipeline import runtime as _runtime

# Rows of a data file read before the run starts, on which what the scorers need is checked
# (the rest is read as the run takes it).
_CHECK_AHEAD = 1_000

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


def _tracer(rt: _runtime.Runtime) -> trace.Tracer | None:
    """The tracer of the caller's runtime (``_runtime.current()``, as the decorators read it):
    a local runtime's inside its ``activate()`` block, else ``configure()``'s while it is
    configured; None: nothing is traced."""
    if rt.disabled or (rt is _runtime.RUNTIME and rt.instance is None):
        return None
    tracer: trace.Tracer | None = rt.tracer
    return tracer


def _checked_options(target: Any, concurrency: Any, on_item_complete: Any,
                     experiment_name: Any, progress: Any) -> str:
    """Check the arguments that are not data or scorers; the experiment's name."""
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
    return str(experiment_name)


def _start_experiment(run: EvalRun, items: int) -> Span | None:
    """The experiment's root span (None when the run is not traced)."""
    if run.tracer is None:
        return None
    return run.tracer.start_span(
        f"{sc.EXPERIMENT_SPAN_PREFIX} {run.name}",
        kind=SpanKind.INTERNAL,
        attributes={
            sc.OPENINFERENCE_SPAN_KIND: sc.OI_KIND_CHAIN,
            sc.TRACESCORE_EXPERIMENT_NAME: run.name,
            sc.TRACESCORE_EXPERIMENT_ID: run.experiment_id,
            sc.TRACESCORE_EXPERIMENT_ITEMS: items,
            sc.TRACESCORE_EXPERIMENT_CONCURRENCY: run.concurrency,
        },
    )


async def _run_items(run: EvalRun, root: Span | None, progress: bool | None) -> None:
    """Run every item under ``root``; an interrupted run ends ``root`` with an error."""
    parent = trace.set_span_in_context(root) if root is not None else None
    bar = progress_bar(progress, run.total, run.name)
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


def _finish(run: EvalRun, root: Span | None, *, started_at: datetime, started: float,
            source: str | None) -> EvalResult:
    """The run's means, verdict and result, also set on ``root``, which ends here."""
    results = [run.results[i] for i in sorted(run.results)]
    tally = run.tally
    trace_id = None
    try:
        summaries = [summarise(spec, tally) for spec in run.specs]
        verdict, reasons = decide_verdict(summaries, tally)
        duration = time.perf_counter() - started
        target_errors = sum(tally.target_errors.values())
        if root is not None:
            for s in summaries:
                if s.mean is not None:
                    root.set_attribute(sc.TRACESCORE_EXPERIMENT_SCORE_PREFIX + s.scorer_id, s.mean)
            root.set_attribute(sc.TRACESCORE_EXPERIMENT_ITEMS, tally.total)
            root.set_attribute(sc.TRACESCORE_EXPERIMENT_VERDICT, verdict)
            root.set_attribute(sc.TRACESCORE_EXPERIMENT_TARGET_ERRORS, target_errors)
            trace_id = f"{root.get_span_context().trace_id:032x}"
    finally:
        if root is not None:
            root.end()
    return EvalResult(
        scores={s.scorer_id: s.mean for s in summaries},
        summary={
            "total_items": tally.total,
            **({"items_listed": len(results)} if len(results) < tally.total else {}),
            "target_errors": target_errors,
            "duration_seconds": duration,
            "scorers": {s.scorer_id: s.as_dict() for s in summaries},
        },
        verdict=verdict,
        reasons=reasons,
        items=tuple(results),
        scorers={s.scorer_id: s for s in summaries},
        experiment_name=run.name,
        experiment_id=run.experiment_id,
        started_at=started_at,
        source=source,
        trace_id=trace_id,
    )


async def arun_evals(*, data: Any, scorers: Any, target: Callable[..., Any],
                     concurrency: int = 1, gates: Any = None,
                     on_item_complete: Callable[..., Any] | None = None,
                     experiment_name: str | None = None,
                     progress: bool | None = None) -> EvalResult:
    """The async form of ``run_evals``: the same arguments, result, errors and spans (see
    ``run_evals``). Await it inside a running event loop (an async test, a notebook, an async
    application); its items run on that loop, sync targets in a pool of ``concurrency``
    threads.

    Examples:
        >>> result = await tracescore.arun_evals(data=data, scorers=[scorer], target=agent)
    """
    stream = stream_items(data)
    specs = build_specs(scorers, gates)
    # A file is read as the run takes its rows (issue 22): what a scorer needs is checked on
    # the first rows, and a malformed row stops the run when it is reached.
    head = list(itertools.islice(stream.items, _CHECK_AHEAD))
    check_needs(specs, head)
    name = _checked_options(target, concurrency, on_item_complete, experiment_name, progress)
    # The caller's runtime: a local runtime inside its activate() block, else configure()'s.
    rt = _runtime.current()
    run = EvalRun(
        items=itertools.chain(head, stream.items),
        total=stream.total,
        specs=specs,
        target=target,
        concurrency=concurrency,
        on_item_complete=on_item_complete,
        name=name,
        experiment_id=uuid.uuid4().hex,
        tracer=_tracer(rt),
        runtime=rt,
    )
    started_at = datetime.now(timezone.utc)
    started = time.perf_counter()
    root = _start_experiment(run, stream.total or len(head))
    await _run_items(run, root, progress)
    return _finish(run, root, started_at=started_at, started=started, source=stream.source)


def run_evals(*, data: Any, scorers: Any, target: Callable[..., Any], concurrency: int = 1,
              gates: Any = None, on_item_complete: Callable[..., Any] | None = None,
              experiment_name: str | None = None, progress: bool | None = None) -> EvalResult:
    """Run ``target`` on every data item, score each output, and decide a verdict.

    Semantics follow Mastra's ``runEvals``: each item's input goes to the target, the target's
    return value is scored by every scorer, and ``scores`` holds each scorer's mean. On top of
    that, for CI: means over the items a scorer scored (a failure is never averaged in as 0),
    thresholds, gates and a three-way verdict with its reasons; ``EvalResult`` says how each
    is decided.

    When tracescore is configured, the run is one span ``experiment {experiment_name}``
    (attributes ``tracescore.experiment.name``/``.id``, and at the end ``.verdict`` and
    ``tracescore.experiment.score.<scorer id>`` means), each item one child span
    ``eval_item {experiment_name}`` (``tracescore.experiment.item.index``, input, output and
    ground truth as content capture allows) under which the target's own spans nest, and every
    score a ``gen_ai.evaluation.result`` event on the item span with the same attributes as
    online scores (``tracescore.sample_rate`` 1). The configuration's own scoring rules keep
    scoring the target's spans; ``run_evals``' scorers only run here. The spans leave through
    the configured exporter (the exit hook flushes them; ``tracescore eval`` flushes before it
    exits). Unconfigured, nothing is traced. Inside ``with local.activate():`` the run is that
    ``tracescore.testing.local_runtime``'s: its provider and exporter, content capture, judge
    and input caps, never ``configure()``'s.

    Call it from synchronous code (tests, scripts). Inside a running event loop it runs on a
    helper thread and blocks the caller; use ``await arun_evals(...)`` there.

    Args:
        data: a list of items ``{"input": ..., "ground_truth": ... (optional), "metadata":
            {...} (optional), "context": [...] (optional), "scorer_inputs": {...} (optional),
            "id": ... (optional)}``, or a path to a ``.jsonl``, ``.json`` or ``.csv`` file of
            them (CSV: one column per key; ``metadata``, ``context`` and ``scorer_inputs``
            cells hold JSON).
        scorers: a list of scorers, or of ``{"scorer": scorer, "threshold": 0.7}``. Each gets
            ``input``, ``output``, ``ground_truth`` (None when the item has none), the item's
            ``context`` when it has one (a context scorer with none of its own judges it) and
            its ``scorer_inputs``.
        target: any callable taking one argument, sync or async (a ``@tracescore.agent`` is
            the common case), called with the item's ``input`` whatever its type (a dict
            arrives as one dict, not as keyword arguments). Async targets (and callables
            returning awaitables) are awaited on the run's loop; sync ones run in a pool of
            ``concurrency`` threads so blocking calls overlap. A generator's chunks are joined
            (strings) or listed. An exception it raises is recorded on the item, whose scorers
            are skipped.
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

    Examples:
        >>> from tracescore.scorers import create_content_similarity_scorer
        >>> result = tracescore.run_evals(
        ...     data=[{"input": "What is the capital of France?", "ground_truth": "Paris"}],
        ...     scorers=[{"scorer": create_content_similarity_scorer(), "threshold": 0.8}],
        ...     target=lambda question: "Paris")
        >>> result.verdict, result.scores
        ('passed', {'content-similarity': 1.0})
    """
    return _blocking(arun_evals(
        data=data, scorers=scorers, target=target, concurrency=concurrency, gates=gates,
        on_item_complete=on_item_complete, experiment_name=experiment_name, progress=progress))


def _blocking(coro: Coroutine[Any, Any, EvalResult]) -> EvalResult:
    """Run ``coro`` to its end from synchronous code: ``asyncio.run`` here, or, called from
    inside an event loop (a notebook, an async test), where ``asyncio.run()`` cannot nest, on a
    helper thread in a copy of the caller's context (its current span and runtime)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
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
