"""The retry spool: batches the exporter failed, kept on disk in order until they go out.

One file per batch (``codec.encode``: compressed OTLP protobuf) in a private folder made on the
first failure (``mkdtemp``: readable by this user only, since spans carry content), inside
``TRACESCORE_EXPORT_RETRY_DIR`` or the system's temporary folder. The spool is bounded twice:
by the bytes its files take (past the bound the oldest batches go first, so what is kept is
the most recent, unbroken stretch) and by age (a batch older than the bound is dropped before
it is tried again). Every span dropped is reported to the caller, which counts it.

The folder belongs to this process: ``close()`` removes it, whatever it still holds (counted as
dropped at shutdown by the export processor). A process that dies without closing leaves it
behind; nothing replays another process's folder.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan

from . import codec

logger = logging.getLogger("tracescore")

# A failing disk would otherwise log once per batch.
_LOG_INTERVAL = 60.0


@dataclass
class _Entry:
    path: Path
    spans: int
    size: int
    created: float  # time.monotonic()


class Spool:
    """Failed batches on disk, oldest first.

    Args:
        directory: the folder to make this process's spool folder in; None: the system's
            temporary folder.
        max_bytes: bytes of files kept at most.
        max_age: seconds a batch is kept at most.
    """

    def __init__(self, directory: str | None, max_bytes: int, max_age: float) -> None:
        self._base = directory
        self.max_bytes = max_bytes
        self.max_age = max_age
        self._dir: Path | None = None
        self._entries: deque[_Entry] = deque()
        self._seq = 0
        self._lock = threading.Lock()
        self.bytes = 0
        self.spans = 0
        self._last_log = -_LOG_INTERVAL

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def directory(self) -> Path | None:
        """This process's spool folder, once something was written."""
        return self._dir

    def append(self, spans: Sequence[ReadableSpan]) -> int:
        """Write a batch at the end. Returns the spans dropped doing so: the batch itself when it
        cannot be written or alone exceeds ``max_bytes``, or the oldest batches evicted to make
        room for it."""
        if not spans:
            return 0
        try:
            data = codec.encode(spans)
        except Exception:
            self._log("tracescore could not encode %d spans for the retry spool; they are lost",
                      len(spans))
            return len(spans)
        if len(data) > self.max_bytes:
            return len(spans)
        with self._lock:
            dropped = 0
            while self._entries and self.bytes + len(data) > self.max_bytes:
                dropped += self._remove(self._entries.popleft())
            try:
                path = self._folder() / f"{self._seq:012d}.otlp"
                self._seq += 1
                path.write_bytes(data)
            except Exception:
                self._log("tracescore could not write %d spans to the retry spool in %s; they "
                          "are lost", len(spans), self._dir or self._base)
                return dropped + len(spans)
            self._entries.append(_Entry(path, len(spans), len(data), time.monotonic()))
            self.bytes += len(data)
            self.spans += len(spans)
            return dropped

    def head(self) -> tuple[list[ReadableSpan] | None, int]:
        """The oldest batch, read back, and the spans dropped on the way: batches past
        ``max_age`` and files that cannot be read. ``(None, dropped)`` when nothing is left."""
        dropped = 0
        now = time.monotonic()
        with self._lock:
            while self._entries:
                entry = self._entries[0]
                if now - entry.created > self.max_age:
                    dropped += self._remove(self._entries.popleft())
                    continue
                try:
                    return codec.decode(entry.path.read_bytes()), dropped
                except Exception:
                    self._log("tracescore could not read back %d spans from %s; they are lost",
                              entry.spans, entry.path)
                    dropped += self._remove(self._entries.popleft())
            return None, dropped

    def pop(self) -> None:
        """Remove the oldest batch (it went out)."""
        with self._lock:
            if self._entries:
                self._remove(self._entries.popleft())

    def expire(self) -> int:
        """Drop the batches past ``max_age``; returns their spans."""
        dropped = 0
        now = time.monotonic()
        with self._lock:
            while self._entries and now - self._entries[0].created > self.max_age:
                dropped += self._remove(self._entries.popleft())
        return dropped

    def close(self) -> int:
        """Remove every batch and the folder; returns the spans that were still waiting."""
        with self._lock:
            dropped = 0
            while self._entries:
                dropped += self._remove(self._entries.popleft())
            if self._dir is not None:
                shutil.rmtree(self._dir, ignore_errors=True)
                self._dir = None
            return dropped

    def after_fork_in_child(self) -> None:
        """Forget the parent's batches (the parent retries them) without touching its files."""
        self._lock = threading.Lock()
        self._entries.clear()
        self._dir = None
        self.bytes = 0
        self.spans = 0

    def _folder(self) -> Path:
        if self._dir is None:
            if self._base is not None:
                os.makedirs(self._base, exist_ok=True)
            self._dir = Path(tempfile.mkdtemp(prefix=f"tracescore-retry-{os.getpid()}-",
                                              dir=self._base))
        return self._dir

    def _remove(self, entry: _Entry) -> int:
        self.bytes -= entry.size
        self.spans -= entry.spans
        with contextlib.suppress(OSError):
            entry.path.unlink()
        return entry.spans

    def _log(self, message: str, *args: object) -> None:
        now = time.monotonic()
        if now - self._last_log >= _LOG_INTERVAL:
            self._last_log = now
            logger.warning(message + " (the application is unaffected)", *args, exc_info=True)
