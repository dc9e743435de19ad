"""Reading and checking the items ``run_evals`` evaluates: a list of dicts, or a JSONL, JSON or
CSV file (JSON lines and CSV read a row at a time as the run takes them: ``stream_items``).

Every problem is reported as a ``ConfigurationError`` that names the item (``data[3]``) or the
file position (``eval.jsonl line 4``, ``eval.csv row 3 (line 4)``), so a CI log says exactly which
row to fix.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracescore._core.errors import ConfigurationError
from tracescore._offline.datafile import count_lines, iter_csv, iter_jsonl, load_json, parse_json

__all__ = ["ITEM_KEYS", "EvalItem", "ItemStream", "load_items", "stream_items"]

# The keys an item may have. Unknown keys are refused rather than ignored: a typo such as
# "groundTruth" would otherwise make every ground-truth scorer silently not scorable.
ITEM_KEYS = ("input", "ground_truth", "metadata", "context", "scorer_inputs", "id")
_RESERVED_SCORER_INPUTS = frozenset({"input", "output", "ground_truth", "context"})
_JSON_CELLS = ("metadata", "context", "scorer_inputs")


@dataclass(frozen=True)
class EvalItem:
    """One evaluation case, as checked by ``run_evals``.

    Attributes:
        index: 0-based position in the data.
        input: what the target is called with (one argument, whatever its type).
        ground_truth: the expected answer, or None when the item has none.
        metadata: free-form data about the item (recorded, never scored).
        context: context pieces for context scorers (strings or documents), or None.
        scorer_inputs: further ``run()`` keyword arguments for every scorer (for example
            ``baseline_response`` of noise sensitivity).
        id: the item's own identifier, if it has one (shown in reports instead of the index).
    """

    index: int
    input: Any
    ground_truth: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)
    context: list[Any] | None = None
    scorer_inputs: dict[str, Any] = field(default_factory=dict)
    id: str | None = None

    @property
    def label(self) -> str:
        """How reports name the item: its id, else ``#<index>``."""
        return self.id if self.id is not None else f"#{self.index}"

    def as_dict(self) -> dict[str, Any]:
        """The item as the data shape it came from (keys with no value left out)."""
        out: dict[str, Any] = {"input": self.input}
        if self.ground_truth is not None:
            out["ground_truth"] = self.ground_truth
        if self.metadata:
            out["metadata"] = dict(self.metadata)
        if self.context is not None:
            out["context"] = list(self.context)
        if self.scorer_inputs:
            out["scorer_inputs"] = dict(self.scorer_inputs)
        if self.id is not None:
            out["id"] = self.id
        return out


def load_items(data: Any) -> tuple[list[EvalItem], str | None]:
    """Read ``data`` into checked items, all of them (``stream_items`` reads a file lazily).

    Args:
        data: a list (or any iterable) of mappings with the keys of ``ITEM_KEYS``, or a path
            (``str`` or ``os.PathLike``) to a ``.jsonl``/``.ndjson`` file (one JSON object per
            line, blank lines skipped), a ``.json`` file (an array of objects) or a ``.csv``
            file (a header row naming the keys; ``metadata``, ``context`` and
            ``scorer_inputs`` cells hold JSON; an empty cell means no value).

    Returns:
        The items, and the file path as given (None for in-memory data).

    Raises:
        ConfigurationError: the file is missing or unreadable, or an item is malformed; the
            message names the item or row.
    """
    stream = stream_items(data)
    return _non_empty(list(stream.items), stream.source or "data"), stream.source


@dataclass
class ItemStream:
    """Items read as they are needed.

    Attributes:
        items: the checked items, in order (an iterator for a file: each row is read, parsed
            and checked when the run takes it, and a problem raises ``ConfigurationError``
            then).
        source: the file path as given, or None for in-memory data.
        total: how many items there are, or, for a JSON-lines or CSV file, an upper bound
            from its line count (for a progress bar); None when unknown.
    """

    items: Iterator[EvalItem]
    source: str | None
    total: int | None


def stream_items(data: Any) -> ItemStream:
    """``data`` as an ``ItemStream``: a JSON-lines or CSV file is read row by row as the
    items are taken (memory holds the rows in flight, not the file); a list is checked at
    once.

    Raises:
        ConfigurationError: the file is missing or of an unknown kind, in-memory data is not a
            list of items (file rows raise as they are read).
    """
    if isinstance(data, (str, os.PathLike)):
        path = Path(data)
        return ItemStream(_file_items(path), str(data), _total(path))
    if isinstance(data, (bytes, bytearray, Mapping)) or not isinstance(data, Iterable):
        raise ConfigurationError(
            "run_evals(data=...) takes a list of items like {'input': ..., 'ground_truth': ...} "
            f"or a path to a .jsonl, .json or .csv file, got {type(data).__name__}"
        )
    rows = list(data)
    items = [_item(row, i, f"data[{i}]") for i, row in enumerate(rows)]
    return ItemStream(iter(_non_empty(items, "data")), None, len(items))


def _non_empty(items: list[EvalItem], where: str) -> list[EvalItem]:
    if not items:
        raise ConfigurationError(f"{where} has no items to evaluate")
    return items


def _total(path: Path) -> int | None:
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson") and path.is_file():
        return count_lines(path)
    if suffix == ".csv" and path.is_file():
        lines = count_lines(path)
        return None if lines is None else max(0, lines - 1)
    return None


