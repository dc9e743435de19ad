"""Test doubles for the span/processor tests, and short names for the kit's readers."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore
from tracescore.testing import InMemoryScoreExporter, evaluation_events


@dataclass
class SimpleResult:
    score: float | None
    reason: str
    judge_model: str | None = None


@dataclass
class ProbeScorer:
    """A real scorer object (the interface the processor calls): it records what it was given
    and scores the output's length against ``scale`` characters, after ``delay`` seconds."""

    id: str = "probe"
    delay: float = 0.0
    uses_context: bool = False
    requires_ground_truth: bool = False
    higher_is_better: bool = True
    fail_with: BaseException | None = None
    calls: list[dict[str, Any]] = field(default_factory=list)

    async def arun(self, **kwargs: Any) -> SimpleResult:
        self.calls.append(kwargs)
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.fail_with is not None:
            raise self.fail_with
        out = kwargs.get("output")
        if out is None or out == "":
            return SimpleResult(None, "output is empty")
        return SimpleResult(min(len(str(out)) / 100, 1.0), f"length {len(str(out))}")


def memory_configure(**kwargs: Any) -> tuple[tracescore.Tracescore, InMemoryScoreExporter]:
    """``tracescore.configure(**kwargs)`` exporting to a new ``InMemoryScoreExporter``."""
    exporter = InMemoryScoreExporter()
    kwargs.setdefault("exporter", exporter)
    inst = tracescore.configure(**kwargs)
    return inst, exporter


def finished(exporter: InMemorySpanExporter, timeout_millis: int = 5000) -> list[Any]:
    """Flush tracescore (pending scores included), then the spans ``exporter`` holds."""
    tracescore.force_flush(timeout_millis)
    return list(exporter.get_finished_spans())


eval_events = evaluation_events


def timeout_scale() -> float:
    """How many times longer than on a quiet machine a test may wait for anything.

    ``TRACESCORE_TEST_TIMEOUT_SCALE`` when set (a number >= 1), else the machine's load per
    core (the larger of the 1- and 5-minute load averages over ``os.cpu_count()``), at least 1
    and at most 10: at a load of 6 on 2 cores every wait gets three times its quiet-machine
    allowance. Read at each call, so a wait that starts when the load has risen gets more.
    ``tests/conftest.py`` scales pytest-timeout's limits by it too.
    """
    given = os.environ.get("TRACESCORE_TEST_TIMEOUT_SCALE", "").strip()
    if given:
        try:
            return min(max(float(given), 1.0), 100.0)
        except ValueError:
            pass
    try:
        load = max(os.getloadavg()[:2])
    except (AttributeError, OSError):  # no load average on this platform
        return 1.0
    return min(max(load / (os.cpu_count() or 1), 1.0), 10.0)


def scaled(seconds: float) -> float:
    """``seconds`` (a quiet machine's allowance) times ``timeout_scale()``."""
    return seconds * timeout_scale()
