"""What the conformance tests assert with: the echo scorer and readers of the exported scores."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tracescore.scorers import create_scorer
from tracescore.testing import CaptureScores, ScriptedJudge

EVENT = "gen_ai.evaluation.result"
TOOL_ONLY = "this model turn only called tools"


@dataclass
class Echo:
    """What the echo scorer was handed, one entry per scored span."""

    seen: list[dict[str, Any]] = field(default_factory=list)

    def scorer(self, scorer_id: str = "echo", *, context: bool = False,
               tool_calls: bool = False) -> Any:
        requires: tuple[str, ...] = ("output",)
        if context:
            requires += ("context",)
        if tool_calls:
            requires = ("tool_calls",)

        def record(run: Any) -> float:
            self.seen.append({"id": scorer_id, "input": run.input_text,
                              "output": run.output_text, "context": list(run.context or []),
                              "tool_calls": list(run.tool_calls or [])})
            return 1.0

        return create_scorer(id=scorer_id, generate_score=record, requires=requires,
                             uses_context=context or None)




def scored(capture: CaptureScores,
           scorer_id: str | None = None) -> list[tuple[Any, dict[str, Any]]]:
    """(span, event attributes) for every score (of ``scorer_id``), in export order."""
    found = []
    for span in capture.spans():
        for event in span.events:
            if event.name != EVENT:
                continue
            attrs = dict(event.attributes or {})
            if scorer_id is None or attrs.get("gen_ai.evaluation.name") == scorer_id:
                found.append((span, attrs))
    return found


def kinds(capture: CaptureScores) -> list[tuple[str, str, Any]]:
    """(scope, name, OpenInference kind or gen_ai operation) of every span: what a failing
    assertion prints."""
    return [(s.instrumentation_scope.name if s.instrumentation_scope else "", s.name,
             (s.attributes or {}).get("openinference.span.kind")
             or (s.attributes or {}).get("gen_ai.operation.name"))
            for s in capture.spans()]


@contextlib.contextmanager
def scripted_judge(answer: str) -> Iterator[ScriptedJudge]:
    """The scripted judge of ``capture``: ``answer`` is relevant and backed by the first
    document."""
    with ScriptedJudge() as judge:
        judge.route("answer_relevancy_statements", {"statements": [answer]})
        judge.route("answer_relevancy_verdicts",
                    {"results": [{"result": "yes", "reason": "answers it"}]})
        judge.route("answer_relevancy_reason", {"reason": "Direct answer."})
        judge.route("output_claims", {"claims": [answer]})
        judge.route("faithfulness_verdicts", {"verdicts": [
            {"claim_index": 0, "verdict": "yes", "reason": "the first document says so"}]})
        judge.route("faithfulness_reason", {"reason": "Backed by the documents."})
        yield judge


def record(request: pytest.FixtureRequest, capture: CaptureScores) -> None:
    """Append the test's figures to ``$CONFORMANCE_STATS`` (see ``conftest``), if set."""
    path = os.environ.get("CONFORMANCE_STATS")
    if not path:
        return
    spans = capture.spans()
    labels = [[(e.attributes or {}).get("gen_ai.evaluation.score.label") for e in s.events
               if e.name == "gen_ai.evaluation.result"] for s in spans]
    report = getattr(request.node, "rep_call", None)
    line = {"framework": Path(str(request.node.fspath)).parent.name,
            "test": request.node.name,
            "passed": bool(report is not None and report.passed),
            "spans": len(spans), "scored": sum(1 for found in labels if found),
            "not_scorable": sum(1 for found in labels if found
                                and all(label == "not_scorable" for label in found))}
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")
