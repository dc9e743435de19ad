"""Ragas's faithfulness on labelled items, for ``bench_judge_quality.py``; runs in a virtualenv
with Ragas 0.4.3 (``pip install "ragas==0.4.3" "langchain-community<0.4" "langchain<1"
"langchain-core<1" "langchain-openai<1"``), never in tracescore's.

Reads the items (JSON: ``id``, ``input``, ``context``, ``output``) and appends one JSON line per
item to the state file (``id``, ``score`` or None, ``error``, ``seconds``); items already in
the state file with a score are skipped, so an interrupted run resumes. The judge is the
OpenAI-compatible server at ``--base`` serving the model as ``judge``, through LangChain's
``ChatOpenAI`` at temperature 0, as Ragas's documentation wires a custom LLM.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import warnings
from pathlib import Path


def done_ids(state: Path) -> set[str]:
    if not state.exists():
        return set()
    out = set()
    for line in state.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if record.get("score") is not None:
            out.add(record["id"])
    return out


async def run(args: argparse.Namespace) -> None:
    warnings.simplefilter("ignore", DeprecationWarning)
    from langchain_openai import ChatOpenAI
    from ragas.dataset_schema import SingleTurnSample
    from ragas.llms import LangchainLLMWrapper
    from ragas.metrics import Faithfulness

    llm = LangchainLLMWrapper(ChatOpenAI(model="judge", base_url=args.base, api_key="none",
                                         temperature=0, timeout=args.timeout, max_retries=0))
    metric = Faithfulness(llm=llm)
    items = json.loads(Path(args.items).read_text(encoding="utf-8"))
    state = Path(args.state)
    skip = done_ids(state)
    for number, item in enumerate(items, start=1):
        if item["id"] in skip:
            continue
        sample = SingleTurnSample(user_input=item["input"], response=item["output"],
                                  retrieved_contexts=list(item["context"]))
        started = time.perf_counter()
        score, error = None, None
        try:
            value = await metric.single_turn_ascore(sample, timeout=args.timeout * 4)
            score = None if value != value else float(value)  # NaN: Ragas could not score
            if score is None:
                error = "nan"
        except Exception as exc:  # noqa: BLE001 - a benchmark records every failure
            error = f"{type(exc).__name__}: {exc}"[:300]
        record = {"id": item["id"], "score": score, "error": error,
                  "seconds": round(time.perf_counter() - started, 1)}
        with state.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
        print(f"ragas {number}/{len(items)} {item['id']}: {score} {error or ''}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True)
    parser.add_argument("--items", required=True)
    parser.add_argument("--state", required=True)
    parser.add_argument("--timeout", type=float, default=600.0)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
