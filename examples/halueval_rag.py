"""A RAG agent on real data, scored online by tracescore: HaluEval QA with a BM25 retriever.

What it shows:

* a retrieval-augmented agent instrumented with ``@tracescore.agent``, ``@tracescore.retrieval``
  and ``@tracescore.llm``, so that every question becomes one trace of three spans:
  ``invoke_agent halueval-rag`` with the children ``retrieval halueval-bm25`` and
  ``chat replay``;
* a real lexical ranker (BM25 from the ``bm25s`` library) over a corpus of a few hundred
  Wikipedia passages, the ``knowledge`` fields of 200 HaluEval rows split into passages;
* sampled, online scoring through ``tracescore.configure(scoring=[...])``: each score is attached
  to the agent span as a ``gen_ai.evaluation.result`` event and also handed to ``on_score``,
  which this script uses to print a summary;
* that the scores separate good answers from bad ones. No model is needed to answer: the "LLM"
  replays the dataset's answer for each question, the right one or the hallucinated one
  (chosen per question from ``--seed``), so the summary can compare the two groups.

Scorers:

* ``content-similarity`` (heuristic, always on): character-bigram similarity of the answer to the
  dataset's right answer. A replayed right answer equals the ground truth, so it scores 1.0 by
  construction; the interesting number is how low hallucinated answers score.
* ``answer-relevancy`` and ``context-precision`` (LLM-judged, only with a judge model): whether
  the answer addresses the question, and whether the retrieved passages (read from the retrieval
  span of the same trace) were useful for it, useful ones first. Without a judge they are
  skipped, and the script says so; it never invents a score.

Run it (from the repository root, after ``pip install -e ".[demo]"``)::

    python examples/halueval_rag.py                      # all 200 rows, heuristic scorer only
    python examples/halueval_rag.py --limit 20 --json    # the summary as JSON

With a judge (any litellm model string plus that provider's usual key variable)::

    OPENAI_API_KEY=sk-... TRACESCORE_JUDGE_MODEL=openai/gpt-4o-mini \\
        python examples/halueval_rag.py --limit 20
    python examples/halueval_rag.py --judge openai/gpt-4o-mini --limit 20   # the same

    # an OpenAI-compatible server of your own (llama.cpp, vLLM, Ollama, LM Studio, a proxy):
    python examples/halueval_rag.py --judge my-model \\
        --judge-api-base http://127.0.0.1:8080/v1 --limit 20
    # the same with litellm's variables:
    OPENAI_API_BASE=http://127.0.0.1:8080/v1 OPENAI_API_KEY=none \\
        python examples/halueval_rag.py --judge openai/my-model --limit 20

A judge on a server of your own gets one call at a time (or the slots the server reports)
and 300 s per call by default; the other calls wait in tracescore's queue, untimed. The script
exits 1 when an LLM scorer scored no question at all (an unreachable judge, a wrong model
name, a missing key), after printing why.

Where spans go: to OTLP when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set, otherwise appended as OTLP/JSON lines to
``tracescore-traces.jsonl`` in the working directory (``TRACESCORE_EXPORT_FILE`` changes the
path). To look at the traces and their scores in Arize Phoenix (its own virtualenv; started
offline as docs/see-your-scores/phoenix.md shows)::

    pip install 'arize-phoenix>=20.26,<21' && phoenix serve   # in another shell; UI on :6006
    OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:6006 TRACESCORE_LOG_RECORDS=false \\
        TRACESCORE_METRICS=false TRACESCORE_PHOENIX_URL=http://127.0.0.1:6006 \\
        python examples/halueval_rag.py

With ``--metrics-port 9464`` the score metrics are served for Prometheus on
``http://127.0.0.1:9464/metrics``, and after the summary the script keeps serving them until
Ctrl-C or SIGTERM (docs/see-your-scores/grafana.md).

Phoenix files the traces under the project ``halueval-rag-demo``: Phoenix reads the project
from the resource attribute ``openinference.project.name``, which tracescore sets from the service
name. Each score is a span annotation (``TRACESCORE_PHOENIX_URL``: a column, a filter and a
summary in Phoenix) and among the agent span's events. ``TRACESCORE_LOG_RECORDS=false`` and
``TRACESCORE_METRICS=false``: Phoenix takes neither OTLP log records nor metrics (HTTP 405).

Data: ``examples/data/halueval_qa_200.jsonl``, 200 rows of HaluEval's QA set (MIT licence, see
``examples/data/README.md``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import bm25s
from opentelemetry import trace

import tracescore
from tracescore.scorers import (
    create_answer_relevancy_scorer,
    create_content_similarity_scorer,
    create_context_precision_scorer,
)

DATA_FILE = Path(__file__).resolve().parent / "data" / "halueval_qa_200.jsonl"
SERVICE_NAME = "halueval-rag-demo"
TOP_K = 3
RIGHT, HALLUCINATED = "right", "hallucinated"
HEURISTIC_SCORERS = ("content-similarity",)
LLM_SCORERS = ("answer-relevancy", "context-precision")
SKIPPED_REASON = (
    "no judge model configured: set TRACESCORE_JUDGE_MODEL=provider/model "
    "(e.g. openai/gpt-4o-mini) together with that provider's API key "
    "(e.g. OPENAI_API_KEY), or pass --judge MODEL"
)
# With a judge, 200 questions mean about a thousand judge calls. A batch run can afford to hold
# each agent span until its scores are in (so they land on the span itself rather than on a
# late "evaluation" carrier span) and to wait for all of them before the summary. Without a
# judge, scoring is instant and tracescore's defaults apply.
JUDGE_TIMEOUT = 600.0

SYSTEM_PROMPT = (
    "Answer the user's question using only the passages below. Answer briefly.\n\n{passages}"
)

# Passages are glued together without a space ("...19th century.First for Women is ..."), so a
# sentence end directly followed by a capital (or an opening quote and a capital) is a boundary.
# Inside a passage, sentences are separated by a space and are not split.
_BOUNDARY = re.compile(r'[.!?](?=[A-Z]|"[A-Z0-9])')


def split_passages(knowledge: str) -> list[str]:
    """Split a HaluEval ``knowledge`` field into the passages it concatenates.

    A boundary is a ``.``, ``!`` or ``?`` immediately followed by a capital letter (or by an
    opening quote and a capital), except after a one-letter token such as the ``S`` of
    ``U.S.Highway`` or the ``e`` of ``e.Dams``: initialisms and names keep their periods.

    Args:
        knowledge: the field's text.

    Returns:
        The passages, stripped, in order, without empty ones.

    Example:
        >>> split_passages("It began in the U.S. in 1844.First for Women is a magazine.")
        ['It began in the U.S. in 1844.', 'First for Women is a magazine.']
    """
    passages: list[str] = []
    start = 0
    for match in _BOUNDARY.finditer(knowledge):
        i = match.start()
        before = knowledge[i - 1] if i >= 1 else ""
        before2 = knowledge[i - 2] if i >= 2 else " "
        if before.isalpha() and (before2 == "." or before2.isspace()):
            continue
        passages.append(knowledge[start : match.end()].strip())
        start = match.end()
    passages.append(knowledge[start:].strip())
    return [p for p in passages if p]


@dataclasses.dataclass(frozen=True)
class Corpus:
    """The retrieval corpus built from every row's ``knowledge``.

    Attributes:
        passages: ``{"id", "content"}`` dicts, deduplicated, in order of first appearance.
        passage_ids_by_question: the ids of the passages each question's own row contributed.
    """

    passages: list[dict[str, str]]
    passage_ids_by_question: dict[str, frozenset[str]]


def build_corpus(rows: Sequence[dict[str, str]]) -> Corpus:
    """Split every row's ``knowledge`` into passages and give each distinct passage an id."""
    ids_by_text: dict[str, str] = {}
    passages: list[dict[str, str]] = []
    own: dict[str, frozenset[str]] = {}
    for row in rows:
        ids = []
        for text in split_passages(row["knowledge"]):
            if text not in ids_by_text:
                ids_by_text[text] = f"halueval-p{len(passages):04d}"
                passages.append({"id": ids_by_text[text], "content": text})
            ids.append(ids_by_text[text])
        own[row["question"]] = frozenset(ids)
    return Corpus(passages, own)


