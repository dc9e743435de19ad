"""What tracescore costs a LangChain app whose spans no rule selects.

Run (in the integration's venv): ``python benchmarks/bench_chain.py [--calls 300] [--rounds 5]``

A LangChain RAG chain (LangChain's in-memory vector store with fake embeddings, a prompt,
LangChain's fake chat model, a string parser: about nine spans per call under OpenInference's
instrumentation) is invoked ``--calls`` times per round in three set-ups, and the median over
rounds of the ms per call is printed:

- ``uninstrumented``: no instrumentation at all (what the chain itself costs);
- ``openinference``: OpenInference's instrumentation on a ``TracerProvider`` with no processor
  (what tracing costs before any processor runs);
- ``+ tracescore, no rule``: the same instrumentation on tracescore's provider,
  ``configure(exporter=False)`` without rules: tracescore's processors on every span;
- ``+ tracescore, rule matches nothing``: the same with one rule ``on="tool"`` (the chain has
  no tool span): the readers and the rule match on top.

The ratio of the last two is the figure to watch: a rule that matches nothing must not make a
LangChain app slower. Nothing is exported (``exporter=False``) so that export cost, which any
OTel set-up pays, is not counted. Output: a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any

os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

from langchain_core.embeddings import DeterministicFakeEmbedding  # noqa: E402
from langchain_core.language_models.fake_chat_models import FakeListChatModel  # noqa: E402
from langchain_core.output_parsers import StrOutputParser  # noqa: E402
from langchain_core.prompts import ChatPromptTemplate  # noqa: E402
from langchain_core.runnables import RunnablePassthrough  # noqa: E402
from langchain_core.vectorstores import InMemoryVectorStore  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402

import tracescore  # noqa: E402
from tracescore.scorers import create_answer_relevancy_scorer  # noqa: E402

DOCS = [f"Document {i}: the Eiffel Tower was completed in {1880 + i}." for i in range(20)]


def build_chain() -> Any:
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=64))
    store.add_texts(DOCS)
    retriever = store.as_retriever(search_kwargs={"k": 4})
    prompt = ChatPromptTemplate.from_messages([
        ("system", "Answer from the context.\n\n{context}"), ("human", "{question}")])
    llm = FakeListChatModel(responses=["The Eiffel Tower was completed in 1889."])

    def join(docs: list[Any]) -> str:
        return "\n\n".join(doc.page_content for doc in docs)

    return ({"context": retriever | join, "question": RunnablePassthrough()}
            | prompt | llm | StrOutputParser())


def per_call_ms(chain: Any, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        chain.invoke("When was the Eiffel Tower completed?")
    return (time.perf_counter() - start) * 1000 / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    from openinference.instrumentation.langchain import LangChainInstrumentor

    chain = build_chain()
    per_call_ms(chain, 20)  # warm-up: imports, caches
    bare = TracerProvider()
    rule = tracescore.ScoringRule(
        scorer=create_answer_relevancy_scorer(model="openai/unused"), on="tool")
    instrumentor = LangChainInstrumentor()
    results: dict[str, list[float]] = {"uninstrumented": [], "openinference": [],
                                       "tracescore_no_rule": [], "tracescore": []}

    def timed(key: str, provider: Any) -> None:
        instrumentor.instrument(tracer_provider=provider)
        per_call_ms(chain, 5)
        results[key].append(per_call_ms(chain, args.calls))
        instrumentor.uninstrument()

    for _ in range(args.rounds):
        results["uninstrumented"].append(per_call_ms(chain, args.calls))
        timed("openinference", bare)
        timed("tracescore_no_rule", tracescore.configure(exporter=False).tracer_provider)
        timed("tracescore", tracescore.configure(exporter=False, scoring=[rule]).tracer_provider)
    stats = tracescore.stats()
    tracescore.shutdown(2000)

    med = {k: statistics.median(v) for k, v in results.items()}
    ratio = med["tracescore"] / med["openinference"]
    print(f"{'set-up':<40} {'ms/call':>8}")
    print(f"{'uninstrumented':<40} {med['uninstrumented']:>8.3f}")
    print(f"{'openinference':<40} {med['openinference']:>8.3f}")
    print(f"{'+ tracescore, no rule':<40} {med['tracescore_no_rule']:>8.3f}")
    print(f"{'+ tracescore, rule matches nothing':<40} {med['tracescore']:>8.3f}")
    print(f"ratio tracescore (rule matches nothing) / openinference: {ratio:.3f}; "
          f"spans scored: {stats.spans_scored}")
    print(json.dumps({"calls": args.calls, "rounds": args.rounds,
                      "ms_per_call": med, "ratio": round(ratio, 4)}))


if __name__ == "__main__":
    main()
