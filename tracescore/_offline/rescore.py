"""``tracescore rescore``: score stored traces again with chosen scorers, side by side.

Each *side* is a scorer with its options, its judge and its threshold: typically the scorer in
production today and a candidate (another prompt set, another judge model, another threshold).
Every side scores the same turns: the traces are read (``tracescore._offline.traces``) and each
whole trace is routed span by span, in the order its spans ended, through a scoring processor of
its own per side: the one router the runtime and ``tracescore serve`` use
(``ScoringSpanProcessor.route``), with the runtime's readers, its trace buffer (a retrieval's
documents reach the turn that used them) and one ``ScoringRule`` per side selecting the same
kind of span (``on``, default ``agent``). What a side's scorer would have scored online is what
it scores here.

Streaming and bounded: spans are read one line at a time, a trace is scored once its root has
come (``TraceAssembler``: bounded open traces and spans, evictions counted), and traces are
scored in batches (the processors are flushed after every ``batch`` spans routed), and each
scored turn is folded into counts and exact sums (``_Tally``) as it lands, so memory holds the
open traces, one batch, the first ``max_listed`` turns whole (the report's ``items``) and the
``top`` turns that moved most per comparison, whatever the number of turns. Resumable: each
scored trace is appended to a state file (JSON lines) once every side is done with it; a run
given the same state file skips those traces, except one where a side failed (it is scored
again), reading their outcomes back from the file when they come (an offset per trace is
kept). A state file written for other sides or another span kind is refused.

Each side is labelled by its evaluator version (``tracescore._pipeline.fingerprint``, the
``tracescore.evaluator.version`` on every score it makes online). The comparison of each side
with the first (the baseline), over the turns both scored:

* the share of turns on which both give the same pass/fail at their own thresholds;
* Cohen's kappa of those pass/fail labels (``tracescore._offline.calibrate.stats.cohen_kappa``),
with its
  95% bootstrap interval;
* the mean absolute shift and the mean shift of the score, each score divided by its scorer's
  scale (so 0..1 whatever the scale);
* how many turns changed label each way, and the turns that moved most.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracescore._core import semconv as sc
from tracescore._core.errors import ConfigurationError
from tracescore._core.redact import redact_text
from tracescore._core.terminal import visible
from tracescore._offline.calibrate import stats

from .traces import SourceCounts, TraceAssembler

__all__ = ["RescoreResult", "Side", "rescore"]

_STATE_VERSION = 1
_MAX_EXPLANATION = 500
_MAX_NAME = 300  # characters of a span name, label or version kept from a state file
_MAX_STATE_LINE = 64 << 20  # bytes of one state line (one trace's turns)
_FLUSH_MILLIS = 24 * 3600 * 1000  # a flush ends when every job did (each judge call is bounded)


@dataclass
class Side:
    """One scorer of the comparison.

    Attributes:
        label: how reports name it (default ``<scorer id> <evaluator version>``).
        scorer: the scorer object.
        threshold: its pass threshold (inclusive; ``<=`` when lower is better).
        judge_model: its judge's model string, or None for a scorer without a judge.
        options: the options it was built with (for the report).
    """

    label: str
    scorer: Any
    threshold: float
    judge_model: str | None = None
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def scorer_id(self) -> str:
        return str(self.scorer.id)

    @property
    def version(self) -> str:
        from tracescore._pipeline.fingerprint import evaluator_version

        return evaluator_version(self.scorer)

    @property
    def scale(self) -> float:
        return float(getattr(self.scorer, "scale", 1.0) or 1.0)

    @property
    def higher_is_better(self) -> bool:
        return bool(getattr(self.scorer, "higher_is_better", True))

    def describe(self) -> dict[str, Any]:
        return {"label": self.label, "scorer": self.scorer_id,
                "evaluator_version": self.version, "judge_model": self.judge_model,
                "threshold": self.threshold, "scale": self.scale,
                "higher_is_better": self.higher_is_better, "options": self.options}


class _Tally:
    """Every turn's outcomes folded into what the report needs, in bounded memory: per side the
    counts by status, the exact sum of the scores, the pass count and the histogram; per side
    against the baseline the pass/fail table, the exact sums of the shifts and the ``top``
    turns that moved most; the first ``max_listed`` turns whole (the JSON report's ``items``).
    Every other turn is counted, not kept."""

    def __init__(self, sides: list[Side], top: int, max_listed: int) -> None:
        from tracescore._offline.reports.html import BINS

        self.sides, self.top, self.max_listed = sides, top, max_listed
        self.turns = 0
        self.every_side = 0  # turns scored by every side
        self.listed: list[dict[str, Any]] = []
        self.by_side = [{"scored": 0, "not_scorable": 0, "error": 0, "missing": 0,
                         "partials": [], "passed": 0,
                         "bins": [[0, 0, 0] for _ in range(BINS)]} for _ in sides]
        self.pairs = [{"tp": 0, "fp": 0, "fn": 0, "tn": 0, "pass_to_fail": 0,
                       "fail_to_pass": 0, "n": 0, "abs": [], "shift": [], "moved": []}
                      for _ in sides]

    def add(self, item: dict[str, Any]) -> None:
        from tracescore._offline.evals.specs import _add_exact
        from tracescore._offline.reports.html import bin_index

        self.turns += 1
        if len(self.listed) < self.max_listed:
            self.listed.append(item)
        outcomes = item["outcomes"]
        passes: list[bool | None] = []
        for side, tally, o in zip(self.sides, self.by_side, outcomes, strict=True):
            tally[o["status"]] += 1
            if o["status"] != "scored":
                passes.append(None)
                continue
            score = float(o["score"])
            _add_exact(tally["partials"], score)
            passed = stats.judge_passes(score, side.threshold, side.higher_is_better)
            tally["passed"] += passed
            passes.append(passed)
            cell = tally["bins"][bin_index(score, side.scale)]
            cell[0] += 1
            cell[1 if passed else 2] += 1
        if all(p is not None for p in passes):
            self.every_side += 1
        base = self.sides[0]
        for index in range(1, len(self.sides)):
            was, now = passes[0], passes[index]
            if was is None or now is None:
                continue
            pair, other = self.pairs[index], self.sides[index]
            pair["n"] += 1
            pair["tp" if was and now else "tn" if not was and not now
                 else "fp" if now else "fn"] += 1
            if was != now:
                pair["pass_to_fail" if was else "fail_to_pass"] += 1
            a, b = outcomes[0], outcomes[index]
            shift = float(b["score"]) / other.scale - float(a["score"]) / base.scale
            _add_exact(pair["abs"], abs(shift))
            _add_exact(pair["shift"], shift)
            if shift != 0:
                moved = pair["moved"]
                moved.append(((-abs(shift), item["trace_id"], item["span_id"]), {
                    "trace_id": item["trace_id"], "span_id": item["span_id"],
                    "span_name": item["span_name"], "shift": round(shift, 12),
                    "baseline": a, "side": b}))
                if len(moved) > 4 * self.top:  # trimmed now and then: O(top) kept
                    moved.sort(key=lambda m: m[0])
                    del moved[self.top:]

    def moved_most(self, index: int) -> list[dict[str, Any]]:
        return [m for _, m in sorted(self.pairs[index]["moved"], key=lambda m: m[0])[:self.top]]


@dataclass
class RescoreResult:
    """What a re-scoring came to: every side's outcomes folded into counts and sums (``_Tally``:
    bounded memory), the first turns whole; the sides compared.

    Attributes:
        sides: the sides, the first being the baseline.
        tally: the folded outcomes.
        source: what was read.
        traces: counts of traces and spans (complete, incomplete, evicted, late, resumed,
            skipped records).
        on: the span kind scored.
        seconds: wall-clock seconds.
        state_file: the state file, if any.
    """

    sides: list[Side]
    tally: _Tally
    source: str
    traces: dict[str, Any]
    on: str
    seconds: float = 0.0
    state_file: str | None = None

    @property
    def items(self) -> list[dict[str, Any]]:
        """The first turns scored (at most ``max_listed``), each ``{"trace_id", "span_id",
        "span_name", "outcomes": [per side {"status", "score", "label", "error_type",
        "explanation", "evaluator_version"}]}``, in the order scored."""
        return self.tally.listed

    @property
    def turns(self) -> int:
        """Every turn scored (listed or not)."""
        return self.tally.turns

    def side_summary(self, index: int) -> dict[str, Any]:
        """A side's counts by status, mean score, pass share (of scored turns) and score
        histogram (``low``, ``high``, ``count``, ``pass``, ``fail`` per bin over 0..scale)."""
        from tracescore._offline.reports.html import BINS

        side, tally = self.sides[index], self.tally.by_side[index]
        scored = tally["scored"]
        top = side.scale if side.scale > 0 else 1.0
        return {**side.describe(),
                **{k: tally[k] for k in ("scored", "not_scorable", "error", "missing")},
                "mean": math.fsum(tally["partials"]) / scored if scored else None,
                "pass_share": tally["passed"] / scored if scored else None,
                "histogram": [{"low": top * i / BINS, "high": top * (i + 1) / BINS,
                               "count": c, "pass": p, "fail": f}
                              for i, (c, p, f) in enumerate(tally["bins"])]}

    def comparison(self, index: int) -> dict[str, Any]:
        """Side ``index`` against the baseline (side 0) on the turns both scored (module
        docstring)."""
        base, other, pair = self.sides[0], self.sides[index], self.tally.pairs[index]
        tp, fp, fn, tn, n = (pair[k] for k in ("tp", "fp", "fn", "tn", "n"))
        interval = stats.kappa_interval(tp, fp, fn, tn) if n else None
        return {
            "baseline": base.label, "side": other.label, "n": n,
            "agree_share": (tp + tn) / n if n else None,
            "kappa": stats.cohen_kappa(tp, fp, fn, tn),
            "kappa_interval": None if interval is None else list(interval),
            "confusion": {"pass": {"pass": tp, "fail": fn}, "fail": {"pass": fp, "fail": tn}},
            "mean_absolute_shift": math.fsum(pair["abs"]) / n if n else None,
            "mean_shift": math.fsum(pair["shift"]) / n if n else None,
            "label_changes": {"pass_to_fail": pair["pass_to_fail"],
                              "fail_to_pass": pair["fail_to_pass"]},
            "moved_most": self.tally.moved_most(index),
        }

    @property
    def passed(self) -> bool:
        """True when some turn was scored by every side."""
        return self.tally.every_side > 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of everything (the ``--report`` file); ``items_listed`` says how
        many turns ``items`` lists when it lists fewer than all."""
        listed = len(self.tally.listed)
        return {
            "tracescore_rescore": _STATE_VERSION,
            "source": self.source,
            "on": self.on,
            "state_file": self.state_file,
            "traces": dict(self.traces),
            "turns": self.turns,
            **({"items_listed": listed} if listed < self.turns else {}),
            "sides": [self.side_summary(i) for i in range(len(self.sides))],
            "comparisons": [self.comparison(i) for i in range(1, len(self.sides))],
            "seconds": round(self.seconds, 3),
            "passed": self.passed,
            "items": self.items,
        }

    def table(self) -> str:
        """The plain-text report a terminal shows."""
        t = self.traces
        lines = [
            f"tracescore rescore ({self.on} turns) from {self.source}: {t['traces']} traces "
            f"({t['complete']} complete, {t['incomplete']} without their root, {t['evicted']} "
            f"evicted, {t['resumed']} from the state file), {t['spans']} spans, "
            f"{self.turns} turns scored"
            + (f"; {t['late_spans']} late spans and {t['skipped_records']} unreadable records "
               "skipped" if t["late_spans"] or t["skipped_records"] else ""),
        ]
        for i in range(len(self.sides)):
            s = self.side_summary(i)
            judge = f"judge {s['judge_model']}, " if s["judge_model"] else ""
            mean = "-" if s["mean"] is None else f"{s['mean']:.3f}"
            share = "-" if s["pass_share"] is None else f"{s['pass_share']:.1%}"
            named = "" if s["label"].startswith(f"{s['scorer']} {s['evaluator_version']}") \
                else f"{s['scorer']} version {s['evaluator_version']}, "
            lines.append(
                f"{'baseline' if i == 0 else 'side ' + str(i)} {s['label']} ({named}"
                f"{judge}threshold {s['threshold']:g}): "
                f"{s['scored']} scored, {s['not_scorable']} not scorable, {s['error']} errors; "
                f"mean {mean}, pass {share}")
        for i in range(1, len(self.sides)):
            c = self.comparison(i)
            if not c["n"]:
                lines.append(f"{c['side']} vs {c['baseline']}: no turn scored by both")
                continue
            kappa = "undefined" if c["kappa"] is None else f"{c['kappa']:.3f}"
            lines.append(
                f"{c['side']} vs {c['baseline']}: {c['n']} turns scored by both; same pass/fail "
                f"on {c['agree_share']:.1%}, Cohen's kappa {kappa}; mean absolute shift "
                f"{c['mean_absolute_shift']:.3f} (mean shift {c['mean_shift']:+.3f}); "
                f"{c['label_changes']['pass_to_fail']} turn(s) pass -> fail, "
                f"{c['label_changes']['fail_to_pass']} fail -> pass")
            for m in c["moved_most"][:5]:
                lines.append(
                    f"  moved {m['shift']:+.3f}: trace {m['trace_id']} span {m['span_id']} "
                    f"({m['span_name']}): {_score(m['baseline'])} -> {_score(m['side'])}")
        if not self.passed:
            lines.append("FAILED: no turn was scored by every side")
        # Span names and labels come from the traces: their escape sequences are not run.
        return visible("\n".join(lines), newlines=True)