class Bm25Index:
    """BM25 over the corpus with ``bm25s``, tokenised with its English stop-word list.

    The index is built once; ``search`` tokenises the query with the corpus vocabulary (words
    the corpus never uses cannot match anyway).

    Args:
        passages: ``{"id", "content"}`` dicts.
    """

    def __init__(self, passages: Sequence[dict[str, str]]) -> None:
        self._passages = list(passages)
        self._tokenizer = bm25s.tokenization.Tokenizer(stopwords="en")
        tokens = self._tokenizer.tokenize(
            [p["content"] for p in self._passages], show_progress=False, return_as="tuple"
        )
        self._bm25 = bm25s.BM25()
        self._bm25.index(tokens, show_progress=False)

    def search(self, query: str, k: int) -> list[dict[str, Any]]:
        """The ``k`` best passages for ``query``, best first, as ``{"id", "content", "score"}``."""
        query_ids = self._tokenizer.tokenize(
            [query], update_vocab=False, show_progress=False, return_as="ids"
        )
        found, scores = self._bm25.retrieve(query_ids, k=k, show_progress=False)
        return [
            {**self._passages[int(i)], "score": round(float(s), 4)}
            for i, s in zip(found[0], scores[0], strict=True)
        ]


class HaluEvalRag:
    """The demo agent: BM25 retrieval, then a replayed "model" answer.

    Args:
        index: the retriever.
        replayed: the answer to give per question (the right or the hallucinated one).
        own_passages: the passage ids of each question's own ``knowledge``, for the hit rate.
    """

    def __init__(
        self,
        index: Bm25Index,
        replayed: dict[str, str],
        own_passages: dict[str, frozenset[str]],
    ) -> None:
        self._index = index
        self._replayed = replayed
        self._own_passages = own_passages
        self.trace_questions: dict[int, str] = {}
        self.retrieval_hits: dict[str, bool] = {}

    @tracescore.retrieval(name="halueval-bm25")
    def search(self, query: str, k: int = TOP_K) -> list[dict[str, Any]]:
        """Retrieve the ``k`` best passages; the documents land on the retrieval span."""
        return self._index.search(query, k)

    @tracescore.llm(name="replay", model="replay")
    def chat(self, messages: list[dict[str, str]]) -> str:
        """Stand-in for a model call: replay the dataset's answer for the user's question."""
        question = next(m["content"] for m in reversed(messages) if m["role"] == "user")
        return self._replayed[question]

    @tracescore.agent(name="halueval-rag")
    def answer(self, question: str) -> str:
        """Answer ``question`` from the retrieved passages."""
        # on_score reports trace ids; remember which question each trace answers.
        trace_id = trace.get_current_span().get_span_context().trace_id
        self.trace_questions[trace_id] = question
        documents = self.search(question)
        self.retrieval_hits[question] = any(
            d["id"] in self._own_passages[question] for d in documents
        )
        passages = "\n\n".join(f"[{d['id']}] {d['content']}" for d in documents)
        messages = [
            {"role": "system", "content": SYSTEM_PROMPT.format(passages=passages)},
            {"role": "user", "content": question},
        ]
        return self.chat(messages)


