"""Tone consistency: AFINN-165 with emoji (the lexicon of Mastra's scorer); reference or
sentence-stability mode.

Ratings used below (AFINN-165, integers): love 3, hate -3, good 3, great 3, nice 3, happy 3,
like 2, terrible -3, wonderful 4; emoji (Emoji Sentiment Ranking, floor(5 x (positive -
negative) / occurrences)): 😀 2. Words such as i, this, it, is, a, day, people, here, stars,
très, bien are not in the lexicon (0). A word after not, non or a negated auxiliary (don't,
can't, isn't, ...) has its rating flipped.
"""

from __future__ import annotations

from typing import Any

import pytest

from tracescore import ConfigurationError
from tracescore.scorers import create_tone_consistency_scorer
from tracescore.scorers.tone_consistency import (
    sentence_comparatives,
    sentiment_comparative,
    sentiment_of,
)
from tracescore.testing import runtime


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", (0.0, 0)),
        ("!!! ...", (0.0, 0)),
        # 3 / 3 tokens: integer ratings, as Mastra's.
        ("I love this", (1.0, 3)),
        # Case does not matter.
        ("I LOVE THIS", (1.0, 3)),
        # Negation flips "good": -3 / 4.
        ("This is not good.", (-0.75, 4)),
        # A curly apostrophe is an apostrophe: "don’t" negates "like": -2 / 3.
        ("don’t like it", (-2 / 3, 3)),
        # Digits are words without a rating: "3", "5", "stars" -> 0 / 3.
        ("3.5 stars", (0.0, 3)),
        # Accented words count as words: "très", "bien" -> 0 / 2.
        ("Très bien", (0.0, 2)),
        # Emoji are tokens with ratings, even touching a word: (3 + 2) / 4.
        ("I love it😀", (1.25, 4)),
        # An emoticon is punctuation, as in Mastra's tokenizer: only "great" counts.
        (":) great", (3.0, 1)),
        # A hyphenated word is one word ("well-being" is rated 2).
        ("well-being", (2.0, 1)),
    ],
)
def test_sentiment_comparative(text: str, expected: tuple[float, int]) -> None:
    comparative, words = sentiment_comparative(text)
    assert (pytest.approx(comparative), words) == (pytest.approx(expected[0]), expected[1])


def test_sentiment_of_counts_rated_tokens() -> None:
    assert sentiment_of("wonderful. terrible.") == (0.5, 2, 2)
    assert sentiment_of("素晴らしい。ひどい。")[2] == 0


def test_sentence_comparatives() -> None:
    # Sentences end at . ! ? or a line break; "3.5" does not end one; a last sentence without
    # end punctuation counts; a sentence without words ("...") is skipped.
    assert sentence_comparatives("Great work! 3.5 stars.\n- terrible ending ... I love it") == [
        pytest.approx(3 / 2),
        0.0,
        pytest.approx(-3 / 2),
        pytest.approx(3 / 3),
    ]
    assert sentence_comparatives("") == []


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        # One sentence: variance 0.
        ("I love this.", 1.0),
        # Same comparative in both sentences (3 / 3): variance 0.
        ("I love this! I LOVE that?", 1.0),
        # 3/3 = 1 and -3/3 = -1: mean 0, variance 1: 1 - 1 = 0.
        ("I love this. I hate this.", 0.0),
        # "Great!" (3) and "I like it." (2/3): mean 11/6, variance (7/6)^2 = 1.36, floored.
        ("Great! I like it.", 0.0),
        # "It is good." (1) and "It is nice!" (1): variance 0.
        ("It is good. It is nice!", 1.0),
    ],
)
def test_stability_mode(output: str, expected: float) -> None:
    result = create_tone_consistency_scorer().run(input="ignored", output=output)
    assert result.score == pytest.approx(expected)
    assert result.not_scorable is False


def test_stability_step_results_and_reason() -> None:
    result = create_tone_consistency_scorer().run(output="I love this. It is a good day.")
    step = result.preprocess_step_result
    assert step is not None and step["mode"] == "stability"
    assert step["sentence_comparatives"] == [pytest.approx(1.0), pytest.approx(0.6)]
    assert step["mean_comparative"] == pytest.approx(0.8)
    assert step["variance"] == pytest.approx(0.04)
    assert result.reason == (
        "Across 2 sentences, the sentiment per word averages 0.8 with a variance of 0.04."
    )
    assert (result.judge_calls, result.judge_model, result.cost) == (0, None, 0.0)
    # Heuristic scores are not rounded: 1 - 0.04 (0.96, up to float noise).
    assert result.score == pytest.approx(0.96)


