"""Keyword coverage: how many of the input's keywords appear in the output. Heuristic, no judge.

Semantics follow the Mastra evals' keyword coverage scorer (which relies on the
``keyword-extractor`` package's English settings); code and the stop-word list are tracescore's
own.

Stop words: a list written for this module (``STOP_WORDS``) rather than a library's. The
maintained packages that ship English stop words without heavy dependencies (``stop-words``,
``stopwordsiso``) use lists of over 1,200 words that include content words such as
"computer", "research", "system", "information" and "world", which would silently drop real
keywords; NLTK's list needs a data download, spaCy's and scikit-learn's come with large
packages. ``STOP_WORDS`` holds English function words only: articles, determiners, pronouns,
prepositions, conjunctions, auxiliary and modal verbs, their contractions, and a few
discourse adverbs.
"""

from __future__ import annotations

import re
import unicodedata

from tracescore.scorers._base import Scorer, ScorerRun

__all__ = ["STOP_WORDS", "create_keyword_coverage_scorer", "keywords"]

SCORER_ID = "keyword-coverage"

_STOP_WORD_TEXT = """
    a an the this that these those such
    all any both each either every few many much more most less least neither no none
    other another some several own same
    i me my mine myself we us our ours ourselves you your yours yourself yourselves
    he him his himself she her hers herself it its itself they them their theirs themselves
    one ones oneself someone something anyone anything everyone everything nobody nothing
    who whom whose which what whatever whoever whichever
    where when why how whether wherever whenever however
    about above across after against along amid among around as at before behind below
    beneath beside besides between beyond by despite down during except for from in inside
    into like near of off on onto out outside over past per since than through throughout
    till to toward towards under underneath unlike until up upon via with within without
    and but or nor so yet if then else because although though while whereas unless once
    also too very just only even still already again ever never not
    here there now then thus hence therefore indeed quite rather
    be am is are was were been being
    have has had having do does did doing done
    can could may might must shall should will would ought
    let lets let's
    i'm i've i'll i'd you're you've you'll you'd he's he'll he'd she's she'll she'd
    it's it'll it'd we're we've we'll we'd they're they've they'll they'd
    that's there's here's what's who's where's when's why's how's
    isn't aren't wasn't weren't hasn't haven't hadn't doesn't don't didn't
    can't cannot couldn't won't wouldn't shan't shouldn't mustn't mightn't needn't
    ain't
    yes ok okay oh please
"""
STOP_WORDS: frozenset[str] = frozenset(_STOP_WORD_TEXT.split())

# Look-alikes become the ASCII character, so that "don’t" is "don't" and "well‐known" (with
# U+2010 HYPHEN) is "well-known". En and em dashes are not hyphens: they separate words.
_LOOK_ALIKES = str.maketrans(
    {"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\uff07": "'", "\u2010": "-", "\u2011": "-"}
)
# Characters that join the parts of one word.
_JOINERS = "-'"
_JOINER_RUN = re.compile(f"[{_JOINERS}]+")
_MAX_LISTED = 10


def _is_separator(char: str) -> bool:
    return char not in _JOINERS and (char.isspace() or unicodedata.category(char).startswith("P"))


def keywords(text: str) -> list[str]:
    """The keywords of ``text``, each once, in order of first appearance.

    Rules (after the Mastra evals' keyword coverage): lowercased tokens (Unicode NFC,
    so a precomposed and a decomposed ``é`` are equal; accents are kept); whitespace
    and punctuation (Unicode categories P*) separate tokens and are dropped, except hyphens and
    apostrophes inside a word, so hyphenated words stay whole (``state-of-the-art``,
    ``covid-19``); hyphens and apostrophes at a token's edges are dropped, and so is a
    possessive ``'s``; tokens made only of digits (``2024``; ``3.5`` is ``3`` and ``5``) and
    stop words (``STOP_WORDS``) are not keywords. Symbols such as ``$`` and emoji are not
    punctuation and stay in their token.

    Args:
        text: any text.

    Returns:
        The keywords; ``[]`` when there are none.

    Examples:
        >>> keywords("The state-of-the-art model's accuracy rose 3.5% in 2024!")
        ['state-of-the-art', 'model', 'accuracy', 'rose']
    """
    text = unicodedata.normalize("NFC", text).lower().translate(_LOOK_ALIKES)
    chars = [" " if _is_separator(c) else c for c in text]
    seen: dict[str, None] = {}
    for raw in "".join(chars).split():
        token = _JOINER_RUN.sub(lambda m: m.group()[0], raw).strip(_JOINERS)
        if token.endswith("'s"):
            token = token[:-2].rstrip(_JOINERS)
        if not token or token.isdigit() or token in STOP_WORDS:
            continue
        seen.setdefault(token, None)
    return list(seen)


