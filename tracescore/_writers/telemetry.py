"""The writer that records each outcome as metrics and as a ``gen_ai.evaluation.result`` log
record (the form the GenAI semantic conventions define), through
``tracescore._writers.instruments``."""

from __future__ import annotations

from typing import Any

from tracescore._core import semconv as sc
from tracescore._pipeline.request import ScoreOutcome

from .callback import ScoreEvent


class TelemetryWriter:
    """Records every outcome with ``telemetry.record_score``: the log record is stamped at the
    scored span's end, and the metrics carry the span's agent name and operation (bounded by
    ``Telemetry.bounded``).

    Args:
        telemetry: the configured instance's ``Telemetry``.
    """

    def __init__(self, telemetry: Any) -> None:
        self.telemetry = telemetry

    def write(self, outcome: ScoreOutcome) -> None:
        request = outcome.request
        attributes = request.attributes
        # The agent's name and the operation are dimensions of the metrics: redacted and bounded
        # there (Telemetry.bounded), as every string tracescore writes.
        agent = attributes.get(sc.GEN_AI_AGENT_NAME)
        self.telemetry.record_score(
            ScoreEvent.from_outcome(outcome), outcome.duration,
            end_time=request.end_time,
            agent=agent,
            operation=attributes.get(sc.GEN_AI_OPERATION_NAME) or request.kind,
        )
