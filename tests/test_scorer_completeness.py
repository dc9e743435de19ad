"""Completeness: share of the input's words (and base forms) covered by the output, no judge."""

from __future__ import annotations

from typing import Any

import pytest

from tracescore import ConfigurationError
from tracescore.scorers import create_completeness_scorer
from tracescore.scorers.completeness import content_words, covered_words, words_match
from tracescore.testing import runtime


@pytest.mark.parametrize(
    ("question", "answer", "expected"),
    [
        # Case and base forms. Input words: which, cats (base cat), ran (base run). Output
        # forms: the, cat, runs, run. Covered: cats (contains "cat", 3/4 > 0.6), ran (its
        # base form "run" is in the output); "which" is not. 2 / 3.
        ("Which cats ran?", "The cat runs.", 2 / 3),
        # Accents: café -> cafe, crème -> creme on both sides. 2 / 2.
        ("Café crème", "cafe CREME", 1.0),
        # Punctuation and hyphens split: state, of, the, art, e, mail. Output: email, about,
        # the, art, state. Covered: state, the, art, mail ("email" contains it, 4/5 > 0.6);
        # "of" and "e" (short, exact only) are not. 4 / 6.
        ("state-of-the-art e-mail!", "email about the art state", 4 / 6),
        # Digits are words: room, 101, on, floor, 3. Output: floor, 3, room, 1010. "101" is
        # 3 characters, so "1010" does not cover it; "on" is missing. 3 / 5.
        ("Room 101 on floor 3", "Floor 3, room 1010", 3 / 5),
        # Containment threshold: "inform" is 6/11 of "information", not over 0.6. 0 / 1.
        ("information", "inform", 0.0),
        # walking (base walk) against walk: "walking" contains "walk" but 4/7 < 0.6; its base
        # form "walk" is equal, so the word is covered. 1 / 1.
        ("walking", "walk", 1.0),
        # Words of 3 letters match only exactly: "cart" contains "car" (3/4) but does not
        # cover it. 0 / 1.
        ("car", "cart", 0.0),
        # Unicode letters are words (Mastra's [a-z0-9] class would drop them): straße and
        # ελλαδα (lowercased) against strasse and ελλαδα. "straße" is not contained in
        # "strasse". 1 / 2.
        ("Straße ΕΛΛΑΔΑ", "STRASSE ελλαδα", 0.5),
        # Only Latin letters lose their accents: a Greek tonos stays, so ελλάδα is not
        # ελλαδα. 0 / 1.
        ("Ελλάδα", "ελλαδα", 0.0),
        # Contractions stay whole: "don't" is one word, covered by "don't". 1 / 3.
        ("I don't know", "don't", 1 / 3),
        # Kana dakuten are not accents: バス (bus) is not ハス (lotus). CJK text is split into
        # character bigrams: バス, スで, で行, 行く against ハス, スで, で行, 行く. 3 / 4.
        ("バスで行く", "ハスで行く", 3 / 4),
        # A Devanagari vowel sign or virama is part of its word: कुत्ता (dog) shares no word
        # with किताब (book). 0 / 1.
        ("कुत्ता", "किताब", 0.0),
        # A reordered Chinese sentence keeps its bigrams but one (吃苹 is split). 4 / 5.
        ("我喜欢吃苹果", "苹果我喜欢吃", 4 / 5),
    ],
)
def test_hand_derived_scores(question: str, answer: str, expected: float) -> None:
    result = create_completeness_scorer().run(input=question, output=answer)
    assert result.score == pytest.approx(expected)
    assert result.not_scorable is False


def test_step_results_and_reason() -> None:
    result = create_completeness_scorer().run(input="Which cats ran?", output="The cat runs.")

    assert result.preprocess_step_result == {
        "input_words": ["which", "cats", "ran"],
        "input_lemmas": ["which", "cat", "run"],
        "output_words": ["the", "cat", "runs"],
        "output_lemmas": ["the", "cat", "run"],
    }
    assert result.analyze_step_result == {
        "covered_words": ["cats", "ran"],
        "missing_words": ["which"],
    }
    assert result.reason == "2 of 3 input words found in the output; missing: which."
    assert (result.judge_calls, result.judge_model, result.cost) == (0, None, 0.0)


def test_scores_are_not_rounded() -> None:
    # 1 of 3 words covered: 0.333..., not 0.33.
    result = create_completeness_scorer().run(input="alpha beta gamma", output="alpha")
    assert result.score == 1 / 3


def test_long_missing_lists_are_shortened() -> None:
    words = " ".join(f"word{i}" for i in range(12))
    result = create_completeness_scorer().run(input=words, output="nothing")
    assert result.score == 0.0
    assert result.reason.startswith("0 of 12 input words found in the output; missing: word0")
    assert result.reason.endswith("word9 and 2 more.")


