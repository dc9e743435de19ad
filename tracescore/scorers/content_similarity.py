"""Content similarity: Sørensen–Dice coefficient of character bigrams. Heuristic, no judge."""

from __future__ import annotations

from collections import Counter
from operator import add

from tracescore._core.errors import ConfigurationError
from tracescore.scorers._base import NotScorable, Scorer, ScorerRun

__all__ = ["create_content_similarity_scorer", "dice_coefficient"]

SCORER_ID = "content-similarity"


def dice_coefficient(first: str, second: str) -> float:
    """Sørensen–Dice coefficient of the two strings' character bigrams, with multiplicity.

    Formula (the Mastra evals' content similarity relies on the ``string-similarity``
    package's ``compareTwoStrings``, which computes the same):
    ``2 * |bigrams(a) ∩ bigrams(b)| / (|bigrams(a)| + |bigrams(b)|)`` where the intersection of
    the bigram multisets counts each bigram ``min(count_a, count_b)`` times. Equal strings give
    1; otherwise a string shorter than 2 characters gives 0. Characters are Unicode code
    points (JavaScript counts UTF-16 code units; they differ only outside the BMP).

    Args:
        first: a string, already normalised.
        second: a string, already normalised.

    Returns:
        A float in [0, 1].

    Examples:
        >>> dice_coefficient("night", "nacht")
        0.25
    """
    if first == second:
        return 1.0
    if len(first) < 2 or len(second) < 2:
        return 0.0
    # Bigrams as first[i] + first[i + 1], counted in C.
    a = Counter(map(add, first, first[1:]))
    b = Counter(map(add, second, second[1:]))
    if len(a) > len(b):
        a, b = b, a
    shared = sum(min(count, b[gram]) for gram, count in a.items() if gram in b)
    return 2 * shared / (len(first) - 1 + len(second) - 1)


def create_content_similarity_scorer(
    *,
    ignore_case: bool = True,
    ignore_whitespace: bool = True,
) -> Scorer:
    """Score how similar the output's text is to a reference text, character by character.

    The reference is ``ground_truth`` when given, else the input (the first user message).
    Both texts are lowercased (``ignore_case``) and stripped of all whitespace
    (``ignore_whitespace``), then compared with ``dice_coefficient``. The score is not rounded
    and no judge is called.

    With ``ignore_whitespace=False`` whitespace characters take part in the bigrams (the Mastra
    scorer's underlying library drops whitespace whatever the option says).

    An empty output against a reference scores 0 (a missing answer is a real
    failure). Not scorable: no reference text (no ground truth and no input, or an empty one),
    since there is nothing to compare with.

    Args:
        ignore_case: compare case-insensitively. Default ``True``.
        ignore_whitespace: remove all whitespace before comparing. Default ``True``.

    Returns:
        A ``Scorer`` with id ``content-similarity``.

    Raises:
        ConfigurationError: an option is not a bool.

    Examples:
        >>> scorer = create_content_similarity_scorer()
        >>> scorer.run(output="The quick brown fox", ground_truth="the quick  brown fox").score
        1.0
    """
    for name, value in (("ignore_case", ignore_case), ("ignore_whitespace", ignore_whitespace)):
        if not isinstance(value, bool):
            raise ConfigurationError(f"{name} must be True or False, got {value!r}")

    def normalise(text: str) -> str:
        if ignore_case:
            text = text.lower()
        if ignore_whitespace:
            text = "".join(text.split())
        return text

    def reference(run: ScorerRun) -> tuple[str, str]:
        if run.ground_truth is not None:
            return "ground truth", run.ground_truth_text
        return "input", run.input_text

    def score(run: ScorerRun) -> float:
        label, text = reference(run)
        if not text.strip():
            raise NotScorable(f"there is no reference text to compare with (the {label} is empty)")
        return dice_coefficient(normalise(run.output_text), normalise(text))

    def reason(run: ScorerRun) -> str:
        label, _ = reference(run)
        if not normalise(run.output_text):
            return f"The output is empty: nothing of the {label} is reproduced (similarity 0)."
        return (
            f"The output's character bigrams overlap with the {label}'s at a Sørensen–Dice "
            f"coefficient of {run.score:.4g} (1 means identical text"
            f"{', ignoring case' if ignore_case else ''}"
            f"{' and whitespace' if ignore_whitespace else ''})."
        )

    return Scorer(
        id=SCORER_ID,
        description="Character-bigram (Sørensen–Dice) similarity of the output to a reference.",
        # Not "output": an empty output is scored (0); only a missing reference is not scorable.
        requires=(),
        generate_score=score,
        generate_reason=reason,
        round_score=False,
        options={"ignore_case": ignore_case, "ignore_whitespace": ignore_whitespace},
    )
