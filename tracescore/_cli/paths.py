"""Output paths of the command line, checked before a run: a report never overwrites an input
(the data, the state file, the target's source), two outputs never name one file, and a path
that cannot be written (a folder, a parent that is a file, no permission, a read-only disk, a
named pipe nobody reads) is refused in one line before anything is scored."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from tracescore._cli.scorers import UsageError

__all__ = ["check_outputs", "write_output"]


def _same(a: str, b: str) -> bool:
    """Whether two paths name one file: equal once resolved (symbolic links, ``..``), or the
    same file on disk (hard links, bind mounts, case-insensitive disks)."""
    if Path(a).resolve() == Path(b).resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False  # one of them does not exist yet: the resolved paths decided


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def check_outputs(inputs: Iterable[tuple[str, str | None]],
                  outputs: Iterable[tuple[str, str | None]]) -> None:
    """Refuse output paths that would overwrite an input or another output, or that cannot
    be written; create their missing parent folders.

    Args:
        inputs: ``(option, path)`` pairs the run reads (``DATA``, ``--feedback``, ...); None
            paths are skipped.
        outputs: ``(option, path)`` pairs the run writes (``--report``, ``--junit``,
            ``--html``, ``--state``); None paths are skipped. A file that exists is opened for
            appending (left unchanged) to prove it can be written; a file that does not is
            created and removed again.

    Raises:
        UsageError: one line naming the option and the path.
    """
    given_inputs = [(o, p) for o, p in inputs if p]
    given_outputs = [(o, p) for o, p in outputs if p]
    for n, (option, path) in enumerate(given_outputs):
        for other, source in given_inputs:
            if _same(path, source):
                raise UsageError(f"{option} {path} is the {other} file: writing it would "
                                 "overwrite it; name another file")
        for other, earlier in given_outputs[:n]:
            if _same(path, earlier):
                raise UsageError(f"{option} {path} is also given to {other}: name two files")
    for option, path in given_outputs:
        if os.path.isdir(path):
            raise UsageError(f"{option} {path} is a folder: name a file in it")
        parent = Path(path).parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"{option} {path}: cannot create its folder {parent} "
                             f"({_reason(exc)})") from None
        # Followed through a symbolic link: a dangling link's target is created by the probe
        # and removed again, like any other file that did not exist.
        existed = os.path.exists(path)
        try:
            # O_NONBLOCK: a named pipe nobody reads is refused (ENXIO) instead of blocking the
            # command forever; a pipe with a reader (``--report >(jq .)``) opens at once.
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT
                         | getattr(os, "O_NONBLOCK", 0), 0o666)
        except OSError as exc:
            raise UsageError(f"{option} {path}: cannot write it ({_reason(exc)})") from None
        os.close(fd)
        if not existed:
            with contextlib.suppress(OSError):
                os.unlink(os.path.realpath(path))


def write_output(option: str, path: str, write: Callable[[object, str], None],
                 result: object) -> None:
    """Call ``write(result, path)``; an ``OSError`` (a disk that filled up during the run)
    becomes a one-line ``UsageError`` naming the option."""
    try:
        write(result, path)
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot write it ({_reason(exc)})") from None
