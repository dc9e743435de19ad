"""Keyword coverage: share of the input's keywords found among the output's, no judge."""

from __future__ import annotations

from typing import Any

import pytest

from tracescore.scorers import create_keyword_coverage_scorer
from tracescore.scorers.keyword_coverage import STOP_WORDS, keywords
from tracescore.testing import runtime


@pytest.mark.parametrize(
    ("question", "answer", "expected"),
    [
        # Case and punctuation: input keywords [photosynthesis] ("what", "is" are stop
        # words, "?" is dropped); output [photosynthesis, explained]. 1 / 1.
        ("What is Photosynthesis?", "PHOTOSYNTHESIS, explained.", 1.0),
        # Hyphenated words stay whole: input [compare, state-of-the-art, models]; output
        # [state, art, models] ("of", "the", "in" are stop words). Only "models". 1 / 3.
        ("Compare state-of-the-art models", "The state of the art in models", 1 / 3),
        # Digits-only tokens are not keywords: input [top, tips] (10, 2024 dropped, "for" a
        # stop word); output [tips, top] (5 dropped). 2 / 2.
        ("Top 10 tips for 2024", "tips: top 5", 1.0),
        # Accents are kept: input [café, résumé]; output [cafe, résumé]. 1 / 2.
        ("Café résumé", "cafe RÉSUMÉ", 0.5),
        # Curly apostrophes: "Don’t" is the stop word "don't"; "students’" loses its edge
        # apostrophe. Input [forget, students, exams]; output [students, forget, exams]. 3 / 3.
        ("Don’t forget the students’ exams", "students forget exams", 1.0),
        # Duplicates count once: input [apple, banana]; output [apple]. 1 / 2.
        ("apple apple banana", "apple", 0.5),
        # A decimal splits into digit tokens, a possessive 's goes: input [model, version];
        # output [version, model]. 2 / 2.
        ("Model's version 3.5", "version model", 1.0),
        # Only stop words in the input: no keywords, score 1 (SCORERS.md).
        ("Is it the one?", "Paris", 1.0),
    ],
)
def test_hand_derived_scores(question: str, answer: str, expected: float) -> None:
    result = create_keyword_coverage_scorer().run(input=question, output=answer)
    assert result.score == pytest.approx(expected)
    assert result.not_scorable is False


def test_step_results_and_reason() -> None:
    result = create_keyword_coverage_scorer().run(
        input="Compare state-of-the-art models", output="The state of the art in models"
    )
    assert result.preprocess_step_result == {
        "input_keywords": ["compare", "state-of-the-art", "models"],
        "output_keywords": ["state", "art", "models"],
    }
    assert result.analyze_step_result == {
        "matched_keywords": ["models"],
        "missing_keywords": ["compare", "state-of-the-art"],
    }
    assert result.score == 1 / 3  # not rounded
    assert result.reason == (
        "1 of 3 input keywords found in the output; missing: compare, state-of-the-art."
    )
    assert (result.judge_calls, result.judge_model, result.cost) == (0, None, 0.0)


def test_reason_without_input_keywords() -> None:
    result = create_keyword_coverage_scorer().run(input="Is it 42?", output="Yes.")
    assert result.score == 1.0
    assert result.reason == "The input has no keywords (only stop words, numbers or punctuation)."


def test_long_missing_lists_are_shortened() -> None:
    words = " ".join(f"term{i}" for i in range(13))
    result = create_keyword_coverage_scorer().run(input=words, output="other")
    assert result.reason.endswith("term9 and 3 more.")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", []),
        ("   \n\t", []),
        ("The, of; and!", []),
        # Punctuation other than an inner hyphen or apostrophe separates tokens.
        ("and/or input/output", ["input", "output"]),
        ("end.Start", ["end", "start"]),
        # En and em dashes separate; U+2010 HYPHEN joins like "-".
        ("fast—cheap – good", ["fast", "cheap", "good"]),
        ("well\u2010known well-known", ["well-known"]),
        # Edge hyphens and apostrophes go; runs of hyphens become one.
        ("-x- 'quoted' well--known", ["x", "quoted", "well-known"]),
        ("COVID-19 2019-2020 1,000 3.14", ["covid-19", "2019-2020"]),
        # Symbols are not punctuation: "$5" stays a token.
        ("$5 fee", ["$5", "fee"]),
        # NFC: a decomposed é equals the precomposed one.
        ("cafe\u0301 café", ["café"]),
        ("rock'n'roll", ["rock'n'roll"]),
    ],
)
def test_keywords(text: str, expected: list[str]) -> None:
    assert keywords(text) == expected


def test_stop_words_are_function_words_only() -> None:
    for word in ("the", "and", "of", "is", "don't", "should", "they're"):
        assert word in STOP_WORDS
    # Content words that larger stop-word lists drop must stay keywords.
    for word in ("computer", "research", "system", "information", "world", "new", "year"):
        assert word not in STOP_WORDS
    assert all(w == w.lower() for w in STOP_WORDS)


@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        ({"input": "", "output": "Plants."}, "input has no text"),
        ({"input": "", "output": ""}, "input has no text"),
        ({"input": [{"role": "system", "content": "x"}], "output": "Plants."}, "no user message"),
    ],
)
def test_not_scorable(kwargs: dict[str, Any], why: str) -> None:
    result = create_keyword_coverage_scorer().run(**kwargs)
    assert result.score is None and result.not_scorable is True
    assert why in result.reason


@pytest.mark.parametrize("output", ["", None, "   "])
def test_empty_output_scores_0(output: Any) -> None:
    # SCORERS.md: an empty output against a non-empty reference is a real failure.
    result = create_keyword_coverage_scorer().run(input="Explain photosynthesis", output=output)

    assert result.score == 0.0 and result.not_scorable is False
    assert result.analyze_step_result == {
        "matched_keywords": [],
        "missing_keywords": ["explain", "photosynthesis"],
    }
    assert result.reason.startswith("The output is empty: 0 of 2 input keywords found")


def test_scorer_attributes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime(), "judge", None)
    scorer = create_keyword_coverage_scorer()
    assert (scorer.id, scorer.uses_judge, scorer.uses_context) == ("keyword-coverage", False, False)
    assert scorer.options == {}
    result = scorer.run(
        input={"input_messages": [{"role": "user", "content": "Paris weather"}]},
        output={"text": "The weather in Paris is mild."},
    )
    assert result.score == 1.0