def _file_items(path: Path) -> Iterator[EvalItem]:
    if not path.is_file():
        raise ConfigurationError(f"data file {str(path)!r} does not exist (or is not a file)")
    suffix = path.suffix.lower()
    if suffix not in (".jsonl", ".ndjson", ".json", ".csv"):
        raise ConfigurationError(
            f"data file {str(path)!r}: use a .jsonl, .json or .csv file "
            f"(got {suffix or 'no suffix'})")
    return _read_file(path, suffix)


def _read_file(path: Path, suffix: str) -> Iterator[EvalItem]:
    count = 0
    if suffix in (".jsonl", ".ndjson"):
        for row, where, _ in iter_jsonl(path):
            yield _item(row, count, where)
            count += 1
    elif suffix == ".json":
        rows = load_json(path)
        if not isinstance(rows, list):
            raise ConfigurationError(f"{path}: a .json data file holds an array of items")
        for i, row in enumerate(rows):
            yield _item(row, i, f"{path} item {i}")
            count += 1
    else:
        for item in _csv_items(path):
            yield item
            count += 1
    if not count:
        raise ConfigurationError(f"{path} has no items to evaluate")


def _csv_items(path: Path) -> Iterator[EvalItem]:
    rows = iter_csv(path)
    header_row, _, _ = next(rows)
    header = list(header_row)
    if not header:
        raise ConfigurationError(f"{path}: the CSV file is empty (no header row)")
    if len(set(header)) != len(header):
        raise ConfigurationError(f"{path} line 1: a column name appears twice in {header}")
    for name in header:
        if name not in ITEM_KEYS:
            raise ConfigurationError(f"{path} line 1: unknown column {name!r}; {_hint(name)}")
    if "input" not in header:
        raise ConfigurationError(f"{path} line 1: the header needs an 'input' column")
    index = 0
    for row, where, _ in rows:
        if None in row:
            raise ConfigurationError(f"{where}: more cells than the header has columns")
        parsed: dict[str, Any] = {}
        for key, cell in row.items():
            if cell is None:  # fewer cells than columns
                continue
            if key in _JSON_CELLS:
                if not cell.strip():
                    continue
                try:
                    parsed[key] = parse_json(cell, where)
                except ConfigurationError as exc:
                    problem = str(exc)[len(where) + 2:]
                    raise ConfigurationError(
                        f"{where}: the {key} cell must hold JSON ({problem})") from None
                if key == "context" and not isinstance(parsed[key], list):
                    raise ConfigurationError(
                        f"{where}: the context cell must hold a JSON array of strings"
                    )
            elif key in ("ground_truth", "id") and cell == "":
                continue
            else:
                parsed[key] = cell
        yield _item(parsed, index, where)
        index += 1


def _hint(key: str) -> str:
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in key).lstrip("_")
    close = [snake] if snake in ITEM_KEYS else difflib.get_close_matches(key, ITEM_KEYS, n=1)
    suggestion = f"did you mean {close[0]!r}? " if close else ""
    return f"{suggestion}an item takes {', '.join(ITEM_KEYS)}"


def _item(row: Any, index: int, where: str) -> EvalItem:
    if not isinstance(row, Mapping):
        raise ConfigurationError(
            f"{where}: an item is an object like {{'input': ..., 'ground_truth': ...}}, "
            f"got {type(row).__name__}"
        )
    for key in row:
        if key not in ITEM_KEYS:
            raise ConfigurationError(f"{where}: unknown key {key!r}; {_hint(str(key))}")
    if "input" not in row:
        raise ConfigurationError(f"{where}: the item has no 'input'")
    metadata = row.get("metadata")
    if metadata is None:
        metadata = {}
    elif not isinstance(metadata, Mapping):
        raise ConfigurationError(
            f"{where}: metadata must be an object, got {type(metadata).__name__}"
        )
    context = row.get("context")
    if isinstance(context, str):
        context = [context]
    elif context is not None:
        if isinstance(context, (bytes, Mapping)) or not isinstance(context, Iterable):
            raise ConfigurationError(
                f"{where}: context must be a list of strings (or documents), "
                f"got {type(context).__name__}"
            )
        context = list(context)
    scorer_inputs = row.get("scorer_inputs")
    if scorer_inputs is None:
        scorer_inputs = {}
    elif not isinstance(scorer_inputs, Mapping) or not all(
        isinstance(k, str) for k in scorer_inputs
    ):
        raise ConfigurationError(
            f"{where}: scorer_inputs must be an object of run() argument names to values"
        )
    clash = sorted(_RESERVED_SCORER_INPUTS.intersection(scorer_inputs))
    if clash:
        raise ConfigurationError(
            f"{where}: scorer_inputs cannot set {', '.join(clash)}; use the item's own keys"
        )
    item_id = row.get("id")
    if item_id is not None:
        if isinstance(item_id, bool) or not isinstance(item_id, (str, int)):
            raise ConfigurationError(f"{where}: id must be a string or an integer")
        item_id = str(item_id)
    return EvalItem(
        index=index,
        input=row["input"],
        ground_truth=row.get("ground_truth"),
        metadata=dict(metadata),
        context=context,
        scorer_inputs=dict(scorer_inputs),
        id=item_id,
    )
