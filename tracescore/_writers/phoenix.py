"""The writer that posts each score to Arize Phoenix as a span annotation, so Phoenix shows it
as a column, a filter and a summary (span events only appear under a span's Events tab).

``POST {base}/v1/span_annotations?sync=false`` with ``{"data": [annotation, ...]}``; each
annotation carries the scored span's id (hex), ``name`` = the scorer id, ``annotator_kind``
``LLM`` (the scorer asks a judge) or ``CODE``, ``result`` = score, label and explanation,
``metadata`` (evaluator version, judge model, error type, trace id) and an ``identifier``
(``tracescore:<evaluator version>``): Phoenix upserts on (span, name, identifier), so a batch
posted twice (a retry after a lost response) leaves one annotation, while scores of two
evaluator versions stay side by side.

Nothing here runs on the caller's thread or the scoring loop: ``write`` appends to a bounded
queue (full: the annotation is dropped and counted) and one daemon thread posts batches of up
to 100, retrying a failed batch twice. Delivered, failed and dropped annotations are counted on
the writer (``sent``, ``failed``, ``dropped``) and as ``tracescore.phoenix.annotations``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from typing import Any

from tracescore._core import semconv as sc
from tracescore._pipeline.request import ScoreOutcome

logger = logging.getLogger("tracescore")

MAX_BATCH = 100
MAX_QUEUE = 10_000
ATTEMPTS = 3  # a batch is posted at most this often
_BACKOFF = (0.5, 2.0)  # seconds before the 2nd and 3rd attempt
_TIMEOUT = 10.0  # seconds per HTTP request


class PhoenixAnnotationWriter:
    """Posts every outcome that has a span to Phoenix's span-annotation API, in batches, from a
    thread of its own.

    Args:
        base_url: Phoenix's base URL, e.g. ``http://127.0.0.1:6006``
            (``OutputOptions(phoenix_url=)`` or ``TRACESCORE_PHOENIX_URL``).
        telemetry: where ``tracescore.phoenix.annotations`` is counted (a ``Telemetry``), or
            None.
        headers: extra HTTP headers (e.g. ``{"Authorization": "Bearer ..."}`` for a Phoenix
            with authentication); never logged.

    Examples:
        >>> writer = PhoenixAnnotationWriter("http://127.0.0.1:6006")
    """

    def __init__(self, base_url: str, telemetry: Any = None,
                 headers: dict[str, str] | None = None) -> None:
        self.url = base_url.rstrip("/") + "/v1/span_annotations?sync=false"
        self._telemetry = telemetry
        self._headers = {"Content-Type": "application/json", **(headers or {})}
        self._queue: deque[dict[str, Any]] = deque()
        self._cond = threading.Condition()
        self._busy = 0  # annotations taken off the queue and not yet settled
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.sent = 0
        self.failed = 0
        self.dropped = 0

    # -- the engine's side (the loop thread): never blocks --------------------------------------
    def write(self, outcome: ScoreOutcome) -> None:
        request = outcome.request
        if not request.span_id:  # run_evals without tracing: nothing in Phoenix to annotate
            return
        self.add(annotation_for(outcome))

    def add(self, annotation: dict[str, Any]) -> None:
        """Queue one annotation (the ``data`` item of the request body) as ``write`` does;
        ``tracescore.record_feedback`` queues human verdicts here."""
        with self._cond:
            if self._stopping or len(self._queue) >= MAX_QUEUE:
                self.dropped += 1
                dropped = True
            else:
                self._queue.append(annotation)
                dropped = False
                self._start()
                self._cond.notify_all()
        if dropped:
            self._count("dropped", 1)

    # -- lifecycle --------------------------------------------------------------------------------
    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        """Wait until every queued annotation was posted (or failed for good). True when none
        is left within ``timeout_millis``."""
        deadline = time.monotonic() + max(0.0, timeout_millis / 1000)
        with self._cond:
            while self._queue or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def shutdown(self, timeout_millis: float = 5_000) -> None:
        """Post what is queued within ``timeout_millis``, then stop; what is left is dropped
        and counted."""
        self.force_flush(timeout_millis)
        with self._cond:
            self._stopping = True
            left = len(self._queue)
            self._queue.clear()
            self.dropped += left
            self._cond.notify_all()
        if left:
            self._count("dropped", left)

    def after_fork_in_child(self) -> None:
        """The thread did not survive ``fork()``; the parent posts what it queued."""
        self._cond = threading.Condition()
        self._queue.clear()
        self._busy = 0
        self._thread = None

    # -- the writer's thread ----------------------------------------------------------------------
    def _start(self) -> None:
        # Holds the condition's lock.
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="tracescore-phoenix",
                                            daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if self._stopping and not self._queue:
                    return
                batch = [self._queue.popleft() for _ in range(min(MAX_BATCH, len(self._queue)))]
                self._busy = len(batch)
            ok = self._post(batch)
            with self._cond:
                self._busy = 0
                if ok:
                    self.sent += len(batch)
                else:
                    self.failed += len(batch)
                self._cond.notify_all()
            self._count("sent" if ok else "failed", len(batch))

    def _post(self, batch: list[dict[str, Any]]) -> bool:
        body = json.dumps({"data": batch}, ensure_ascii=False).encode("utf-8")
        problem = ""
        for attempt in range(ATTEMPTS):
            if attempt:
                with self._cond:
                    if self._stopping:
                        break
                    self._cond.wait(_BACKOFF[attempt - 1])
            try:
                req = urllib.request.Request(self.url, data=body, headers=self._headers,
                                             method="POST")
                with urllib.request.urlopen(req, timeout=_TIMEOUT) as response:
                    response.read()
                return True
            except urllib.error.HTTPError as exc:
                problem = f"HTTP {exc.code}"
                if 400 <= exc.code < 500 and exc.code not in (408, 429):
                    break  # the request itself is wrong: a retry would be refused too
            except Exception as exc:  # unreachable, reset, timeout
                problem = type(exc).__name__
        logger.warning("tracescore could not post %d score annotation(s) to Phoenix (%s); "
                       "the scores are still on the spans and the application is unaffected",
                       len(batch), problem)
        return False

    def _count(self, outcome: str, n: int) -> None:
        if self._telemetry is not None:
            self._telemetry.record_annotations(outcome, n)


def annotation_for(outcome: ScoreOutcome) -> dict[str, Any]:
    """One score as a Phoenix span annotation (the ``data`` items of the request body)."""
    request = outcome.request
    attrs = outcome.attributes
    version = str(attrs.get(sc.TRACESCORE_EVALUATOR_VERSION) or "")
    result: dict[str, Any] = {"explanation": outcome.explanation}
    if outcome.score is not None:
        result["score"] = outcome.score
    label = outcome.label or (None if outcome.error_type is None else "error")
    if label is not None:
        result["label"] = label
    metadata: dict[str, Any] = {"trace_id": f"{request.trace_id:032x}", "source": "tracescore"}
    for key in (sc.TRACESCORE_EVALUATOR_VERSION, sc.TRACESCORE_JUDGE_MODEL, sc.ERROR_TYPE,
                sc.TRACESCORE_SAMPLE_RATE, sc.GEN_AI_RESPONSE_ID):
        if key in attrs:
            metadata[key] = attrs[key]
    uses_judge = outcome.judge_model is not None or sc.TRACESCORE_JUDGE_MODEL in attrs
    return {
        "span_id": f"{request.span_id:016x}",
        "name": outcome.scorer_id,
        "annotator_kind": "LLM" if uses_judge else "CODE",
        "result": result,
        "metadata": metadata,
        "identifier": f"tracescore:{version}" if version else "tracescore",
    }
