"""Writers: where a ``ScoreOutcome`` goes. One module per destination.

The engine hands every finished job's outcome to each configured writer, in order, on the
tracescore loop's thread. A writer must not block (hand slow work to its own exporter) and may
raise only by accident (the engine logs it and goes on with the next writer). Adding a
destination is a new module with a class that has ``write(outcome)``; the engine does not change.

- ``span_event``: the ``gen_ai.evaluation.result`` event on the held scored span, or on a
  carrier span ``evaluation {scorer id}`` when the scored span already went out;
- ``telemetry``: the score metrics and the ``gen_ai.evaluation.result`` log record;
- ``callback``: the user's ``configure(on_score=...)`` callback, with a ``ScoreEvent``.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from tracescore._pipeline.request import ScoreOutcome


@runtime_checkable
class Writer(Protocol):
    """A destination for scores."""

    def write(self, outcome: ScoreOutcome) -> None: ...