def _score(outcome: Mapping[str, Any]) -> str:
    if outcome["status"] != "scored":
        return outcome["status"]
    return f"{outcome['score']:.3f}" + (f" {outcome['label']}" if outcome["label"] else "")


# -- the run ------------------------------------------------------------------------------------


class _Collector:
    """Receives every side's outcomes (``on_score``), on tracescore's loop thread."""

    def __init__(self, sides: int) -> None:
        self.sides = sides
        self.lock = threading.Lock()
        self.by_trace: dict[int, dict[int, dict[str, Any]]] = {}

    def callback(self, index: int) -> Any:
        def on_score(event: Any) -> None:
            with self.lock:
                turns = self.by_trace.setdefault(event.trace_id, {})
                turn = turns.get(event.span_id)
                if turn is None:
                    turn = turns[event.span_id] = {"span_name": event.span_name,
                                                   "outcomes": [None] * self.sides}
                turn["outcomes"][index] = _outcome(event)
        return on_score

    def take(self, trace_id: int) -> dict[int, dict[str, Any]]:
        with self.lock:
            return self.by_trace.pop(trace_id, {})


def _outcome(event: Any) -> dict[str, Any]:
    if event.error_type is not None:
        status = "error"
    elif event.score is None:
        status = "not_scorable"
    else:
        status = "scored"
    # The state file and the report are files on disk: redacted as every writer is.
    return {"status": status, "score": event.score, "label": event.label,
            "error_type": event.error_type,
            "explanation": redact_text(str(event.explanation or "")[:_MAX_EXPLANATION]),
            "evaluator_version": event.attributes.get(sc.TRACESCORE_EVALUATOR_VERSION)}


