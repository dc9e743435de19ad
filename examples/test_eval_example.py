"""An evaluation as a pytest test: a small FAQ agent checked against expected answers in CI.

The agent answers from a tiny knowledge base; ``run_evals`` calls it with each question of
``data/eval_sample.jsonl`` and scores the answer against the item's ``ground_truth`` with the
heuristic ``content-similarity`` scorer (character-bigram overlap, no judge model needed). The
test passes when the mean similarity reaches 0.8; otherwise the assertion prints the
per-scorer table and the items that fell short.

Run it::

    pytest examples/test_eval_example.py

or the same evaluation from the command line (exit code 0 passed, 1 failed, 2 usage error)::

    tracescore eval examples/data/eval_sample.jsonl \\
        --target examples/test_eval_example.py:answer --scorer content-similarity:0.8

With an LLM judge, add e.g. ``create_answer_relevancy_scorer(model="openai/gpt-4o-mini")`` to
the scorers (or ``--scorer answer-relevancy:0.7 --judge openai/gpt-4o-mini``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import tracescore
from tracescore.scorers import create_content_similarity_scorer
from tracescore.testing import assert_passed, tracescore_evals  # noqa: F401 - the fixture

DATA = Path(__file__).parent / "data" / "eval_sample.jsonl"

KNOWLEDGE_BASE = [
    "Refunds are issued within 14 days of receiving the returned item.",
    "Standard shipping takes 3 to 5 business days within the EU.",
    "Support is available by chat from 9:00 to 17:00 CET on weekdays.",
    "Use the 'Forgot password' link on the sign-in page; a reset email arrives in minutes.",
    "Invoices are in your account under Orders, one PDF per order.",
    "Orders can be cancelled free of charge until they have shipped.",
]


STOPWORDS = {"a", "an", "are", "can", "do", "how", "i", "in", "is", "my", "of", "the", "to"}


def _words(text: str) -> set[str]:
    # A crude stem (the first five letters) lets "invoice" match "Invoices".
    words = (w.strip("?.,;'").lower() for w in text.split())
    return {w[:5] for w in words if w and w not in STOPWORDS}


@tracescore.agent(name="faq-bot")
def answer(question: str) -> str:
    """Answer with the knowledge-base entry sharing the most words with the question (a real
    agent would retrieve and call a model here)."""
    asked = _words(question)
    return max(KNOWLEDGE_BASE, key=lambda doc: len(asked & _words(doc)))


@tracescore.agent(name="faq-bot-async")
async def answer_async(question: str) -> str:
    """The same agent, async: ``run_evals`` awaits async targets."""
    await asyncio.sleep(0)
    return answer(question)


def test_faq_bot_answers_match_expected(tracescore_evals):  # noqa: F811 - the fixture
    result = tracescore_evals.run(
        data=DATA,
        scorers=[{"scorer": create_content_similarity_scorer(), "threshold": 0.8}],
        target=answer,
    )
    assert_passed(result)
    assert result.summary["total_items"] == 6


def test_async_faq_bot_with_concurrency():
    result = tracescore.run_evals(
        data=DATA,
        scorers=[{"scorer": create_content_similarity_scorer(), "threshold": 0.8}],
        target=answer_async,
        concurrency=4,
        progress=False,
    )
    assert_passed(result)
    # Every item was scored: none failed, none was skipped.
    assert result.summary["scorers"]["content-similarity"]["scored"] == 6
