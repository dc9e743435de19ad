"""LlamaIndex, traced through OpenInference (``LlamaIndexInstrumentor``), as its starter
examples show: ``Settings.llm = OpenAI(...)`` and ``Settings.embed_model = OpenAIEmbedding(...)``
(``api_base`` pointing at the model server), a ``VectorStoreIndex.from_documents`` queried
through ``index.as_query_engine()``, and a ``FunctionAgent`` with one tool.

Spans of the index build: ``SentenceSplitter.__call__`` (a root ``CHAIN`` whose input and
output are reprs of nodes) and ``OpenAIEmbedding.get_text_embedding_batch`` (a root
``EMBEDDING``), each its own trace. Of a query: ``RetrieverQueryEngine.query`` (root ``CHAIN``:
question and answer as text) > ``VectorIndexRetriever.retrieve`` (``RETRIEVER`` with the
documents) > ``_retrieve``, ..., ``OpenAI.predict`` (``LLM``: a prompt template's repr in) >
``OpenAI.chat`` (``LLM``: the messages). Of the agent: ``FunctionAgent.run`` (root ``CHAIN``:
its start state in, a cut ``StopEvent`` repr out) > ``OpenAI._prepare_chat_with_tools``
(``LLM``, no model call) and ``OpenAI.astream_chat`` (``LLM``) per step, ``FunctionTool.acall``.
"""

from __future__ import annotations

import asyncio

from checks import TOOL_ONLY, Echo, kinds, scored
from llama_index.core import Document, Settings, VectorStoreIndex
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.embeddings.openai import OpenAIEmbedding
from llama_index.llms.openai import OpenAI
from model_server import API_KEY, ModelServer
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

import tracescore
from tracescore.scorers import (
    create_answer_relevancy_scorer,
    create_faithfulness_scorer,
    create_tool_call_accuracy_scorer_code,
)
from tracescore.testing import CaptureScores

QUESTION = "When was the Eiffel Tower completed?"
ANSWER = "The Eiffel Tower was completed in 1889."
DOCUMENTS = ["The Eiffel Tower in Paris was completed in 1889.",
             "The tower is 330 metres tall.", "Bananas are yellow and curved."]
RETRIEVED = DOCUMENTS[:2]  # similarity_top_k=2: the banana has no word of the question
AGENT_QUESTION = "Look up when the Eiffel Tower was completed."
TOOL_ARGUMENTS = {"landmark": "Eiffel Tower"}
TOOL_RESULT = "Completed in 1889."


def lookup_landmark(landmark: str) -> str:
    """Facts about a landmark."""
    return TOOL_RESULT


class App:
    def __init__(self, model: ModelServer, capture: CaptureScores) -> None:
        self.capture = capture
        self.instrumentor = LlamaIndexInstrumentor()
        self.instrumentor.instrument(tracer_provider=capture.tracer_provider)
        Settings.llm = OpenAI(model="gpt-4o-mini", api_base=model.base_url, api_key=API_KEY)
        Settings.embed_model = OpenAIEmbedding(model="text-embedding-3-small",
                                               api_base=model.base_url, api_key=API_KEY)

    def build(self) -> VectorStoreIndex:
        return VectorStoreIndex.from_documents([Document(text=t) for t in DOCUMENTS])

    def query(self, index: VectorStoreIndex) -> str:
        return str(index.as_query_engine(similarity_top_k=2).query(QUESTION))

    def agent(self) -> str:
        agent = FunctionAgent(tools=[lookup_landmark], llm=Settings.llm,
                              system_prompt="You are a travel guide.")

        async def main() -> str:
            return str(await agent.run(AGENT_QUESTION))

        return asyncio.run(main())

    def close(self) -> None:
        self.instrumentor.uninstrument()
        assert self.capture.flush()