_MISSING = {"status": "missing", "score": None, "label": None, "error_type": None,
            "explanation": "this side did not score the turn", "evaluator_version": None}


def rescore(
    spans: Iterable[Any],
    sides: list[Side],
    *,
    source: str,
    counts: SourceCounts | None = None,
    on: str = "agent",
    state_file: str | os.PathLike[str] | None = None,
    concurrency: int = 4,
    batch: int = 256,
    max_open_traces: int = 1_000,
    max_spans: int = 100_000,
    complete_on_root: bool = True,
    progress: bool | None = None,
    top: int = 20,
    max_listed: int = 10_000,
) -> RescoreResult:
    """Score the turns of stored traces with every side (module docstring).

    Args:
        spans: ``ReadableSpan``s in the order they were stored (``tracescore._offline.traces``).
        sides: at least one ``Side``; the first is the baseline.
        source: what was read, for the report.
        counts: the source's counters (spans read, records skipped), for the report.
        on: the span kind every side scores (``agent``, ``llm``, ``retrieval``, ``tool``).
        state_file: append each scored trace here and skip the traces it holds.
        concurrency: scoring jobs at once per side. Default 4.
        batch: spans routed between two flushes (a whole trace is never split). Default 256.
        max_open_traces: traces waiting for their root at once. Default 1,000.
        max_spans: spans waiting at once. Default 100,000.
        complete_on_root: a trace is scored once its root comes (True: spans stored in the
            order they ended); False: at the end of the input or when pushed out
            (``TraceAssembler``).
        progress: progress on stderr (default: a bar on a terminal, elsewhere a line every
            5 s).
        top: turns listed as moved most per comparison. Default 20.
        max_listed: turns kept whole for the report's ``items`` (the first ones scored); every
            turn is counted in the comparison either way. Default 10,000.

    Raises:
        ConfigurationError: no side, a bad option, a state file of other sides.
    """
    _check_options(sides, concurrency=concurrency, batch=batch, top=top, max_listed=max_listed)
    counts = counts if counts is not None else SourceCounts()
    header = {"tracescore_rescore": _STATE_VERSION, "on": on,
              "sides": [[s.scorer_id, s.version, s.judge_model, s.threshold] for s in sides]}
    path = Path(state_file) if state_file is not None else None
    done = _read_state(path, header) if path is not None else {}
    assembler = TraceAssembler(max_open_traces, max_spans, complete_on_root)
    run = _Run(sides, on, path, header, done, concurrency=concurrency, batch=batch, top=top,
               max_listed=max_listed, progress=progress)
    try:
        for span in spans:
            for trace in assembler.add(span):
                run.score(trace)
        for trace in assembler.finish():
            run.score(trace)
        run.settle()
    finally:
        refused = run.close()
    traces = {"traces": assembler.complete + assembler.incomplete + assembler.evicted,
              "complete": assembler.complete, "incomplete": assembler.incomplete,
              "evicted": assembler.evicted, "late_spans": assembler.late_spans,
              "resumed": run.resumed, "spans": counts.spans,
              "skipped_records": counts.skipped_records, "jobs_refused": refused,
              "first_skipped_record": counts.first_problem,
              "max_open_traces": max_open_traces, "max_buffered_spans": max_spans}
    return RescoreResult(sides=list(sides), tally=run.tally, source=source, traces=traces, on=on,
                         seconds=time.perf_counter() - run.started,
                         state_file=None if path is None else str(path))


