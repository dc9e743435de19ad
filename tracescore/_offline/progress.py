"""Progress of ``tracescore eval``/``run_evals`` and ``calibrate`` on stderr.

On a terminal: a tqdm bar. Elsewhere (a CI log, a file), where a bar's carriage returns make
one endless line: a plain line every ``LINE_INTERVAL`` seconds, the first only once the run has
lasted that long (a short run prints nothing), in tqdm's own wording (``tqdm.format_meter``):
``name:  42%|####  | 2100/5000 [00:12<00:16, 175.02item/s, errors=3]``.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from typing import Any

logger = logging.getLogger("tracescore")

# Seconds between two progress lines off a terminal.
LINE_INTERVAL = 5.0


class LineProgress:
    """tqdm's ``update``/``set_postfix``/``close`` as a line every ``interval`` seconds.

    Args:
        total: items expected, or None when unknown.
        desc: the run's name, at the start of each line.
        initial: items already done (resumed).
        interval: seconds between lines (default ``LINE_INTERVAL``).
        stream: where lines go (default ``sys.stderr``).
    """

    def __init__(self, total: int | None, desc: str, initial: int = 0,
                 interval: float = LINE_INTERVAL, stream: Any = None) -> None:
        self.total = total
        self.desc = desc
        self.n = initial
        self.initial = initial
        self.interval = interval
        self.stream = stream if stream is not None else sys.stderr
        self.postfix: dict[str, Any] = {}
        self._start = time.monotonic()
        self._next = self._start + interval
        self._printed = False

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.monotonic()
        if now >= self._next:
            self._next = now + self.interval
            self._print(now)

    def set_postfix(self, refresh: bool = False, **values: Any) -> None:
        self.postfix.update(values)

    def close(self) -> None:
        if self._printed:  # a run long enough to show progress also shows its end
            self._print(time.monotonic())

    def _print(self, now: float) -> None:
        self._printed = True
        elapsed = now - self._start
        total = self.total if self.total is not None and self.total >= self.n else None
        postfix = ", ".join(f"{k}={v}" for k, v in self.postfix.items()) or None
        try:
            from tqdm import tqdm  # type: ignore[import-untyped, unused-ignore]

            line = tqdm.format_meter(self.n, total, elapsed, ncols=80, prefix=self.desc,
                                     unit="item", initial=self.initial, postfix=postfix)
        except ImportError:
            rate = (self.n - self.initial) / elapsed if elapsed > 0 else 0.0
            of = f"/{total}" if total is not None else ""
            line = (f"{self.desc}: {self.n}{of} items [{elapsed:.0f} s, {rate:.2f} item/s"
                    f"{', ' + postfix if postfix else ''}]")
        with contextlib.suppress(OSError, ValueError):
            print(line, file=self.stream, flush=True)


def progress_bar(progress: bool | None, total: int | None, desc: str, initial: int = 0) -> Any:
    """What shows a run's progress: a tqdm bar (``progress=True``, or None on a terminal), a
    ``LineProgress`` (None off a terminal), or None (``progress=False``)."""
    if progress is False:
        return None
    if progress is None and not _is_terminal():
        return LineProgress(total, desc, initial)
    try:
        from tqdm import tqdm  # type: ignore[import-untyped, unused-ignore]
    except ImportError:
        logger.warning("tracescore: no progress bar (tqdm is not installed)")
        return LineProgress(total, desc, initial)
    return tqdm(total=total, initial=initial, desc=desc, unit="item", file=sys.stderr,
                dynamic_ncols=True)


def _is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False
