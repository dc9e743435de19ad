"""LangGraph, traced through OpenInference (``LangChainInstrumentor``), as LangGraph's docs
build an agent with the Graph API: a ``StateGraph(MessagesState)`` with a model node
(``ChatOpenAI(...).bind_tools(tools)``), a ``ToolNode`` and ``tools_condition``; the tool
retrieves from a LangChain vector store (the docs' agentic RAG: ``retriever.invoke`` inside a
``@tool``). Embeddings come from the model server (``OpenAIEmbeddings``).

Spans per ``graph.invoke``: ``LangGraph`` (root ``CHAIN``: the state in and out) > node runs
(``call_model``, ``tools``: ``CHAIN`` with ``langgraph_node`` metadata; a node whose name
contains "agent" would be marked ``AGENT``) > ``ChatOpenAI`` (``LLM``), ``retrieve_facts``
(``TOOL``) > ``VectorStoreRetriever`` (``RETRIEVER`` with the documents).
"""

from __future__ import annotations

from checks import TOOL_ONLY, Echo, kinds, scored
from langchain_core.tools import tool
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_openai import ChatOpenAI, OpenAIEmbeddings
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from model_server import API_KEY, ModelServer
from openinference.instrumentation.langchain import LangChainInstrumentor

import tracescore
from tracescore.scorers import create_faithfulness_scorer, create_tool_call_accuracy_scorer_code
from tracescore.testing import CaptureScores

QUESTION = "When was the Eiffel Tower completed?"
ANSWER = "The Eiffel Tower was completed in 1889."
DOCUMENTS = ["The Eiffel Tower in Paris was completed in 1889.",
             "The tower is 330 metres tall.", "Bananas are yellow and curved."]
RETRIEVED = DOCUMENTS[:2]
TOOL_ARGUMENTS = {"query": QUESTION}


def run_app(model: ModelServer, capture: CaptureScores, *, node: str = "call_model") -> str:
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=capture.tracer_provider)
    llm = ChatOpenAI(model="gpt-4o-mini", base_url=model.base_url, api_key=API_KEY)
    embeddings = OpenAIEmbeddings(model="text-embedding-3-small", base_url=model.base_url,
                                  api_key=API_KEY, check_embedding_ctx_length=False)
    try:
        store = InMemoryVectorStore(embeddings)
        store.add_texts(DOCUMENTS)
        retriever = store.as_retriever(search_kwargs={"k": 2})

        @tool
        def retrieve_facts(query: str) -> str:
            """Search the knowledge base."""
            return "\n\n".join(doc.page_content for doc in retriever.invoke(query))

        tools = [retrieve_facts]
        bound = llm.bind_tools(tools)

        def call_model(state: MessagesState) -> dict:
            return {"messages": [bound.invoke(state["messages"])]}

        graph = StateGraph(MessagesState)
        graph.add_node(node, call_model)
        graph.add_node("tools", ToolNode(tools))
        graph.add_edge(START, node)
        graph.add_conditional_edges(node, tools_condition)
        graph.add_edge("tools", node)
        app = graph.compile()
        state = app.invoke({"messages": [{"role": "user", "content": QUESTION}]})
        return str(state["messages"][-1].content)
    finally:
        instrumentor.uninstrument()
        llm.root_client.close()
        assert capture.flush()


def test_graph_run_is_the_agent_turn_judged_with_exactly_the_retrieved_documents(
        model: ModelServer, capture: CaptureScores, echo: Echo) -> None:
    capture.configure(scoring=[
        tracescore.ScoringRule(scorer=echo.scorer(context=True), on="agent"),
        tracescore.ScoringRule(scorer=create_faithfulness_scorer(), on="agent")])
    assert run_app(model, capture) == ANSWER
    assert [s.name for s, _ in scored(capture, "echo")] == ["LangGraph"], kinds(capture)
    assert echo.seen == [{"id": "echo", "input": QUESTION, "output": ANSWER,
                          "context": RETRIEVED, "tool_calls": []}]
    (_, faithfulness), = scored(capture, "faithfulness")
    assert faithfulness["gen_ai.evaluation.score.value"] == 1.0


def test_a_node_named_agent_is_a_step_not_a_turn(
        model: ModelServer, capture: CaptureScores, echo: Echo) -> None:
    capture.configure(scoring=[tracescore.ScoringRule(scorer=echo.scorer(), on="agent")])
    run_app(model, capture, node="agent")  # OpenInference marks this node AGENT
    assert [s.name for s, _ in scored(capture)] == ["LangGraph"], kinds(capture)
    assert [(e["input"], e["output"]) for e in echo.seen] == [(QUESTION, ANSWER)]


def test_each_model_call_is_judged_once_and_the_tool_only_turn_says_so(
        model: ModelServer, capture: CaptureScores, echo: Echo) -> None:
    capture.configure(scoring=[
        tracescore.ScoringRule(scorer=echo.scorer(), on="llm"),
        tracescore.ScoringRule(scorer=create_tool_call_accuracy_scorer_code(
            expected_tool="retrieve_facts"), on="llm")])
    run_app(model, capture)
    events = scored(capture, "echo")
    assert [s.name for s, _ in events] == ["ChatOpenAI", "ChatOpenAI"], kinds(capture)
    assert TOOL_ONLY in events[0][1]["gen_ai.evaluation.explanation"]
    assert [e["output"] for e in echo.seen] == [ANSWER]
    tools = [attrs for _, attrs in scored(capture, "tool-call-accuracy-code")]
    assert tools[0]["gen_ai.evaluation.score.value"] == 1.0