def _check_options(sides: list[Side], **counts: int) -> None:
    """Raises ConfigurationError on no side or on a count that is not an int >= 1."""
    if not sides:
        raise ConfigurationError("rescore needs at least one scorer")
    for name, value in counts.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigurationError(f"rescore {name} must be an int >= 1, got {value!r}")


class _Run:
    """One run's moving parts: a scoring processor per side, the collector of their outcomes,
    the tally, the state file (read back and appended to) and the progress bar. Traces come
    whole (``score``); every ``batch`` spans routed, the processors are flushed and the traces
    routed since are folded into the tally and written to the state file (``settle``)."""

    def __init__(self, sides: list[Side], on: str, path: Path | None, header: dict[str, Any],
                 done: dict[int, int], *, concurrency: int, batch: int, top: int,
                 max_listed: int, progress: bool | None) -> None:
        self.done, self.batch = done, batch
        self.collector = _Collector(len(sides))
        self.processors = [_processor(side.scorer, on, side.threshold, concurrency,
                                      self.collector.callback(i))
                           for i, side in enumerate(sides)]
        self.tally = _Tally(list(sides), top, max_listed)
        self.resumed_from = _StateReader(path) if done else None
        self.resumed = 0
        self.bar = _progress(progress)
        self.started = time.perf_counter()
        self.writer = _StateWriter(path, header)
        self.pending: list[int] = []
        self.routed = 0

    def settle(self) -> None:
        """Flush every side, then fold and write each trace routed since the last flush."""
        for processor in self.processors:
            processor.force_flush(_FLUSH_MILLIS)
        for trace_id in self.pending:
            turns = self.collector.take(trace_id)
            trace_items = [
                {"trace_id": f"{trace_id:032x}", "span_id": f"{span_id:016x}",
                 "span_name": turn["span_name"],
                 "outcomes": [o if o is not None else dict(_MISSING) for o in turn["outcomes"]]}
                for span_id, turn in turns.items()]
            for item in trace_items:
                self.tally.add(item)
            self.writer.write({"trace": f"{trace_id:032x}", "items": trace_items})
            if self.bar is not None:
                self.bar.update(1)
        if self.bar is not None:
            self.bar.set_postfix(turns=self.tally.turns)
        self.pending.clear()
        self.routed = 0

    def score(self, trace: tuple[int, list[Any], str]) -> None:
        """One whole trace: read back from the state file when an earlier run finished it,
        else routed through every side's processor."""
        trace_id, trace_spans, _ = trace
        offset = self.done.pop(trace_id, None)
        if offset is not None and self.resumed_from is not None:
            for item in self.resumed_from.items(offset):
                self.tally.add(item)
            self.resumed += 1
            if self.bar is not None:
                self.bar.update(1)
            return
        for span in trace_spans:
            for processor in self.processors:
                processor.route(span, forward=False)
        self.pending.append(trace_id)
        self.routed += len(trace_spans)
        if self.routed >= self.batch:
            self.settle()

    def close(self) -> int:
        """Close the files, the processors and the bar; return the jobs the processors refused
        (queue or held traces full)."""
        refused = 0
        self.writer.close()
        if self.resumed_from is not None:
            self.resumed_from.close()
        for processor in self.processors:
            refused += processor.stats.skipped_queue_full + processor.stats.skipped_held_full
            processor.shutdown(1000)
        if self.bar is not None:
            self.bar.close()
        return refused


