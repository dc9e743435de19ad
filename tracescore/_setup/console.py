"""What tracescore says on stderr when spans go to the local file (no exporter, no OTLP
endpoint): once per process where spans and scores go, and at exit a short summary of what was
written there and how to look at it (``tracescore view``).

A first run that writes three JSON lines files and prints nothing looks like a run that did
nothing; this is the one place tracescore prints on its own. It is a plain write to stderr, as
OpenTelemetry-native SDKs print their project link, not a log record: the application's logging
setup decides nothing here. ``OutputOptions(console=False)`` or ``TRACESCORE_CONSOLE=false`` turns
both off. Nothing here ever raises: a closed stderr costs the message, nothing else.
"""

from __future__ import annotations

import shlex
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

from tracescore._core.terminal import visible

MAX_SCORER_LINES = 20  # scorers listed in the exit summary; the rest are counted
MAX_ERROR_CHARS = 200  # characters of a scorer's first error message shown
MAX_FILE_LINES = 5  # files listed when several were written (the last ones used)


@dataclass
class _ScorerCounts:
    scores: int = 0
    total: float = 0.0
    numeric: int = 0
    labels: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    first_error: str = ""


class Tally:
    """Process-wide counts of what went to the local file: spans per file (added when a
    configuration that used the file shuts down) and scores per scorer (counted by a writer
    as they are made)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.spans: dict[str, int] = {}
        self.dropped: dict[str, int] = {}
        self.scorers: dict[str, _ScorerCounts] = {}

    def add_spans(self, path: str, exported: int, dropped: int) -> None:
        """Count the spans one configuration exported to (or dropped before) ``path``."""
        with self._lock:
            # The file used last goes last: the one the summary's view command names.
            self.spans[path] = self.spans.pop(path, 0) + exported
            self.dropped[path] = self.dropped.get(path, 0) + dropped

    def add_score(self, scorer_id: str, score: float | None, label: str | None,
                  error_type: str | None, explanation: str = "") -> None:
        """Count one score (or failed scoring) of ``scorer_id``; the first error's
        ``explanation`` is kept (redacted, cut) to be shown."""
        with self._lock:
            counts = self.scorers.setdefault(scorer_id, _ScorerCounts())
            counts.scores += 1
            if error_type:
                counts.errors[error_type] = counts.errors.get(error_type, 0) + 1
                if not counts.first_error and explanation:
                    counts.first_error = _shown_error(explanation)
            elif score is not None:
                counts.total += float(score)
                counts.numeric += 1
            if label:
                counts.labels[label] = counts.labels.get(label, 0) + 1

    def empty(self) -> bool:
        """True when nothing was counted (no file was used, or nothing was written)."""
        with self._lock:
            return not self.spans and not self.scorers

    def summary(self) -> list[str]:
        """The exit summary's lines (without newlines)."""
        with self._lock:
            spans = dict(self.spans)
            dropped = dict(self.dropped)
            scorers = {k: _copy(v) for k, v in self.scorers.items()}
        n_scores = sum(c.scores for c in scorers.values())
        results = (f" with {n_scores:,} evaluation result{'s' * (n_scores != 1)}" if n_scores
                   else " (no scores: configure(scoring=[tracescore.ScoringRule(...)]) adds them)")
        total = sum(spans.values())
        where = (f" to {next(iter(spans))}" if len(spans) == 1
                 else f" to {len(spans)} files" if spans else "")
        lines = [f"tracescore: wrote {total:,} span{'s' * (total != 1)}{where}{results}"]
        if len(spans) > 1:
            for path in list(spans)[-MAX_FILE_LINES:]:
                lines.append(f"  {spans[path]:,} span{'s' * (spans[path] != 1)} to {path}")
        lost = sum(dropped.values())
        if lost:
            lines.append(f"  {lost:,} span(s) could not be written (tracescore.stats()"
                         ".spans_dropped says why)")
        width = max([len(s) for s in scorers] + [0])
        for scorer_id in sorted(scorers)[:MAX_SCORER_LINES]:
            counts = scorers[scorer_id]
            lines.append(f"  {scorer_id:<{width}}  {_describe(counts)}")
            if counts.first_error:
                lines.append(f"  {'':<{width}}  first error: {counts.first_error}")
        if len(scorers) > MAX_SCORER_LINES:
            lines.append(f"  ... and {len(scorers) - MAX_SCORER_LINES} more scorers")
        if spans:
            lines.append(f"  see them: tracescore view {shlex.quote(list(spans)[-1])}  (an HTML "
                         "page of the traces and their scores)")
        return lines


