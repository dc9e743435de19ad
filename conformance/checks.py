"""What the conformance tests assert with: the echo scorer and readers of the exported scores."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tracescore.scorers import create_scorer
from tracescore.testing import CaptureScores

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