def _processor(scorer: Any, on: str, threshold: float, concurrency: int,
               on_score: Any) -> Any:
    """The runtime's scoring processor with one rule (``scorer`` on spans of kind ``on``),
    exporting nothing, its scores handed to ``on_score``."""
    from tracescore._pipeline.processor import ScoringSpanProcessor
    from tracescore._pipeline.rules import ScoringRule
    from tracescore._pipeline.runtime import RUNTIME

    rule = ScoringRule(scorer=scorer, on=on, threshold=threshold).compile()
    return ScoringSpanProcessor(
        None, [rule], score_timeout=3600.0, max_concurrency=concurrency,
        max_queue_size=100_000, flush_timeout=60.0, on_score=on_score,
        readers=RUNTIME.readers)


def _progress(progress: bool | None) -> Any:
    from tracescore._offline.progress import progress_bar

    return progress_bar(progress, None, "rescore")


def _read_state(path: Path, header: dict[str, Any]) -> dict[int, int]:
    """The traces an earlier run finished, each with the byte offset of its line (a trace where
    a side failed is scored again): an int per trace is kept, not its outcomes, which are read
    back from the file when the trace comes (``_StateReader``).

    Raises:
        ConfigurationError: the file was written for other sides or another kind, or is not a
            rescore state file.
    """
    if not path.exists():
        return {}
    if not path.is_file():  # /dev/zero, a named pipe: never a state file
        raise ConfigurationError(f"state file {path} is not a regular file")
    done: dict[int, int] = {}
    try:
        with path.open("rb") as fh:
            offset = line_no = 0
            while raw := fh.readline(_MAX_STATE_LINE + 1):
                line_no += 1
                if len(raw) > _MAX_STATE_LINE:
                    raise ConfigurationError(
                        f"state file {path} line {line_no}: longer than "
                        f"{_MAX_STATE_LINE >> 20} MiB: not a rescore state file (use another "
                        "file, or delete it)")
                at, offset = offset, offset + len(raw)
                try:
                    record = json.loads(raw.decode("utf-8"))
                except (UnicodeDecodeError, ValueError, RecursionError):
                    continue  # a line cut by the interruption: that trace is scored again
                if not isinstance(record, dict):
                    raise ConfigurationError(f"state file {path} line {line_no}: not a rescore "
                                             "record (use another file, or delete it)")
                if "tracescore_rescore" in record:
                    theirs = {k: record.get(k) for k in ("on", "sides")}
                    ours = {k: header[k] for k in ("on", "sides")}
                    if theirs != ours:
                        raise ConfigurationError(
                            f"state file {path} was written for other scorers or another span "
                            f"kind ({theirs}), not {ours}: use another file (or delete it)")
                    continue
                trace, trace_items = record.get("trace"), record.get("items")
                trace_id = _trace_id(trace)
                if trace_id is None or not isinstance(trace_items, list) or not all(
                        _is_item(item, len(header["sides"])) for item in trace_items):
                    raise ConfigurationError(f"state file {path} line {line_no}: not a rescore "
                                             "record (use another file, or delete it)")
                failed = any(o.get("status") == "error" for item in trace_items
                             for o in item["outcomes"])
                if failed:
                    done.pop(trace_id, None)
                else:
                    done[trace_id] = at
    except OSError as exc:
        raise ConfigurationError(f"state file {path}: cannot read it ({exc})") from None
    return done


