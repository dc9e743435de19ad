"""A real LangChain RAG chain, instrumented by the real OpenInference package, scored by
tracescore and exported to an OTLP receiver on loopback.

The chain retrieves from LangChain's own in-memory vector store (fake, deterministic embeddings:
no model download), fills a prompt and asks ``ChatOpenAI`` speaking to a loopback
OpenAI-protocol server (the model); a second loopback server is the judge. A rule
``on="agent"`` with answer relevancy and faithfulness must score the chain the request entered
by, with its question and answer, and faithfulness must judge the documents the retriever span
returned.
"""

from __future__ import annotations

from typing import Any

import tracescore_langchain
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_openai import ChatOpenAI

import tracescore
from tracescore.scorers import create_answer_relevancy_scorer, create_faithfulness_scorer
from tracescore.testing import ScriptedJudge

QUESTION = "When was the Eiffel Tower completed?"
ANSWER = "The Eiffel Tower was completed in 1889."
DOCUMENTS = [
    "The Eiffel Tower in Paris was completed in 1889.",
    "The tower is 330 metres tall.",
    "It was designed by the engineering company of Gustave Eiffel.",
]
EVENT = "gen_ai.evaluation.result"


def _configure(judge: ScriptedJudge) -> None:
    tracescore.configure(service_name="lc-app", judge=judge.as_judge(), scoring=[
        tracescore.ScoringRule(scorer=create_answer_relevancy_scorer(), on="agent"),
        tracescore.ScoringRule(scorer=create_faithfulness_scorer(), on="agent")])


def _run_chain(model: ScriptedJudge) -> str:
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=32))
    store.add_texts(DOCUMENTS)
    retriever = store.as_retriever(search_kwargs={"k": len(DOCUMENTS)})
    prompt = ChatPromptTemplate.from_messages([
        ("system", "Answer from the context only.\n\n{context}"),
        ("human", "{question}")])
    llm = ChatOpenAI(model="gpt-4o-mini", base_url=model.api_base, api_key="sk-loopback-model",
                     max_retries=0)

    def join(docs: list[Any]) -> str:
        return "\n\n".join(doc.page_content for doc in docs)

    chain = ({"context": retriever | join, "question": RunnablePassthrough()}
             | prompt | llm | StrOutputParser())
    try:
        return str(chain.invoke(QUESTION))
    finally:
        llm.root_client.close()  # an open keep-alive socket is a ResourceWarning (an error)


def _events(span: Any) -> dict[str, dict[str, Any]]:
    return {attrs["gen_ai.evaluation.name"]: attrs for name, attrs in span.events
            if name == EVENT}


def test_chain_is_scored_with_its_question_answer_and_retrieved_documents(
        model: ScriptedJudge, judge: ScriptedJudge, receiver: Any) -> None:
    _configure(judge)
    tracescore_langchain.instrument()
    try:
        assert _run_chain(model) == ANSWER
    finally:
        tracescore_langchain.uninstrument()
    assert tracescore.force_flush(20_000)
    assert receiver.wait_for(lambda spans: sum(len(_events(s)) for s in spans) >= 2, 20)

    scored = [s for s in receiver.spans if _events(s)]
    assert len(scored) == 1, [(s.name, s.attributes.get("openinference.span.kind"))
                              for s in receiver.spans]
    (root,) = scored
    assert root.parent_span_id == ""  # the chain the request entered by
    assert root.attributes["openinference.span.kind"] == "CHAIN"
    assert root.scope == "openinference.instrumentation.langchain"
    events = _events(root)
    assert events["answer-relevancy"]["gen_ai.evaluation.score.value"] == 1.0
    assert events["faithfulness"]["gen_ai.evaluation.score.value"] == 1.0
    kinds = {s.attributes.get("openinference.span.kind") for s in receiver.spans}
    assert {"CHAIN", "RETRIEVER", "LLM"} <= kinds

    prompts = dict(zip(judge.schema_names, judge.prompts, strict=True))
    assert QUESTION in prompts["answer_relevancy_verdicts"]  # the chain's input
    assert ANSWER in prompts["answer_relevancy_statements"]  # the chain's output
    assert ANSWER in prompts["output_claims"]
    verdicts = prompts["faithfulness_verdicts"]
    for doc in DOCUMENTS:  # the retriever span's documents, as the context judged
        assert doc in verdicts
    assert "sk-loopback-model" not in "".join(judge.prompts)


def test_chain_with_content_hidden_is_not_scorable_and_says_why(
        model: ScriptedJudge, judge: ScriptedJudge, receiver: Any) -> None:
    _configure(judge)
    tracescore_langchain.instrument(capture_content=False)
    try:
        _run_chain(model)
    finally:
        tracescore_langchain.uninstrument()
    assert tracescore.force_flush(20_000)
    assert receiver.wait_for(lambda spans: sum(len(_events(s)) for s in spans) >= 2, 20)
    (root,) = [s for s in receiver.spans if _events(s)]
    for event in _events(root).values():
        assert event["gen_ai.evaluation.score.label"] == "not_scorable"
        assert "OPENINFERENCE_HIDE_INPUTS" in event["gen_ai.evaluation.explanation"]
    assert judge.requests == []
