"""Judge calls and tokens of every LLM scorer on one fixed RAG sample, next to Mastra's counts.

Run: ``python benchmarks/bench_judge_calls.py [--json PATH]``

The script starts the loopback judge server of the test suite (``tests/judge_server.py``, a
real OpenAI-compatible HTTP server reached through litellm), finds every LLM scorer factory
registered in ``tracescore.scorers`` when it runs (``create_*_scorer*`` whose scorer calls a
judge; heuristic scorers are skipped), runs each once on the same sample (a question, a
four-sentence answer, three context chunks, a reference answer) and prints one row per scorer:
judge calls, prompt tokens, completion tokens, Mastra's call count where known, and, for
factories with ``reason="inline"``, the same numbers in that mode and what it saves.

Replies are scripted plausibly and generically: each request's JSON schema (sent in
``response_format``) is filled in, lists of judged items get one entry per indexed element
(``<claim index="0">`` ...) of the last kind in the prompt, and lists of extracted items get
one entry per sentence of the answer; ``REPLY_OVERRIDES`` holds hand-written answers where a
schema needs values the prompt decides (tool names). A scorer whose answers still do not fit
is reported as failed, not hidden.

Token counts are the ``usage`` the loopback server returns, which it derives from text length
(``len(text) // 4`` over the message contents; the JSON schema in ``response_format`` is not
counted): they compare scorers and modes with each other, not with a real tokenizer's counts.
Every scorer gets a fresh ``Judge`` so that no answer comes from another run's request cache.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tracescore import scorers  # noqa: E402
from tracescore.testing import ScriptedJudge as JudgeServer  # noqa: E402
from tracescore.testing import make_judge

# -- the sample ----------------------------------------------------------------------------------
SYSTEM_PROMPT = "You are a health assistant. Answer in plain language and cite no studies."
QUESTION = "How does regular exercise benefit the heart?"
ANSWER = (
    "Regular exercise strengthens the heart muscle, so it pumps more blood with each beat. "
    "It also lowers resting blood pressure over time. "
    "Aerobic activity raises HDL, the protective form of cholesterol. "
    "Most adults should aim for about 150 minutes of moderate activity a week."
)
CONTEXT = [
    "Aerobic exercise makes the heart muscle stronger, so each beat moves more blood.",
    "Regular physical activity lowers resting blood pressure and improves HDL cholesterol.",
    "Guidelines recommend at least 150 minutes of moderate-intensity activity per week.",
]
REFERENCE = (
    "Exercise strengthens the heart, lowers blood pressure and improves cholesterol; adults "
    "should get 150 minutes of moderate activity weekly."
)
TOOLS = [
    {"name": "search_guidelines", "description": "Search public health guidelines."},
    {"name": "get_weather", "description": "Current weather for a city."},
]
TOOL_CALLS = [
    {
        "name": "search_guidelines",
        "arguments": {"query": "exercise heart benefits"},
        "result": " ".join(CONTEXT),
    }
]

# Mastra's judge calls per scorer (@mastra/evals 1.x), where known.
MASTRA_CALLS = {
    "answer-relevancy": 3,
    "faithfulness": 3,
    "hallucination": 3,
    "answer-similarity": 3,
    "context-precision": 2,
    "context-relevance": 2,
}

# Extra factory / run() arguments some scorers need; passed only to factories that take them.
FACTORY_OPTIONS: dict[str, Any] = {
    "available_tools": TOOLS,
    "baseline_response": ANSWER,
    "noisy_query": QUESTION + " Also, my cousin says coffee is bad for you.",
    "source": " ".join(CONTEXT),
}
RUN_ARGUMENTS: dict[str, Any] = {
    "input": [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": QUESTION},
    ],
    "output": ANSWER,
    "context": CONTEXT,
    "ground_truth": REFERENCE,
    "tool_calls": TOOL_CALLS,
}

# -- scripted replies ----------------------------------------------------------------------------
_INDEXED = re.compile(r'<([a-z][a-z0-9_-]*) index="(\d+)">\n(.*?)\n</\1>', re.DOTALL)
_SENTENCES = [s.strip() for s in re.split(r"(?<=\.)\s+", ANSWER) if s.strip()]
_REASON_WORDS = ("reason", "explanation", "assessment", "summary", "rationale")
# Lists of problems: a plausible judge finds none in the sample answer.
_PROBLEM_LISTS = ("missing", "extra", "contradiction", "issue", "unsupported")
_VERDICTS = {"yes", "no", "unsure"}
# Schemas whose "yes" verdict flags a problem (lower is better): answered mostly "no".
YES_MEANS_A_PROBLEM = {"bias_verdicts", "hallucination_verdicts", "toxicity_verdicts"}


def _user_prompt(request: dict[str, Any]) -> str:
    messages = request.get("messages") or []
    users = [m.get("content") for m in messages if m.get("role") == "user"]
    return str(users[0]) if users else ""


def _judged_items(prompt: str) -> list[str]:
    """The texts of the last kind of indexed element in the prompt (what is being judged)."""
    found = _INDEXED.findall(prompt)
    if not found:
        return []
    last_tag = found[-1][0]
    return [text for tag, _, text in found if tag == last_tag]


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[-1]]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [s for s in schema[key] if s.get("type") != "null"]
            return _resolve(options[0], defs)
    return schema


def _category_field(
    name: str, item_schema: dict[str, Any], defs: dict[str, Any]
) -> tuple[str, list[Any]] | None:
    """``(field, values)`` when the items are one per value of an enum field named for the list."""
    for key, sub in (item_schema.get("properties") or {}).items():
        values = _resolve(sub, defs).get("enum")
        if values and name in (key + "s", key + "es") and not set(values) <= _VERDICTS:
            return key, list(values)
    return None


@dataclasses.dataclass(frozen=True)
class _Filler:
    """Fills a JSON schema for one request: its definitions, user prompt and schema name."""

    defs: dict[str, Any]
    prompt: str
    schema_name: str

    def fill(self, schema: dict[str, Any], name: str, index: int) -> Any:
        schema = _resolve(schema, self.defs)
        kind = schema.get("type")
        if "enum" in schema:
            return self._choose(list(schema["enum"]), index)
        if kind == "object":
            properties = schema.get("properties") or {}
            return {key: self.fill(sub, key, index) for key, sub in properties.items()}
        if kind == "array":
            return self._list(schema, name)
        if kind == "string":
            return self._text(name, index)
        if kind == "integer":
            return index
        if kind == "number":
            return round(min(0.85, schema.get("maximum", 1)), 2)
        if kind == "boolean":
            return index % 4 != 3
        return None

    def _choose(self, values: list[Any], index: int) -> Any:
        favoured = values[0]
        if set(values) <= _VERDICTS and self.schema_name in YES_MEANS_A_PROBLEM:
            favoured = "no"
        # Mostly the favourable value, every third item another one.
        others = [v for v in values if v != favoured]
        return others[0] if index % 3 == 2 and others else favoured

    def _list(self, schema: dict[str, Any], name: str) -> list[Any]:
        item_schema = _resolve(schema.get("items") or {}, self.defs)
        if any(word in name.lower() for word in _PROBLEM_LISTS):
            return []  # the sample answer is a good one: no missing pieces, no contradictions
        judged = _judged_items(self.prompt)
        categories = None if judged else _category_field(name, item_schema, self.defs)
        if categories is not None:
            # One item per category ("dimensions": one per value of "dimension").
            key, values = categories
            items = [self.fill(item_schema, name, i) for i in range(len(values))]
            for item, value in zip(items, values, strict=True):
                item[key] = value
            return items
        if item_schema.get("type") == "object":
            count = len(judged) if judged else len(_SENTENCES)
            return [self.fill(item_schema, name, i) for i in range(count)]
        if "question" in name.lower():
            return [f"Does the text say that {s[0].lower()}{s[1:-1]}?" for s in _SENTENCES]
        return list(_SENTENCES)

    def _text(self, name: str, index: int) -> str:
        if any(word in name.lower() for word in _REASON_WORDS):
            return (
                "The text states this directly and it matches the material it was checked "
                "against, so the judgement is clear."
            )
        judged = _judged_items(self.prompt)
        if judged and index < len(judged):
            return judged[index].splitlines()[0][:120]
        return f"{name.replace('_', ' ')} {index + 1}"


def generic_reply(request: dict[str, Any]) -> Any:
    """A plausible answer built from the request's JSON schema and its user prompt."""
    response_format = request.get("response_format") or {}
    json_schema = response_format.get("json_schema") or {}
    schema = json_schema.get("schema")
    if not isinstance(schema, dict):
        return JudgeServer.Reply(status=500, body={"error": {"message": "no JSON schema"}})
    filler = _Filler(schema.get("$defs") or {}, _user_prompt(request), json_schema.get("name", ""))
    return filler.fill(schema, "root", 0)


