"""Tone consistency: sentiment of the output, against a reference tone or across its sentences.

Semantics follow SCORERS.md and the Mastra evals' tone scorer (1.x code: an optional
``referenceTone``, else the stability of the output's per-sentence sentiment); code is
tracescore's own. No judge.

Lexicon: VADER's (``vaderSentiment``, MIT, by the lexicon's authors, Hutto & Gilbert 2014).
Its wheel ships ``vader_lexicon.txt``, about 7,500 words and emoticons each rated by ten people
on -4..+4, and works offline. Mastra uses the ``sentiment`` npm package's AFINN-165 list
(integer ratings -5..+5); the Python ``afinn`` package carries that list but only as an
unmaintained 2016 source release under the share-alike ODbL database licence. Only VADER's
lexicon and negation word list are used, as an AFINN-style word -> valence table, not VADER's
compound-score rules, so the comparative is the same kind of number as Mastra's.
"""

from __future__ import annotations

import functools
import math
import re
import statistics
import unicodedata
from collections.abc import Mapping
from typing import Any

from tracescore._errors import ConfigurationError
from tracescore.scorers._base import NotScorable, Scorer, ScorerRun

__all__ = ["create_tone_consistency_scorer", "sentence_comparatives", "sentiment_comparative"]

SCORER_ID = "tone-consistency"

_LOOK_ALIKES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})
# Words: runs of letters and digits, an apostrophe inside a word kept ("don't").
_TOKEN = re.compile(r"[^\W_]+(?:'[^\W_]+)*")
# A sentence ends at ., !, ?, an ellipsis or their CJK forms followed by white space, or at a
# line break (list items, headings); "3.5" and "e.g.," do not end one.
_SENTENCE_END = re.compile(r"(?<=[.!?\u2026\u3002\uff01\uff1f])\s+|\s*\n\s*")


@functools.lru_cache(maxsize=1)
def _lexicon() -> tuple[Mapping[str, float], frozenset[str]]:
    import importlib.resources

    from vaderSentiment.vaderSentiment import NEGATE  # type: ignore[import-untyped]

    text = importlib.resources.files("vaderSentiment").joinpath("vader_lexicon.txt")
    valences: dict[str, float] = {}
    for line in text.read_text(encoding="utf-8").splitlines():
        fields = line.split("\t")
        if len(fields) >= 2 and fields[0]:
            try:
                valences[fields[0]] = float(fields[1])
            except ValueError:
                continue
    return valences, frozenset(NEGATE)


def _tokens(text: str) -> list[str]:
    text = unicodedata.normalize("NFC", text).lower().translate(_LOOK_ALIKES)
    return _TOKEN.findall(text)


def sentiment_comparative(text: str) -> tuple[float, int]:
    """The text's sentiment per word, and its number of words.

    Each word (letters and digits, an inner apostrophe kept; lowercased) takes its valence from
    VADER's lexicon (0 when absent); a word right after a negation word (``not``, ``never``,
    ``don't``, ... VADER's list) has its valence flipped, as the ``sentiment`` package Mastra
    uses does. The comparative is the sum of valences divided by the number of words.

    Args:
        text: any text.

    Returns:
        ``(comparative, words)``; ``(0.0, 0)`` for a text without words.

    Example:
        >>> sentiment_comparative("The service was not good")  # -1.9 / 5
        (-0.38, 5)
    """
    valences, negations = _lexicon()
    tokens = _tokens(text)
    total = 0.0
    for position, token in enumerate(tokens):
        valence = valences.get(token, 0.0)
        if position and tokens[position - 1] in negations:
            valence = -valence
        total += valence
    return (total / len(tokens) if tokens else 0.0), len(tokens)


def sentence_comparatives(text: str) -> list[float]:
    """``sentiment_comparative`` of each sentence that has words, in order.

    Example:
        >>> sentence_comparatives("Great work! 3.5 stars.\\n- terrible ending")
        [1.55, 0.0, -1.05]
    """
    comparatives = []
    for sentence in _SENTENCE_END.split(text):
        comparative, words = sentiment_comparative(sentence)
        if words:
            comparatives.append(comparative)
    return comparatives


def create_tone_consistency_scorer(*, reference_tone: str | None = None) -> Scorer:
    """Score whether the output keeps a steady tone, or the tone of a reference text.

    Sentiment is VADER's lexicon used AFINN-style (see ``sentiment_comparative``): valence per
    word, the comparative being the sum over the text divided by its number of words. Not
    rounded; no judge.

    Formula (SCORERS.md, from the Mastra evals' tone scorer):

    - with a reference tone (``run(reference_tone=...)``, else the factory's
      ``reference_tone``): ``max(0, 1 - |comparative(output) - comparative(reference)|)``;
    - without: ``max(0, 1 - variance)``, the population variance of the comparatives of the
      output's sentences (a one-sentence output scores 1).

    The input is not compared: a question's tone is rarely the tone its answer should have
    (Mastra's documentation describes an input/output mode, its 1.x code compares with
    ``referenceTone`` only, as SCORERS.md does). To compare with the input, pass it:
    ``run(..., reference_tone=question)``.

    Sentences end at ``.``, ``!``, ``?``, an ellipsis or a line break (Mastra's splitter drops a
    last sentence without end punctuation; this one keeps it); sentences without words are
    skipped.

    ``preprocess_step_result``: with a reference ``{"mode": "reference",
    "output_comparative", "reference_comparative", "difference"}``; without ``{"mode":
    "stability", "sentence_comparatives": [...], "mean_comparative", "variance"}``.

    Not scorable: an empty output, or an output without words (only symbols or emoji): there is
    no tone to read.

    Args:
        reference_tone: a text whose tone the output should match, for every run (a
            ``reference_tone=`` given to ``run()`` wins). Default ``None``: sentence stability.

    Returns:
        A ``Scorer`` with id ``tone-consistency``.

    Raises:
        ConfigurationError: ``reference_tone`` is not a non-empty string.

    Example:
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
    try:
        import vaderSentiment  # type: ignore[import-untyped]  # noqa: F401 - fail early
    except ImportError as exc:  # pragma: no cover - vaderSentiment is a dependency of tracescore
        raise ConfigurationError(
            "the tone-consistency scorer needs vaderSentiment: "
            "pip install 'vaderSentiment>=3.3.2,<4'"
        ) from exc

    def reference_of(run: ScorerRun) -> str | None:
        given = run.extra.get("reference_tone")
        if given is not None and not isinstance(given, str):
            raise NotScorable(f"reference_tone must be a text, got {type(given).__name__}")
        return given if given and given.strip() else reference_tone

    def preprocess(run: ScorerRun) -> dict[str, Any]:
        output_comparative, words = sentiment_comparative(run.output_text)
        if not words:
            raise NotScorable("the output has no words to read a tone from")
        reference = reference_of(run)
        if reference is not None:
            reference_comparative, _ = sentiment_comparative(reference)
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

    def score(run: ScorerRun) -> float:
        assert run.preprocess_result is not None
        result = run.preprocess_result
        spread = result["difference"] if result["mode"] == "reference" else result["variance"]
        return max(0.0, 1.0 - float(spread))

    def reason(run: ScorerRun) -> str:
        assert run.preprocess_result is not None
        result = run.preprocess_result
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

    return Scorer(
        id=SCORER_ID,
        description="Whether the output's tone is steady, or matches a reference tone.",
        requires=("output",),
        preprocess=preprocess,
        generate_score=score,
        generate_reason=reason,
        round_score=False,
        options={"reference_tone": reference_tone},
    )
