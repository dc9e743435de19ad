"""Textual difference: 2 * LCS / (len(a) + len(b)) over characters, no judge."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tracescore.scorers import create_textual_difference_scorer
from tracescore.scorers.textual_difference import lcs_similarity
from tracescore.testing import runtime


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        # LCS "ittn" (k/s, e/i and the final g differ): 2 * 4 / (6 + 7).
        ("kitten", "sitting", 8 / 13),
        # A true LCS, not difflib's matching blocks: "ABCBDAB" / "BDCABA" has LCS 4 ("BCBA"),
        # 2 * 4 / 13.
        ("ABCBDAB", "BDCABA", 8 / 13),
        # Case counts: no common character.
        ("ABC", "abc", 0.0),
        # Punctuation counts: LCS "Hello world" (11), 2 * 11 / (13 + 11).
        ("Hello, world!", "Hello world", 22 / 24),
        # Digits: reversed "12345" keeps one character in order, 2 * 1 / 10.
        ("12345", "54321", 0.2),
        # Code points: the emoji is one character; LCS "ab", 2 * 2 / (3 + 2).
        ("a\U0001f600b", "ab", 0.8),
        # Accented letters: "é" (precomposed) differs from "e"; LCS "caf", 2 * 3 / 8.
        ("café", "cafe", 0.75),
        # Both empty: identical, 1; one empty: nothing shared, 0.
        ("", "", 1.0),
        ("", "abc", 0.0),
        ("same text", "same text", 1.0),
    ],
)
def test_lcs_similarity(first: str, second: str, expected: float) -> None:
    assert lcs_similarity(first, second) == pytest.approx(expected)
    assert lcs_similarity(second, first) == pytest.approx(expected)


def test_scores_against_the_ground_truth() -> None:
    result = create_textual_difference_scorer().run(
        input="unused question", output="colour", ground_truth="color"
    )
    # LCS "color" (5): 2 * 5 / (6 + 5); not rounded.
    assert result.score == 10 / 11
    assert result.preprocess_step_result == {
        "lcs_length": 5,
        "output_length": 6,
        "reference_length": 5,
        "length_difference": 1 / 6,
    }
    assert result.reason == (
        "The output (6 characters) and the ground truth (5 characters) share a common "
        "subsequence of 5 characters: similarity 0.9091 (1 means identical)."
    )
    assert (result.judge_calls, result.judge_model, result.cost) == (0, None, 0.0)


def test_falls_back_to_the_input() -> None:
    result = create_textual_difference_scorer().run(
        input=[{"role": "user", "content": "Hello, world!"}],
        output=[{"role": "assistant", "content": "Hello world"}],
    )
    assert result.score == 22 / 24
    assert "the input (13 characters)" in result.reason


def test_unicode_normalisation() -> None:
    # "café" precomposed (4 code points) against "cafe" + U+0301 (5 code points): equal after
    # NFC, 1. Without it the LCS would be "caf": 2 * 3 / 9.
    result = create_textual_difference_scorer().run(output="café", ground_truth="cafe\u0301")
    assert result.score == 1.0


@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        ({"output": "text", "ground_truth": ""}, "ground truth is empty"),
        ({"output": "", "ground_truth": ""}, "ground truth is empty"),
        ({"output": "text", "ground_truth": "  "}, "ground truth is empty"),
        ({"output": "text"}, "input is empty"),
    ],
)
def test_not_scorable(kwargs: dict[str, Any], why: str) -> None:
    result = create_textual_difference_scorer().run(**kwargs)
    assert result.score is None and result.not_scorable is True
    assert why in result.reason


@pytest.mark.parametrize(
    "kwargs",
    [
        {"output": "", "ground_truth": "Paris"},
        {"output": None, "ground_truth": "Paris"},
        {"output": "", "input": "What is the capital of France?"},
    ],
)
def test_empty_output_against_a_reference_scores_0(kwargs: dict[str, Any]) -> None:
    # SCORERS.md: an empty output against a non-empty reference is a real failure;
    # 2 * 0 / (0 + len(reference)) = 0.
    result = create_textual_difference_scorer().run(**kwargs)

    assert result.score == 0.0 and result.not_scorable is False
    assert result.preprocess_step_result is not None
    assert result.preprocess_step_result["output_length"] == 0
    assert result.preprocess_step_result["length_difference"] == 1.0
    assert result.reason.startswith("The output is empty: ")


def test_scorer_attributes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime(), "judge", None)
    scorer = create_textual_difference_scorer()
    assert (scorer.id, scorer.uses_judge, scorer.higher_is_better) == (
        "textual-difference",
        False,
        True,
    )
    assert scorer.options == {}
    assert scorer.run(output="abc", ground_truth="abc").score == 1.0


def test_long_texts() -> None:
    # Two 20,000-character texts differing in their last character: LCS 19,999.
    first = "abcdefghij" * 2_000
    second = first[:-1] + "x"
    result = create_textual_difference_scorer().run(output=first, ground_truth=second)
    assert result.score == pytest.approx(2 * 19_999 / 40_000)


def _lcs_by_table(first: str, second: str) -> int:
    # The textbook dynamic programme, to check the bit-parallel one against.
    previous = [0] * (len(second) + 1)
    for char in first:
        row = [0]
        for j, other in enumerate(second):
            row.append(previous[j] + 1 if char == other else max(previous[j + 1], row[j]))
        previous = row
    return previous[-1]


def test_lcs_similarity_agrees_with_the_dynamic_programme() -> None:
    # Small alphabets make many ties and repeats; a combining accent, an emoji and shared
    # prefixes and suffixes (which the computation strips first) are among them.
    rng = random.Random(35)
    alphabets = ["ab", "abc ", "aé\u0301e\U0001f600", "the cat sat on a mat"]
    for _ in range(2_000):
        alphabet = rng.choice(alphabets)
        first = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        second = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        if rng.random() < 0.3:
            second = first[: rng.randint(0, len(first))] + second + first[rng.randint(0, 40):]
        lcs = _lcs_by_table(first, second)
        expected = 1.0 if not first and not second else 2 * lcs / (len(first) + len(second))
        assert lcs_similarity(first, second) == expected, (first, second)
        assert lcs_similarity(second, first) == expected, (first, second)
