"""Support check: a lexical estimate of whether the context supports the answer. No judge.

A logistic regression over four word-overlap features (``_support_features``: how much of the
answer, word by word, pair by pair and in one run, its context contains, the question's own
words left aside), trained on the development split of HaluEval QA
(``benchmarks/judge_quality/train_support_check.py``, scikit-learn at training time only). The
weights ship as ``support_check.json`` beside this module; scoring is plain Python, with no
model download and no network. Its agreement with human labels on the held-out split, beside
the LLM judges and with their tokens per answer, is in docs/judge-quality.md.

It reads words, not meaning: a hallucinated answer made of the context's own words (the wrong
one of two names the context gives) passes, and a faithful paraphrase in other words can fail.
It was trained on short question-answering answers; on long or differently worded answers,
check it on a team's own labels (``tracescore calibrate``) before trusting it alone.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections.abc import Callable, Sequence
from importlib import resources
from typing import Any

from tracescore.scorers._base import Scorer, ScorerRun
from tracescore.scorers._claims import check_context_option
from tracescore.scorers._common import context_options
from tracescore.scorers._support_features import FEATURE_NAMES, features

__all__ = ["SupportModel", "create_support_check_scorer", "support_model"]

SCORER_ID = "support-check"
_MODEL_FILE = "support_check.json"


class SupportModel:
    """The support check's logistic regression, read from its JSON file.

    Attributes:
        mean, scale, coef: per feature, in ``FEATURE_NAMES`` order: the standardisation the
            training used and the coefficients.
        intercept: the regression's intercept.
        band: ``(low, high)``: the faithfulness cascade asks the judge when the probability is
            strictly between them (chosen on the development split).
        digest: 12 hex digits of the file's sha256 (part of scorers' options, so new weights
            give a new evaluator version).
        trained_on: what the weights were fitted on, with the development figures.
    """

    def __init__(self, data: dict[str, Any], digest: str) -> None:
        if list(data["features"]) != list(FEATURE_NAMES):
            raise ValueError(f"{_MODEL_FILE} was trained on other features: {data['features']}")
        self.mean = [float(v) for v in data["mean"]]
        self.scale = [float(v) for v in data["scale"]]
        self.coef = [float(v) for v in data["coef"]]
        self.intercept = float(data["intercept"])
        low, high = data["band"]
        self.band = (float(low), float(high))
        self.digest = digest
        self.trained_on: dict[str, Any] = dict(data.get("trained_on") or {})

    def probability(self, output: str, context: Sequence[str], question: str = "") -> float:
        """The probability that ``context`` supports ``output`` (0..1).

        Args:
            output: the answer's text.
            context: the context pieces' texts.
            question: the question's text, "" when there is none (words the question gave the
                answer are not counted as new).
        """
        values = features(output, context, question)
        z = self.intercept + sum(
            c * (v - m) / s for c, v, m, s in zip(self.coef, values, self.mean, self.scale,
                                                  strict=True))
        return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


@functools.cache
def support_model() -> SupportModel:
    """The shipped model (read once per process)."""
    raw = resources.files(__package__ or "").joinpath(_MODEL_FILE).read_bytes()
    return SupportModel(json.loads(raw), hashlib.sha256(raw).hexdigest()[:12])


def _describe(values: list[float]) -> str:
    fresh, pairs, run, numbers = values
    return (f"{fresh:.0%} of the answer's words are in the context (and not the question), "
            f"{pairs:.0%} of its word pairs, its longest run in the context's order {run:.0%}, "
            f"its numbers {numbers:.0%}")


def create_support_check_scorer(
    *,
    context: Sequence[Any] | None = None,
    context_extractor: Callable[[Any, Any], Sequence[Any]] | None = None,
) -> Scorer:
    """Score whether the context supports the answer, from word overlap alone: no judge call.

    The score is the probability (0..1, higher is better, not rounded) a logistic regression
    gives from four lexical features of the answer against its context and question
    (``preprocess_step_result``: ``{"features": {name: value}}``), trained on the development
    split of HaluEval QA (its figures, and the held-out ones beside the LLM judges, in
    docs/judge-quality.md). A pass threshold of 0.5 is what it was trained for. Microseconds
    per answer; use it alone where a judge costs too much, or in front of one
    (``create_faithfulness_cascade_scorer``).

    It reads words, not meaning: an answer made of the context's own words in a wrong
    combination passes, and a faithful paraphrase in other words can fail. Trained on short
    question-answering answers: check it on your own labels (``tracescore calibrate``) before
    trusting it alone on other kinds of answers.

    Context: ``context_extractor(input, output)`` wins over ``context=``, which wins over
    ``run(context=...)``; in a ``ScoringRule`` without either, the documents of the trace's
    retrieval spans, in retrieval order. The question (the first user message), when given,
    counts as known: an answer repeating it is not penalised for words the context lacks.

    Not scorable: an empty output or empty context.

    Args:
        context: fixed context pieces for every run.
        context_extractor: ``(input, output) -> pieces``, called at each run.

    Returns:
        A ``Scorer`` with id ``support-check``.

    Raises:
        ConfigurationError: ``context`` is not a list or ``context_extractor`` is not callable.

    Examples:
        >>> scorer = create_support_check_scorer(
        ...     context=["The Oberoi Group's head office is in Delhi."])
        >>> scorer.run(input="Where is its head office?", output="Delhi").score > 0.5
        True
    """
    check_context_option(context)
    model = support_model()

    def preprocess(run: ScorerRun) -> dict[str, Any]:
        values = features(run.output_text, run.context or [], run.input_text)
        return {"features": dict(zip(FEATURE_NAMES, values, strict=True))}

    def score(run: ScorerRun) -> float:
        return model.probability(run.output_text, run.context or [], run.input_text)

    def reason(run: ScorerRun) -> str:
        assert run.preprocess_result is not None and run.score is not None
        values = list(run.preprocess_result["features"].values())
        verdict = "supported" if run.score >= 0.5 else "not supported"
        return f"Lexical support check: {run.score:.2f} ({verdict}): {_describe(values)}."

    options = context_options(context, context_extractor, 1)
    options["model"] = f"support-check-v1-{model.digest}"
    return Scorer(
        id=SCORER_ID,
        description="Whether the context supports the answer, from word overlap (no judge).",
        preprocess=preprocess,
        generate_score=score,
        generate_reason=reason,
        requires=("output", "context"),
        context=context,
        context_extractor=context_extractor,
        options=options,
    )
