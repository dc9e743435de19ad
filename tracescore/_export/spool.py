"""The retry spool: batches the exporter failed, kept on disk in order until they go out, across
a crash or a kill of the process too.

One file per batch (``codec.encode``: compressed OTLP protobuf, already redacted by the export
processor's ``scrub``), readable and writable by this user only (0600), in a private folder
(0700) made on the first failure inside ``TRACESCORE_EXPORT_RETRY_DIR`` or the system's
temporary folder. A file's name says its order, its spans and the bytes it inflates to
(``000000000042-512-1048576.otlp``): reading it back never inflates more than that (nor more
than ``max_decoded``), so a damaged or planted file costs no memory before it is dropped. The
span count in the name is a hint for this process's own files only: an adopted file's spans are
counted from its decoded contents.

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
alive.

What is adopted is trusted no further than its owner: a folder is adopted only when it is a
real folder (not a symbolic link) owned by this process's user with mode 0700, checked on the
opened folder itself; any other is left alone, counted (``Stats.spool_refused["folders"]``) and
logged once per process. Inside it, only regular files of this user with one link are taken; a
file larger than a batch can be (``max_decoded`` and zlib's framing) is dropped alone, unread,
and counted (``Stats.spool_refused["files"]``), as is a file that does not decode; one within
that but alone past the byte bound is dropped alone too, its spans counted, before it could push
out older batches. The spans of
an adopted file are counted from its decoded contents, never from its name, whether it is
replayed or dropped (past the age bound, beyond the byte bound, at shutdown).

``close()`` (shutdown) removes this process's folder, whatever it still holds (counted as
dropped at shutdown by the export processor).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import shutil
import stat
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
# Folders refused already reported, by (device, inode): one warning per folder and process.
_REFUSED_LOGGED: set[tuple[int, int]] = set()
_REFUSED_LOCK = threading.Lock()


@dataclass
class _Entry:
    path: Path
    spans: int | None  # None: adopted, not decoded yet
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
        #: Batches adopted from spools of processes that are gone, and spans of theirs dropped
        #: (counted as they are decoded).
        self.adopted = 0
        self.adopted_dropped = 0
        #: Spool folders left alone (not this user's, not 0700) and files dropped unread
        #: (larger than a batch can be, not regular, damaged).
        self.refused = {"folders": 0, "files": 0}
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
        """Spans dropped outside ``append``/``head`` not yet reported (reported once), after
        dropping the batches past the age bound and the oldest beyond the byte bound (adopted
        batches are counted here, decoded, on the caller's thread: the export thread)."""
        dropped = self.expire()
        with self._lock:
            # A batch alone past the byte bound goes by itself, before it could push out
            # the batches older than it; then the oldest go until the rest fits.
            if any(entry.size > self.max_bytes for entry in self._entries):
                kept: deque[_Entry] = deque()
                for entry in self._entries:
                    if entry.size > self.max_bytes:
                        dropped += self._remove(entry)
                    else:
                        kept.append(entry)
                self._entries = kept
            while self._entries and self.bytes > self.max_bytes:
                dropped += self._remove(self._entries.popleft())
            dropped, self._dropped_pending = dropped + self._dropped_pending, 0
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
                    spans = codec.decode(data, min(entry.raw, self.max_decoded))
                except Exception:
                    self._log("tracescore could not read back the batch in %s; it is lost",
                              entry.path)
                    if entry.spans is None:
                        self.refused["files"] += 1
                        entry.spans = 0  # nothing decoded: no spans known
                    dropped += self._remove(self._entries.popleft())
                    continue
                if entry.spans is None:
                    entry.spans = len(spans)
                    self.spans += len(spans)
                return spans, dropped
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
        found: list[tuple[float, str, int, str, int, int, int]] = []
        held: list[tuple[str, int]] = []
        refused: list[str] = []
        too_big = 0
        # A batch file is never larger than what it inflates to, plus zlib's few bytes of
        # framing per 16 KiB block: a larger one is not read at all. (One within that but
        # past the byte bound is adopted and then dropped alone, counted, by take_dropped.)
        max_file = self.max_decoded + (self.max_decoded >> 10) + 64
        try:
            for item in os.scandir(base):
                if not item.name.startswith(PREFIX) or not item.is_dir(follow_symlinks=False):
                    continue
                fd = _try_lock(item.path, item.name)
                if fd is None:
                    continue  # a live process's folder (or gone already)
                if not _private(os.fstat(fd)):
                    # Checked on the opened folder itself: renaming another folder into its
                    # place after the check changes nothing read below.
                    refused.append(item.path)
                    _note_refused(os.fstat(fd), item.path)
                    os.close(fd)
                    continue
                held.append((item.path, fd))
                for f in os.scandir(fd):
                    match = _FILE.match(f.name)
                    if match is None:
                        continue
                    st = os.stat(f.name, dir_fd=fd, follow_symlinks=False)
                    if not (stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid()
                            and st.st_nlink == 1):
                        self.refused["files"] += 1
                        continue  # left to be removed with the folder, unread
                    if st.st_size > max_file:
                        self.refused["files"] += 1
                        too_big += 1
                        continue
                    raw = int(match.group(3)) if match.group(3) else self.max_decoded
                    found.append((st.st_mtime, item.name, int(match.group(1)), f.name,
                                  len(held) - 1, st.st_size, raw))
            self.refused["folders"] += len(refused)
            if not held:
                return
            found.sort(key=lambda x: (x[0], x[1], x[2]))
            now_wall, now = time.time(), time.monotonic()
            lost = 0
            with self._lock:
                for mtime, _, _, name, folder, size, raw in found:
                    age = max(0.0, now_wall - mtime)
                    try:
                        target = self._folder() / f"{self._seq:012d}-0-{raw}.otlp"
                        os.rename(name, target, src_dir_fd=held[folder][1])
                    except OSError:
                        lost += 1
                        continue
                    self._seq += 1
                    # Counted when decoded: replayed (head), or dropped (past the age bound,
                    # beyond the byte bound, at shutdown).
                    self._entries.append(_Entry(target, None, size, now - age, raw))
                    self.bytes += size
                    self.adopted += 1
                self.refused["files"] += lost
            logger.info("tracescore took over the retry spool of %d process(es) that ended "
                        "without shutting down, in %s: %d batch(es) to replay, %d file(s) "
                        "dropped unread (larger than a batch can be, not regular files of this "
                        "user, or not movable)",
                        len(held), base, self.adopted, too_big + lost)
        finally:
            for path, fd in held:
                shutil.rmtree(path, ignore_errors=True)
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _remove(self, entry: _Entry) -> int:
        """Forget ``entry`` and delete its file; returns its spans (an adopted file's counted
        from its decoded contents first). Holds ``_lock``."""
        self.bytes -= entry.size
        if entry.spans is None:
            spans = self._count(entry)
            self.adopted_dropped += spans
        else:
            spans = entry.spans
            self.spans -= spans
        with contextlib.suppress(OSError):
            entry.path.unlink()
        return spans

    def _count(self, entry: _Entry) -> int:
        """The spans in an adopted file, decoded (within its size and ``max_decoded``); 0 and
        counted as refused when it does not decode."""
        try:
            data = _read_private(entry.path, entry.size)
            return codec.count(data, min(entry.raw, self.max_decoded))
        except Exception:
            self.refused["files"] += 1
            self._log("tracescore dropped %s from an adopted retry spool: it does not decode",
                      entry.path)
            return 0

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


def _private(st: os.stat_result) -> bool:
    """A folder only this process's user can enter: a real folder of this user, mode 0700."""
    return (stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()
            and stat.S_IMODE(st.st_mode) == 0o700)


def _note_refused(st: os.stat_result, path: str) -> None:
    """Warn once per process about a spool folder left alone."""
    key = (st.st_dev, st.st_ino)
    with _REFUSED_LOCK:
        if key in _REFUSED_LOGGED:
            return
        _REFUSED_LOGGED.add(key)
    logger.warning("tracescore left the retry spool folder %s alone: it is not a private "
                   "folder of this user (owner uid %d, mode %o; adopted only when owned by uid "
                   "%d with mode 700). Its batches are not replayed and it is not removed.",
                   path, st.st_uid, stat.S_IMODE(st.st_mode), os.geteuid())


def _alive(pid: int) -> bool:
    if pid <= 0:
        return True  # unknown: leave it alone
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno == errno.EPERM
    return True
