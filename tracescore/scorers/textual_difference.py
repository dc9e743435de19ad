"""Textual difference: character-level similarity by longest common subsequence. No judge.

Semantics: ``2 * LCS / (len(a) + len(b))``; the Mastra evals' textual
difference scorer uses a ``difflib``-style matching-blocks ratio instead, which is not a true
LCS and depends on junk heuristics. Code is tracescore's own.

The LCS length is computed bit-parallel (Allison and Dix 1986, "A bit-string longest-common-
subsequence algorithm", in Hyyrö's 2004 formulation): one Python integer holds a row of the
dynamic programme, so a pair of texts costs one integer addition, subtraction and two bitwise
operations per character of the shorter text, each over ``len(longer) / 30`` machine words.
On two different 10,000-character texts this takes ~13 ms of CPU; a common prefix and suffix
are stripped first, so near-identical texts cost little. No compiled dependency is needed.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from tracescore.scorers._base import NotScorable, Scorer, ScorerRun

__all__ = ["create_textual_difference_scorer", "lcs_similarity"]

SCORER_ID = "textual-difference"


def _lcs_length(first: str, second: str) -> int:
    """The length of the longest common subsequence of two strings (characters in order)."""
    # A common prefix and suffix are part of every longest common subsequence.
    start, end = 0, min(len(first), len(second))
    while start < end and first[start] == second[start]:
        start += 1
    tail = 0
    while tail < end - start and first[-1 - tail] == second[-1 - tail]:
        tail += 1
    same = start + tail
    first, second = first[start : len(first) - tail], second[start : len(second) - tail]
    if len(second) > len(first):
        first, second = second, first
    if not second:
        return same
    # Bit i of masks[c] is set where first[i] == c.
    masks: dict[str, int] = {}
    for i, char in enumerate(first):
        masks[char] = masks.get(char, 0) | (1 << i)
    # row: bit i is 0 where the LCS of first[: i + 1] and the characters seen so far grew.
    full = (1 << len(first)) - 1
    row = full
    for char in second:
        matches = masks.get(char)
        if matches:
            common = row & matches
            row = ((row + common) | (row - common)) & full
    return same + len(first) - row.bit_count()


def lcs_similarity(first: str, second: str) -> float:
    """``2 * LCS(first, second) / (len(first) + len(second))`` over characters.

    ``LCS`` is the length of the longest common subsequence (characters in the same order, not
    necessarily adjacent). Two empty strings are identical: 1. Characters are Unicode code
    points; no normalisation happens here.

    Args:
        first: a string.
        second: a string.

    Returns:
        A float in [0, 1]: 1 for equal strings, 0 when no character is shared.

    Examples:
        >>> lcs_similarity("kitten", "sitting")  # LCS "ittn": 2 * 4 / 13
        0.6153846153846154
    """
    total = len(first) + len(second)
    if total == 0:
        return 1.0
    return 2 * _lcs_length(first, second) / total


def create_textual_difference_scorer() -> Scorer:
    """Score how close the output's text is to a reference text, character by character.

    The reference is ``ground_truth`` when given, else the judged question (the first user
    message), as for ``content-similarity``; Mastra's scorer always compares with the input.
    Both texts are put in Unicode NFC form (so a precomposed and a decomposed ``é`` are the same
    character); case, whitespace and punctuation count. Not rounded; no judge.

    Formula: ``2 * LCS(output, reference) / (len(output) + len(reference))`` with
    a true longest common subsequence (``lcs_similarity``). 1 means identical text; despite the
    scorer's name, higher is more similar.

    ``preprocess_step_result``: ``{"lcs_length", "output_length", "reference_length",
    "length_difference"}`` with the lengths in characters and ``length_difference`` =
    ``|output_length - reference_length| / max(output_length, reference_length)``.

    An empty output against a reference scores 0: no character is shared (a
    missing answer is a real failure). Not scorable: no reference text (no ground truth and no
    input, or an empty one), since there is nothing to compare with.

    Returns:
        A ``Scorer`` with id ``textual-difference``.

    Examples:
        >>> scorer = create_textual_difference_scorer()
        >>> scorer.run(output="colour", ground_truth="color").score  # LCS 5: 10 / 11
        0.9090909090909091
    """
    def reference(run: ScorerRun) -> tuple[str, str]:
        if run.ground_truth is not None:
            return "ground truth", run.ground_truth_text
        return "input", run.input_text

    def preprocess(run: ScorerRun) -> dict[str, Any]:
        label, text = reference(run)
        if not text.strip():
            raise NotScorable(f"there is no reference text to compare with (the {label} is empty)")
        output = unicodedata.normalize("NFC", run.output_text)
        ref = unicodedata.normalize("NFC", text)
        longest = max(len(output), len(ref))
        return {
            "lcs_length": _lcs_length(output, ref),
            "output_length": len(output),
            "reference_length": len(ref),
            "length_difference": abs(len(output) - len(ref)) / longest,
        }

    def score(run: ScorerRun) -> float:
        assert run.preprocess_result is not None
        result = run.preprocess_result
        lengths = result["output_length"] + result["reference_length"]
        return 2 * int(result["lcs_length"]) / int(lengths)

    def reason(run: ScorerRun) -> str:
        assert run.preprocess_result is not None
        result = run.preprocess_result
        label, _ = reference(run)
        empty = "The output is empty: " if not result["output_length"] else ""
        return (
            f"{empty}The output ({result['output_length']} characters) and the {label} "
            f"({result['reference_length']} characters) share a common subsequence of "
            f"{result['lcs_length']} characters: similarity {run.score:.4g} (1 means identical)."
        )

    return Scorer(
        id=SCORER_ID,
        description="Character-level LCS similarity of the output to a reference (1 = identical).",
        # Not "output": an empty output is scored (0); only a missing reference is not scorable.
        requires=(),
        preprocess=preprocess,
        generate_score=score,
        generate_reason=reason,
        round_score=False,
        options={},
    )