def _tool_evaluations(request: dict[str, Any]) -> Any:
    reply = generic_reply(request)
    calls = [json.loads(text)["name"] for text in _judged_items(_user_prompt(request))]
    for evaluation, name in zip(reply.get("evaluations", []), calls, strict=False):
        evaluation["tool_called"] = name
        evaluation["was_appropriate"] = True
    reply["missing_tools"] = []
    return reply


# Hand-written answers for schemas whose values the prompt decides.
REPLY_OVERRIDES: dict[str, Callable[[dict[str, Any]], Any]] = {
    "tool_call_accuracy_evaluations": _tool_evaluations,
}


def route_all(server: JudgeServer) -> None:
    def answer(request: dict[str, Any]) -> Any:
        name = (request.get("response_format") or {}).get("json_schema", {}).get("name")
        return REPLY_OVERRIDES.get(name, generic_reply)(request)

    server.route("*", answer)


# -- running -------------------------------------------------------------------------------------
def llm_factories() -> dict[str, Callable[..., Any]]:
    """Every ``create_*_scorer*`` factory of ``tracescore.scorers`` that takes ``model=``."""
    found = {}
    for name in sorted(getattr(scorers, "__all__", dir(scorers))):
        if not re.fullmatch(r"create_\w+_scorer(_\w+)?", name):
            continue
        factory = getattr(scorers, name, None)
        if callable(factory) and "model" in inspect.signature(factory).parameters:
            found[name] = factory
    return found