@pytest.mark.parametrize(
    ("question", "answer", "expected", "why"),
    [
        # No input words: 1 when the output has none either, else 0 (SCORERS.md).
        ("???", "!!! ...", 1.0, "Neither the input nor the output has words."),
        ("???", "Paris", 0.0, "The input has no words to cover, but the output has words."),
    ],
)
def test_input_without_words(question: str, answer: str, expected: float, why: str) -> None:
    result = create_completeness_scorer().run(input=question, output=answer)
    assert result.score == expected
    assert result.reason == why


@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        ({"input": "", "output": "Cats."}, "input has no text"),
        ({"output": "Cats."}, "input has no text"),
        ({"input": "", "output": ""}, "input has no text"),
    ],
)
def test_not_scorable(kwargs: dict[str, Any], why: str) -> None:
    result = create_completeness_scorer().run(**kwargs)
    assert result.score is None and result.not_scorable is True
    assert why in result.reason


@pytest.mark.parametrize("output", ["", None, "  \n", [{"role": "assistant", "content": ""}]])
def test_empty_output_scores_0(output: Any) -> None:
    # SCORERS.md: an empty output against a non-empty reference is a real failure, not a
    # comparison that cannot be made.
    result = create_completeness_scorer().run(input="Which cats ran?", output=output)

    assert result.score == 0.0 and result.not_scorable is False
    assert result.reason.startswith("The output is empty: 0 of 3 input words found")


def test_empty_output_against_an_input_without_words_scores_1() -> None:
    # The table's rule: no input words and none in the output either -> 1.
    result = create_completeness_scorer().run(input="?!", output="")
    assert result.score == 1.0 and result.not_scorable is False


def test_message_shapes() -> None:
    result = create_completeness_scorer().run(
        input=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Which cats ran?"},
        ],
        output=[{"role": "assistant", "content": "The cat runs."}],
    )
    assert result.score == pytest.approx(2 / 3)


def test_content_words() -> None:
    assert content_words("") == []
    assert content_words("Café-owners' RÉSUMÉS, 2024!") == ["cafe", "owners", "resumes", "2024"]
    # "_" separates words like any other non-alphanumeric character.
    assert content_words("snake_case x2") == ["snake", "case", "x2"]
    # A decomposed accent (e + U+0301) is stripped like a precomposed one.
    assert content_words("cafe\u0301") == ["cafe"]
    # Duplicates appear once, in order of first appearance.
    assert content_words("b a B A") == ["b", "a"]
    # Contractions stay whole, with either apostrophe; a trailing apostrophe is not a word.
    assert content_words("Don\u2019t, can't owners'") == ["don't", "can't", "owners"]
    # With a lemmatizer, each word's base form follows it.
    assert content_words("Mice ran", lambda w: {"mice": "mouse", "ran": "run"}[w]) == [
        "mice",
        "mouse",
        "ran",
        "run",
    ]


@pytest.mark.parametrize(
    ("wanted", "candidate", "expected"),
    [
        ("cat", "cat", True),
        ("cat", "cats", False),  # 3 letters: exact only
        ("cats", "cat", True),  # 3/4 > 0.6
        ("cats", "at", False),  # 2/4
        ("house", "houses", True),  # 5/6
        ("information", "inform", False),  # 6/11
        ("abcde", "abc", False),  # exactly 0.6 is not over 0.6
        ("abcd", "xabcdx", True),  # containment either way: 4/6 > 0.6
    ],
)
def test_words_match(wanted: str, candidate: str, expected: bool) -> None:
    assert words_match(wanted, candidate) is expected


def test_covered_words() -> None:
    assert covered_words(["cats", "dog", "bird"], ["cat", "dog"]) == ["cats", "dog"]
    assert covered_words([], ["cat"]) == []


def test_language_option(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime(), "judge", None)
    scorer = create_completeness_scorer(language="de")
    # German base forms: Häuser -> Haus -> haus (lowercased), matching "Haus".
    assert scorer.run(input="Häuser", output="ein Haus").score == 1.0
    assert scorer.options == {"language": "de"}
    assert create_completeness_scorer().options == {"language": "en"}
    assert (scorer.id, scorer.uses_judge, scorer.uses_context) == ("completeness", False, False)


@pytest.mark.parametrize("language", ["xx", "EN", "", None, 3])
def test_invalid_language_fails_early(language: Any) -> None:
    with pytest.raises(ConfigurationError, match="language"):
        create_completeness_scorer(language=language)
