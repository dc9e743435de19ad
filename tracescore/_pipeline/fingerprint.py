"""The evaluator version: a short hash of what decides a scorer's scores (its prompts, options,
scale, the logic of its steps), the same in every process, so scores from before and after a
prompt or logic change are told apart (``tracescore.evaluator.version`` on every score).

Only stable facts enter the hash: strings, numbers, JSON schemas, and for a function its
normalized code, its ``__name__``, the module-level strings and numbers it reads, what its
closure holds and its defaults; never an object's ``repr`` (memory addresses differ per
process) and never bytecode (pytest's assertion rewriting and each Python version change it).

A function's code is its syntax tree without docstrings, line numbers or columns, so comments,
docstrings, formatting, indentation and where the function is defined (nested in a factory or
at module level, in which module) do not count; what it computes does. Module-level functions
of tracescore that a step calls by name (a score formula, a prompt helper) are described too,
each once, and through them the helpers they call: changing their logic changes the version.
Where a function's source cannot be read (built in the REPL), its code's constants and names
stand in.
"""

from __future__ import annotations

import ast
import dis
import functools
import hashlib
import inspect
import json
import textwrap
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
    helpers = _Helpers()
    described: list[Any] = [_describe(p, 0, helpers) for p in parts]
    if helpers.found:
        described.append({"helpers": helpers.described()})
    text = json.dumps(described, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
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


class _Helpers:
    """The module-level functions of tracescore that the described functions call, each
    described once; kept apart from the functions that call them, as a sorted list, so the
    order in which steps reach a helper does not count."""

    def __init__(self) -> None:
        self.found: dict[str, Any] = {}
        self._seen: set[int] = set()

    def follow(self, func: types.FunctionType) -> None:
        for name in sorted(_names(func.__code__)):
            helper = func.__globals__.get(name)
            if callable(helper) and hasattr(helper, "__wrapped__"):
                helper = inspect.unwrap(helper)  # functools.lru_cache, functools.wraps
            if not isinstance(helper, types.FunctionType) or id(helper) in self._seen:
                continue
            module = getattr(helper, "__module__", None) or ""
            if module == "tracescore" or module.startswith("tracescore."):
                self._seen.add(id(helper))
                described = _function(helper, 0, self)
                self.found[json.dumps(described, sort_keys=True, ensure_ascii=False)] = described

    def described(self) -> list[Any]:
        return [self.found[key] for key in sorted(self.found)]


def _describe(obj: Any, depth: int, helpers: _Helpers) -> Any:
    if depth > 12:  # a cycle or a pathological nesting: stop, stably
        return "..."
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return repr(obj)
    if isinstance(obj, bytes):
        return obj.hex()
    if isinstance(obj, Mapping):
        return {str(k): _describe(v, depth + 1, helpers) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        items = [_describe(v, depth + 1, helpers) for v in obj]
        return sorted(items, key=repr) if isinstance(obj, (set, frozenset)) else items
    if isinstance(obj, (types.FunctionType, types.MethodType)):
        return _function(getattr(obj, "__func__", obj), depth, helpers)
    if isinstance(obj, type):
        schema = getattr(obj, "model_json_schema", None)
        if callable(schema):  # a pydantic model class: what the judge is asked to answer
            try:
                return {"schema": _describe(schema(), depth + 1, helpers)}
            except Exception:
                pass
        return {"type": f"{obj.__module__}.{obj.__qualname__}"}
    fields = getattr(obj, "__dataclass_fields__", None)
    if fields is not None:
        return {"type": type(obj).__qualname__,
                **{name: _describe(getattr(obj, name, None), depth + 1, helpers)
                   for name in fields}}
    if callable(obj):  # a callable object (functools.partial, a class instance)
        call = type(obj).__call__
        return {"callable": f"{type(obj).__module__}.{type(obj).__qualname__}",
                "call": _describe(call, depth + 1, helpers) if call is not None else None}
    return {"type": f"{type(obj).__module__}.{type(obj).__qualname__}"}


def _function(func: types.FunctionType, depth: int, helpers: _Helpers) -> dict[str, Any]:
    """A function by what it computes: not by where it is defined (module, qualname)."""
    helpers.follow(func)
    code = func.__code__
    cells = func.__closure__ or ()
    return {"fn": func.__name__,
            "code": _code(func.__code__.co_filename, func.__code__),
            # Prompt texts a step reads from module constants, and what its closure holds.
            "globals": _constants(func),
            "closure": {name: _describe(_cell(cell), depth + 1, helpers)
                        for name, cell in zip(code.co_freevars, cells, strict=True)},
            "defaults": _describe(func.__defaults__ or (), depth + 1, helpers),
            "kwdefaults": _describe(func.__kwdefaults__ or {}, depth + 1, helpers)}


@functools.lru_cache(maxsize=512)
def _code(filename: str, code: types.CodeType) -> Any:
    """The syntax tree of a function's code as text, without docstrings, positions or
    comments. Cached: a scorer's steps are described again for each scorer made; the file name
    is part of the key because equal code objects may come from two files."""
    try:
        source = textwrap.dedent(inspect.getsource(code))
    except (OSError, TypeError):
        return {"consts": [c for c in code.co_consts if isinstance(c, (str, int, float))],
                "names": list(code.co_names)}
    try:
        tree = ast.parse(source)
    except SyntaxError:  # a lambda amid a longer expression: its lines alone are no statement
        return source.strip()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return _dump(tree)


def _dump(node: Any) -> str:
    """Like ``ast.dump``, but the same text on every Python version tracescore supports: fields
    that are empty or ``None`` are left out (3.12 added ``type_params``; 3.13 prints fewer)."""
    if isinstance(node, ast.AST):
        fields = ",".join(f"{name}={_dump(value)}" for name, value in ast.iter_fields(node)
                          if value is not None and value != [])
        return f"{type(node).__name__}({fields})"
    if isinstance(node, list):
        return "[" + ",".join(_dump(item) for item in node) + "]"
    return repr(node)


@functools.lru_cache(maxsize=512)
def _names(code: types.CodeType) -> frozenset[str]:
    """The global names the code and the code nested in it read. Read from the instructions
    (``co_names`` also holds attribute names: ``run.score`` is no reference to a ``score``
    function); only the names enter the hash, never the bytecode."""
    names: set[str] = set()
    stack = [code]
    while stack:
        current = stack.pop()
        names.update(str(op.argval) for op in dis.get_instructions(current)
                     if op.opname in ("LOAD_GLOBAL", "LOAD_NAME"))
        stack.extend(c for c in current.co_consts if isinstance(c, types.CodeType))
    return frozenset(names)


def _constants(func: types.FunctionType) -> dict[str, Any]:
    found = {}
    for name in sorted(_names(func.__code__)):
        value = func.__globals__.get(name)
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            found[name] = value if not isinstance(value, float) else repr(value)
    return found


def _cell(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return None
