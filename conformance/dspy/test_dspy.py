"""DSPy, traced through OpenInference (``DSPyInstrumentor``, with ``LiteLLMInstrumentor`` as
its docs pair them), as DSPy's RAG tutorial builds a program: ``dspy.LM`` pointed at the model
server, ``dspy.retrievers.Embeddings`` over a corpus (``dspy.Embedder``), and a module whose
``forward`` searches and calls ``dspy.ChainOfThought("context, question -> response")``.

Spans per call: ``RAG.forward`` (root ``CHAIN``: ``{"question"}`` in, the ``Prediction``'s
``reasoning`` and ``response`` out) > ``ChainOfThought.forward`` > ``Predict.forward`` > ... >
``ChatAdapter.__call__`` > ``LM.__call__`` (``LLM``: the completion in DSPy's
``[[ ## field ## ]]`` format). The corpus and query embeddings are ``EMBEDDING`` roots of their
own traces; the retriever makes no span.
"""

from __future__ import annotations

from typing import Any

import dspy
from checks import Echo, kinds, scored
from model_server import API_KEY, ModelServer, Turn
from openinference.instrumentation.dspy import DSPyInstrumentor
from openinference.instrumentation.litellm import LiteLLMInstrumentor

import tracescore
from tracescore.scorers import create_answer_relevancy_scorer, create_faithfulness_scorer
from tracescore.testing import CaptureScores

QUESTION = "When was the Eiffel Tower completed?"
ANSWER = "The Eiffel Tower was completed in 1889."
REASONING = "The first passage gives the year of completion."
CORPUS = ["The Eiffel Tower in Paris was completed in 1889.",
          "The tower is 330 metres tall.", "Bananas are yellow and curved."]
RETRIEVED = CORPUS[:2]


def dspy_model(body: dict[str, Any]) -> Turn:
    """The model in DSPy's chat format, answering the fields the adapter asked for."""
    return Turn(text=f"[[ ## reasoning ## ]]\n{REASONING}\n\n[[ ## response ## ]]\n{ANSWER}\n\n"
                     "[[ ## completed ## ]]")


def run_app(model: ModelServer, capture: CaptureScores, *, traced_search: bool = False) -> str:
    model.script = dspy_model
    instrumentors = [DSPyInstrumentor(), LiteLLMInstrumentor()]
    for instrumentor in instrumentors:
        instrumentor.instrument(tracer_provider=capture.tracer_provider)
    try:
        dspy.configure(lm=dspy.LM("openai/gpt-4o-mini", api_base=model.base_url,
                                  api_key=API_KEY, cache=False))
        embedder = dspy.Embedder("openai/text-embedding-3-small", api_base=model.base_url,
                                 api_key=API_KEY, caching=False)
        search = dspy.retrievers.Embeddings(embedder=embedder, corpus=CORPUS, k=2)

        def passages(question: str) -> list[str]:
            return list(search(question).passages)

        if traced_search:  # what the not-scorable reason tells a DSPy user to do
            passages = tracescore.retrieval(passages)

        class RAG(dspy.Module):
            def __init__(self) -> None:
                self.respond = dspy.ChainOfThought("context, question -> response")

            def forward(self, question: str) -> Any:
                return self.respond(context=passages(question), question=question)

        return str(RAG()(question=QUESTION).response)
    finally:
        for instrumentor in instrumentors:
            instrumentor.uninstrument()
        assert capture.flush()


def test_program_is_judged_on_the_question_and_the_response_without_reasoning(
        model: ModelServer, capture: CaptureScores, echo: Echo) -> None:
    capture.configure(scoring=[
        tracescore.ScoringRule(scorer=echo.scorer(), on="agent"),
        tracescore.ScoringRule(scorer=create_answer_relevancy_scorer(), on="agent")])
    assert run_app(model, capture) == ANSWER
    assert [s.name for s, _ in scored(capture, "echo")] == ["RAG.forward"], kinds(capture)
    assert echo.seen == [{"id": "echo", "input": QUESTION, "output": ANSWER, "context": [],
                          "tool_calls": []}]
    (_, relevancy), = scored(capture, "answer-relevancy")
    assert relevancy["gen_ai.evaluation.score.value"] == 1.0


def test_the_model_call_is_judged_once_on_its_answer_field(
        model: ModelServer, capture: CaptureScores, echo: Echo) -> None:
    capture.configure(scoring=[tracescore.ScoringRule(scorer=echo.scorer(), on="llm")])
    run_app(model, capture)
    assert len(scored(capture)) == 1, kinds(capture)
    assert echo.seen[0]["output"] == ANSWER  # not the [[ ## reasoning ## ]] text
    assert QUESTION in echo.seen[0]["input"]


def test_without_a_retrieval_span_faithfulness_says_why_and_how_to_pass_context(
        model: ModelServer, capture: CaptureScores) -> None:
    capture.configure(scoring=[tracescore.ScoringRule(scorer=create_faithfulness_scorer(),
                                                      on="agent")])
    run_app(model, capture)
    (_, faithfulness), = scored(capture)
    reason = faithfulness["gen_ai.evaluation.explanation"]
    assert faithfulness["gen_ai.evaluation.score.label"] == "not_scorable"
    assert "no retrieval span" in reason and "dspy.retrievers.Embeddings" in reason
    assert "@tracescore.retrieval" in reason and "context_extractor" in reason


def test_a_search_marked_as_retrieval_gives_faithfulness_exactly_its_passages(
        model: ModelServer, capture: CaptureScores, echo: Echo) -> None:
    capture.configure(scoring=[
        tracescore.ScoringRule(scorer=echo.scorer(context=True), on="agent"),
        tracescore.ScoringRule(scorer=create_faithfulness_scorer(), on="agent")])
    run_app(model, capture, traced_search=True)
    assert [s.name for s, _ in scored(capture, "echo")] == ["RAG.forward"], kinds(capture)
    assert (echo.seen[0]["output"], echo.seen[0]["context"]) == (ANSWER, RETRIEVED)
    (_, faithfulness), = scored(capture, "faithfulness")
    assert faithfulness["gen_ai.evaluation.score.value"] == 1.0