def test_index_build_is_never_an_agent_and_the_query_is_judged_on_its_text(
        model: ModelServer, capture: CaptureScores, echo: Echo) -> None:
    capture.configure(scoring=[tracescore.ScoringRule(scorer=echo.scorer(), on="agent")])
    app = App(model, capture)
    try:
        index = app.build()
        assert app.query(index) == ANSWER
    finally:
        app.close()
    assert [s.name for s, _ in scored(capture)] == ["RetrieverQueryEngine.query"], kinds(capture)
    assert echo.seen == [{"id": "echo", "input": QUESTION, "output": ANSWER, "context": [],
                          "tool_calls": []}]


def test_faithfulness_judges_exactly_the_retrieved_documents(
        model: ModelServer, capture: CaptureScores, echo: Echo) -> None:
    capture.configure(scoring=[
        tracescore.ScoringRule(scorer=echo.scorer(context=True), on="agent"),
        tracescore.ScoringRule(scorer=create_faithfulness_scorer(), on="agent"),
        tracescore.ScoringRule(scorer=create_answer_relevancy_scorer(), on="agent")])
    app = App(model, capture)
    try:
        app.query(app.build())
    finally:
        app.close()
    # the query, once: the index build is no turn, and costs no judge call
    assert [s.name for s, _ in scored(capture, "faithfulness")] == [
        "RetrieverQueryEngine.query"], kinds(capture)
    assert [e["context"] for e in echo.seen] == [RETRIEVED]
    scores = {attrs["gen_ai.evaluation.name"]: attrs for _, attrs in scored(capture)}
    assert scores["faithfulness"]["gen_ai.evaluation.score.value"] == 1.0
    assert scores["answer-relevancy"]["gen_ai.evaluation.score.value"] == 1.0
    verdicts = capture.judge.prompts[capture.judge.schema_names.index("faithfulness_verdicts")]
    assert all(doc in verdicts for doc in RETRIEVED) and DOCUMENTS[2] not in verdicts


def test_predict_around_chat_is_one_model_call(
        model: ModelServer, capture: CaptureScores, echo: Echo) -> None:
    capture.configure(scoring=[tracescore.ScoringRule(scorer=echo.scorer(), on="llm")])
    app = App(model, capture)
    try:
        app.query(app.build())
    finally:
        app.close()
    assert [s.name for s, _ in scored(capture)] == ["OpenAI.chat"], kinds(capture)
    assert echo.seen[0]["output"] == ANSWER
    assert QUESTION in echo.seen[0]["input"] and "PromptTemplate(" not in echo.seen[0]["input"]


def test_agent_turn_is_read_from_its_model_calls_and_the_tool_only_turn_says_so(
        model: ModelServer, capture: CaptureScores, echo: Echo) -> None:
    capture.configure(scoring=[
        tracescore.ScoringRule(scorer=echo.scorer(), on="agent"),
        tracescore.ScoringRule(scorer=echo.scorer("echo-llm"), on="llm"),
        tracescore.ScoringRule(scorer=create_tool_call_accuracy_scorer_code(
            expected_tool="lookup_landmark"), on="llm")])
    app = App(model, capture)
    try:
        assert app.agent() == ANSWER
    finally:
        app.close()
    agent = [(s.name, e) for s, e in scored(capture, "echo")]
    assert [name for name, _ in agent] == ["FunctionAgent.run"], kinds(capture)
    turn = [e for e in echo.seen if e["id"] == "echo"]
    assert turn == [{"id": "echo", "input": AGENT_QUESTION,
                     "output": ANSWER, "context": [],
                     "tool_calls": []}]
    calls = scored(capture, "echo-llm")
    assert [s.name for s, _ in calls] == ["OpenAI.astream_chat"] * 2, kinds(capture)
    assert TOOL_ONLY in calls[0][1]["gen_ai.evaluation.explanation"]
    tools = [attrs for _, attrs in scored(capture, "tool-call-accuracy-code")]
    assert tools[0]["gen_ai.evaluation.score.value"] == 1.0
