"""The retry spool: batches the exporter failed, kept on disk in order until they go out, across
a crash or a kill of the process too.

One file per batch (``codec.encode``: compressed OTLP protobuf, already redacted by the export
processor's ``scrub``), readable and writable by this user only (0600), in a private folder
(0700) made on the first failure inside ``TRACESCORE_EXPORT_RETRY_DIR`` or the system's
temporary folder. A file's name says its order, its spans and the bytes it inflates to
(``000000000042-512-1048576.otlp``): reading it back never inflates more than that (nor more
than ``max_decoded``), so a damaged or planted file costs no memory before it is dropped.

The spool is bounded twice: by the bytes its files take (past the bound the oldest batches go
first, so what is kept is the most recent, unbroken stretch) and by age (a batch older than the
bound is dropped before it is tried again). Every span dropped is reported to the caller, which
counts it.

Surviving the process (issue 22): the folder is made under a temporary name, locked with
``flock`` on the folder itself, then renamed to ``tracescore-retry-<pid>-<random>.locked``; the
lock is held for as long as the process lives (the kernel releases it when the process dies,
however it dies). A new spool on the same directory looks at the other spool folders there
once, when it is made: a folder whose lock it can take belongs to a process that is gone, and
its batches are adopted (moved into this spool's folder, oldest first by their files' times,
ahead of anything of this process), those past the age bound dropped and counted, and the folder
removed. A folder whose lock is held is never touched. Folders of earlier versions (no
``.locked`` suffix, no lock held) are adopted only when the process id in their name is not
alive. ``close()`` (shutdown) removes this process's folder, whatever it still holds (counted as
dropped at shutdown by the export processor).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
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

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX: no adoption, folders stay private
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger("tracescore")

# A failing disk would otherwise log once per batch.
_LOG_INTERVAL = 60.0
PREFIX = "tracescore-retry-"
_NEW_PREFIX = ".tracescore-retry-new-"
LOCKED_SUFFIX = ".locked"
# Bytes a batch file may inflate to at most, whatever its name says: batches are cut to the
# export request's limit (3 MiB by default) before they are spooled.
MAX_DECODED = 64 << 20
_FILE = re.compile(r"(\d{12})(?:-(\d+)-(\d+))?\.otlp\Z")
_FOLDER_PID = re.compile(re.escape(PREFIX) + r"(\d+)-")


@dataclass
class _Entry:
    path: Path
    spans: int
    size: int
    created: float  # time.monotonic()
    raw: int  # bytes it inflates to (MAX_DECODED when unknown)


class Spool:
    """Failed batches on disk, oldest first.

    Args:
        directory: the folder to make this process's spool folder in; None: the system's
            temporary folder.
        max_bytes: bytes of files kept at most.
        max_age: seconds a batch is kept at most.
        adopt: take over the batches of spools in ``directory`` whose process is gone (see the
            module docstring). Default True.
        max_decoded: bytes a batch file may inflate to at most. Default 64 MiB.
    """

    def __init__(self, directory: str | None, max_bytes: int, max_age: float, *,
                 adopt: bool = True, max_decoded: int = MAX_DECODED) -> None:
        self._base = directory
        self.max_bytes = max_bytes
        self.max_age = max_age
        self.max_decoded = max_decoded
        self._dir: Path | None = None
        self._lock_fd: int | None = None
        self._entries: deque[_Entry] = deque()
        self._seq = 0
        self._lock = threading.Lock()
        self.bytes = 0
        self.spans = 0
        self._last_log = -_LOG_INTERVAL
        #: Spans adopted from spools of processes that are gone, and spans of theirs dropped.
        self.adopted = 0
        self.adopted_dropped = 0
        self._dropped_pending = 0
        if adopt:
            try:
                self._adopt()
            except Exception:
                logger.warning("tracescore could not look for the retry spools of processes "
                               "that ended in %s (the application is unaffected)",
                               self._base_dir(), exc_info=True)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def directory(self) -> Path | None:
        """This process's spool folder, once something was written."""
        return self._dir

    def take_dropped(self) -> int:
        """Spans dropped outside ``append``/``head`` (batches of processes that are gone, past
        the age bound or unreadable) not yet reported; reported once."""
        with self._lock:
            dropped, self._dropped_pending = self._dropped_pending, 0
            return dropped

    def append(self, spans: Sequence[ReadableSpan]) -> int:
        """Write a batch at the end. Returns the spans dropped doing so: the batch itself when it
        cannot be written or alone exceeds ``max_bytes``, or the oldest batches evicted to make
        room for it."""
        if not spans:
            return 0
        try:
            data, raw = codec.encode_sized(spans)
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
                path = self._folder() / f"{self._seq:012d}-{len(spans)}-{raw}.otlp"
                self._seq += 1
                _write_private(path, data)
            except Exception:
                self._log("tracescore could not write %d spans to the retry spool in %s; they "
                          "are lost", len(spans), self._dir or self._base)
                return dropped + len(spans)
            self._entries.append(_Entry(path, len(spans), len(data), time.monotonic(), raw))
            self.bytes += len(data)
            self.spans += len(spans)
            return dropped

    def head(self) -> tuple[list[ReadableSpan] | None, int]:
        """The oldest batch, read back, and the spans dropped on the way: batches past
        ``max_age`` and files that cannot be read. ``(None, dropped)`` when nothing is left."""
        now = time.monotonic()
        with self._lock:
            dropped, self._dropped_pending = self._dropped_pending, 0
            while self._entries:
                entry = self._entries[0]
                if now - entry.created > self.max_age:
                    dropped += self._remove(self._entries.popleft())
                    continue
                try:
                    data = _read_private(entry.path, entry.size)
                    return codec.decode(data, min(entry.raw, self.max_decoded)), dropped
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
            dropped, self._dropped_pending = self._dropped_pending, 0
            while self._entries:
                dropped += self._remove(self._entries.popleft())
            if self._dir is not None:
                shutil.rmtree(self._dir, ignore_errors=True)
                self._dir = None
            self._unlock()
            return dropped

    def after_fork_in_child(self) -> None:
        """Forget the parent's batches (the parent retries them) without touching its files,
        and let go of the child's copy of the parent's lock (the parent keeps holding it)."""
        self._lock = threading.Lock()
        self._entries.clear()
        self._dir = None
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)  # the parent's descriptor keeps the lock
            self._lock_fd = None
        self.bytes = 0
        self.spans = 0

    # -- this process's folder -------------------------------------------------------------------
    def _base_dir(self) -> str:
        return self._base if self._base is not None else tempfile.gettempdir()

    def _folder(self) -> Path:
        if self._dir is None:
            base = self._base_dir()
            os.makedirs(base, exist_ok=True)
            # Made under a name other spools do not look at, locked, then renamed: no other
            # process ever sees it unlocked.
            made = tempfile.mkdtemp(prefix=_NEW_PREFIX, dir=base)
            try:
                fd = _lock_folder(made)
                final = os.path.join(base, f"{PREFIX}{os.getpid()}-"
                                     f"{os.path.basename(made)[len(_NEW_PREFIX):]}"
                                     f"{LOCKED_SUFFIX if fd is not None else ''}")
                os.rename(made, final)
            except BaseException:
                shutil.rmtree(made, ignore_errors=True)
                raise
            self._lock_fd = fd
            self._dir = Path(final)
        return self._dir

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)
            self._lock_fd = None

    # -- adopting the spools of processes that are gone ------------------------------------------
    def _adopt(self) -> None:
        base = self._base_dir()
        if fcntl is None or not os.path.isdir(base):
            return
        found: list[tuple[float, str, int, Path, int, int, int]] = []
        held: list[tuple[str, int]] = []
        try:
            for item in os.scandir(base):
                if not item.name.startswith(PREFIX) or not item.is_dir(follow_symlinks=False):
                    continue
                fd = _try_lock(item.path, item.name)
                if fd is None:
                    continue  # a live process's folder
                held.append((item.path, fd))
                for f in os.scandir(item.path):
                    match = _FILE.match(f.name)
                    if match is None or not f.is_file(follow_symlinks=False):
                        continue
                    stat = f.stat(follow_symlinks=False)
                    spans = int(match.group(2)) if match.group(2) else 0
                    raw = int(match.group(3)) if match.group(3) else self.max_decoded
                    found.append((stat.st_mtime, item.name, int(match.group(1)), Path(f.path),
                                  spans, stat.st_size, raw))
            if not held:
                return
            found.sort(key=lambda x: (x[0], x[1], x[2]))
            now_wall, now = time.time(), time.monotonic()
            adopted = dropped = 0
            with self._lock:
                for mtime, _, _, path, spans, size, raw in found:
                    age = max(0.0, now_wall - mtime)
                    if age > self.max_age:
                        dropped += spans
                        continue
                    try:
                        target = self._folder() / f"{self._seq:012d}-{spans}-{raw}.otlp"
                        os.rename(path, target)
                    except OSError:
                        dropped += spans
                        continue
                    self._seq += 1
                    self._entries.append(_Entry(target, spans, size, now - age, raw))
                    self.bytes += size
                    self.spans += spans
                    adopted += spans
                while self._entries and self.bytes > self.max_bytes:
                    evicted = self._remove(self._entries.popleft())
                    dropped += evicted
                    adopted -= evicted
                self._dropped_pending += dropped
            self.adopted += adopted
            self.adopted_dropped += dropped
            logger.info("tracescore took over the retry spool of %d process(es) that ended "
                        "without shutting down, in %s: %d spans to replay, %d dropped (past "
                        "the age bound, beyond the byte bound or unreadable)",
                        len(held), base, adopted, dropped)
        finally:
            for path, fd in held:
                shutil.rmtree(path, ignore_errors=True)
                with contextlib.suppress(OSError):
                    os.close(fd)

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


def _write_private(path: Path, data: bytes) -> None:
    """Write a new file readable and writable by this user only."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def _read_private(path: Path, size: int) -> bytes:
    """Read a batch file (not through a symbolic link), at most the size it was written with."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as source:
        data = source.read(size + 1)
    if len(data) > size:
        raise ValueError(f"{path} grew since it was written")
    return data


def _lock_folder(path: str) -> int | None:
    """An exclusive ``flock`` on the folder itself, held through the returned descriptor
    (None where ``fcntl`` is missing)."""
    if fcntl is None:
        return None
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _try_lock(path: str, name: str) -> int | None:
    """The lock of another spool's folder when its process is gone, else None."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
                     | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None  # held: its process is alive
    if not name.endswith(LOCKED_SUFFIX):
        # An earlier version's folder: no lock was ever held, so only a dead process id says
        # it is free (a live one may still be writing to it).
        match = _FOLDER_PID.match(name)
        pid = int(match.group(1)) if match else -1
        if pid != os.getpid() and _alive(pid):
            os.close(fd)
            return None
    return fd


def _alive(pid: int) -> bool:
    if pid <= 0:
        return True  # unknown: leave it alone
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno == errno.EPERM
    return True
