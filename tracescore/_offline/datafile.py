"""Reading data files row by row, for ``tracescore eval``/``run_evals`` and ``calibrate``.

A ``.jsonl``/``.ndjson`` file is read a line at a time and a ``.csv`` file a row at a time, so a
run holds one row in memory, not the file (a ``.json`` array is read whole: use JSON lines for
large data). Every problem a file can have is a ``ConfigurationError`` of one line that names
the file, the line and the problem (issue 22): bytes that are not UTF-8, invalid JSON, JSON
nested deeper than the parser's recursion limit, a line longer than ``MAX_LINE`` bytes, a CSV
cell longer than the ``csv`` module's field limit (131,072 characters unless the application
raised it: tracescore never changes that process-wide setting; longer values belong in JSON
lines), a malformed CSV row.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tracescore._core.errors import ConfigurationError

__all__ = ["MAX_LINE", "count_lines", "iter_csv", "iter_jsonl", "load_json",
           "parse_json"]

# A JSON line is read at most this long; a longer one is refused (bytes).
MAX_LINE = 256 << 20
_BOM = codecs.BOM_UTF8


def parse_json(text: str | bytes, where: str) -> Any:
    """``json.loads(text)``, every failure a one-line ``ConfigurationError`` at ``where``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigurationError(f"{where}: not valid JSON ({exc.msg}, column {exc.colno})") \
            from None
    except RecursionError:
        raise ConfigurationError(f"{where}: JSON nested too deeply to read") from None
    except UnicodeDecodeError as exc:
        raise ConfigurationError(f"{where}: not UTF-8 text (byte {exc.start}: {exc.reason})") \
            from None
    except ValueError as exc:  # e.g. an integer with too many digits
        raise ConfigurationError(f"{where}: cannot read the JSON ({exc})") from None


def iter_jsonl(path: Path) -> Iterator[tuple[Any, str, int]]:
    """``(row, where, line number)`` for each non-blank line of a JSON-lines file.

    Raises:
        ConfigurationError: a line is not UTF-8, not JSON, nested too deeply or too long; the
            file cannot be read.
    """
    try:
        with path.open("rb") as fh:
            line_no = 0
            while True:
                line = fh.readline(MAX_LINE + 1)
                if not line:
                    return
                line_no += 1
                where = f"{path} line {line_no}"
                if len(line) > MAX_LINE and not line.endswith(b"\n"):
                    raise ConfigurationError(f"{where}: longer than {MAX_LINE} bytes")
                if line_no == 1 and line.startswith(_BOM):
                    line = line[len(_BOM):]
                try:
                    text = line.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise ConfigurationError(
                        f"{where}: not UTF-8 text (byte {exc.start + 1} of the line: "
                        f"{exc.reason})") from None
                if not text.strip():
                    continue
                yield parse_json(text, where), where, line_no
    except OSError as exc:
        raise ConfigurationError(f"{path}: cannot read the file ({exc})") from None


def iter_csv(path: Path) -> Iterator[tuple[dict[str, Any], str, int]]:
    """``(row, where, line number)`` for each row of a CSV file with a header row; the first
    item yielded is ``(header, where, 1)`` with the header's column names as keys (values
    None).

    Raises:
        ConfigurationError: bytes that are not UTF-8, a malformed row, a cell longer than
            the ``csv`` module's field limit, or the file cannot be read.
    """
    try:
        with path.open("rb") as raw:
            # newline="" lets the csv module handle line breaks inside quoted cells.
            text = io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")
            reader = csv.DictReader(text)
            row_no = 0
            try:
                header = reader.fieldnames
                yield dict.fromkeys(header or ()), f"{path} line 1", 1
                for row in reader:
                    row_no += 1
                    yield row, f"{path} row {row_no} (line {reader.line_num})", reader.line_num
            except UnicodeDecodeError as exc:
                raise ConfigurationError(
                    f"{path} line {reader.line_num + 1}: not UTF-8 text ({exc.reason})") from None
            except csv.Error as exc:
                at = f"{path} row {row_no + 1} (line {reader.line_num})"
                if "field larger than field limit" in str(exc):
                    raise ConfigurationError(
                        f"{at}: a cell is longer than {csv.field_size_limit()} characters "
                        "(use a .jsonl file for longer values)") from None
                raise ConfigurationError(f"{at}: not a CSV row ({exc})") from None
    except OSError as exc:
        raise ConfigurationError(f"{path}: cannot read the file ({exc})") from None


def load_json(path: Path) -> Any:
    """A whole ``.json`` file, parsed; errors name the line.

    Raises:
        ConfigurationError: not UTF-8, not JSON, nested too deeply, unreadable.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigurationError(f"{path}: cannot read the file ({exc})") from None
    if data.startswith(_BOM):
        data = data[len(_BOM):]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigurationError(f"{path} line {line}: not UTF-8 text ({exc.reason})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigurationError(f"{path} line {exc.lineno}: not valid JSON ({exc.msg})") \
            from None
    except RecursionError:
        raise ConfigurationError(f"{path}: JSON nested too deeply to read") from None
    except ValueError as exc:
        raise ConfigurationError(f"{path}: cannot read the JSON ({exc})") from None


def count_lines(path: Path) -> int | None:
    """Lines of a file, counted in 1 MiB chunks (a progress bar's total); None when it cannot
    be read."""
    try:
        with path.open("rb") as fh:
            count = 0
            last = b"\n"
            while chunk := fh.read(1 << 20):
                count += chunk.count(b"\n")
                last = chunk[-1:]
            return count + (last != b"\n")
    except OSError:
        return None