def run_one(server: JudgeServer, factory: Callable[..., Any], **mode: Any) -> tuple[Any, Any, int]:
    """Build the scorer with a fresh judge, run it on the sample; (scorer, result, requests)."""
    parameters = inspect.signature(factory).parameters
    options = {k: v for k, v in FACTORY_OPTIONS.items() if k in parameters}
    server.reset()
    route_all(server)
    scorer = factory(model=make_judge(server, timeout=30), **options, **mode)
    if not scorer.uses_judge:
        return scorer, None, 0
    result = scorer.run(**RUN_ARGUMENTS)
    return scorer, result, len(server.requests)


def measure(server: JudgeServer) -> list[dict[str, Any]]:
    rows = []
    for name, factory in llm_factories().items():
        row: dict[str, Any] = {"factory": name}
        try:
            scorer, result, requests = run_one(server, factory)
        except Exception as exc:  # noqa: BLE001 - a scorer in progress must not stop the table
            row.update(scorer_id="?", error=f"{type(exc).__name__}: {exc}"[:160])
            rows.append(row)
            continue
        if result is None:
            continue
        row.update(
            scorer_id=scorer.id,
            score=result.score,
            not_scorable=result.not_scorable,
            calls=result.judge_calls,
            requests=requests,
            prompt_tokens=result.input_tokens,
            completion_tokens=result.output_tokens,
            mastra_calls=MASTRA_CALLS.get(scorer.id),
        )
        if "reason" in inspect.signature(factory).parameters:
            try:
                _, inline, _ = run_one(server, factory, reason="inline")
            except Exception as exc:  # noqa: BLE001
                row["inline_error"] = f"{type(exc).__name__}: {exc}"[:160]
            else:
                row.update(
                    inline_score=inline.score,
                    inline_calls=inline.judge_calls,
                    inline_prompt_tokens=inline.input_tokens,
                    inline_completion_tokens=inline.output_tokens,
                )
        rows.append(row)
    return rows


