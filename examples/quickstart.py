"""tracescore quickstart: a decorated agent and retrieval, one scoring rule, scores on spans.

A tiny FAQ bot answers three questions. Every trace is scored online with the heuristic
``content-similarity`` scorer against an expected answer (no judge model needed); each score is
attached to the agent span as a ``gen_ai.evaluation.result`` event and printed here through
``on_score``.

Run it::

    python examples/quickstart.py

Spans go to OTLP when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set, otherwise to
``tracescore-traces.jsonl`` in the working directory (``TRACESCORE_EXPORT_FILE`` changes it).
For LLM-judged scorers, add ``judge="openai/gpt-4o-mini"`` to ``configure`` (or set
``TRACESCORE_JUDGE_MODEL``) and a rule with e.g. ``create_answer_relevancy_scorer()``.
"""

from __future__ import annotations

import tracescore
from tracescore.scorers import create_content_similarity_scorer

DOCUMENTS = [
    "Refunds are issued within 14 days of receiving the returned item.",
    "Standard shipping takes 3 to 5 business days within the EU.",
    "Support is available by chat from 9:00 to 17:00 CET on weekdays.",
]

# What a good answer says, per question: the ground truth the scorer compares with.
EXPECTED = {
    "How long do refunds take?": "Refunds are issued within 14 days of receiving the item.",
    "How long does shipping take?": "Shipping takes 3 to 5 business days within the EU.",
    "When can I reach support?": "Support is available by chat on weekdays, 9:00 to 17:00 CET.",
}


@tracescore.retrieval(name="faq-search")
def search(query: str) -> list[str]:
    """Return the documents sharing the most words with the query, best first."""
    words = set(query.lower().rstrip("?").split())
    return sorted(DOCUMENTS, key=lambda d: -len(words & set(d.lower().split())))[:2]


@tracescore.agent(name="faq-bot")
def answer(question: str) -> str:
    """Answer from the best document (a real agent would call a model here)."""
    return search(question)[0]


def main() -> None:
    scores: list[tracescore.ScoreEvent] = []
    instance = tracescore.configure(
        service_name="quickstart",
        scoring=[
            tracescore.ScoringRule(
                scorer=create_content_similarity_scorer(),
                on="agent",
                sample_rate=1.0,
                # call_input is the agent's argument: the question.
                ground_truth=lambda span, question: EXPECTED[question],
            )
        ],
        on_score=scores.append,
    )

    for question in EXPECTED:
        answer(question)
    tracescore.force_flush()  # wait for the scores, then export

    for event in scores:
        print(f"{event.span_name}: {event.scorer_id} = {event.score:.3f}  ({event.explanation})")
    print(f"spans went to: {instance.exporter_description}")
    tracescore.shutdown()


if __name__ == "__main__":
    main()
