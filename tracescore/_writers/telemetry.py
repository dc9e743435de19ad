"""The writer that records each outcome as metrics and as a ``gen_ai.evaluation.result`` log
record (the form the GenAI semantic conventions define), through ``tracescore._telemetry``."""

from __future__ import annotations

from typing import Any

from .._request import ScoreOutcome
from .callback import ScoreEvent


class TelemetryWriter:
    """Records every outcome with ``telemetry.record_score``.

    Args:
        telemetry: the configured instance's ``Telemetry``.
    """

    def __init__(self, telemetry: Any) -> None:
        self.telemetry = telemetry

    def write(self, outcome: ScoreOutcome) -> None:
        self.telemetry.record_score(ScoreEvent.from_outcome(outcome), outcome.duration)
