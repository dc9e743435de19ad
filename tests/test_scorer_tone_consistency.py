"""Tone consistency: VADER's lexicon used AFINN-style; reference or sentence-stability mode.

Valences used below, from vaderSentiment's vader_lexicon.txt: love 3.2, hate -2.7, good 1.9,
great 3.1, nice 1.8, happy 2.7, like 1.5, terrible -2.1; words such as i, this, it, is, a,
day, people, here, stars, très, bien are not in the lexicon (0). Negation words (not, don't,
never, ...) flip the next word's valence.
"""

from __future__ import annotations

from typing import Any

import pytest

from tracescore import _state
from tracescore._errors import ConfigurationError
from tracescore.scorers import create_tone_consistency_scorer
from tracescore.scorers.tone_consistency import sentence_comparatives, sentiment_comparative


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", (0.0, 0)),
        ("!!! ... 🙂", (0.0, 0)),
        # 3.2 / 3 words.
        ("I love this", (3.2 / 3, 3)),
        # Case does not matter.
        ("I LOVE THIS", (3.2 / 3, 3)),
        # Negation flips "good": -1.9 / 4.
        ("This is not good.", (-1.9 / 4, 4)),
        # A curly apostrophe is an apostrophe: "don’t" negates "like": -1.5 / 3.
        ("don’t like it", (-1.5 / 3, 3)),
        # Digits are words without valence: "3", "5", "stars" -> 0 / 3.
        ("3.5 stars", (0.0, 3)),
        # Accented words count as words: "très", "bien" -> 0 / 2.
        ("Très bien", (0.0, 2)),
        # Hyphenated words are separate words: "nice", "looking" -> 1.8 / 2.
        ("nice-looking", (1.8 / 2, 2)),
    ],
)
def test_sentiment_comparative(text: str, expected: tuple[float, int]) -> None:
    comparative, words = sentiment_comparative(text)
    assert (pytest.approx(comparative), words) == (pytest.approx(expected[0]), expected[1])


def test_sentence_comparatives() -> None:
    # Sentences end at . ! ? or a line break; "3.5" does not end one; a last sentence without
    # end punctuation counts; a sentence without words ("...") is skipped.
    assert sentence_comparatives("Great work! 3.5 stars.\n- terrible ending ... I love it") == [
        pytest.approx(3.1 / 2),
        0.0,
        pytest.approx(-2.1 / 2),
        pytest.approx(3.2 / 3),
    ]
    assert sentence_comparatives("") == []


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        # One sentence: variance 0.
        ("I love this.", 1.0),
        # Same comparative in both sentences (3.2 / 3): variance 0.
        ("I love this! I LOVE that?", 1.0),
        # 3.2/3 = 1.0667 and -2.7/3 = -0.9: mean 0.0833, each 0.98333 away, variance 0.96694.
        ("I love this. I hate this.", 1 - ((3.2 / 3 + 2.7 / 3) / 2) ** 2),
        # Digits: "3.5 stars." (0 over 3 words) and "Great!" (3.1): variance 1.55^2 = 2.4025,
        # floored at 0.
        ("3.5 stars. Great!", 0.0),
        # Neutral sentences: 0 and 0.
        ("The sky. The sea.", 1.0),
    ],
)
def test_stability_mode(output: str, expected: float) -> None:
    result = create_tone_consistency_scorer().run(input="ignored", output=output)
    assert result.score == pytest.approx(expected)
    assert result.not_scorable is False


def test_stability_step_results_and_reason() -> None:
    result = create_tone_consistency_scorer().run(output="I love this. I hate this.")
    step = result.preprocess_step_result
    assert step is not None and step["mode"] == "stability"
    assert step["sentence_comparatives"] == [pytest.approx(3.2 / 3), pytest.approx(-0.9)]
    assert step["mean_comparative"] == pytest.approx(0.5 / 6)
    assert step["variance"] == pytest.approx((5.9 / 6) ** 2)
    assert result.reason == (
        "Across 2 sentences, the sentiment per word averages 0.0833 with a variance of 0.967."
    )
    assert (result.judge_calls, result.judge_model, result.cost) == (0, None, 0.0)
    # Heuristic scores are not rounded.
    assert result.score == pytest.approx(1 - (5.9 / 6) ** 2)
    assert result.score != round(result.score, 2)


@pytest.mark.parametrize(
    ("output", "reference", "expected"),
    [
        # "a nice day": 1.8 / 3 = 0.6; "happy people here": 2.7 / 3 = 0.9; 1 - 0.3.
        ("a nice day", "happy people here", 0.7),
        # Negation: -1.9 / 4 = -0.475 against 1.9 / 3 = 0.633: difference 1.108, floored.
        ("This is not good.", "This is good.", 0.0),
        # Case and punctuation do not change the comparative: equal tones.
        ("GREAT!!!", "great", 1.0),
        # A reference without words has comparative 0: 1 - |0.6 - 0|.
        ("a nice day", "🙂", 0.4),
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
        "output_comparative": pytest.approx(0.6),
        "reference_comparative": pytest.approx(0.9),
        "difference": pytest.approx(0.3),
    }
    assert result.reason == (
        "The output's sentiment per word is 0.6, the reference tone's 0.9: a difference of 0.3."
    )


def test_run_reference_wins_over_the_factory_and_blank_falls_back() -> None:
    scorer = create_tone_consistency_scorer(reference_tone="happy people here")
    # Run value "terrible": -2.1 against 0.6: floored to 0.
    assert scorer.run(output="a nice day", reference_tone="terrible").score == 0.0
    # A blank run value means "not given": the factory's reference applies (0.7).
    assert scorer.run(output="a nice day", reference_tone="  ").score == pytest.approx(0.7)
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
        ({"output": ""}, "output is empty"),
        ({"output": None}, "output is empty"),
        ({"output": "🙂 !!!"}, "no words to read a tone from"),
        ({"output": "fine", "reference_tone": 3}, "reference_tone must be a text"),
    ],
)
def test_not_scorable(kwargs: dict[str, Any], why: str) -> None:
    result = create_tone_consistency_scorer().run(**kwargs)
    assert result.score is None and result.not_scorable is True
    assert why in result.reason


def test_options_and_attributes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_state, "default_judge", None)
    assert create_tone_consistency_scorer().options == {"reference_tone": None}
    scorer = create_tone_consistency_scorer(reference_tone="calm")
    assert scorer.options == {"reference_tone": "calm"}
    assert (scorer.id, scorer.uses_judge, scorer.run_inputs) == ("tone-consistency", False, ())


@pytest.mark.parametrize("reference_tone", ["", "   ", 3, ["calm"]])
def test_invalid_reference_fails_early(reference_tone: Any) -> None:
    with pytest.raises(ConfigurationError, match="reference_tone"):
        create_tone_consistency_scorer(reference_tone=reference_tone)
