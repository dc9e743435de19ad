"""What one scorer run is given, bounded: characters per value, documents per request,
characters per document.

A span may carry a 10 MB argument, a 100,000-item output or a retrieval of a million documents.
Scorers and the judge see them through these caps, applied at the scorers' call site
(``tracescore._pipeline.scoring.run_scorer``), so every scorer, online and in ``run_evals``, gets
them and
every judge prompt is bounded by them. What was cut is said in the score's explanation.

Cutting costs what is kept, not what was given: strings are sliced, containers are walked only
until the budget is spent. A value that fits is handed over as it is (same object, same type);
one that does not becomes a cut copy (containers become ``dict``/``list``, objects their model
dump, dataclass fields or ``repr``).

Only the standard library and the option table (``_setup.options``) are imported.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tracescore._setup.options import LimitsOptions
from tracescore._setup.options import fields as _table

# The defaults, from the option table (LimitsOptions.max_scoring_*).
_DEFAULT = {entry.name: entry.default for entry in _table(LimitsOptions)}

__all__ = ["InputCaps", "cap_kwargs"]

# Deeper nesting than this is cut: a scorer's own JSON dump would hit the recursion limit.
_MAX_DEPTH = 64
# Kwargs holding documents or tool calls: a count cap, then a per-item budget.
_ITEM_KWARGS = {"context": "documents", "tool_calls": "tool calls"}
_LABELS = {"ground_truth": "ground truth", "context": "context", "tool_calls": "tool calls"}


@dataclass(frozen=True)
class InputCaps:
    """The caps of one configuration.

    Attributes:
        max_length: characters per input, output, ground truth or other named value.
            ``TRACESCORE_MAX_SCORING_LENGTH``, default 50,000.
        max_documents: documents per request (the first ones are kept), and likewise tool
            calls. ``TRACESCORE_MAX_SCORING_DOCUMENTS``, default 32.
        max_document_length: characters per document or tool call.
            ``TRACESCORE_MAX_SCORING_DOCUMENT_LENGTH``, default 8,000.
    """

    max_length: int = _DEFAULT["max_scoring_length"]
    max_documents: int = _DEFAULT["max_scoring_documents"]
    max_document_length: int = _DEFAULT["max_scoring_document_length"]

    @classmethod
    def from_env(cls) -> InputCaps:
        """The caps the environment sets (the option table's defaults where it sets none)."""
        limits = LimitsOptions().resolve()
        return cls(
            max_length=int(limits.max_scoring_length or 0),
            max_documents=int(limits.max_scoring_documents or 0),
            max_document_length=int(limits.max_scoring_document_length or 0),
        )


class _Budget:
    __slots__ = ("left", "cut")

    def __init__(self, chars: int) -> None:
        self.left = chars
        self.cut = False


def cap_kwargs(
    kwargs: Mapping[str, Any], caps: InputCaps | None = None
) -> tuple[dict[str, Any], list[str]]:
    """Bound a scorer's keyword arguments.

    Args:
        kwargs: ``scorer.arun``'s keyword arguments (``input``, ``output``, ``context``,
            ``tool_calls``, ``ground_truth`` and any other named value).
        caps: the caps; default: the environment's (``InputCaps.from_env()``). The scorers'
            call site passes the runtime's (``Runtime.caps``, what ``configure()`` set).

    Returns:
        ``(bounded kwargs, cuts)``: values that fit are the same objects; ``cuts`` says in
        words what was cut (``"output to its first 50,000 of 10,485,760 characters"``), empty
        when nothing was.

    Examples:
        >>> cap_kwargs({"output": "x" * 10}, InputCaps(max_length=4))
        ({'output': 'xxxx'}, ['output to its first 4 of 10 characters'])
    """
    caps = InputCaps.from_env() if caps is None else caps
    out: dict[str, Any] = {}
    cuts: list[str] = []
    for name, value in kwargs.items():
        label = _LABELS.get(name, name)
        if name in _ITEM_KWARGS and isinstance(value, (list, tuple)):
            out[name] = _cap_items(label, _ITEM_KWARGS[name], value, caps, cuts)
            continue
        budget = _Budget(caps.max_length)
        bounded = _bounded(value, budget, 0)
        if budget.cut:
            cuts.append(_describe(label, value, caps.max_length))
        out[name] = bounded
    return out, cuts


def _cap_items(label: str, unit: str, items: list[Any] | tuple[Any, ...], caps: InputCaps,
               cuts: list[str]) -> Any:
    kept = items[: caps.max_documents]
    if len(items) > caps.max_documents:
        cuts.append(f"{label} to its first {caps.max_documents:,} of {len(items):,} {unit}")
    bounded = []
    long_items = 0
    for item in kept:
        budget = _Budget(caps.max_document_length)
        bounded.append(_bounded(item, budget, 0))
        long_items += budget.cut
    if long_items:
        cuts.append(f"{long_items:,} {unit if long_items > 1 else unit[:-1]} to "
                    f"{caps.max_document_length:,} characters each")
    if len(kept) == len(items) and not long_items:
        return items
    return tuple(bounded) if type(items) is tuple else bounded


def _describe(label: str, value: Any, limit: int) -> str:
    if isinstance(value, (str, bytes, bytearray)):
        return f"{label} to its first {limit:,} of {len(value):,} characters"
    return f"{label} to about {limit:,} characters"


def _bounded(value: Any, budget: _Budget, depth: int) -> Any:
    """``value`` itself when it fits in ``budget``, else a cut copy; spends the budget."""
    if value is None or isinstance(value, (bool, int, float)):
        budget.left -= 1
        return value
    if isinstance(value, str):
        return _cut_text(value, budget)
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value[: max(budget.left, 0) + 1])
        if len(raw) <= budget.left:
            budget.left -= len(raw)
            return value
        return _cut_text(raw.decode("utf-8", errors="replace"), budget)
    if depth >= _MAX_DEPTH or budget.left <= 0:
        budget.cut = True
        budget.left = 0
        return "..."
    if isinstance(value, Mapping):
        return _bounded_mapping(value, budget, depth)
    if isinstance(value, (list, tuple, set, frozenset)):
        return _bounded_sequence(value, budget, depth)
    dump = getattr(value, "model_dump", None)  # pydantic models (OpenAI messages among them)
    fields: Any = None
    if callable(dump) and not isinstance(value, type):
        try:
            fields = dump(mode="json")
        except Exception:  # noqa: BLE001 - a broken model is rendered like any object
            fields = None
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        try:
            fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        except Exception:  # noqa: BLE001
            fields = None
    if fields is not None:
        before = budget.cut
        budget.cut = False
        bounded = _bounded(fields, budget, depth + 1)
        if not budget.cut:
            budget.cut = before
            return value
        return bounded
    # Other objects reach scorers as their repr (tracescore.scorers._text): bound that.
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001
        text = f"<{type(value).__name__} object>"
    if len(text) <= budget.left:
        budget.left -= len(text)
        return value
    return _cut_text(text, budget)


def _cut_text(text: str, budget: _Budget) -> str:
    if len(text) <= budget.left:
        budget.left -= len(text)
        return text
    keep = max(budget.left, 0)
    budget.left = 0
    budget.cut = True
    return text[:keep]


def _bounded_mapping(value: Mapping[Any, Any], budget: _Budget, depth: int) -> Any:
    out: dict[Any, Any] = {}
    changed = False
    for key, item in value.items():
        if budget.left <= 0:
            budget.cut = changed = True
            break
        budget.left -= len(key) if isinstance(key, str) else 1
        bounded = _bounded(item, budget, depth + 1)
        changed = changed or bounded is not item
        out[key] = bounded
    return out if changed else value


def _bounded_sequence(value: Any, budget: _Budget, depth: int) -> Any:
    out: list[Any] = []
    changed = False
    for item in value:
        if budget.left <= 0:
            budget.cut = changed = True
            break
        budget.left -= 1
        bounded = _bounded(item, budget, depth + 1)
        changed = changed or bounded is not item
        out.append(bounded)
    if not changed:
        return value
    return tuple(out) if isinstance(value, tuple) else out
