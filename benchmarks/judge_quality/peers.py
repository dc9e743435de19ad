"""Ragas's and DeepEval's metrics on the benchmark's items, for ``run.py``; runs in a virtualenv
of their own, never in tracescore's::

    python3 -m venv /work/venvs/quality-peers
    /work/venvs/quality-peers/bin/pip install "ragas==0.4.3" "langchain-community<0.4" \\
        "langchain<1" "langchain-core<1" "langchain-openai<1"
    /work/venvs/quality-peers/bin/pip install "deepeval==4.3.1"

Reads one request (JSON on stdin: ``engine``, ``scorers``, ``prompt_set``, ``server``,
``model``, ``timeout``, ``items``) and prints one JSON line per item and metric as it lands:
``id``, ``scorer``, ``status`` (``scored``/``error``), ``score``, ``error``, ``judge_calls``,
``prompt_tokens``, ``completion_tokens``, ``seconds``. The judge is the same OpenAI-compatible
server and model tracescore's scorers use, at temperature 0, wired as each peer documents a
custom model: Ragas through LangChain's ``ChatOpenAI`` (tokens counted by LangChain's OpenAI
callback), DeepEval through a ``DeepEvalBaseLLM`` subclass whose ``generate`` asks the server
for JSON (``response_format`` ``json_object``: llama.cpp's server rejects ``json_schema``) and
validates it into the schema DeepEval passes.

Metrics: Ragas ``Faithfulness`` (scorer ``ragas-faithfulness``); DeepEval ``FaithfulnessMetric``
(``deepeval-faithfulness``) and ``HallucinationMetric`` (``deepeval-hallucination``, the
context given as its ``context``; in DeepEval 4.3.1 its score is the share of contexts the
output agrees with and a test case succeeds at score >= threshold: higher is better).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
import warnings
from importlib.metadata import version
from typing import Any


def emit(record: dict[str, Any]) -> None:
    print(json.dumps(record, ensure_ascii=False), flush=True)


def failure(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:600]


async def run_ragas(request: dict[str, Any]) -> None:
    from langchain_community.callbacks import get_openai_callback
    from langchain_openai import ChatOpenAI
    from ragas.dataset_schema import SingleTurnSample
    from ragas.llms import LangchainLLMWrapper
    from ragas.metrics import Faithfulness

    llm = LangchainLLMWrapper(ChatOpenAI(model=request["model"], base_url=request["server"],
                                         api_key="none", temperature=0,
                                         timeout=request["timeout"], max_retries=0))
    metric = Faithfulness(llm=llm)
    for item in request["items"]:
        sample = SingleTurnSample(user_input=item["input"], response=item["output"],
                                  retrieved_contexts=list(item["context"]))
        started = time.perf_counter()
        record: dict[str, Any] = {"id": item["id"], "scorer": "ragas-faithfulness"}
        with get_openai_callback() as usage:
            try:
                value = await metric.single_turn_ascore(sample, timeout=request["timeout"] * 4)
                if value != value:  # NaN: Ragas could not score (no statements, bad JSON)
                    record.update(status="error", score=None, error="nan")
                else:
                    record.update(status="scored", score=float(value), error=None)
            except Exception as exc:  # noqa: BLE001 - a benchmark records every failure
                record.update(status="error", score=None, error=failure(exc))
        record.update(judge_calls=usage.successful_requests, prompt_tokens=usage.prompt_tokens,
                      completion_tokens=usage.completion_tokens,
                      seconds=round(time.perf_counter() - started, 2))
        emit(record)


def run_deepeval(request: dict[str, Any]) -> None:
    from deepeval.metrics import FaithfulnessMetric, HallucinationMetric
    from deepeval.models import DeepEvalBaseLLM
    from deepeval.test_case import LLMTestCase
    from openai import OpenAI

    client = OpenAI(base_url=request["server"], api_key="none", timeout=request["timeout"],
                    max_retries=0)
    counts = {"calls": 0, "prompt": 0, "completion": 0}

    class ServerModel(DeepEvalBaseLLM):  # type: ignore[misc]
        """The benchmark's judge as a DeepEval custom model (temperature 0, JSON mode)."""

        def __init__(self) -> None:
            super().__init__(model=request["model"])

        def load_model(self) -> Any:
            return client

        def generate(self, prompt: str, schema: Any = None) -> Any:
            kwargs: dict[str, Any] = {}
            if schema is not None:
                kwargs["response_format"] = {"type": "json_object"}
                prompt += ("\n\nAnswer with one JSON object that matches this JSON schema:\n"
                           + json.dumps(schema.model_json_schema()))
            reply = client.chat.completions.create(
                model=request["model"], temperature=0,
                messages=[{"role": "user", "content": prompt}], **kwargs)
            counts["calls"] += 1
            if reply.usage is not None:
                counts["prompt"] += reply.usage.prompt_tokens
                counts["completion"] += reply.usage.completion_tokens
            text = reply.choices[0].message.content or ""
            return schema.model_validate_json(text) if schema is not None else text

        async def a_generate(self, prompt: str, schema: Any = None) -> Any:
            return self.generate(prompt, schema)

        def get_model_name(self) -> str:
            return str(request["model"])

    model = ServerModel()
    metrics = {
        "deepeval-faithfulness": lambda: FaithfulnessMetric(
            threshold=0.5, model=model, async_mode=False),
        "deepeval-hallucination": lambda: HallucinationMetric(
            threshold=0.5, model=model, async_mode=False),
    }
    for item in request["items"]:
        case = LLMTestCase(input=item["input"], actual_output=item["output"],
                           retrieval_context=list(item["context"]),
                           context=list(item["context"]))
        for scorer in request["scorers"]:
            record: dict[str, Any] = {"id": item["id"], "scorer": scorer}
            counts.update(calls=0, prompt=0, completion=0)
            started = time.perf_counter()
            try:
                metric = metrics[scorer]()
                metric.measure(case)
                record.update(status="scored", score=float(metric.score), error=None)
            except Exception as exc:  # noqa: BLE001 - a benchmark records every failure
                record.update(status="error", score=None, error=failure(exc))
            record.update(judge_calls=counts["calls"], prompt_tokens=counts["prompt"],
                          completion_tokens=counts["completion"],
                          seconds=round(time.perf_counter() - started, 2))
            emit(record)


def main() -> int:
    warnings.simplefilter("ignore")
    request = json.load(sys.stdin)
    engine = request["engine"]
    expected = f"{engine}-{version(engine)}"
    if request["prompt_set"] != expected:
        print(f"peers.py: the plan asks for {request['prompt_set']}, this virtualenv has "
              f"{expected}", file=sys.stderr)
        return 2
    os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
    os.environ.setdefault("DEEPEVAL_DISABLE_PROGRESS_BAR", "YES")
    os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
    os.chdir(tempfile.mkdtemp(prefix="judge-quality-peers-"))  # DeepEval writes .deepeval/
    if engine == "ragas":
        asyncio.run(run_ragas(request))
    elif engine == "deepeval":
        run_deepeval(request)
    else:
        print(f"peers.py: unknown engine {engine!r}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
