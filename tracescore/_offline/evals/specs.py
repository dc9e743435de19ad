"""The scorers of one ``run_evals`` call and the verdict on what they scored.

A ``ScorerSpec`` is a scorer with its threshold or gate; ``build_specs`` checks what the user
passed, ``check_needs`` refuses a run in which a scorer cannot score any item, ``summarise`` and
``decide_verdict`` turn per-item scores into the per-scorer summary and the three-way verdict.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tracescore._core import semconv as sc
from tracescore._core.errors import ConfigurationError
from tracescore._offline.evals.data import EvalItem
from tracescore._offline.evals.results import EvalItemResult, ScorerSummary, Verdict
from tracescore._pipeline.scorer import as_scorer
from tracescore._pipeline.scoring import label_for


@dataclass(frozen=True)
class ScorerSpec:
    """A scorer of a run, with what its scores are compared with."""

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


def is_scorer(obj: Any) -> bool:
    return callable(getattr(obj, "arun", None)) and bool(getattr(obj, "id", None))


def number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigurationError(f"{what} must be a finite number, got {value!r}")
    return float(value)


def build_specs(scorers: Any, gates: Any) -> list[ScorerSpec]:
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
                threshold = number(threshold, f"{where} threshold")
        else:
            scorer, threshold = entry, None
        if not is_scorer(scorer):
            raise ConfigurationError(
                f"{where}: expected a scorer from tracescore.scorers (an object with an id and "
                f"arun()), got {type(scorer).__name__}"
            )
        entries.append((scorer, threshold))
    gate_objects = []
    for i, gate in enumerate(gates):
        if not is_scorer(gate):
            raise ConfigurationError(
                f"gates[{i}]: expected a scorer from tracescore.scorers, got {type(gate).__name__}"
            )
        gate_objects.append(gate)

    specs: list[ScorerSpec] = []
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
            ScorerSpec(
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


def check_needs(specs: list[ScorerSpec], items: list[EvalItem]) -> None:
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


def _add_exact(partials: list[float], x: float) -> None:
    """Add ``x`` to the non-overlapping partial sums ``partials`` (Shewchuk's algorithm, the
    one ``math.fsum`` uses): ``math.fsum(partials)`` is then the exactly rounded sum of every
    value added, in any order, in a few floats of memory."""
    i = 0
    for y in partials:
        if abs(x) < abs(y):
            x, y = y, x
        hi = x + y
        lo = y - (hi - x)
        if lo:
            partials[i] = lo
            i += 1
        x = hi
    partials[i:] = [x]


class ScorerTally:
    """One scorer's outcomes over a run, in bounded memory: counts by status and error type,
    the exact sum of the scores, and the first error (or not-scorable outcome) in data order."""

    def __init__(self) -> None:
        self.outcomes = 0
        self.values = 0
        self.partials: list[float] = []
        self.counts: Counter[str] = Counter()
        self.error_types: Counter[str] = Counter()
        self.first_error: tuple[int, Any] | None = None
        self.first_other: tuple[int, Any] | None = None

    def add(self, index: int, outcome: Any) -> None:
        self.outcomes += 1
        self.counts[outcome.status] += 1
        if outcome.status == "scored" and outcome.score is not None:
            self.values += 1
            _add_exact(self.partials, float(outcome.score))
        if outcome.status == "error":
            self.error_types[outcome.error_type or "scorer_error"] += 1
            if self.first_error is None or index < self.first_error[0]:
                self.first_error = (index, outcome)
        elif outcome.status != "scored" and (self.first_other is None
                                             or index < self.first_other[0]):
            self.first_other = (index, outcome)

    @property
    def mean(self) -> float | None:
        # fsum: exactly rounded, so the mean does not depend on the order items finished in.
        return math.fsum(self.partials) / self.values if self.values else None


class RunTally:
    """Every item's outcome over a run, in bounded memory (a run over a file of millions of
    rows keeps the items it lists in its report, not all of them): items, target errors by
    type, and a ``ScorerTally`` per scorer id."""

    def __init__(self, specs: list[ScorerSpec]) -> None:
        self.total = 0
        self.target_errors: Counter[str] = Counter()
        self.scorers = {spec.id: ScorerTally() for spec in specs}

    def add(self, result: EvalItemResult) -> None:
        self.total += 1
        if result.error is not None:
            self.target_errors[result.error.type] += 1
        for scorer_id, tally in self.scorers.items():
            outcome = result.scores.get(scorer_id)
            if outcome is not None:
                tally.add(result.item.index, outcome)

    @classmethod
    def of(cls, specs: list[ScorerSpec], results: list[EvalItemResult]) -> RunTally:
        tally = cls(specs)
        for result in results:
            tally.add(result)
        return tally


def summarise(spec: ScorerSpec, results: list[EvalItemResult] | RunTally) -> ScorerSummary:
    """A scorer's summary over a run's results (or their ``RunTally``)."""
    run = results if isinstance(results, RunTally) else RunTally.of([spec], results)
    tally = run.scorers[spec.id]
    counts = tally.counts
    error_types = tally.error_types
    mean = tally.mean
    problems: list[str] = []
    who = f"gate {spec.id}" if spec.gate else spec.id
    required = spec.required
    if not counts["scored"] and tally.outcomes:
        # Nothing judged is no evidence of quality: a CI gate must not pass on it (an
        # unreachable judge, a wrong model name, a missing key). The cause is in the message,
        # so the terminal shows it, not only the report file.
        problems.append(f"{who}: scored no item of {tally.outcomes}{_first_cause(tally)}")
    elif mean is None:
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


def _first_cause(tally: ScorerTally) -> str:
    """`` (timeout: 2); first error: ...`` for a scorer that scored nothing: the counts by
    status and the first error message (or not-scorable reason), cut to one line."""
    detail = ", ".join(f"{k}: {v}" for k, v in sorted(tally.counts.items()))
    found = tally.first_error or tally.first_other
    first = found[1] if found is not None else None
    if first is None or not first.reason:
        return f" ({detail})"
    reason = " ".join(str(first.reason).split())
    if len(reason) > _MAX_CAUSE:
        reason = reason[: _MAX_CAUSE - 1] + "…"
    kind = f"{first.error_type}: " if first.error_type else ""
    return f" ({detail}); first {first.status}: {kind}{reason}"


_MAX_CAUSE = 300


def decide_verdict(
    summaries: list[ScorerSummary], results: list[EvalItemResult] | RunTally
) -> tuple[Verdict, tuple[str, ...]]:
    """``failed`` when a gate failed or a scorer scored no item at all (nothing was judged:
    a CI run must not pass on it); ``warned`` when a threshold was missed, a scorer failed on
    some items or the target raised; else ``passed``. Returns the verdict and its reasons."""
    if isinstance(results, RunTally):
        total, errors = results.total, results.target_errors
    else:
        total = len(results)
        errors = Counter(r.error.type for r in results if r.error is not None)
    unjudged = {s.scorer_id for s in summaries if total and not s.scored}
    failed = [p for s in summaries if s.gate or s.scorer_id in unjudged for p in s.problems]
    scored = [p for s in summaries if not (s.gate or s.scorer_id in unjudged)
              for p in s.problems]
    if errors:
        detail = ", ".join(f"{k}: {v}" for k, v in sorted(errors.items()))
        scored.append(
            f"the target raised on {sum(errors.values())} of {total} item(s) ({detail})"
        )
    if failed:
        return "failed", tuple(failed + scored)
    if scored:
        return "warned", tuple(scored)
    return "passed", ()
