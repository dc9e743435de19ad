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
* The advised threshold maximises balanced accuracy, the mean of the judge's agreement on the
  items humans passed and on those they failed (K. H. Brodersen, C. S. Ong, K. E. Stephan and
  J. M. Buhmann, "The balanced accuracy and its posterior distribution", ICPR 2010,
  pp. 3121-3124; equivalently Youden's J = 2 x balanced accuracy - 1: W. J. Youden, "Index
  for rating diagnostic tests", Cancer 3(1), 1950, pp. 32-35). Raw accuracy is fooled by
  class imbalance: with 36 human passes and 4 fails, passing everything scores 90%. Balanced
  accuracy gives any threshold that passes or fails everything exactly 0.5, whatever the
  shares. Such a threshold is never advised.
* Whether a threshold should move: an exact McNemar test (Q. McNemar, "Note on the sampling
  error of the difference between correlated proportions or percentages", Psychometrika 12(2),
  1947, pp. 153-157) on the items the two thresholds label differently: under "no better",
  each such item is as likely to become right as to become wrong (p = 1/2). Because the
  criterion is balanced accuracy, an item counts with weight 1/(human passes) or 1/(human
  fails) by its human label, and the p-value is the exact probability, over every equally
  likely assignment of "became right"/"became wrong" to those items, of a change in balanced
  accuracy at least as large as the one seen (with as many passes as fails it is McNemar's).
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
    "balanced_mcnemar_p",
    "best_threshold",
    "cohen_kappa",
    "kappa_band",
    "kappa_interval",
    "no_better_than_chance",
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
        balanced_accuracy: the mean of the share of human passes the judge passes and the
            share of human fails the judge fails, 0..1 (None when the humans gave one label
            only). 0.5 is chance; any threshold that passes or fails everything scores 0.5.
    """

    threshold: float
    n: int
    true_pass: int
    false_pass: int
    false_fail: int
    true_fail: int
    accuracy: float | None
    kappa: float | None
    balanced_accuracy: float | None = None

    @property
    def degenerate(self) -> bool:
        """True when the judge gives every item the same label at this threshold (passes
        everything or fails everything): a threshold that says nothing about the items."""
        judge_pass = self.true_pass + self.false_pass
        return self.n > 0 and judge_pass in (0, self.n)

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

    Examples:
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
    return round((observed - expected) / (1 - expected), 12) + 0.0  # never -0.0


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
    balanced = (None if tp + fn == 0 or fp + tn == 0
                else round((tp / (tp + fn) + tn / (fp + tn)) / 2, 12))
    return Agreement(threshold, n, tp, fp, fn, tn,
                     (tp + tn) / n if n else None, cohen_kappa(tp, fp, fn, tn), balanced)


def best_threshold(
    pairs: Sequence[tuple[float, bool]], default: float, higher_is_better: bool = True
) -> Agreement | None:
    """The threshold to advise: the one with the highest balanced accuracy on ``pairs`` among
    those that do not pass or fail everything, and its agreement.

    The candidates are the distinct scores themselves (with an inclusive threshold, every
    other value gives the same labels as the nearest score on its passing side) and
    ``default``. A candidate at which the judge gives every item the same label is left out
    (it would "agree" with the majority of humans by saying nothing), and so is one whose
    balanced accuracy is not above 0.5 (chance). Ties go to the higher kappa, then to the
    candidate nearest ``default``, so a threshold moves only when it buys agreement. It is
    fitted on the same items it is measured on: on a few dozen items the gain is optimistic.

    Returns:
        The best ``Agreement``; None without pairs, when the humans gave one label only, or
        when no threshold that separates the items beats chance.

    Examples:
        >>> best_threshold([(0.2, False), (0.6, True), (0.4, True)], 0.5).threshold
        0.4
    """
    if not pairs:
        return None
    best: Agreement | None = None
    best_key: tuple[float, float, float] | None = None
    for threshold in sorted({score for score, _ in pairs} | {default}):
        result = agreement(pairs, threshold, higher_is_better)
        if result.degenerate or result.balanced_accuracy is None \
                or result.balanced_accuracy <= 0.5:
            continue
        key = (result.balanced_accuracy,
               result.kappa if result.kappa is not None else -2.0,
               -abs(threshold - default))
        if best_key is None or key > best_key:
            best, best_key = result, key
    return best


def kappa_band(kappa: float | None) -> str:
    """Landis and Koch's (1977) name for a kappa value.

    Examples:
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

    Examples:
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

    Examples:
        >>> round(mcnemar_p(9, 1), 4)
        0.0215
    """
    n = gained + lost
    if n == 0:
        return 1.0
    k = min(gained, lost)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def balanced_mcnemar_p(gained_pass: int, lost_pass: int, gained_fail: int, lost_fail: int,
                       human_pass: int, human_fail: int) -> float:
    """The exact two-sided p-value that a change of threshold moved balanced accuracy by
    chance alone.

    Among the items the two thresholds label differently, ``gained_*`` became right and
    ``lost_*`` became wrong, counted by the human label (``*_pass``, ``*_fail``). Under "no
    better", each such item is as likely to be gained as lost; the change in balanced accuracy
    is ``((gained_pass - lost_pass) / human_pass + (gained_fail - lost_fail) / human_fail) / 2``.
    The p-value sums the binomial probabilities of every split at least as far from zero.
    With ``human_pass == human_fail`` it equals ``mcnemar_p`` of the totals.

    Args:
        gained_pass, lost_pass: human-pass items that became right / wrong.
        gained_fail, lost_fail: human-fail items that became right / wrong.
        human_pass, human_fail: items humans passed / failed (both > 0).

    Examples:
        >>> round(balanced_mcnemar_p(5, 0, 4, 1, 20, 20), 4) == round(mcnemar_p(9, 1), 4)
        True
    """
    if human_pass <= 0 or human_fail <= 0:
        return 1.0
    d_pass, d_fail = gained_pass + lost_pass, gained_fail + lost_fail
    # The statistic times human_pass * human_fail, in integers (no ties lost to rounding).
    observed = abs((gained_pass - lost_pass) * human_fail + (gained_fail - lost_fail) * human_pass)
    if observed == 0:
        return 1.0
    pmf_fail = [math.comb(d_fail, k) / 2 ** d_fail for k in range(d_fail + 1)]
    upper = [0.0] * (d_fail + 2)  # upper[k] = P(G_fail >= k)
    for k in range(d_fail, -1, -1):
        upper[k] = upper[k + 1] + pmf_fail[k]
    total = 0.0
    for g in range(d_pass + 1):
        a = (2 * g - d_pass) * human_fail
        # a + (2 k - d_fail) * human_pass >= observed  <=>  k >= lo
        lo = -((-(observed - a + d_fail * human_pass)) // (2 * human_pass))
        # a + (2 k - d_fail) * human_pass <= -observed  <=>  k <= hi
        hi = (-observed - a + d_fail * human_pass) // (2 * human_pass)
        p = upper[max(0, lo)] if lo <= d_fail else 0.0
        if hi >= 0:
            p += 1.0 - upper[min(d_fail, hi) + 1]
        total += math.comb(d_pass, g) / 2 ** d_pass * p
    return min(1.0, total)


def no_better_than_chance(a: Agreement, interval: tuple[float, float] | None) -> bool:
    """Whether the judge's agreement at one threshold is no better than chance: Cohen's kappa
    is undefined or at most 0, or the lower end of its 95% bootstrap interval
    (``kappa_interval``) is at most 0 (or that interval is undefined).

    Args:
        a: the agreement at the threshold.
        interval: ``kappa_interval`` of the same table.
    """
    if a.kappa is None or a.kappa <= 0:
        return True
    return interval is None or interval[0] <= 0


def threshold_advice(
    pairs: Sequence[tuple[float, bool]], current: float, higher_is_better: bool = True,
    alpha: float = 0.05,
) -> dict[str, object] | None:
    """Whether the threshold should move to the advised one (``best_threshold``: the highest
    balanced accuracy among thresholds that neither pass nor fail everything).

    It should when the advised threshold has a higher balanced accuracy than ``current`` and
    the exact test of that difference (``balanced_mcnemar_p`` on the items the two label
    differently) gives p < ``alpha``; otherwise the difference is within what chance gives on
    this many items. No threshold is advised when the humans gave one label only, or when no
    threshold that separates the items beats chance; the text says so.

    Returns:
        ``{"move", "criterion", "current", "best", "current_balanced_accuracy",
        "best_balanced_accuracy", "current_degenerate", "gained", "lost", "p_value",
        "text"}`` (``best`` and its balanced accuracy None when nothing is advised); None
        without pairs.
    """
    if not pairs:
        return None
    now = agreement(pairs, current, higher_is_better)
    best = best_threshold(pairs, current, higher_is_better)
    human_pass = sum(1 for _, human in pairs if human)
    human_fail = len(pairs) - human_pass
    out: dict[str, object] = {
        "move": False, "criterion": "balanced_accuracy", "current": current,
        "best": None if best is None else best.threshold,
        "current_balanced_accuracy": now.balanced_accuracy,
        "best_balanced_accuracy": None if best is None else best.balanced_accuracy,
        "current_degenerate": now.degenerate, "gained": 0, "lost": 0, "p_value": None,
    }
    if human_pass == 0 or human_fail == 0:
        word = "pass" if human_fail == 0 else "fail"
        out["text"] = (f"no threshold advised: all {len(pairs)} human labels are {word}, so "
                       "no threshold can be told apart from one that says "
                       f"{word} to everything; label some {'fail' if word == 'pass' else 'pass'}"
                       "ing examples too")
        return out
    if best is None:
        out["text"] = (f"no threshold advised: every threshold that does not pass or fail all "
                       f"{len(pairs)} items agrees with the humans no better than chance "
                       "(balanced accuracy <= 0.5); this judge does not separate these labels")
        return out
    gained_pass = lost_pass = gained_fail = lost_fail = 0
    for score, human in pairs:
        was = judge_passes(score, current, higher_is_better) == human
        will = judge_passes(score, best.threshold, higher_is_better) == human
        if will and not was:
            gained_pass += human
            gained_fail += not human
        elif was and not will:
            lost_pass += human
            lost_fail += not human
    gained, lost = gained_pass + gained_fail, lost_pass + lost_fail
    p = balanced_mcnemar_p(gained_pass, lost_pass, gained_fail, lost_fail, human_pass,
                           human_fail)
    better = (best.balanced_accuracy or 0.0) > (now.balanced_accuracy or 0.0)
    move = best.threshold != current and better and p < alpha
    out.update(gained=gained, lost=lost, p_value=p, move=move)
    shift = (f"balanced accuracy {_pct(now.balanced_accuracy)} -> "
             f"{_pct(best.balanced_accuracy)}")
    if best.threshold == current or not better:
        out["text"] = (f"keep the threshold at {current:g}: no other threshold agrees better "
                       "(by balanced accuracy)")
    elif move:
        out["text"] = (f"move the threshold from {current:g} to {best.threshold:g}: {shift}, "
                       f"{gained} item(s) more agree and {lost} fewer (exact test p = {p:.3g})")
    else:
        out["text"] = (f"keep the threshold at {current:g}: {best.threshold:g} would change "
                       f"{shift} ({gained} item(s) more agree and {lost} fewer), within chance "
                       f"on this many items (exact test p = {p:.3g})")
    return out


def _pct(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.1%}"
