"""``tracescore.calibrate``: how well a scorer with its judge agrees with human labels.

Given a labelled dataset, a scorer and a judge, every item is scored and the judge's pass/fail
at a threshold is compared with the human label: accuracy, balanced accuracy, Cohen's kappa with
its bootstrap interval, the confusion matrix, whether the judge agrees better than chance at all,
the advised threshold (the highest balanced accuracy among thresholds that neither pass nor fail
everything; none when no such threshold beats chance) and whether to move to it, and what it
cost (judge calls, tokens, money, time). It is what a user choosing a judge model and a threshold
for an online rule needs; the arithmetic lives in ``tracescore._offline.calibrate.stats``.

Resumable: each item's outcome is appended to a state file (JSON lines, keyed by item id) as it
finishes; a run given the same state file skips the items already scored, so an interrupted
run of hours goes on where it stopped. Items that failed (a timeout, an outage) are tried again.

Data (``.jsonl``, ``.json`` or ``.csv``), one item per row:

* ``output`` (required): the answer the scorer judges;
* ``label`` (required): the human verdict: ``pass``/``fail`` (also ``true``/``false``,
  ``yes``/``no``, ``1``/``0``) or a number, which passes at ``label_threshold`` or above
  (inclusive). "Pass" means the output should pass this scorer: for a lower-is-better scorer
  such as hallucination, a pass is an output without hallucination;
* ``input``, ``context`` (a list of passages, or one string), ``ground_truth``: what the scorer
  reads;
* ``id``: the item's key in the state file (default: its position, ``#0``, ``#1``, ...);
* ``metadata``: kept, never read.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracescore._core.errors import ConfigurationError
from tracescore._core.redact import redact_text
from tracescore._offline.calibrate import stats
from tracescore._offline.datafile import count_lines, iter_csv, iter_jsonl, load_json, parse_json
from tracescore._offline.progress import progress_bar
from tracescore._pipeline.request import ScoringRequest
from tracescore._pipeline.scoring import run_scorer, scorer_kwargs

__all__ = ["CalibrationItem", "CalibrationResult", "calibrate", "load_labelled"]

_KEYS = ("id", "input", "output", "context", "ground_truth", "label", "metadata")
_PASS_WORDS = {"pass": True, "passed": True, "true": True, "yes": True, "good": True,
               "fail": False, "failed": False, "false": False, "no": False, "bad": False}
_STATE_VERSION = 1


@dataclass(frozen=True)
class CalibrationItem:
    """One labelled item.

    Attributes:
        id: its key in the state file.
        input: what the scorer reads as the input (None when absent).
        output: the judged output.
        context: context passages, or None.
        ground_truth: the expected answer, or None.
        label: the human label as given (``"pass"``, ``"fail"``, a number, ...).
        human_pass: the label as pass (True) or fail (False).
    """

    id: str
    input: Any
    output: Any
    context: list[Any] | None
    ground_truth: Any
    label: Any
    human_pass: bool


@dataclass
class ItemOutcome:
    """What scoring one item came to (one line of the state file)."""

    id: str
    human_pass: bool
    status: str  # scored | not_scorable | error
    score: float | None = None
    error_type: str | None = None
    explanation: str = ""
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = 0.0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class CalibrationResult:
    """The agreement of a scorer and its judge with human labels.

    Attributes:
        scorer_id: the scorer's id.
        judge_model: the judge's model string (None for a scorer without a judge).
        higher_is_better: the scorer's direction.
        threshold: the default threshold the agreement is measured at.
        at_threshold: the agreement at ``threshold``
        (``tracescore._offline.calibrate.stats.Agreement``).
        best: the agreement at the advised threshold: the highest balanced accuracy on these
            items among thresholds that neither pass nor fail everything (fitted on them:
            optimistic on small sets); None when no such threshold beats chance or the humans
            gave one label only.
        items: every item's outcome, in data order.
        resumed: items whose outcome came from the state file, not from this run.
        seconds: wall-clock seconds of this run.
    """

    scorer_id: str
    judge_model: str | None
    higher_is_better: bool
    threshold: float
    at_threshold: stats.Agreement
    best: stats.Agreement | None
    items: list[ItemOutcome]
    resumed: int = 0
    seconds: float = 0.0
    data: str | None = None
    state_file: str | None = None
    label_threshold: float = 0.5
    problems: list[str] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        """Items by status: ``scored``, ``not_scorable``, ``error``."""
        out = {"scored": 0, "not_scorable": 0, "error": 0}
        for item in self.items:
            out[item.status] += 1
        return out

    @property
    def cost(self) -> dict[str, Any]:
        """Judge calls, tokens, money (USD; None when the price of some call is unknown) and
        time (the judge time summed over items, and the run's wall clock). Calls of an item
        whose scoring failed are not counted: a failed scorer run reports no accounting."""
        costs = [i.cost for i in self.items]
        return {
            "judge_calls": sum(i.calls for i in self.items),
            "prompt_tokens": sum(i.prompt_tokens for i in self.items),
            "completion_tokens": sum(i.completion_tokens for i in self.items),
            "usd": (None if any(c is None for c in costs)
                    else round(math.fsum(c for c in costs if c is not None), 6)),
            "item_seconds": round(math.fsum(i.seconds for i in self.items), 3),
            "wall_seconds": round(self.seconds, 3),
        }

    @property
    def threshold_advice(self) -> dict[str, Any] | None:
        """Whether the threshold should move
        (``tracescore._offline.calibrate.stats.threshold_advice``):
        ``move``, ``current``, ``best``, ``gained``, ``lost``, ``p_value``, ``text``; None
        when nothing was scored."""
        pairs = [(i.score, i.human_pass) for i in self.items
                 if i.status == "scored" and i.score is not None]
        return stats.threshold_advice(pairs, self.threshold, self.higher_is_better)

    @property
    def kappa_interval(self) -> tuple[float, float] | None:
        """The 95% percentile-bootstrap interval of Cohen's kappa at ``threshold``
        (``tracescore._offline.calibrate.stats.kappa_interval``: 2,000 resamples, seeded); None when
        undefined. Computed once."""
        if "_kappa_interval" not in self.__dict__:
            a = self.at_threshold
            self.__dict__["_kappa_interval"] = (
                stats.kappa_interval(a.true_pass, a.false_pass, a.false_fail, a.true_fail)
                if a.n else None)
        return self.__dict__["_kappa_interval"]  # type: ignore[no-any-return]

    @property
    def no_better_than_chance(self) -> bool | None:
        """Whether the judge agrees with the humans no better than chance at ``threshold``:
        Cohen's kappa undefined or <= 0, or the lower end of its 95% bootstrap interval <= 0
        (``tracescore._offline.calibrate.stats.no_better_than_chance``); None when nothing was
        scored."""
        if not self.at_threshold.n:
            return None
        return stats.no_better_than_chance(self.at_threshold, self.kappa_interval)

    @property
    def passed(self) -> bool:
        """True when every requirement held (``problems`` is empty); a judge no better than
        chance is a problem."""
        return not self.problems

    @property
    def verdict(self) -> str:
        """``"passed"``, ``"no better than chance"`` (the judge's agreement with the humans is
        not above chance) or ``"failed"`` (another problem)."""
        if self.no_better_than_chance:
            return "no better than chance"
        return "passed" if self.passed else "failed"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of everything (the ``--report`` file)."""
        def agreement(a: stats.Agreement | None) -> dict[str, Any] | None:
            if a is None:
                return None
            return {"threshold": a.threshold, "n": a.n, "accuracy": a.accuracy,
                    "balanced_accuracy": a.balanced_accuracy, "kappa": a.kappa,
                    "kappa_band": stats.kappa_band(a.kappa), "degenerate": a.degenerate,
                    "confusion": a.confusion()}

        gain = None
        if self.best is not None and self.at_threshold.balanced_accuracy is not None:
            gain = round((self.best.balanced_accuracy or 0.0)
                         - self.at_threshold.balanced_accuracy, 12)
        interval = self.kappa_interval
        return {
            "scorer": self.scorer_id,
            "judge_model": self.judge_model,
            "higher_is_better": self.higher_is_better,
            "data": self.data,
            "state_file": self.state_file,
            "label_threshold": self.label_threshold,
            "counts": {"items": len(self.items), **self.counts, "resumed": self.resumed},
            "at_threshold": agreement(self.at_threshold),
            "best_threshold": agreement(self.best),
            "best_threshold_gain": gain,
            "threshold_choice": THRESHOLD_CHOICE,
            "threshold_advice": self.threshold_advice,
            "chance": {"no_better_than_chance": self.no_better_than_chance,
                       "kappa_interval": None if interval is None else list(interval),
                       "definition": CHANCE_DEFINITION},
            "cost": self.cost,
            "verdict": self.verdict,
            "passed": self.passed,
            "problems": list(self.problems),
            "items": [i.as_dict() for i in self.items],
        }

    def table(self) -> str:
        """The plain-text report a terminal shows."""
        c, a, b = self.counts, self.at_threshold, self.best
        lines = [
            f"tracescore calibrate {self.scorer_id} (judge {self.judge_model or '-'}): "
            f"{len(self.items)} items, {c['scored']} scored, {c['not_scorable']} not scorable, "
            f"{c['error']} errors" + (f" ({self.resumed} from the state file)"
                                      if self.resumed else ""),
            _agreement_line(f"at threshold {_num(a.threshold)}", a),
        ]
        chance = self.no_better_than_chance
        if chance is not None:
            interval = self.kappa_interval
            ci = ("undefined" if interval is None
                  else f"{interval[0]:.3f} to {interval[1]:.3f}")
            who = "judge" if self.judge_model else "scorer"
            lines.append(
                f"{who}: {'NO BETTER THAN CHANCE' if chance else 'better than chance'} at "
                f"{_num(a.threshold)} (Cohen's kappa 95% interval {ci}; no better than chance "
                "means kappa <= 0 or an interval reaching 0)")
        advice = self.threshold_advice
        if b is not None:
            gain = (b.balanced_accuracy or 0.0) - (a.balanced_accuracy or 0.0)
            lines.append(_agreement_line(f"advised threshold {_num(b.threshold)}", b)
                         + f"  ({gain:+.1%} balanced accuracy over {_num(a.threshold)})")
        if advice is not None:
            lines.append(f"threshold: {advice['text']}")
        lines += _confusion_lines(f"at threshold {_num(a.threshold)}", a)
        if b is not None and b.threshold != a.threshold:
            lines += _confusion_lines(f"at the advised threshold {_num(b.threshold)}", b)
        cost = self.cost
        usd = "unknown" if cost["usd"] is None else f"${cost['usd']:.4f}"
        lines.append(
            f"cost: {cost['judge_calls']} judge calls, {cost['prompt_tokens']} + "
            f"{cost['completion_tokens']} tokens, {usd}, {cost['item_seconds']:.1f} s judging, "
            f"{cost['wall_seconds']:.1f} s wall"
        )
        errors = [i for i in self.items if i.status == "error"]
        if errors:
            kinds: dict[str, int] = {}
            for i in errors:
                kinds[i.error_type or "error"] = kinds.get(i.error_type or "error", 0) + 1
            detail = ", ".join(f"{k} x{v}" for k, v in sorted(kinds.items()))
            lines.append(f"errors ({detail}), e.g. item {errors[0].id}: "
                         f"{' '.join(errors[0].explanation.split())[:300]}")
        lines += [f"FAILED: {p}" for p in self.problems]
        return "\n".join(lines)


THRESHOLD_CHOICE = {
    "criterion": "balanced_accuracy",
    "why": ("balanced accuracy (the mean of the judge's agreement on human passes and on human "
            "fails) is not fooled by class imbalance: a threshold that passes or fails "
            "everything scores 0.5 whatever the shares, where raw accuracy rewards it with the "
            "majority's share. Thresholds that pass or fail every item are never advised, nor "
            "one whose balanced accuracy is not above 0.5; ties go to the higher Cohen's kappa, "
            "then to the threshold nearest the current one."),
}
"""How the advised threshold is chosen (the JSON report's ``threshold_choice``)."""

CHANCE_DEFINITION = (
    "no better than chance: at the current threshold, Cohen's kappa is undefined or <= 0, or "
    "the lower end of its 95% percentile-bootstrap interval (2,000 resamples of the items, "
    "seeded) is <= 0")
"""When a judge is marked no better than chance (the JSON report's ``chance.definition``)."""


def _confusion_lines(what: str, a: stats.Agreement) -> list[str]:
    return [
        f"confusion {what} (rows human, columns judge):",
        "               judge pass  judge fail",
        f"  human pass   {a.true_pass:>10}  {a.false_fail:>10}",
        f"  human fail   {a.false_pass:>10}  {a.true_fail:>10}",
    ]


def _num(value: float) -> str:
    return f"{value:.4g}"


def _agreement_line(what: str, a: stats.Agreement) -> str:
    if a.accuracy is None:
        return f"{what}: no item to compare"
    kappa = "undefined" if a.kappa is None else f"{a.kappa:.3f}"
    balanced = ("undefined" if a.balanced_accuracy is None
                else f"{a.balanced_accuracy:.1%}")
    return (f"{what}: accuracy {a.accuracy:.1%} ({a.true_pass + a.true_fail}/{a.n}), "
            f"balanced accuracy {balanced}, Cohen's kappa {kappa} ({stats.kappa_band(a.kappa)})")


# -- data -----------------------------------------------------------------------------------


def load_labelled(data: Any, label_threshold: float = 0.5) -> list[CalibrationItem]:
    """Read labelled items from a path (``.jsonl``, ``.json``, ``.csv``) or a list of dicts.

    Raises:
        ConfigurationError: the file cannot be read, a row lacks ``output`` or ``label``, a
            label cannot be read as pass/fail, an unknown key, or two rows share an id.
    """
    return list(iter_labelled(data, label_threshold))


def iter_labelled(data: Any, label_threshold: float = 0.5) -> Iterator[CalibrationItem]:
    """``load_labelled`` a row at a time: a data file is read as the items are taken (each
    problem raises when its row is reached).

    Raises:
        ConfigurationError: as ``load_labelled``.
    """
    if isinstance(data, (str, os.PathLike)):
        path = Path(data)
        rows: Iterable[tuple[Any, str]] = _read_rows(path)
        where = str(path)
    else:
        rows = [(row, f"data[{i}]") for i, row in enumerate(data)]
        where = "data"
    seen: set[str] = set()
    index = -1
    for index, (row, at) in enumerate(rows):
        if not isinstance(row, Mapping):
            raise ConfigurationError(f"{at}: an item is a JSON object, got {type(row).__name__}")
        unknown = sorted(set(row) - set(_KEYS))
        if unknown:
            raise ConfigurationError(f"{at}: unknown key(s) {unknown}; an item has {_KEYS}")
        for key in ("output", "label"):
            if row.get(key) in (None, ""):
                raise ConfigurationError(f"{at}: the item has no {key!r}")
        item_id = str(row["id"]) if row.get("id") not in (None, "") else f"#{index}"
        if item_id in seen:
            raise ConfigurationError(f"{at}: the id {item_id!r} is used twice")
        seen.add(item_id)
        context = row.get("context")
        if isinstance(context, str):
            context = [context]
        yield CalibrationItem(
            id=item_id, input=row.get("input"), output=row["output"],
            context=list(context) if context is not None else None,
            ground_truth=row.get("ground_truth") or None, label=row["label"],
            human_pass=_human_pass(row["label"], label_threshold, at),
        )
    if index < 0:
        raise ConfigurationError(f"{where}: no items")


def _finite(number: float) -> bool:
    try:
        return math.isfinite(number)
    except OverflowError:  # an int past a float's range
        return False


def _human_pass(label: Any, label_threshold: float, at: str) -> bool:
    if isinstance(label, bool):
        return label
    if isinstance(label, (int, float)):
        if not _finite(label):
            raise ConfigurationError(f"{at}: the label {str(label)[:40]!r} is not a finite number")
        return float(label) >= label_threshold
    if isinstance(label, str):
        word = label.strip().lower()
        if word in _PASS_WORDS:
            return _PASS_WORDS[word]
        try:
            return _human_pass(float(word), label_threshold, at)
        except ValueError:
            pass
    raise ConfigurationError(
        f"{at}: the label {label!r} is neither pass/fail (true/false, yes/no) nor a number"
    )


def _read_rows(path: Path) -> Iterator[tuple[Any, str]]:
    """The rows of a data file, read one at a time (``_datafile``: every problem is one line
    naming the file, the line and the problem)."""
    if not path.is_file():
        raise ConfigurationError(f"data file {str(path)!r} does not exist (or is not a file)")
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        for row, where, _ in iter_jsonl(path):
            yield row, where
        return
    if suffix == ".json":
        rows = load_json(path)
        if not isinstance(rows, list):
            raise ConfigurationError(f"{path}: a .json data file holds an array of items")
        for i, row in enumerate(rows):
            yield row, f"{path} item {i}"
        return
    if suffix == ".csv":
        rows_csv = iter_csv(path)
        next(rows_csv)  # the header
        for row, at, _ in rows_csv:
            parsed = {k: v for k, v in row.items() if k is not None and v != ""}
            for key in ("context", "metadata"):
                if isinstance(parsed.get(key), str) and parsed[key].lstrip()[:1] in "[{":
                    parsed[key] = _json(parsed[key], f"{at} {key} cell")
            yield parsed, at
        return
    raise ConfigurationError(f"data file {str(path)!r}: use a .jsonl, .json or .csv file")


def _json(text: str, where: str) -> Any:
    return parse_json(text, where)


# -- state file -------------------------------------------------------------------------------

_STATUSES = frozenset({"scored", "not_scorable", "error"})


def _read_state(path: Path, header: dict[str, Any]) -> dict[str, ItemOutcome]:
    """The outcomes an earlier run recorded in ``path`` (an error is not kept: it is retried).

    Raises:
        ConfigurationError: the file was written for another scorer or judge.
    """
    if not path.exists():
        return {}
    done: dict[str, ItemOutcome] = {}
    lines = _state_lines(path)
    for line_no, line in lines:
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            continue  # a line cut by the interruption: that item is scored again
        if not isinstance(record, dict):
            raise ConfigurationError(f"state file {path} line {line_no}: not a calibration "
                                     "record (use another file, or delete it to start over)")
        if "tracescore_calibrate" in record:
            theirs = {k: record.get(k) for k in ("scorer", "judge_model")}
            ours = {k: header[k] for k in ("scorer", "judge_model")}
            if theirs != ours:
                raise ConfigurationError(
                    f"state file {path} was written for {theirs}, not {ours}: use another "
                    "file (or delete it to start over)"
                )
            continue
        try:
            outcome = ItemOutcome(**record)
            if not isinstance(outcome.id, str) or outcome.status not in _STATUSES:
                raise TypeError
        except TypeError:
            raise ConfigurationError(
                f"state file {path} line {line_no}: not a calibration record (use another "
                "file, or delete it to start over)"
            ) from None
        if outcome.status == "error":
            done.pop(outcome.id, None)
        else:
            done[outcome.id] = outcome
    return done


def _state_lines(path: Path) -> Iterator[tuple[int, str]]:
    """The state file's lines; bytes that are not UTF-8 are one line of error."""
    try:
        with path.open("rb") as fh:
            for line_no, raw in enumerate(fh, start=1):
                try:
                    yield line_no, raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise ConfigurationError(
                        f"state file {path} line {line_no}: not UTF-8 text ({exc.reason}); "
                        "use another file, or delete it to start over") from None
    except OSError as exc:
        raise ConfigurationError(f"state file {path}: cannot read it ({exc})") from None


class _StateWriter:
    def __init__(self, path: Path | None, header: dict[str, Any]) -> None:
        self._fh = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            new = not path.exists() or path.stat().st_size == 0
            # A lone surrogate in an id is written as its JSON escape: it reads back the same.
            self._fh = path.open("a", encoding="utf-8", errors="backslashreplace")
            if new:
                self.write(header)

    def write(self, record: Mapping[str, Any]) -> None:
        if self._fh is not None:
            self._fh.write(json.dumps(record, ensure_ascii=False) + "\n")
            # Flushed per item: an interruption loses at most the items in flight.
            self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()


# -- the run ----------------------------------------------------------------------------------


def calibrate(
    data: Any,
    scorer: Any,
    *,
    judge: Any = None,
    threshold: float | None = None,
    label_threshold: float = 0.5,
    state_file: str | os.PathLike[str] | None = None,
    concurrency: int = 1,
    progress: bool | None = None,
    min_accuracy: float | None = None,
    min_kappa: float | None = None,
) -> CalibrationResult:
    """Score a labelled dataset and report how the judge agrees with the human labels.

    Args:
        data: a path to a ``.jsonl``, ``.json`` or ``.csv`` file, or a list of dicts; each
            item has ``output`` and ``label`` and, as the scorer needs, ``input``, ``context``,
            ``ground_truth``; ``id`` keys it in the state file (module docstring).
        scorer: a scorer (``tracescore.scorers.create_*_scorer(...)``) or a scorer id such as
            ``"faithfulness"``.
        judge: the judge of a scorer given by id: a litellm model string or a
            ``tracescore.Judge``. Default: the configured judge, else ``TRACESCORE_JUDGE_MODEL``.
            A scorer object brings its own (its ``model=``).
        threshold: the score at which the judge's label is pass (inclusive; for a
            lower-is-better scorer a pass is at or below it). Default: half the scorer's scale.
        label_threshold: where a numeric human label becomes pass (inclusive). Default 0.5.
        state_file: append each item's outcome here as it finishes, and skip the items an
            earlier run recorded (failed ones are tried again). Default: no state.
        concurrency: items scored at once. Default 1 (a local model serves one at a time).
        progress: a tqdm progress bar on stderr. Default: when stderr is a terminal.
        min_accuracy: when given, a lower accuracy at ``threshold`` is a problem
            (``CalibrationResult.passed`` False; the CLI exits 1).
        min_kappa: likewise for Cohen's kappa.

    Returns:
        A ``CalibrationResult``. Problems also include "nothing was scored" and a judge that
        agrees with the humans no better than chance (``no_better_than_chance``).

    Raises:
        ConfigurationError: unreadable data, an unknown scorer id, a state file written for
            another scorer or judge, or an option out of range.

    Examples:
        >>> result = tracescore.calibrate("labelled.jsonl", "faithfulness",
        ...                               judge="openai/gpt-4o-mini", state_file="cal.state")
        >>> print(result.table())
    """
    scorer, threshold, judge_model = _checked(
        scorer, judge, threshold, concurrency=concurrency, label_threshold=label_threshold,
        min_accuracy=min_accuracy, min_kappa=min_kappa)
    header = {"tracescore_calibrate": _STATE_VERSION, "scorer": scorer.id,
              "judge_model": judge_model}
    path = Path(state_file) if state_file is not None else None
    done = _read_state(path, header) if path is not None else {}
    data, total = _sized(data)
    human, fresh, seconds = _score_data(
        scorer, data, label_threshold, done, _progress(progress, total, 0), concurrency,
        path, header)
    outcomes = [done.get(item_id) or fresh[item_id] for item_id in human]
    # A state line is trusted for its score; the human label is the data's (it may be fixed).
    for outcome, human_pass in zip(outcomes, human.values(), strict=True):
        outcome.human_pass = human_pass
    pairs = [(o.score, o.human_pass) for o in outcomes
             if o.status == "scored" and o.score is not None]
    higher_is_better = bool(getattr(scorer, "higher_is_better", True))
    result = CalibrationResult(
        scorer_id=scorer.id, judge_model=judge_model, higher_is_better=higher_is_better,
        threshold=threshold, at_threshold=stats.agreement(pairs, threshold, higher_is_better),
        best=stats.best_threshold(pairs, threshold, higher_is_better),
        items=outcomes, resumed=sum(1 for item_id in human if item_id in done),
        seconds=seconds, data=str(data) if isinstance(data, (str, os.PathLike)) else None,
        state_file=str(path) if path is not None else None, label_threshold=label_threshold,
    )
    result.problems = _problems(result, min_accuracy, min_kappa)
    return result


def _checked(scorer: Any, judge: Any, threshold: float | None, *, concurrency: int,
             **bounds: float | None) -> tuple[Any, float, str | None]:
    """``(scorer, threshold, judge model)`` of a calibration: the scorer built from its id,
    the threshold defaulted to half its scale, every option checked.

    Raises:
        ConfigurationError: an option out of range, an unknown scorer id, a judge-less run
            of a scorer that asks a judge.
    """
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigurationError(f"calibrate concurrency must be an int >= 1, got {concurrency!r}")
    scorer = _scorer(scorer, judge)
    if threshold is None:
        threshold = float(getattr(scorer, "scale", 1.0) or 1.0) / 2
    if not isinstance(threshold, (int, float)) or not math.isfinite(threshold):
        raise ConfigurationError(f"calibrate threshold must be a finite number, got {threshold!r}")
    # A NaN bound compares False with everything: a gate that can never fail.
    for name, bound in bounds.items():
        if bound is not None and (isinstance(bound, bool) or not isinstance(bound, (int, float))
                                  or not _finite(bound)):
            raise ConfigurationError(f"calibrate {name} must be a finite number, got "
                                     f"{str(bound)[:40]!r}")
    judge_model = _judge_model(scorer)
    if getattr(scorer, "uses_judge", False) and judge_model is None:
        raise ConfigurationError(
            f"scorer {scorer.id!r} asks an LLM judge: pass judge= (--judge MODEL, or "
            "--judge-api-base URL with --judge NAME) or set TRACESCORE_JUDGE_MODEL"
        )
    return scorer, float(threshold), judge_model


def _sized(data: Any) -> tuple[Any, int | None]:
    """``(data, rows)``: a path as it is, with its rows when a count is cheap (else None);
    any other iterable as a list, with its length."""
    if isinstance(data, (str, os.PathLike)):
        return data, _data_rows(Path(data))
    data = list(data)
    return data, len(data)


def _score_data(scorer: Any, data: Any, label_threshold: float, done: dict[str, ItemOutcome],
                bar: Any, concurrency: int, path: Path | None, header: dict[str, Any],
                ) -> tuple[dict[str, bool], dict[str, ItemOutcome], float]:
    """Score every item of ``data`` that ``done`` (read from the state file) lacks, each
    outcome appended to the state file at ``path`` (if any) as it lands.

    Returns:
        ``(human labels by item id in data order, this run's outcomes by item id, seconds)``.
    """
    # The data is read as the workers take items (issue 22): what is kept per item is its id,
    # its human label and its outcome, not its input, output and context.
    human: dict[str, bool] = {}

    def todo() -> Iterator[CalibrationItem]:
        for item in iter_labelled(data, label_threshold):
            human[item.id] = item.human_pass
            if item.id in done:
                if bar is not None:
                    bar.update(1)
                continue
            yield item

    started = time.perf_counter()
    state = _StateWriter(path, header)
    try:
        fresh = asyncio.run(_score_all(scorer, todo(), concurrency, bar, state))
    finally:
        state.close()
    return human, fresh, time.perf_counter() - started


def _problems(result: CalibrationResult, min_accuracy: float | None,
              min_kappa: float | None) -> list[str]:
    for name, bound in (("min_accuracy", min_accuracy), ("min_kappa", min_kappa)):
        if bound is not None and (isinstance(bound, bool) or not isinstance(bound, (int, float))
                                  or not _finite(bound)):
            raise ConfigurationError(f"calibrate {name} must be a finite number, got "
                                     f"{str(bound)[:40]!r}")
    problems = []
    a = result.at_threshold
    if a.n == 0:
        errors = [i for i in result.items if i.status == "error"]
        cause = f": e.g. item {errors[0].id}: {errors[0].explanation[:300]}" if errors else ""
        problems.append(f"no item of {len(result.items)} was scored{cause}")
        return problems
    if min_accuracy is not None and (a.accuracy or 0.0) < min_accuracy:
        problems.append(f"accuracy {a.accuracy:.3f} is below --min-accuracy {min_accuracy:g}")
    if min_kappa is not None and (a.kappa is None or a.kappa < min_kappa):
        kappa = "undefined" if a.kappa is None else f"{a.kappa:.3f}"
        problems.append(f"Cohen's kappa {kappa} is below --min-kappa {min_kappa:g}")
    if result.no_better_than_chance:
        interval = result.kappa_interval
        kappa = "undefined" if a.kappa is None else f"{a.kappa:.3f}"
        ci = "undefined" if interval is None else f"{interval[0]:.3f} to {interval[1]:.3f}"
        who = "judge" if result.judge_model else "scorer"
        problems.append(
            f"the {who} agrees with the humans no better than chance at threshold "
            f"{_num(a.threshold)} (Cohen's kappa {kappa}, 95% interval {ci}): do not rely on "
            "its pass/fail")
    return problems


def _scorer(scorer: Any, judge: Any) -> Any:
    if isinstance(scorer, str):
        from tracescore.scorers._registry import build

        return build(scorer, judge)
    if judge is not None:
        raise ConfigurationError(
            "calibrate(judge=...) applies to a scorer given by id; a scorer object uses its own "
            "judge (create it with model=...)"
        )
    if not hasattr(scorer, "arun") or not isinstance(getattr(scorer, "id", None), str):
        raise ConfigurationError(
            f"calibrate needs a tracescore scorer or a scorer id, got {type(scorer).__name__}"
        )
    return scorer


def _judge_model(scorer: Any) -> str | None:
    if not getattr(scorer, "uses_judge", False):
        return None
    from tracescore._pipeline.runtime import RUNTIME

    judge = getattr(scorer, "model", None) or RUNTIME.judge
    if judge is None:
        from tracescore._setup import env as _env

        return _env.judge_model()
    return str(getattr(judge, "model", judge))


def _progress(progress: bool | None, total: int | None, initial: int) -> Any:
    return progress_bar(progress, total, "calibrate", initial)


async def _score_all(scorer: Any, items: Iterable[CalibrationItem], concurrency: int,
                     bar: Any, writer: _StateWriter) -> dict[str, ItemOutcome]:
    results: dict[str, ItemOutcome] = {}
    # One shared iterator (a data file read a row at a time): next() never awaits, so
    # workers cannot take the same item.
    order = iter(items)

    async def worker() -> None:
        for item in order:
            outcome = await _score_one(scorer, item)
            results[item.id] = outcome
            writer.write(outcome.as_dict())
            if bar is not None:
                bar.update(1)

    try:
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    finally:
        if bar is not None:
            bar.close()
    return results


def _data_rows(path: Path) -> int | None:
    """Rows of a data file for the progress bar's total (JSON lines, CSV less its header)."""
    suffix = path.suffix.lower()
    if not path.is_file() or suffix not in (".jsonl", ".ndjson", ".csv"):
        return None
    lines = count_lines(path)
    return None if lines is None else max(0, lines - (suffix == ".csv"))


async def _score_one(scorer: Any, item: CalibrationItem) -> ItemOutcome:
    request = ScoringRequest(input=item.input, output=item.output,
                             documents=tuple(item.context or ()), ground_truth=item.ground_truth)
    kwargs = scorer_kwargs(request, scorer)
    if item.context is not None:
        kwargs["context"] = list(item.context)
    started = time.perf_counter()
    outcome = await run_scorer(scorer, kwargs)
    seconds = time.perf_counter() - started
    result = outcome.result
    if outcome.error_type is not None:
        status = "error"
    elif outcome.score is None:
        status = "not_scorable"
    else:
        status = "scored"
    return ItemOutcome(
        id=item.id, human_pass=item.human_pass, status=status, score=outcome.score,
        # The state file is a file on disk like a report: redacted as every writer is.
        error_type=outcome.error_type, explanation=redact_text(outcome.explanation[:2000]),
        calls=int(getattr(result, "judge_calls", 0) or 0),
        prompt_tokens=int(getattr(result, "input_tokens", 0) or 0),
        completion_tokens=int(getattr(result, "output_tokens", 0) or 0),
        cost=getattr(result, "cost", 0.0) if result is not None else 0.0,
        seconds=round(seconds, 3),
    )
