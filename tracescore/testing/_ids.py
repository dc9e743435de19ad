"""Sequential trace and span ids, so whole spans can be compared in tests."""

from __future__ import annotations

import threading

from opentelemetry.sdk.trace.id_generator import IdGenerator

__all__ = ["SequentialIdGenerator"]


class SequentialIdGenerator(IdGenerator):
    """An OpenTelemetry SDK ``IdGenerator`` handing out 1, 2, 3, ... as trace and span ids.

    Trace ids and span ids count separately, from 1, in the order spans start; as hex they
    read ``00000000000000000000000000000001`` and ``0000000000000001``. tracescore's sampling
    hashes the trace id, so ``sample_rate`` still picks a deterministic fraction of these ids.
    Not for production: the ids are neither random nor unique across processes, and
    ``is_trace_id_random()`` says so.

    Examples:
        >>> provider = TracerProvider(id_generator=SequentialIdGenerator())
        >>> tracescore.configure(tracer_provider=provider, exporter=InMemoryScoreExporter())
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._trace_id = 0
        self._span_id = 0

    def generate_trace_id(self) -> int:
        """The next trace id: 1, 2, 3, ..."""
        with self._lock:
            self._trace_id += 1
            return self._trace_id

    def generate_span_id(self) -> int:
        """The next span id: 1, 2, 3, ..."""
        with self._lock:
            self._span_id += 1
            return self._span_id

    def is_trace_id_random(self) -> bool:
        """False: the W3C ``random-trace-id`` flag must not be set for these ids."""
        return False

    def reset(self) -> None:
        """Start both counters from 1 again."""
        with self._lock:
            self._trace_id = 0
            self._span_id = 0