class ScoreCollector:
    """The ``on_score`` callback: keeps every ``ScoreEvent`` (called on the scoring thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.events: list[tracescore.ScoreEvent] = []

    def __call__(self, event: tracescore.ScoreEvent) -> None:
        with self._lock:
            self.events.append(event)

    def snapshot(self) -> list[tracescore.ScoreEvent]:
        with self._lock:
            return list(self.events)


def load_rows(path: Path) -> list[dict[str, str]]:
    """Read the JSON-lines data file."""
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def choose_answers(
    rows: Sequence[dict[str, str]], seed: int, hallucination_rate: float
) -> dict[str, str]:
    """Decide per question whether the agent gives the right or the hallucinated answer.

    Deterministic for a seed: the same questions get the same kind of answer on every run.

    Returns:
        ``RIGHT`` or ``HALLUCINATED`` by question.
    """
    rng = random.Random(seed)
    return {
        row["question"]: HALLUCINATED if rng.random() < hallucination_rate else RIGHT
        for row in rows
    }


def summarise(
    events: Sequence[tracescore.ScoreEvent],
    trace_questions: dict[int, str],
    kinds: dict[str, str],
    scorer_ids: Sequence[str],
) -> dict[str, dict[str, Any]]:
    """Per scorer id: mean score by answer kind, counts of scored, not scorable, errors, and
    the pass rate (share of ``pass`` among the ``pass``/``fail`` labels; None without labels).

    Errors are also counted by ``error.type``, with the first error's message as an example, so
    that a misconfigured judge (a missing key, a wrong model name) explains itself.
    """
    table: dict[str, dict[str, Any]] = {}
    for scorer_id in scorer_ids:
        values: dict[str, list[float]] = {RIGHT: [], HALLUCINATED: []}
        not_scorable = errors = 0
        error_types: Counter[str] = Counter()
        labels: Counter[str | None] = Counter()
        first_error: str | None = None
        for event in events:
            if event.scorer_id != scorer_id:
                continue
            labels[event.label] += 1
            if event.error_type is not None:
                errors += 1
                error_types[event.error_type] += 1
                first_error = first_error or event.explanation
            elif event.score is None:
                not_scorable += 1
            else:
                values[kinds[trace_questions[event.trace_id]]].append(event.score)
        table[scorer_id] = {
            kind: {
                "mean": round(sum(v) / len(v), 4) if v else None,
                "n": len(v),
            }
            for kind, v in values.items()
        }
        table[scorer_id].update(
            scored=len(values[RIGHT]) + len(values[HALLUCINATED]),
            not_scorable=not_scorable,
            errors=errors,
            error_types=dict(error_types),
            first_error=first_error,
            passed=labels["pass"],
            failed=labels["fail"],
            pass_rate=(
                round(labels["pass"] / (labels["pass"] + labels["fail"]), 4)
                if labels["pass"] + labels["fail"]
                else None
            ),
        )
    return table


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Plain text columns: the first left-aligned, the rest right-aligned."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        first, *rest = cells
        parts = [str(first).ljust(widths[0])]
        parts += [str(c).rjust(w) for c, w in zip(rest, widths[1:], strict=True)]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), rule, *(line(r) for r in rows)])


def render(summary: dict[str, Any]) -> str:
    """The human-readable summary."""

    def mean(cell: dict[str, Any]) -> str:
        return "-" if cell["mean"] is None else f"{cell['mean']:.3f}"

    out = [
        f"HaluEval RAG demo: {summary['items']} questions "
        f"({summary['answers'][RIGHT]} answered right, "
        f"{summary['answers'][HALLUCINATED]} hallucinated; seed {summary['seed']}), "
        f"sample rate {summary['sample_rate']:g}",
        f"corpus: {summary['corpus_passages']} passages; BM25 top-{TOP_K} hit rate "
        f"{summary['retrieval_hit_rate']:.1%} (a question's own passage among the top {TOP_K})",
        "",
    ]
    header = ["scorer", "mean (right)", "mean (halluc.)", "scored", "not scorable", "errors"]
    rows = [
        [
            scorer_id,
            mean(cell[RIGHT]),
            mean(cell[HALLUCINATED]),
            str(cell["scored"]),
            str(cell["not_scorable"]),
            str(cell["errors"]),
        ]
        for scorer_id, cell in summary["scorers"].items()
    ]
    rows += [[scorer_id, "SKIPPED", "", "", "", ""] for scorer_id in summary["skipped_scorers"]]
    out.append(format_table(header, rows))
    for scorer_id, cell in summary["scorers"].items():
        if cell["errors"]:
            types = ", ".join(f"{t} x{n}" for t, n in cell["error_types"].items())
            out += ["", f"{scorer_id} errors ({types}), e.g.: {cell['first_error'][:300]}"]
    if summary["skipped_scorers"]:
        out += ["", f"LLM scorers SKIPPED: {summary['skipped_reason']}."]
    stats = summary["stats"]
    out += [
        "",
        "tracescore.stats(): "
        + ", ".join(
            f"{name}={stats[name]}"
            for name in (
                "spans_exported",
                "scores_attached",
                "scores_late",
                "scoring_errors",
                "scores_not_scorable",
                "skipped_queue_full",
            )
        ),
        f"spans went to: {summary['exporter']}",
        f"time: {summary['seconds']['answering']:.2f} s answering, "
        f"{summary['seconds']['flush']:.2f} s waiting for scores and export",
    ]
    if not summary["flushed"]:
        out.append("WARNING: force_flush() timed out; some scores or spans may be missing.")
    return "\n".join(out)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="A BM25 RAG agent on HaluEval QA, scored online by tracescore."
    )
    parser.add_argument(
        "--limit",
        type=int,
        default=None,
        metavar="N",
        help="answer only the first N questions (default: all 200)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the right/hallucinated choice per question (default 0)",
    )
    parser.add_argument(
        "--sample-rate",
        type=float,
        default=1.0,
        metavar="RATE",
        help="fraction of traces to score, 0..1 (default 1)",
    )
    parser.add_argument(
        "--hallucination-rate",
        type=float,
        default=0.5,
        metavar="RATE",
        help="share of questions answered with the hallucinated answer (default 0.5)",
    )
    parser.add_argument(
        "--threshold",
        type=float,
        default=0.5,
        metavar="SCORE",
        help="pass/fail threshold of every scorer, 0..1 (default 0.5): each score gets the "
        "label pass or fail, e.g. the span attribute tracescore.label.content_similarity",
    )
    parser.add_argument(
        "--judge",
        default=None,
        metavar="MODEL",
        help="litellm model string of the judge for the LLM scorers "
        "(default: TRACESCORE_JUDGE_MODEL; none: LLM scorers are skipped)",
    )
    parser.add_argument(
        "--judge-api-base",
        default=None,
        metavar="URL",
        help="base URL of an OpenAI-compatible judge server, e.g. http://127.0.0.1:8080/v1; "
        "--judge then names the model it serves (openai/ is added to a bare name); the key is "
        "OPENAI_API_KEY when set, else none",
    )
    parser.add_argument(
        "--judge-response-format",
        default="auto",
        choices=("auto", "json_schema", "json_object", "none"),
        help="structured output to ask the judge for (default auto: falls back as the server "
        "refuses; json_object suits llama.cpp's server)",
    )
    parser.add_argument(
        "--judge-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="seconds per judge call (default 60, 300 for a server on this machine or network)",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        metavar="PORT",
        help="serve the score metrics for Prometheus on http://HOST:PORT/metrics, and after the "
        "summary keep serving them until Ctrl-C (or SIGTERM), so Prometheus gets to scrape them "
        "(needs opentelemetry-exporter-prometheus, in the demo extra)",
    )
    parser.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        metavar="HOST",
        help="address the metrics are served on (default 127.0.0.1; 0.0.0.0 for all)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the summary as JSON on stdout (notes go to stderr)",
    )
    args = parser.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        parser.error("--limit takes a positive number")
    if args.metrics_port is not None and not 0 <= args.metrics_port <= 65535:
        parser.error("--metrics-port takes a port number, 0..65535 (0: any free port)")
    for name in ("sample_rate", "hallucination_rate", "threshold"):
        if not 0.0 <= getattr(args, name) <= 1.0:
            parser.error(f"--{name.replace('_', '-')} takes a number in 0..1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo; return the process exit code."""
    args = parse_args(argv)
    note_stream = sys.stderr if args.json else sys.stdout

    def note(message: str) -> None:
        print(message, file=note_stream, flush=True)

    all_rows = load_rows(DATA_FILE)
    rows = all_rows if args.limit is None else all_rows[: args.limit]
    # The corpus always holds every row's passages, so a short run still retrieves among all.
    corpus = build_corpus(all_rows)
    index = Bm25Index(corpus.passages)

    kinds = choose_answers(rows, args.seed, args.hallucination_rate)
    right_answers = {row["question"]: row["right_answer"] for row in rows}
    replayed = {
        row["question"]: row[
            "hallucinated_answer" if kinds[row["question"]] == HALLUCINATED else "right_answer"
        ]
        for row in rows
    }

    judge_model = args.judge or os.environ.get("TRACESCORE_JUDGE_MODEL", "").strip() or None
    judge = build_judge(judge_model, args)
    rules = [
        tracescore.ScoringRule(
            scorer=create_content_similarity_scorer(),
            on="agent",
            sample_rate=args.sample_rate,
            ground_truth=lambda span, question: right_answers[question],
            threshold=args.threshold,
        )
    ]
    if judge:
        rules += [
            tracescore.ScoringRule(
                scorer=create_answer_relevancy_scorer(),
                on="agent",
                sample_rate=args.sample_rate,
                threshold=args.threshold,
            ),
            # No context=: the scorer judges the documents the trace's retrieval span returned.
            tracescore.ScoringRule(
                scorer=create_context_precision_scorer(),
                on="agent",
                sample_rate=args.sample_rate,
                threshold=args.threshold,
            ),
        ]
        where = f" at {args.judge_api_base}" if args.judge_api_base else ""
        note(f"judge: {judge.model}{where} (LLM scorers: {', '.join(LLM_SCORERS)})")
    else:
        note(f"LLM scorers {', '.join(LLM_SCORERS)} SKIPPED: {SKIPPED_REASON}.")

    meter_provider = None
    if args.metrics_port is not None:
        meter_provider, url = serve_metrics(args.metrics_host, args.metrics_port)
        note(f"metrics for Prometheus: {url}")

    collector = ScoreCollector()
    instance = tracescore.configure(
        service_name=SERVICE_NAME,
        judge=judge,
        scoring=rules,
        on_score=collector,
        limits=tracescore.LimitsOptions(score_timeout=JUDGE_TIMEOUT if judge else None),
        output=tracescore.OutputOptions(meter_provider=meter_provider),
    )
    if not instance.exporter_description.startswith("file "):
        # (the local file: configure() has just said so on stderr)
        note(f"exporting spans to: {instance.exporter_description}")

    agent = HaluEvalRag(index, replayed, corpus.passage_ids_by_question)
    started = time.perf_counter()
    for row in rows:
        agent.answer(row["question"])
    answered = time.perf_counter()
    flushed = tracescore.force_flush(int(JUDGE_TIMEOUT * 1000) if judge else None)
    # A slow local judge may need longer for every score: wait on while scores keep arriving
    # (each judge call is bounded by the judge's own timeout), stop when none came in a round.
    seen = 0
    while judge and not flushed and len(collector.snapshot()) > seen:
        seen = len(collector.snapshot())
        note(f"{seen} scores in so far; waiting for the judge")
        flushed = tracescore.force_flush(int(JUDGE_TIMEOUT * 1000))
    done = time.perf_counter()
    stats = tracescore.stats()

    scorer_ids = HEURISTIC_SCORERS + (LLM_SCORERS if judge else ())
    summary: dict[str, Any] = {
        "items": len(rows),
        "answers": {
            RIGHT: sum(1 for k in kinds.values() if k == RIGHT),
            HALLUCINATED: sum(1 for k in kinds.values() if k == HALLUCINATED),
        },
        "seed": args.seed,
        "sample_rate": args.sample_rate,
        "hallucination_rate": args.hallucination_rate,
        "corpus_passages": len(corpus.passages),
        "retrieval_hit_rate": round(
            sum(agent.retrieval_hits.values()) / max(1, len(agent.retrieval_hits)), 4
        ),
        "judge": judge.model if judge else None,
        "scorers": summarise(collector.snapshot(), agent.trace_questions, kinds, scorer_ids),
        "skipped_scorers": [] if judge else list(LLM_SCORERS),
        "skipped_reason": None if judge else SKIPPED_REASON,
        "stats": dataclasses.asdict(stats),
        "exporter": instance.exporter_description,
        "flushed": flushed,
        "seconds": {"answering": round(answered - started, 3), "flush": round(done - answered, 3)},
    }
    if args.json:
        print(json.dumps(summary, indent=2), flush=True)
    else:
        print()
        print(render(summary), flush=True)
    if meter_provider is not None:
        note("serving the metrics until Ctrl-C (or SIGTERM)")
        wait_for_interrupt()
    tracescore.shutdown()
    if meter_provider is not None:
        meter_provider.shutdown()
    if not flushed:
        note("force_flush() did not finish in time: scores or spans may be missing.")
        return 1
    unjudged = unjudged_scorers(summary)
    for scorer_id, why in unjudged.items():
        note(f"FAILED: {scorer_id} scored no question: {why}")
    return 1 if unjudged else 0


