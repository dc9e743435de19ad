"""``os.fork()`` with scoring work pending: the parent keeps every score, the child starts clean.

The spans go to a loopback OTLP receiver (in the parent), scored by a heuristic scorer, so no
judge is involved.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

import tracescore
from tests.otlp_receiver import HttpOtlpReceiver
from tracescore.scorers import create_tone_consistency_scorer

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork()")

EVALUATION = "gen_ai.evaluation.result"


class GatedTone:
    """Tone consistency that waits for ``gate`` before scoring a call of the parent made before
    the fork: those jobs are still pending (queued, held) when ``fork()`` happens."""

    def __init__(self, gate: threading.Event) -> None:
        self._inner = create_tone_consistency_scorer()
        self.id = self._inner.id
        self.gate = gate
        self.seen: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def arun(self, **kwargs: Any) -> Any:
        question = str(kwargs.get("input"))
        self.seen.append(question)
        if "before" in question:
            while not self.gate.is_set():
                await asyncio.sleep(0.005)
        return await self._inner.arun(**kwargs)


@pytest.fixture
def receiver() -> Iterator[HttpOtlpReceiver]:
    with HttpOtlpReceiver() as rx:
        yield rx


def _question(span: Any) -> str:
    return str(json.loads(span.attributes["input.value"])["q"])


def test_parent_keeps_every_score_and_the_child_starts_clean(receiver: HttpOtlpReceiver) -> None:
    gate = threading.Event()
    scorer = GatedTone(gate)
    tracescore.configure(
        service_name="forking-app",
        exporter=OTLPSpanExporter(endpoint=f"{receiver.endpoint}/v1/traces"),
        scoring=[tracescore.ScoringRule(scorer=scorer, on="agent")],
        limits=tracescore.LimitsOptions(score_timeout=120),
    )

    @tracescore.agent
    def answer(q: str) -> str:
        return f"Thank you for asking. Here is a calm, friendly answer about {q}."

    for i in range(10):
        answer(f"before {i}")
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        code = 0
        try:
            inherited = len(scorer.seen)  # jobs the parent's loop had started before fork()
            gate.set()  # had the child inherited the parent's jobs, they would score now
            for i in range(3):
                answer(f"child {i}")
            ok = tracescore.force_flush(60_000)
            stats = tracescore.stats()
            report = {"ok": ok, "scored": stats.spans_scored, "held": stats.spans_held,
                      "attached": stats.scores_attached, "seen": scorer.seen[inherited:]}
            os.write(write_fd, json.dumps(report).encode())
        except BaseException as exc:  # noqa: BLE001
            os.write(write_fd, json.dumps({"error": repr(exc)}).encode())
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    for i in range(10):
        answer(f"after {i}")
    chunks = []
    while chunk := os.read(read_fd, 65536):
        chunks.append(chunk)
    os.close(read_fd)
    os.waitpid(pid, 0)
    child = json.loads(b"".join(chunks))
    # The child scored its own three calls and nothing of the parent's.
    assert child["ok"] is True, child
    assert child["scored"] == child["attached"] == 3 and child["held"] == 0, child
    assert not [q for q in child["seen"] if "child" not in q], child

    gate.set()
    assert tracescore.force_flush(60_000)
    stats = tracescore.stats()
    assert stats.spans_scored == stats.scores_attached == 20
    assert stats.deadline_exports == 0 and stats.jobs_dropped == 0

    agents = [s for s in receiver.received.spans if s.name.startswith("invoke_agent")]
    parents = sorted((_question(s), [n for n, _ in s.events].count(EVALUATION))
                     for s in agents if "child" not in _question(s))
    # Every one of the parent's 20 spans arrived once, with its score on it.
    assert parents == sorted([(f"before {i}", 1) for i in range(10)]
                             + [(f"after {i}", 1) for i in range(10)])
    children = sorted((_question(s), [n for n, _ in s.events].count(EVALUATION))
                      for s in agents if "child" in _question(s))
    assert children == [(f"child {i}", 1) for i in range(3)]
    assert not [s for s in receiver.received.spans if s.name.startswith("evaluation ")]


FORK_RIGHT_AFTER_CONFIGURE = """
import os, sys
sys.path.insert(0, {root!r})
import tracescore
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from tracescore.scorers import create_answer_relevancy_scorer

judge = tracescore.Judge("openai/test-judge", api_base={api_base!r}, api_key="sk-test-forking",
                         max_retries=0)
tracescore.configure(
    service_name="forking-app",
    exporter=OTLPSpanExporter(endpoint={endpoint!r} + "/v1/traces"),
    scoring=[tracescore.ScoringRule(scorer=create_answer_relevancy_scorer(model=judge))],
)

@tracescore.agent
def answer(q):
    return "Paris is the capital of France."

pid = os.fork()  # while configure()'s judge preload may still be importing in the background
if pid == 0:
    answer("child")
    os._exit(0 if tracescore.force_flush(60_000) else 3)
answer("parent")
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status) or (0 if tracescore.force_flush(60_000) else 4))
"""


def test_a_fork_during_the_judge_preload_leaves_the_child_a_working_judge(
        receiver: HttpOtlpReceiver, judge_server: Any, tmp_path: Any) -> None:
    import subprocess
    import sys
    from pathlib import Path

    judge_server.route("answer_relevancy_statements", {"statements": ["Paris is the capital."]})
    judge_server.route("answer_relevancy_verdicts",
                       {"results": [{"result": "yes", "reason": "on topic"}]})
    judge_server.route("answer_relevancy_reason", {"reason": "It answers the question."})
    script = tmp_path / "fork_app.py"
    script.write_text(FORK_RIGHT_AFTER_CONFIGURE.format(
        root=str(Path(__file__).resolve().parent.parent), api_base=judge_server.api_base,
        endpoint=receiver.endpoint))
    # A fresh interpreter: nothing of the judge's transport is imported before configure().
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    events = {_question(s): [a for n, a in s.events if n == EVALUATION]
              for s in receiver.received.spans if s.name.startswith("invoke_agent")}
    assert sorted(events) == ["child", "parent"]
    for question, found in events.items():
        ((event),) = found
        assert "error.type" not in event, (question, event)
        assert event["gen_ai.evaluation.score.value"] == 1.0
