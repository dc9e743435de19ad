"""The features of the support check: how much of an answer its context (and question) contain.

Lexical, standard library only (the benchmark's training script loads this file on its own,
without the tracescore package, so training and scoring compute the very same features).
Words are lowercased runs of letters and digits, accents stripped; a plural ``s`` is dropped
from words longer than three letters; a short English stop-word list is left out.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Sequence

__all__ = ["FEATURE_NAMES", "features", "words"]

_WORD = re.compile(r"[^\W_]+")
_NUMBER = re.compile(r"\d")
# Function words: they say nothing about support. A short list on purpose: a question word
# ("who", "which") or a negation ("not", "no") can matter and is kept.
_STOP_WORD_TEXT = """
    a an the of in on at to for from by with as and or but is are was were be been being
    it its this that these those he she they them his her their there here has have had do
    does did also than then so such into about over after before during while
"""
STOP_WORDS = frozenset(_STOP_WORD_TEXT.split())

FEATURE_NAMES: tuple[str, ...] = (
    "context_not_question",  # share of the answer's words found in the context, not the question
    "bigrams_in_context",  # share of the answer's word pairs found in the context (one word:
    # whether it is found)
    "longest_run",  # longest run of answer words found in order in the context, over words
    "numbers_in_context",  # share of the answer's numbers found in the context (1 when none)
)
# Only overlap, each feature rising with support, so the fitted weights stay readable (all
# positive). Left out: the plain share of words in the context and the share new to both
# context and question (with the others in the model their weights turned negative and
# positive respectively on 100 development answers: noise fitted, not support), and answer
# length: on HaluEval QA the right answers are short spans and the hallucinated ones sentences,
# so length alone separates them there (ROC-AUC 0.94 on the development split), which says
# nothing about support and would mark every long faithful answer down.


def words(text: str) -> list[str]:
    """The content words of ``text``: lowercased, accents stripped, stop words left out."""
    folded = unicodedata.normalize("NFKD", text.lower())
    folded = "".join(c for c in folded if not unicodedata.combining(c))
    out = []
    for word in _WORD.findall(folded):
        if word in STOP_WORDS:
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        out.append(word)
    return out


def _share(items: Sequence[object], pool: set[object]) -> float:
    return sum(1 for i in items if i in pool) / len(items) if items else 1.0


def features(output: str, context: Sequence[str], question: str = "") -> list[float]:
    """The feature vector of one answer, in ``FEATURE_NAMES`` order.

    Args:
        output: the answer's text.
        context: the context pieces' texts.
        question: the question's text ("" when there is none).

    Returns:
        Four shares in [0, 1] (an answer without content words: 0, 1, 1, 1).
    """
    answer = words(output)
    context_words = [w for piece in context for w in words(piece)]
    pool = set(context_words)
    asked = set(words(question))
    fresh = sum(1 for w in answer if w in pool and w not in asked) / len(answer) if answer \
        else 0.0
    pairs = list(zip(answer, answer[1:], strict=False))
    context_pairs = set(zip(context_words, context_words[1:], strict=False))
    longest = 0
    if answer and context_words:
        matcher = difflib.SequenceMatcher(None, answer, context_words, autojunk=False)
        longest = matcher.find_longest_match(0, len(answer), 0, len(context_words)).size
    numbers = [w for w in answer if _NUMBER.search(w)]
    return [
        fresh,
        _share(pairs, context_pairs) if pairs else _share(answer, pool),  # type: ignore[arg-type]
        longest / len(answer) if answer else 1.0,
        _share(numbers, pool),  # type: ignore[arg-type]
    ]