def serve_metrics(host: str, port: int) -> tuple[Any, str]:
    """A MeterProvider whose metrics are served for Prometheus on ``host:port``.

    Returns:
        The provider (for ``tracescore.OutputOptions(meter_provider=...)``) and the URL to scrape.

    Raises:
        SystemExit: opentelemetry-exporter-prometheus is not installed, or the port is taken.
    """
    try:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from opentelemetry.sdk.metrics import MeterProvider
        from prometheus_client import start_http_server
    except ImportError:
        sys.exit("halueval_rag.py: error: --metrics-port needs opentelemetry-exporter-prometheus "
                 '(pip install -e ".[demo]")')
    try:
        server, _thread = start_http_server(port, addr=host)
    except OSError as exc:
        sys.exit(f"halueval_rag.py: error: cannot serve metrics on {host}:{port}: {exc}")
    bound = server.server_address[1]
    shown = f"[{host}]" if ":" in host else host
    return MeterProvider(metric_readers=[PrometheusMetricReader()]), (
        f"http://{shown}:{bound}/metrics"
    )


def wait_for_interrupt() -> None:
    """Block until Ctrl-C (SIGINT) or SIGTERM."""
    import signal

    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(3600):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)


def build_judge(model: str | None, args: argparse.Namespace) -> tracescore.Judge | None:
    """The judge the options describe, or None without a model.

    Raises:
        SystemExit: ``--judge-api-base`` without a model name (argparse's usage error).
    """
    if model is None:
        if args.judge_api_base:
            sys.exit("halueval_rag.py: error: --judge-api-base needs --judge NAME (the model the "
                     "server serves)")
        return None
    options: dict[str, Any] = {"response_format": args.judge_response_format}
    if args.judge_timeout is not None:
        options["timeout"] = args.judge_timeout
    if args.judge_api_base:
        model = model if "/" in model else f"openai/{model}"
        options["api_base"] = args.judge_api_base
        # litellm's OpenAI provider wants a key; a local server takes any.
        options["api_key"] = os.environ.get("OPENAI_API_KEY") or "none"
    return tracescore.Judge(model, **options)


def unjudged_scorers(summary: dict[str, Any]) -> dict[str, str]:
    """The LLM scorers that scored no question although some were sampled, with why.

    A run whose judge scored nothing says nothing about the answers: it must not look like
    a success (an unreachable server, a wrong model name, a missing key).
    """
    out = {}
    for scorer_id in LLM_SCORERS:
        cell = summary["scorers"].get(scorer_id)
        if cell is None or cell["scored"] or not (cell["errors"] or cell["not_scorable"]):
            continue
        if cell["errors"]:
            types = ", ".join(f"{t} x{n}" for t, n in cell["error_types"].items())
            out[scorer_id] = f"{cell['errors']} errors ({types}), e.g.: {cell['first_error'][:300]}"
        else:
            out[scorer_id] = f"{cell['not_scorable']} not scorable"
    return out


if __name__ == "__main__":
    sys.exit(main())