def create_keyword_coverage_scorer() -> Scorer:
    """Score the share of the input's keywords that the output also contains.

    Keywords of the judged question (the first user message) and of the judged answer come from
    ``keywords``: lowercased tokens without stop words, digits-only tokens and punctuation,
    hyphenated words kept whole. A keyword is covered when the output's keywords contain it
    exactly (no stemming: ``cat`` does not cover ``cats``; use ``completeness`` for base
    forms). Not rounded; no judge.

    Formula (from the Mastra evals' keyword coverage):
    ``covered input keywords / input keywords``; an input with text but no keywords (only stop
    words, numbers or punctuation) gives 1: there was nothing to cover.

    ``preprocess_step_result``: ``{"input_keywords": [...], "output_keywords": [...]}``;
    ``analyze_step_result``: ``{"matched_keywords": [...], "missing_keywords": [...]}``.

    An empty output has no keywords: it scores 0 against an input with keywords, as in Mastra
    (a missing answer is a real failure, not a comparison that cannot be made).

    Not scorable: an input without text (no user message): there is nothing to cover.

    Returns:
        A ``Scorer`` with id ``keyword-coverage``.

    Examples:
        >>> scorer = create_keyword_coverage_scorer()
        >>> scorer.run(input="How do plants use photosynthesis?",
        ...            output="Plants use photosynthesis to make sugar.").score
        1.0
    """

    def preprocess(run: ScorerRun) -> dict[str, list[str]]:
        return {
            "input_keywords": keywords(run.input_text),
            "output_keywords": keywords(run.output_text),
        }

    def analyze(run: ScorerRun) -> dict[str, list[str]]:
        assert run.preprocess_result is not None
        available = set(run.preprocess_result["output_keywords"])
        wanted = run.preprocess_result["input_keywords"]
        return {
            "matched_keywords": [k for k in wanted if k in available],
            "missing_keywords": [k for k in wanted if k not in available],
        }

    def score(run: ScorerRun) -> float:
        assert run.preprocess_result is not None and run.analyze_result is not None
        total = len(run.preprocess_result["input_keywords"])
        return len(run.analyze_result["matched_keywords"]) / total if total else 1.0

    def reason(run: ScorerRun) -> str:
        assert run.preprocess_result is not None and run.analyze_result is not None
        total = len(run.preprocess_result["input_keywords"])
        if total == 0:
            return "The input has no keywords (only stop words, numbers or punctuation)."
        text = f"{len(run.analyze_result['matched_keywords'])} of {total} input keywords found "
        text += "in the output"
        if not run.output_text.strip():
            text = f"The output is empty: {text}"
        missing = run.analyze_result["missing_keywords"]
        if missing:
            more = f" and {len(missing) - _MAX_LISTED} more" if len(missing) > _MAX_LISTED else ""
            text += f"; missing: {', '.join(missing[:_MAX_LISTED])}{more}"
        return text + "."

    return Scorer(
        id=SCORER_ID,
        description="Share of the input's keywords that also appear in the output.",
        # Not "output": an empty output is scored (0), only a missing input is not scorable.
        requires=("input",),
        preprocess=preprocess,
        analyze=analyze,
        generate_score=score,
        generate_reason=reason,
        round_score=False,
        options={},
    )
