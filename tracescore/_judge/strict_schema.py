"""A pydantic model as the strict JSON schema of a ``json_schema`` response format, built
without litellm or the ``openai`` SDK.

OpenAI's structured outputs with ``strict: true`` accept a subset of JSON Schema: every object
says ``additionalProperties: false`` and lists every property as required (optional fields are
expressed as ``anyOf [..., null]``, which pydantic already writes), and a ``$ref`` may not have
sibling keywords. The rules come from OpenAI's structured-outputs guide ("Supported schemas");
the output matches what litellm sends for the same class (``tests/test_judge_direct.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import BaseModel


def response_format(schema: type[BaseModel], name: str) -> dict[str, Any]:
    """``{"type": "json_schema", "json_schema": {"schema": ..., "name": name, "strict": True}}``.

    Args:
        schema: a pydantic model class.
        name: the schema name sent to the provider.

    Raises:
        TypeError: ``schema`` is not a pydantic model class.

    Examples:
        >>> from pydantic import BaseModel
        >>> class A(BaseModel):
        ...     x: int
        >>> response_format(A, "a")["json_schema"]["schema"]["additionalProperties"]
        False
    """
    if not hasattr(schema, "model_json_schema"):
        raise TypeError(f"judge schema must be a pydantic model class, got {schema!r}")
    root = schema.model_json_schema()
    return {
        "type": "json_schema",
        "json_schema": {"schema": strict(root, root), "name": name, "strict": True},
    }


def strict(node: Any, root: dict[str, Any]) -> Any:
    """``node`` (part of the JSON schema ``root``) made strict, recursively; a new object."""
    if isinstance(node, list):
        return [strict(item, root) for item in node]
    if not isinstance(node, dict):
        return node
    node = dict(node)
    ref = node.get("$ref")
    if isinstance(ref, str) and len(node) > 1:
        # A $ref beside other keywords (a field's description, say) is refused: inline it.
        target = _resolve(ref, root)
        if target is not None:
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            node = {**target, **siblings}
    all_of = node.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], dict):
        node = {**all_of[0], **{k: v for k, v in node.items() if k != "allOf"}}
    if "default" in node and node["default"] is None:
        del node["default"]  # a null default means optional, which anyOf [..., null] says
    if node.get("type") == "object" and "properties" in node:
        node["additionalProperties"] = False
        node["required"] = list(node["properties"])
    for key in ("properties", "$defs", "definitions"):
        value = node.get(key)
        if isinstance(value, dict):
            node[key] = {name: strict(sub, root) for name, sub in value.items()}
    for key in ("items", "anyOf", "oneOf", "allOf", "additionalProperties", "prefixItems"):
        value = node.get(key)
        if isinstance(value, (dict, list)):
            node[key] = strict(value, root)
    return node


def _resolve(ref: str, root: dict[str, Any]) -> dict[str, Any] | None:
    if not ref.startswith("#/"):
        return None
    target: Any = root
    for part in ref[2:].split("/"):
        if not isinstance(target, dict) or part not in target:
            return None
        target = target[part]
    return target if isinstance(target, dict) else None
