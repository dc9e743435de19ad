"""Agreement between a judge and human labels: confusion matrix, accuracy, Cohen's kappa and the
threshold that maximises agreement. Pure arithmetic on ``(score, human_pass)`` pairs, no I/O.

Sources:

* Cohen's kappa: J. Cohen, "A coefficient of agreement for nominal scales", Educational and
  Psychological Measurement 20(1), 1960, pp. 37-46: ``kappa = (p_o - p_e) / (1 - p_e)`` where
  ``p_o`` is the observed share of agreement and ``p_e = sum_k p_human(k) * p_judge(k)`` the
  agreement expected by chance from each rater's own label shares.
* Wilson score interval for a proportion: E. B. Wilson, "Probable inference, the law of
  succession, and statistical inference", JASA 22(158), 1927, pp. 209-212.
* The kappa interval is a percentile bootstrap over items (B. Efron and R. Tibshirani, "An
  Introduction to the Bootstrap", 1993, ch. 13), seeded so a report is reproducible.
* Whether a threshold should move: an exact McNemar test (Q. McNemar, "Note on the sampling
  error of the difference between correlated proportions or percentages", Psychometrika 12(2),
  1947, pp. 153-157) on the items the two thresholds label differently: under "no better",
  those that become right and those that become wrong are equally likely (binomial, p = 1/2).
* The interpretation bands quoted in reports (slight < 0.2 < fair < 0.4 < moderate < 0.6 <
  substantial < 0.8 < almost perfect): J. R. Landis and G. G. Koch, "The measurement of
  observer agreement for categorical data", Biometrics 33(1), 1977, pp. 159-174.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "Agreement",
    "agreement",
    "best_threshold",
    "cohen_kappa",
    "kappa_band",
    "kappa_interval",
    "mcnemar_p",
    "threshold_advice",
    "wilson_interval",
]


@dataclass(frozen=True)
class Agreement:
    """How a judge's pass/fail at one threshold agrees with the human labels.

    Attributes:
        threshold: the score threshold the judge's labels were taken at.
        n: items compared (both a score and a human label).
        true_pass: human pass, judge pass.
        false_pass: human fail, judge pass (the judge let a bad output through).
        false_fail: human pass, judge fail (the judge flagged a good output).
        true_fail: human fail, judge fail.
        accuracy: share of items where both agree, 0..1 (None when ``n`` is 0).
        kappa: Cohen's kappa, -1..1 (None when undefined: ``n`` is 0, or chance agreement is
            1 because both raters gave a single label to everything).
    """

    threshold: float
    n: int
    true_pass: int
    false_pass: int
    false_fail: int
    true_fail: int
    accuracy: float | None
    kappa: float | None

    def confusion(self) -> dict[str, dict[str, int]]:
        """The confusion matrix as ``{human label: {judge label: count}}``."""
        return {
            "pass": {"pass": self.true_pass, "fail": self.false_fail},
            "fail": {"pass": self.false_pass, "fail": self.true_fail},
        }


def judge_passes(score: float, threshold: float, higher_is_better: bool) -> bool:
    """Whether ``score`` passes ``threshold`` (inclusive), as ``tracescore`` labels scores."""
    return score >= threshold if higher_is_better else score <= threshold


def cohen_kappa(tp: int, fp: int, fn: int, tn: int) -> float | None:
    """Cohen's kappa of a 2x2 table (Cohen 1960).

    Args:
        tp: both pass. fp: judge pass, human fail. fn: judge fail, human pass. tn: both fail.

    Returns:
        ``(p_o - p_e) / (1 - p_e)``; None when the table is empty or ``p_e`` is 1.

    Example:
        >>> cohen_kappa(4, 1, 1, 4)   # p_o = 0.8, p_e = 0.5
        0.6
    """
    n = tp + fp + fn + tn
    if n == 0:
        return None
    observed = (tp + tn) / n
    human_pass, judge_pass = (tp + fn) / n, (tp + fp) / n
    expected = human_pass * judge_pass + (1 - human_pass) * (1 - judge_pass)
    if expected >= 1.0:
        return None
    return round((observed - expected) / (1 - expected), 12)


def agreement(
    pairs: Sequence[tuple[float, bool]], threshold: float, higher_is_better: bool = True
) -> Agreement:
    """The agreement of the judge's labels at ``threshold`` with the human labels.

    Args:
        pairs: ``(judge score, human says pass)`` per item.
        threshold: where the judge's pass starts (inclusive; ``<=`` when lower is better).
        higher_is_better: the scorer's direction.
    """
    tp = fp = fn = tn = 0
    for score, human_pass in pairs:
        passed = judge_passes(score, threshold, higher_is_better)
        if human_pass and passed:
            tp += 1
        elif human_pass:
            fn += 1
        elif passed:
            fp += 1
        else:
            tn += 1
    n = len(pairs)
    return Agreement(threshold, n, tp, fp, fn, tn,
                     (tp + tn) / n if n else None, cohen_kappa(tp, fp, fn, tn))


def best_threshold(
    pairs: Sequence[tuple[float, bool]], default: float, higher_is_better: bool = True
) -> Agreement | None:
    """The threshold that maximises accuracy on ``pairs``, and its agreement.

    The candidates are the distinct scores themselves (with an inclusive threshold, every
    other value gives the same labels as the nearest score on its passing side), ``default``,
    and one 0.01 past the best score, where every item fails. Ties go to the higher kappa,
    then to the candidate nearest ``default``, so a threshold moves only when it buys
    agreement. It is fitted on the same items it is measured on: on a few dozen items the
    gain is optimistic.

    Returns:
        The best ``Agreement``; None without pairs.

    Example:
        >>> best_threshold([(0.2, False), (0.6, True), (0.4, True)], 0.5).threshold
        0.4
    """
    if not pairs:
        return None
    candidates = sorted({score for score, _ in pairs} | {default})
    # "Fail everything" is a labelling too: a threshold 0.01 past the best score, far enough
    # to read as such in a report (a threshold a hair away prints as the score itself).
    candidates.append(candidates[-1] + 0.01 if higher_is_better else candidates[0] - 0.01)
    best: Agreement | None = None
    best_key: tuple[float, float, float] | None = None
    for threshold in candidates:
        result = agreement(pairs, threshold, higher_is_better)
        key = (result.accuracy or 0.0,
               result.kappa if result.kappa is not None else -2.0,
               -abs(threshold - default))
        if best_key is None or key > best_key:
            best, best_key = result, key
    return best


def kappa_band(kappa: float | None) -> str:
    """Landis and Koch's (1977) name for a kappa value.

    Example:
        >>> kappa_band(0.6)
        'moderate'
    """
    if kappa is None:
        return "undefined"
    if kappa < 0:
        return "poor"
    for bound, name in ((0.2, "slight"), (0.4, "fair"), (0.6, "moderate"),
                        (0.8, "substantial")):
        if kappa <= bound:
            return name
    return "almost perfect"


def wilson_interval(
    successes: int, n: int, z: float = 1.959963984540054
) -> tuple[float, float] | None:
    """The Wilson score interval of a proportion (Wilson 1927): 95% by default.

    Args:
        successes: items that agreed (or any count of successes).
        n: items compared.
        z: the standard normal quantile of the confidence level (1.96 for 95%).

    Returns:
        ``(low, high)`` in 0..1, or None when ``n`` is 0.

    Example:
        >>> tuple(round(x, 3) for x in wilson_interval(9, 10))
        (0.596, 0.982)
    """
    if n <= 0:
        return None
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def kappa_interval(
    tp: int, fp: int, fn: int, tn: int, *, level: float = 0.95, resamples: int = 2000,
    seed: int = 25,
) -> tuple[float, float] | None:
    """A percentile-bootstrap interval for Cohen's kappa of a 2x2 table.

    Items are resampled with replacement ``resamples`` times; resamples where kappa is
    undefined (one label only) are left out. Seeded: the same table gives the same interval.

    Args:
        tp: both pass. fp: judge pass, human fail. fn: judge fail, human pass. tn: both fail.
        level: the confidence level, 0..1. Default 0.95.
        resamples: bootstrap resamples. Default 2000.
        seed: the random generator's seed. Default 25.

    Returns:
        ``(low, high)``, or None when the table is empty or kappa is undefined in most
        resamples.
    """
    n = tp + fp + fn + tn
    if n == 0:
        return None
    cells = [0] * tp + [1] * fp + [2] * fn + [3] * tn
    rng = random.Random(seed)
    values = []
    for _ in range(resamples):
        counts = [0, 0, 0, 0]
        for _ in range(n):
            counts[cells[rng.randrange(n)]] += 1
        kappa = cohen_kappa(*counts)
        if kappa is not None:
            values.append(kappa)
    if len(values) < resamples / 2:
        return None
    values.sort()
    tail = (1 - level) / 2
    low = values[int(math.floor(tail * (len(values) - 1)))]
    high = values[int(math.ceil((1 - tail) * (len(values) - 1)))]
    return low, high


def mcnemar_p(gained: int, lost: int) -> float:
    """The exact two-sided McNemar p-value for ``gained`` items that one labelling gets right
    and the other wrong against ``lost`` the other way round (McNemar 1947).

    Example:
        >>> round(mcnemar_p(9, 1), 4)
        0.0215
    """
    n = gained + lost
    if n == 0:
        return 1.0
    k = min(gained, lost)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def threshold_advice(
    pairs: Sequence[tuple[float, bool]], current: float, higher_is_better: bool = True,
    alpha: float = 0.05,
) -> dict[str, object] | None:
    """Whether the threshold should move to the one that maximises agreement on ``pairs``.

    It should when the best threshold labels more items like the humans than ``current`` does
    and the exact McNemar test on the items the two label differently gives p < ``alpha``;
    otherwise the difference is within what chance gives on this many items.

    Returns:
        ``{"move", "current", "best", "gained", "lost", "p_value", "text"}``; None without
        pairs.
    """
    best = best_threshold(pairs, current, higher_is_better)
    if best is None:
        return None
    gained = lost = 0
    for score, human in pairs:
        now = judge_passes(score, current, higher_is_better) == human
        then = judge_passes(score, best.threshold, higher_is_better) == human
        gained += then and not now
        lost += now and not then
    p = mcnemar_p(gained, lost)
    move = gained > lost and p < alpha
    if best.threshold == current or gained == lost == 0:
        text = f"keep the threshold at {current:g}: no other threshold agrees better"
    elif move:
        text = (f"move the threshold from {current:g} to {best.threshold:g}: {gained} more "
                f"item(s) agree and {lost} fewer (exact McNemar p = {p:.3g})")
    else:
        text = (f"keep the threshold at {current:g}: {best.threshold:g} agrees on {gained} more "
                f"and {lost} fewer item(s) here, within chance (exact McNemar p = {p:.3g})")
    return {"move": move, "current": current, "best": best.threshold, "gained": gained,
            "lost": lost, "p_value": p, "text": text}
