"""Completeness: how many of the input's words the output covers. Heuristic, no judge.

Semantics follow SCORERS.md and the Mastra evals' completeness scorer (which extracts nouns,
verb infinitives, topics and all terms with the ``compromise`` NLP library); code is
tracescore's own.

Base forms come from simplemma (MIT, zero dependencies, maintained, its dictionaries ship inside
the wheel, so it works offline with no download step). It lemmatizes word by word without a
part-of-speech tagger, so every word's base form is added, not only the verbs' (``cats`` also
gives ``cat``, ``ran`` gives ``run``); taggers that could tell verbs apart (spaCy models, NLTK
data) are downloaded at run time, which tracescore must not do.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Sequence

from tracescore._errors import ConfigurationError
from tracescore.scorers._base import Scorer, ScorerRun

__all__ = ["content_words", "covered_words", "create_completeness_scorer", "words_match"]

SCORER_ID = "completeness"

# Letters and digits of any script; everything else (punctuation, spaces, symbols, "_")
# separates words.
_WORD = re.compile(r"[^\W_]+")
# Words this short match only exactly; longer ones may match by containment.
_EXACT_MATCH_MAX_LENGTH = 3
_CONTAINMENT_MIN_RATIO = 0.6
# Longer words match only exactly (see covered_words).
_MAX_FUZZY_LENGTH = 64
_MAX_LISTED = 10


def _strip_accents(text: str) -> str:
    decomposed = unicodedata.normalize("NFD", text)
    return unicodedata.normalize(
        "NFC", "".join(c for c in decomposed if unicodedata.category(c) != "Mn")
    )


def content_words(text: str, lemmatize: Callable[[str], str] | None = None) -> list[str]:
    """The words compared by completeness, each once, in order of first appearance.

    Every word (a run of letters or digits; any other character splits words) is lowercased
    and stripped of accents; when ``lemmatize`` is given, each word's base form follows it
    (``ran`` -> ``ran``, ``run``). Words are lemmatized before accents are stripped, because
    lemma dictionaries spell words with their accents.

    Args:
        text: any text.
        lemmatize: maps a lowercased word to its base form, or ``None`` for surface forms only.

    Returns:
        The words; ``[]`` when the text has no letters or digits.

    Example:
        >>> content_words("Café-owners' RÉSUMÉS, 2024!")
        ['cafe', 'owners', 'resumes', '2024']
    """
    seen: dict[str, None] = {}
    for match in _WORD.finditer(text):
        word = match.group().lower()
        forms = [word] if lemmatize is None else [word, lemmatize(word).lower()]
        for form in forms:
            for piece in _WORD.findall(_strip_accents(form)):
                seen.setdefault(piece, None)
    return list(seen)


def words_match(wanted: str, candidate: str) -> bool:
    """Whether ``candidate`` (an output word) covers ``wanted`` (an input word).

    Rule (SCORERS.md, from the Mastra evals' completeness): an input word of 3 characters or
    fewer must be equal; a longer one matches when one word contains the other and the shorter
    is over 60% of the longer's length (``cats`` covers ``cat``... and ``cat`` covers ``cats``,
    3/4 > 0.6; ``inform`` does not cover ``information``, 6/11).

    Example:
        >>> words_match("cats", "cat"), words_match("information", "inform")
        (True, False)
    """
    if len(wanted) <= _EXACT_MATCH_MAX_LENGTH:
        return wanted == candidate
    longer, shorter = (wanted, candidate) if len(wanted) >= len(candidate) else (candidate, wanted)
    return shorter in longer and len(shorter) / len(longer) > _CONTAINMENT_MIN_RATIO


def covered_words(wanted: Sequence[str], available: Sequence[str]) -> list[str]:
    """The words of ``wanted`` that some word of ``available`` covers (``words_match``).

    Near-linear in the number of words: instead of comparing every wanted word with every
    available one, each word's qualifying substrings (those over 60% of its length) are looked
    up in a set. A word longer than 64 characters (a hash, a base64 blob, never a natural
    word) matches only itself, which keeps that enumeration small (at most ~400 substrings per
    word); ``words_match`` still applies its full rule to any pair.

    Example:
        >>> covered_words(["cats", "information", "dog"], ["cat", "inform", "dogs"])
        ['cats']
    """
    exact = set(available)
    # Substrings of available words that a shorter wanted word may equal (case 1 below).
    inside_available: set[str] = set()
    for candidate in exact:
        inside_available.update(_qualifying_substrings(candidate))
    covered = []
    for word in wanted:
        if word in exact:
            covered.append(word)
        elif len(word) <= _EXACT_MATCH_MAX_LENGTH or len(word) > _MAX_FUZZY_LENGTH:
            continue
        elif word in inside_available or any(  # 1: inside a longer word; 2: contains one
            part in exact for part in _qualifying_substrings(word)
        ):
            covered.append(word)
    return covered


def _qualifying_substrings(word: str) -> set[str]:
    """The substrings of ``word`` shorter than it and over 60% of its length (none for words
    of 3 characters or fewer, or over ``_MAX_FUZZY_LENGTH``)."""
    size = len(word)
    if size > _MAX_FUZZY_LENGTH or size <= _EXACT_MATCH_MAX_LENGTH:
        return set()
    shortest = int(size * _CONTAINMENT_MIN_RATIO) + 1
    return {
        word[start : start + length]
        for length in range(shortest, size)
        for start in range(size - length + 1)
    }


@functools.lru_cache(maxsize=16)
def _lemmatizer(language: str) -> Callable[[str], str]:
    import simplemma

    @functools.lru_cache(maxsize=65_536)
    def lemmatize(word: str) -> str:
        return str(simplemma.lemmatize(word, lang=language))

    return lemmatize


def create_completeness_scorer(*, language: str = "en") -> Scorer:
    """Score how many of the input's words the output covers.

    Both texts (the judged question, i.e. the first user message, and the judged answer) become
    word sets with ``content_words``: every word lowercased, accents stripped, split at any
    character that is not a letter or digit, plus each word's base form (simplemma, for
    ``language``). The score is the share of input words that an output word covers
    (``words_match``: 3 characters or fewer exactly, longer ones by containment when the shorter
    is over 60% of the longer). Not rounded; no judge.

    Formula (SCORERS.md, from the Mastra evals' completeness): ``covered / input words``; an
    input without words (only punctuation or symbols) gives 1 when the output has none either,
    else 0. Like Mastra's, the word set keeps every term, function words included (``the``
    counts).

    Differences from Mastra, on purpose: letters and digits of every script are words (Mastra's
    ``[a-z0-9]`` class drops ``ß``, Greek, Cyrillic and CJK text entirely); base forms are added
    for every word (no tagger, see the module docstring).

    ``preprocess_step_result``: ``{"input_words": [...], "output_words": [...]}``;
    ``analyze_step_result``: ``{"covered_words": [...], "missing_words": [...]}``.

    An empty output covers nothing: it scores 0 against an input with words (SCORERS.md: a
    missing answer is a real failure, not a comparison that cannot be made).

    Not scorable: an input without text (no user message): there is nothing to cover.

    Args:
        language: simplemma language code for base forms (``"en"``, ``"de"``, ``"fr"``, ...).
            Default ``"en"``.

    Returns:
        A ``Scorer`` with id ``completeness``.

    Raises:
        ConfigurationError: ``language`` is not a language simplemma knows, or simplemma is
            not installed.

    Example:
        >>> scorer = create_completeness_scorer()
        >>> scorer.run(input="Which cats ran?", output="The cat runs.").score
        0.6
    """
    try:
        import simplemma
    except ImportError as exc:  # pragma: no cover - simplemma is a dependency of tracescore
        raise ConfigurationError(
            "the completeness scorer needs simplemma: pip install 'simplemma>=1,<3'"
        ) from exc
    try:
        if not isinstance(language, str):
            raise ValueError(language)
        # Loads the language's dictionary now, so that a bad code fails here, not at scoring.
        simplemma.lemmatize("words", lang=language)
    except ValueError:
        raise ConfigurationError(
            f"language must be a language code simplemma supports, such as 'en' or 'de', "
            f"got {language!r}"
        ) from None
    lemmatize = _lemmatizer(language)

    def preprocess(run: ScorerRun) -> dict[str, list[str]]:
        return {
            "input_words": content_words(run.input_text, lemmatize),
            "output_words": content_words(run.output_text, lemmatize),
        }

    def analyze(run: ScorerRun) -> dict[str, list[str]]:
        assert run.preprocess_result is not None
        wanted = run.preprocess_result["input_words"]
        covered = covered_words(wanted, run.preprocess_result["output_words"])
        covered_set = set(covered)
        return {
            "covered_words": covered,
            "missing_words": [w for w in wanted if w not in covered_set],
        }

    def score(run: ScorerRun) -> float:
        assert run.preprocess_result is not None and run.analyze_result is not None
        total = len(run.preprocess_result["input_words"])
        if total == 0:
            return 0.0 if run.preprocess_result["output_words"] else 1.0
        return len(run.analyze_result["covered_words"]) / total

    def reason(run: ScorerRun) -> str:
        assert run.preprocess_result is not None and run.analyze_result is not None
        total = len(run.preprocess_result["input_words"])
        if total == 0:
            if run.preprocess_result["output_words"]:
                return "The input has no words to cover, but the output has words."
            return "Neither the input nor the output has words."
        covered = len(run.analyze_result["covered_words"])
        text = f"{covered} of {total} input words found in the output"
        if not run.output_text.strip():
            text = f"The output is empty: {text}"
        missing = run.analyze_result["missing_words"]
        if missing:
            listed = ", ".join(missing[:_MAX_LISTED])
            more = f" and {len(missing) - _MAX_LISTED} more" if len(missing) > _MAX_LISTED else ""
            text += f"; missing: {listed}{more}"
        return text + "."

    return Scorer(
        id=SCORER_ID,
        description="Share of the input's words (and their base forms) covered by the output.",
        # Not "output": an empty output is scored (0), only a missing input is not scorable.
        requires=("input",),
        preprocess=preprocess,
        analyze=analyze,
        generate_score=score,
        generate_reason=reason,
        round_score=False,
        options={"language": language},
    )
