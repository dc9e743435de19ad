"""Content similarity: Sørensen–Dice on character bigrams, no judge."""

from __future__ import annotations

from typing import Any

import pytest

from tracescore import ConfigurationError
from tracescore.scorers import create_content_similarity_scorer
from tracescore.scorers.content_similarity import dice_coefficient
from tracescore.testing import runtime


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        ("night", "nacht", 0.25),  # ni ig gh ht / na ac ch ht: 1 shared of 4 + 4
        ("abcd", "abce", 2 / 3),  # ab bc shared of 3 + 3
        ("aaaa", "aa", 2 * 1 / (3 + 1)),  # multiplicity: aa x3 vs aa x1
        ("same", "same", 1.0),
        ("a", "a", 1.0),
        ("a", "ab", 0.0),
        ("", "", 1.0),
        ("ab", "", 0.0),
    ],
)
def test_dice_coefficient(first: str, second: str, expected: float) -> None:
    assert dice_coefficient(first, second) == pytest.approx(expected)
    assert dice_coefficient(second, first) == pytest.approx(expected)


def test_defaults_ignore_case_and_whitespace() -> None:
    scorer = create_content_similarity_scorer()
    result = scorer.run(output="The Quick\tbrown  fox", ground_truth="the quick brown fox")
    assert result.score == 1.0
    assert result.not_scorable is False
    assert "Sørensen–Dice" in result.reason
    assert (result.judge_calls, result.judge_model, result.cost) == (0, None, 0.0)


def test_scores_are_not_rounded() -> None:
    result = create_content_similarity_scorer().run(output="abcd", ground_truth="abce")
    assert result.score == 2 / 3


def test_case_and_whitespace_options() -> None:
    strict = create_content_similarity_scorer(ignore_case=False, ignore_whitespace=False)
    # "Ab" vs "ab": no shared bigram when case counts.
    assert strict.run(output="Ab", ground_truth="ab").score == 0.0
    # "a b" has bigrams "a ", " b"; "ab" has "ab": nothing shared when whitespace counts.
    assert strict.run(output="a b", ground_truth="ab").score == 0.0
    assert create_content_similarity_scorer().run(output="A b", ground_truth="ab").score == 1.0
    assert strict.options == {"ignore_case": False, "ignore_whitespace": False}
    assert create_content_similarity_scorer(ignore_case=False).options == {
        "ignore_case": False,
        "ignore_whitespace": True,
    }


def test_falls_back_to_the_input_without_ground_truth() -> None:
    scorer = create_content_similarity_scorer()
    result = scorer.run(
        input=[{"role": "user", "content": "Paris is the capital"}],
        output=[{"role": "assistant", "content": "paris is the capital"}],
    )
    assert result.score == 1.0
    assert "input" in result.reason


@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        ({"output": "text", "ground_truth": ""}, "ground truth is empty"),
        ({"output": "text"}, "input is empty"),
        ({"output": "", "ground_truth": ""}, "ground truth is empty"),
        ({"output": None}, "input is empty"),
    ],
)
def test_not_scorable(kwargs: dict[str, Any], why: str) -> None:
    result = create_content_similarity_scorer().run(**kwargs)
    assert result.score is None and result.not_scorable is True
    assert why in result.reason


@pytest.mark.parametrize(
    "kwargs",
    [
        {"output": "", "ground_truth": "Paris"},
        {"output": None, "ground_truth": "Paris"},
        {"output": " \n", "ground_truth": "Paris"},
        {"output": "", "input": "What is the capital of France?"},
    ],
)
def test_empty_output_against_a_reference_scores_0(kwargs: dict[str, Any]) -> None:
    # SCORERS.md: an empty output against a non-empty reference is a real failure.
    result = create_content_similarity_scorer().run(**kwargs)

    assert result.score == 0.0 and result.not_scorable is False
    assert result.reason.startswith("The output is empty: ")


def test_needs_no_judge(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime(), "judge", None)
    scorer = create_content_similarity_scorer()
    assert (scorer.id, scorer.uses_judge, scorer.uses_context) == (
        "content-similarity",
        False,
        False,
    )
    assert scorer.run(output="hello", ground_truth="hello").score == 1.0


@pytest.mark.parametrize("kwargs", [{"ignore_case": 1}, {"ignore_whitespace": "no"}])
def test_invalid_options_fail_early(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        create_content_similarity_scorer(**kwargs)
