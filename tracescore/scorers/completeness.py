"""Completeness: how many of the input's words the output covers. Heuristic, no judge.

Semantics follow the Mastra evals' completeness scorer (which extracts nouns,
verb infinitives, topics and all terms with the ``compromise`` NLP library); code is
tracescore's own.

Base forms come from simplemma (MIT, zero dependencies, maintained, its dictionaries ship inside
the wheel, so it works offline with no download step). It lemmatizes word by word without a
part-of-speech tagger, so every word has a base form, not only the verbs (``cats`` -> ``cat``,
``ran`` -> ``run``); an input word counts as covered when its surface form or its base form is
covered, so an inflected word is never half missing. Taggers that could tell verbs apart (spaCy
models, NLTK data) are downloaded at run time, which tracescore must not do.

CJK text (Han, Hiragana, Katakana) has no spaces between words; it is segmented into
overlapping character bigrams, the dictionary-free method search engines use for CJK (e.g.
Lucene's CJK bigram filter), so a reordered sentence still shares its words. Dictionary
segmenters on PyPI (jieba, last released 2020; janome; fugashi with a MeCab dictionary) are
per-language and tens of megabytes; bigrams need nothing and treat Chinese and Japanese alike.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Callable, Sequence

from tracescore._core.errors import ConfigurationError
from tracescore.scorers._base import Scorer, ScorerRun

__all__ = [
    "content_words",
    "covered_words",
    "create_completeness_scorer",
    "strip_latin_accents",
    "words_match",
]

SCORER_ID = "completeness"

# Words this short match only exactly; longer ones may match by containment.
_EXACT_MATCH_MAX_LENGTH = 3
_CONTAINMENT_MIN_RATIO = 0.6
# Longer words match only exactly (see covered_words).
_MAX_FUZZY_LENGTH = 64
_MAX_LISTED = 10
_APOSTROPHES = frozenset("'\u2019\u02bc")
# Scripts written without spaces between words: Han, Hiragana, Katakana (and their
# extensions and half-width forms).
_CJK_RANGES = ((0x3040, 0x30FF), (0x31F0, 0x31FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF),
               (0xF900, 0xFAFF), (0xFF66, 0xFF9F), (0x20000, 0x2FA1F))


def _is_cjk(char: str) -> bool:
    code = ord(char)
    return any(low <= code <= high for low, high in _CJK_RANGES)


def _is_word_char(char: str) -> bool:
    # Letters, digits and combining marks (a Devanagari vowel sign or virama is part of its
    # word, not a separator).
    return unicodedata.category(char)[0] in "LNM"


@functools.lru_cache(maxsize=4096)
def _is_latin(char: str) -> bool:
    return unicodedata.name(char, "").startswith("LATIN ")


def strip_latin_accents(word: str) -> str:
    """Remove the combining accents of Latin letters only (``café`` -> ``cafe``).

    A mark on a letter of another script changes the letter (``バ`` is not ``ハ``, Cyrillic
    ``й`` is not ``и``, a Devanagari vowel sign is part of the syllable) and stays.

    Examples:
        >>> strip_latin_accents("Crème"), strip_latin_accents("バス"), strip_latin_accents("й")
        ('Creme', 'バス', 'й')
    """
    decomposed = unicodedata.normalize("NFD", word)
    kept: list[str] = []
    base_is_latin = False
    for char in decomposed:
        if unicodedata.category(char) == "Mn":
            if base_is_latin:
                continue
        else:
            base_is_latin = _is_latin(char)
        kept.append(char)
    return unicodedata.normalize("NFC", "".join(kept))


def _tokens(text: str) -> list[str]:
    """Lowercased words in order: runs of letters, digits and combining marks, an apostrophe
    between two letters kept (``don't``, ``l'eau``); a run of CJK characters becomes its
    overlapping character bigrams (a lone character stays whole), the dictionary-free
    segmentation search engines use for CJK (e.g. Lucene's CJK bigram filter)."""
    text = unicodedata.normalize("NFC", text).lower()
    out: list[str] = []
    word: list[str] = []
    cjk: list[str] = []

    def close_word() -> None:
        if word:
            out.append("".join(word))
        word.clear()

    def close_cjk() -> None:
        if len(cjk) == 1:
            out.append(cjk[0])
        out.extend(cjk[i] + cjk[i + 1] for i in range(len(cjk) - 1))
        cjk.clear()

    for index, char in enumerate(text):
        if _is_cjk(char):
            close_word()
            cjk.append(char)
            continue
        if cjk and unicodedata.category(char) == "Mn":  # a mark on a CJK character
            cjk[-1] += char
            continue
        close_cjk()
        if _is_word_char(char):
            word.append(char)
        elif (char in _APOSTROPHES and word and index + 1 < len(text)
              and _is_word_char(text[index + 1])):
            word.append("'")
        else:
            close_word()
    close_word()
    close_cjk()
    return out


def _forms(text: str, lemmatize: Callable[[str], str] | None) -> list[tuple[str, str]]:
    """Each distinct word of ``text`` with its base form, in order: ``(surface, lemma)``,
    both lowercased and stripped of Latin accents (the lemma is looked up before accents
    are stripped: lemma dictionaries spell words with them)."""
    seen: dict[str, str] = {}
    for token in _tokens(text):
        surface = strip_latin_accents(token)
        if surface in seen:
            continue
        lemma = surface
        if lemmatize is not None and not _is_cjk(token[0]):
            lemma = strip_latin_accents(lemmatize(token).lower()) or surface
        seen[surface] = lemma
    return list(seen.items())


def content_words(text: str, lemmatize: Callable[[str], str] | None = None) -> list[str]:
    """The words compared by completeness, each once, in order of first appearance.

    Words are runs of letters, digits and combining marks (an apostrophe between letters
    kept: ``don't`` is one word), lowercased, with the accents of Latin letters stripped; CJK
    text is segmented into character bigrams. With ``lemmatize``, each word's base form
    follows it when it differs (the scorer counts a word covered when either form is).

    Args:
        text: any text.
        lemmatize: maps a lowercased word to its base form, or ``None`` for surface forms only.

    Returns:
        The words; ``[]`` when the text has no letters or digits.

    Examples:
        >>> content_words("Café-owners don't ran")
        ['cafe', 'owners', "don't", 'ran']
    """
    out: list[str] = []
    for surface, lemma in _forms(text, lemmatize):
        out.append(surface)
        if lemma != surface:
            out.append(lemma)
    return list(dict.fromkeys(out))


def words_match(wanted: str, candidate: str) -> bool:
    """Whether ``candidate`` (an output word) covers ``wanted`` (an input word).

    Rule (from the Mastra evals' completeness): an input word of 3 characters or
    fewer must be equal; a longer one matches when one word contains the other and the shorter
    is over 60% of the longer's length (``cats`` covers ``cat``... and ``cat`` covers ``cats``,
    3/4 > 0.6; ``inform`` does not cover ``information``, 6/11).

    Examples:
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

    Examples:
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


def _checked_lemmatizer(language: str) -> Callable[[str], str]:
    """The base-form function of ``language``, its dictionary loaded now, so that a bad code
    fails when the scorer is made, not at scoring.

    Raises:
        ConfigurationError: simplemma is not installed or does not know ``language``.
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
        simplemma.lemmatize("words", lang=language)
    except ValueError:
        raise ConfigurationError(
            f"language must be a language code simplemma supports, such as 'en' or 'de', "
            f"got {language!r}"
        ) from None
    return _lemmatizer(language)


def analyze(run: ScorerRun) -> dict[str, list[str]]:
    """The covered and missing input words (surface forms), in input order."""
    assert run.preprocess_result is not None
    result = run.preprocess_result
    available = list(dict.fromkeys(result["output_words"] + result["output_lemmas"]))
    pairs = list(zip(result["input_words"], result["input_lemmas"], strict=True))
    forms = list(dict.fromkeys(f for pair in pairs for f in pair))
    hit = set(covered_words(forms, available))
    covered = [surface for surface, lemma in pairs if surface in hit or lemma in hit]
    covered_set = set(covered)
    return {
        "covered_words": covered,
        "missing_words": [w for w, _ in pairs if w not in covered_set],
    }


def score(run: ScorerRun) -> float:
    """The share of covered input words (1 or 0 for an input without words)."""
    assert run.preprocess_result is not None and run.analyze_result is not None
    total = len(run.preprocess_result["input_words"])
    if total == 0:
        return 0.0 if run.preprocess_result["output_words"] else 1.0
    return len(run.analyze_result["covered_words"]) / total


def reason(run: ScorerRun) -> str:
    """How many input words the output covers, and the first missing ones."""
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


def create_completeness_scorer(*, language: str = "en") -> Scorer:
    """Score how many of the input's words the output covers.

    Both texts (the judged question, i.e. the first user message, and the judged answer) become
    words: runs of letters, digits and combining marks (an apostrophe between letters kept, so
    ``don't`` stays one word), lowercased, the accents of Latin letters stripped (``café`` ->
    ``cafe``; marks that change a letter in other scripts, such as kana dakuten or Devanagari
    vowel signs, stay), CJK runs split into character bigrams. Each word has a base form
    (simplemma, for ``language``). An input word is covered when its surface form or its base
    form is covered by an output word or base form (``words_match``: 3 characters or fewer
    exactly, longer ones by containment when the shorter is over 60% of the longer). Not
    rounded; no judge.

    Formula (from the Mastra evals' completeness): ``covered / input words``; an
    input without words (only punctuation or symbols) gives 1 when the output has none either,
    else 0. Like Mastra's, the word set keeps every term, function words included (``the``
    counts).

    Differences from Mastra, on purpose: letters and digits of every script are words (Mastra's
    ``[a-z0-9]`` class drops ``ß``, Greek, Cyrillic and CJK text entirely); base forms are
    taken for every word (no tagger, see the module docstring).

    ``preprocess_step_result``: ``{"input_words", "input_lemmas", "output_words",
    "output_lemmas"}`` (the lemma lists aligned with the word lists); ``analyze_step_result``:
    ``{"covered_words": [...], "missing_words": [...]}`` (input surface forms).

    Empty output (the rule every heuristic scorer follows, see the README): an empty output
    against an input with words scores 0 (a missing answer is a real failure, not a
    comparison that cannot be made).

    Not scorable: an input without text (no user message): there is nothing to cover.

    Args:
        language: simplemma language code for base forms (``"en"``, ``"de"``, ``"fr"``, ...).
            Default ``"en"``.

    Returns:
        A ``Scorer`` with id ``completeness``.

    Raises:
        ConfigurationError: ``language`` is not a language simplemma knows, or simplemma is
            not installed.

    Examples:
        >>> scorer = create_completeness_scorer()
        >>> round(scorer.run(input="Which cats ran?", output="The cat runs.").score, 2)
        0.67
    """
    lemmatize = _checked_lemmatizer(language)

    def preprocess(run: ScorerRun) -> dict[str, list[str]]:
        wanted = _forms(run.input_text, lemmatize)
        given = _forms(run.output_text, lemmatize)
        return {
            "input_words": [surface for surface, _ in wanted],
            "input_lemmas": [lemma for _, lemma in wanted],
            "output_words": [surface for surface, _ in given],
            "output_lemmas": [lemma for _, lemma in given],
        }

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