def _copy(counts: _ScorerCounts) -> _ScorerCounts:
    return _ScorerCounts(counts.scores, counts.total, counts.numeric, dict(counts.labels),
                         dict(counts.errors), counts.first_error)


def _shown_error(text: str) -> str:
    """An error message for the terminal: credentials redacted, one line, cut."""
    from tracescore._core import redact as _redact  # imported by the decorators already

    line = " ".join(_redact.redact_text(str(text)).split())
    line = line if len(line) <= MAX_ERROR_CHARS else line[:MAX_ERROR_CHARS - 1] + "…"
    return visible(line)


def _describe(counts: _ScorerCounts) -> str:
    parts = []
    if counts.numeric:
        scored = [f"mean {counts.total / counts.numeric:.3g}"]
        scored += [f"{counts.labels[label]:,} {label}" for label in ("pass", "fail")
                   if counts.labels.get(label)]
        parts.append(f"{counts.numeric:,} scored ({', '.join(scored)})")
    if counts.labels.get("not_scorable"):
        parts.append(f"{counts.labels['not_scorable']:,} not scorable")
    if counts.errors:
        kinds = ", ".join(sorted(counts.errors))
        parts.append(f"{sum(counts.errors.values()):,} failed ({kinds})")
    return ", ".join(parts) or f"{counts.scores:,} without a score"


class TallyWriter:
    """A score writer (``write(outcome)``) counting each outcome in a ``Tally``."""

    def __init__(self, tally: Tally) -> None:
        self.tally = tally

    def write(self, outcome: Any) -> None:
        self.tally.add_score(outcome.scorer_id, outcome.score, outcome.label,
                             outcome.error_type, outcome.explanation)


class Console:
    """What the process's runtime (``RUNTIME.console``) prints on its own: once per process
    where spans and scores go, and at exit the summary of its ``tally``; a service's runtime
    has none.

    Attributes:
        tally: what went to the local file.
        enabled: the console setting of the latest ``configure()`` (it decides the exit
            summary).
    """

    def __init__(self) -> None:
        self.tally = Tally()
        self.enabled = True
        self._lock = threading.Lock()
        self._announced = False

    def announce(self, path: str) -> None:
        """Say once per process where spans and scores go (when the console is on).

        Args:
            path: the span file.
        """
        with self._lock:
            if self._announced or not self.enabled:
                return
            self._announced = True
        _write([f"tracescore: no OTLP endpoint set: spans and scores go to {path} "
                f"(see them: tracescore view {shlex.quote(path)}; quiet: "
                "TRACESCORE_CONSOLE=false)"])

    def print_summary(self) -> None:
        """Print the exit summary when the console is on and something went to the local
        file."""
        try:
            if not self.enabled or self.tally.empty():
                return
            _write(self.tally.summary())
        except Exception:  # noqa: BLE001 - at exit nothing may raise
            pass


def _write(lines: list[str]) -> None:
    try:
        stream = sys.stderr
        if stream is None:
            return
        # A file name or a scorer's error from the application's data: escape sequences in
        # them are shown, never run by the terminal.
        stream.write("".join(f"{visible(line)}\n" for line in lines))
        stream.flush()
    except Exception:  # noqa: BLE001 - a closed or broken stderr: the message is lost, nothing else
        pass