_STATUSES = frozenset({"scored", "not_scorable", "error", "missing"})


def _trace_id(value: Any) -> int | None:
    if not isinstance(value, str) or len(value) != 32:
        return None
    try:
        return int(value, 16)
    except ValueError:
        return None


def _is_item(item: Any, sides: int) -> bool:
    """A turn of a state line as ``settle`` writes it: what the tally reads is there."""
    if not isinstance(item, dict) or not all(isinstance(item.get(k), str)
                                             for k in ("trace_id", "span_id", "span_name")):
        return False
    outcomes = item.get("outcomes")
    if not isinstance(outcomes, list) or len(outcomes) != sides:
        return False
    for o in outcomes:
        if not isinstance(o, dict) or o.get("status") not in _STATUSES:
            return False
        score = o.get("score")
        if o["status"] == "scored" and (isinstance(score, bool) or not isinstance(
                score, (int, float)) or not _finite(score)):
            return False
        if any(o.get(k) is not None and not isinstance(o.get(k), str)
               for k in ("label", "error_type", "evaluator_version", "explanation")):
            return False
    return True


def _finite(number: float) -> bool:
    try:
        return math.isfinite(number)
    except OverflowError:  # an int past a float's range
        return False


def _read_back(item: dict[str, Any]) -> dict[str, Any]:
    """A turn read back from the state file, its texts cut and redacted again (the file may
    have been written, or changed, by someone else); its shape was checked by ``_is_item``."""
    def text(value: Any, limit: int) -> Any:
        return None if value is None else redact_text(str(value)[:limit])

    return {"trace_id": item["trace_id"][:64], "span_id": item["span_id"][:64],
            "span_name": text(item["span_name"], _MAX_NAME),
            "outcomes": [{"status": o["status"],
                          "score": float(o["score"]) if o["status"] == "scored" else None,
                          "label": text(o.get("label"), _MAX_NAME),
                          "error_type": text(o.get("error_type"), _MAX_NAME),
                          "explanation": text(o.get("explanation") or "", _MAX_EXPLANATION),
                          "evaluator_version": text(o.get("evaluator_version"), _MAX_NAME)}
                         for o in item["outcomes"]]}


class _StateReader:
    """Reads a finished trace's turns back from the state file at the offset ``_read_state``
    found, when the trace comes again."""

    def __init__(self, path: Path | None) -> None:
        self._fh = path.open("rb") if path is not None else None

    def items(self, offset: int) -> list[dict[str, Any]]:
        if self._fh is None:
            return []
        self._fh.seek(offset)
        record = json.loads(self._fh.readline(_MAX_STATE_LINE + 1).decode("utf-8"))
        return [_read_back(item) for item in record["items"]]

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()


class _StateWriter:
    def __init__(self, path: Path | None, header: dict[str, Any]) -> None:
        self._fh = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            new = not path.exists() or path.stat().st_size == 0
            self._fh = path.open("a", encoding="utf-8")
            if new:
                self.write(header)

    def write(self, record: Mapping[str, Any]) -> None:
        if self._fh is not None:
            self._fh.write(json.dumps(record, ensure_ascii=False) + "\n")
            self._fh.flush()  # an interruption loses at most the batch in flight

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
