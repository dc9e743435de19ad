"""The evaluator version: a short hash of what decides a scorer's scores (its prompts, options,
scale), the same in every process, so scores from before and after a prompt change are told
apart (``tracescore.evaluator.version`` on every score).

Only stable facts enter the hash: strings, numbers, JSON schemas, a function's source text, the
module-level strings and numbers it reads and what its closure holds; never an object's ``repr``
(memory addresses differ per process) and never bytecode (pytest's assertion rewriting and each
Python version change it). Where a function's source cannot be read (built in the REPL), its
code's constants and names stand in.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import types
from collections.abc import Mapping
from typing import Any

_LENGTH = 12  # hex digits: 48 bits, ample for the versions of one scorer id


def fingerprint(*parts: Any) -> str:
    """A 12-hex-digit SHA-256 prefix of ``parts`` described stably.

    Args:
        parts: strings, numbers, mappings, sequences, functions, dataclass-like objects,
            pydantic model classes (their JSON schema) in any nesting.

    Returns:
        e.g. ``"3f2a9c1b0d4e"``.

    Examples:
        >>> fingerprint("answer-relevancy", {"scale": 1}) == fingerprint(
        ...     "answer-relevancy", {"scale": 1})
        True
    """
    text = json.dumps([_describe(p, 0) for p in parts], sort_keys=True, ensure_ascii=False,
                      separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:_LENGTH]


def evaluator_version(scorer: Any) -> str:
    """The scorer's own ``fingerprint`` when it has one (tracescore's scorers), else a hash of
    its id, scale, direction and the code of its class's ``arun``."""
    own = getattr(scorer, "fingerprint", None)
    if isinstance(own, str) and own:
        return own
    target = getattr(scorer, "wrapped", scorer)  # as_scorer's adapter, when there is one
    return fingerprint(
        str(getattr(scorer, "id", "custom")),
        getattr(scorer, "scale", 1.0),
        getattr(scorer, "higher_is_better", True),
        f"{type(target).__module__}.{type(target).__qualname__}",
        getattr(type(target), "arun", None),
    )


def _describe(obj: Any, depth: int) -> Any:
    if depth > 12:  # a cycle or a pathological nesting: stop, stably
        return "..."
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return repr(obj)
    if isinstance(obj, bytes):
        return obj.hex()
    if isinstance(obj, Mapping):
        return {str(k): _describe(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        items = [_describe(v, depth + 1) for v in obj]
        return sorted(items, key=repr) if isinstance(obj, (set, frozenset)) else items
    if isinstance(obj, (types.FunctionType, types.MethodType)):
        func = getattr(obj, "__func__", obj)
        return {"fn": f"{func.__module__}.{func.__qualname__}",
                "source": _source(func),
                # Prompt texts a step reads from module constants, and what its closure holds.
                "globals": _constants(func),
                "closure": [_describe(_cell(c), depth + 1) for c in func.__closure__ or ()],
                "defaults": _describe(func.__defaults__ or (), depth + 1)}
    if isinstance(obj, type):
        schema = getattr(obj, "model_json_schema", None)
        if callable(schema):  # a pydantic model class: what the judge is asked to answer
            try:
                return {"schema": _describe(schema(), depth + 1)}
            except Exception:
                pass
        return {"type": f"{obj.__module__}.{obj.__qualname__}"}
    fields = getattr(obj, "__dataclass_fields__", None)
    if fields is not None:
        return {"type": type(obj).__qualname__,
                **{name: _describe(getattr(obj, name, None), depth + 1) for name in fields}}
    if callable(obj):  # a callable object (functools.partial, a class instance)
        call = type(obj).__call__
        return {"callable": f"{type(obj).__module__}.{type(obj).__qualname__}",
                "call": _describe(call, depth + 1) if call is not None else None}
    return {"type": f"{type(obj).__module__}.{type(obj).__qualname__}"}


def _source(func: Any) -> Any:
    try:
        return inspect.getsource(func)
    except (OSError, TypeError):
        code = func.__code__
        return {"consts": [c for c in code.co_consts if isinstance(c, (str, int, float))],
                "names": list(code.co_names)}


def _constants(func: Any) -> dict[str, Any]:
    names: set[str] = set()
    stack = [func.__code__]
    while stack:
        code = stack.pop()
        names.update(code.co_names)
        stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    found = {}
    for name in sorted(names):
        value = func.__globals__.get(name)
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            found[name] = value if not isinstance(value, float) else repr(value)
    return found


def _cell(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return None