def shared_judge_calls(server: JudgeServer) -> int:
    """Judge calls when every LLM scorer runs on the sample with one ``Judge`` (one cache)."""
    server.reset()
    route_all(server)
    judge = make_judge(server, timeout=30)
    for factory in llm_factories().values():
        parameters = inspect.signature(factory).parameters
        options = {k: v for k, v in FACTORY_OPTIONS.items() if k in parameters}
        try:
            factory(model=judge, **options).run(**RUN_ARGUMENTS)
        except Exception:  # noqa: BLE001 - reported in the table already
            continue
    return len(server.requests)


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def print_table(rows: list[dict[str, Any]], shared: int | None = None) -> None:
    header = (
        f"{'scorer':<28} {'score':>5} {'calls':>5} {'prompt tok':>10} {'compl tok':>9} "
        f"{'Mastra':>6}  "
        f"{'inline: calls':>13} {'prompt tok':>10} {'compl tok':>9}  saved"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        label = row["scorer_id"] if row["scorer_id"] != "?" else row["factory"]
        if row["factory"].endswith("_llm"):
            label += " (llm)"
        if "error" in row:
            print(f"{label:<28} failed: {row['error']}")
            continue
        line = (
            f"{label:<28} {_cell(row['score']):>5} {row['calls']:>5} {row['prompt_tokens']:>10} "
            f"{row['completion_tokens']:>9} {_cell(row['mastra_calls']):>6}  "
        )
        if "inline_calls" in row:
            saved_calls = row["calls"] - row["inline_calls"]
            saved_tokens = (row["prompt_tokens"] + row["completion_tokens"]) - (
                row["inline_prompt_tokens"] + row["inline_completion_tokens"]
            )
            total = row["prompt_tokens"] + row["completion_tokens"]
            same = "" if row["inline_score"] == row["score"] else " (score differs!)"
            line += (
                f"{row['inline_calls']:>13} {row['inline_prompt_tokens']:>10} "
                f"{row['inline_completion_tokens']:>9}  {saved_calls} "
                f"call{'s' if saved_calls != 1 else ''}, "
                f"{saved_tokens} tokens "
                f"({100 * saved_tokens / total:.0f}%){same}"
            )
        elif "inline_error" in row:
            line += f"inline failed: {row['inline_error']}"
        else:
            line += f"{'-':>13} {'-':>10} {'-':>9}  -"
        if row.get("not_scorable"):
            line += "  [not scorable on the sample]"
        print(line)
    print()
    if shared is not None:
        separate = sum(row.get("requests", 0) for row in rows if "error" not in row)
        print(
            f"All {len(rows)} LLM scorers on one Judge (its request cache shares identical "
            f"requests, e.g. the claims of the answer): {shared} judge calls, against "
            f"{separate} with a judge each."
        )
    print(
        "Tokens: the loopback server's usage, len(message text) // 4 per call; the JSON schema "
        "in response_format is not counted. Mastra: its judge calls for the same scorer, where "
        'known. Inline: reason="inline" (the analyze call writes the reason).'
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    with JudgeServer() as server:
        rows = measure(server)
        shared = shared_judge_calls(server)
    print_table(rows, shared)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