@pytest.mark.parametrize(
    ("output", "reference", "expected"),
    [
        # "a nice day": 3 / 3 = 1; "happy people here": 3 / 3 = 1: equal.
        ("a nice day", "happy people here", 1.0),
        # "a nice day here": 3 / 4 = 0.75 against 1: 1 - 0.25.
        ("a nice day here", "happy people here", 0.75),
        # Negation: -3 / 4 against 3 / 3: difference 1.75, floored.
        ("This is not good.", "This is good.", 0.0),
        # Case and punctuation do not change the comparative: equal tones.
        ("GREAT!!!", "great", 1.0),
        # An emoji reference: 😀 is 2 / 1; "a nice day 😀" is 5 / 4: 1 - 0.75.
        ("a nice day 😀", "😀", 0.25),
    ],
)
def test_reference_mode(output: str, reference: str, expected: float) -> None:
    factory = create_tone_consistency_scorer(reference_tone=reference)
    assert factory.run(output=output).score == pytest.approx(expected)
    per_run = create_tone_consistency_scorer()
    assert per_run.run(output=output, reference_tone=reference).score == pytest.approx(expected)


def test_reference_step_results_and_reason() -> None:
    result = create_tone_consistency_scorer(reference_tone="happy people here").run(
        output="a nice day"
    )
    assert result.preprocess_step_result == {
        "mode": "reference",
        "output_comparative": pytest.approx(1.0),
        "reference_comparative": pytest.approx(1.0),
        "difference": pytest.approx(0.0),
    }
    assert result.reason == (
        "The output's sentiment per word is 1, the reference tone's 1: a difference of 0."
    )


def test_run_reference_wins_over_the_factory_and_blank_falls_back() -> None:
    scorer = create_tone_consistency_scorer(reference_tone="happy people here")
    # Run value "terrible": -3 against 1: floored to 0.
    assert scorer.run(output="a nice day", reference_tone="terrible").score == 0.0
    # A blank run value means "not given": the factory's reference applies (0.75).
    assert scorer.run(output="a nice day here", reference_tone="  ").score == pytest.approx(0.75)
    # No reference anywhere: stability mode.
    assert create_tone_consistency_scorer().run(output="a nice day", reference_tone="").score == 1


def test_the_input_is_not_the_reference() -> None:
    # A negative question does not pull the score of a steady, positive answer down.
    result = create_tone_consistency_scorer().run(
        input="I hate this terrible product.", output="I love this. I love that."
    )
    assert result.score == 1.0
    assert result.preprocess_step_result["mode"] == "stability"  # type: ignore[index]


@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        # An empty output without a reference: nothing to compare (the heuristics' rule).
        ({"output": ""}, "output is empty and there is no reference tone"),
        ({"output": None}, "output is empty and there is no reference tone"),
        # No word of the lexicon: "wonderful. terrible." in Japanese has no readable tone
        # (Mastra scores it 1, a steady tone of 0 per sentence).
        ({"output": "素晴らしい。ひどい。"}, "no word or emoji of the output is in the"),
        ({"output": "!!! 42."}, "no word or emoji of the output is in the"),
        ({"output": "It is good.", "reference_tone": "素晴らしい"},
         "no word or emoji of the reference tone"),
        ({"output": "fine", "reference_tone": 3}, "reference_tone must be a text"),
    ],
)
def test_not_scorable(kwargs: dict[str, Any], why: str) -> None:
    result = create_tone_consistency_scorer().run(**kwargs)
    assert result.score is None and result.not_scorable is True
    assert why in result.reason


def test_options_and_attributes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime(), "judge", None)
    assert create_tone_consistency_scorer().options == {"reference_tone": None}
    scorer = create_tone_consistency_scorer(reference_tone="calm")
    assert scorer.options == {"reference_tone": "calm"}
    assert (scorer.id, scorer.uses_judge, scorer.run_inputs) == ("tone-consistency", False, ())


@pytest.mark.parametrize("output", ["", None, "   ", [{"role": "assistant", "content": ""}]])
def test_an_empty_output_against_a_reference_tone_scores_0(output: Any) -> None:
    # README: a heuristic scorer scores an empty output 0 against a non-empty reference
    # (Mastra's reads it as a neutral text: 1 - |0 - reference|).
    result = create_tone_consistency_scorer(reference_tone="I love it!").run(output=output)
    assert result.score == 0.0 and result.not_scorable is False
    assert result.reason == "The output is empty: it has none of the reference's tone."


@pytest.mark.parametrize("reference_tone", ["", "   ", 3, ["calm"]])
def test_invalid_reference_fails_early(reference_tone: Any) -> None:
    with pytest.raises(ConfigurationError, match="reference_tone"):
        create_tone_consistency_scorer(reference_tone=reference_tone)
