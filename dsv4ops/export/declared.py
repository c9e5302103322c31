"""Fields a structural schema does not declare: what the API server drops (or keeps for a
controller that ignores them). Shared by the group's checks (validate.py) and the
CoordinatedPolicy's (coordination.py); a module of its own so neither imports the other back."""

from __future__ import annotations

from collections.abc import Iterable

from dsv4ops.jsontypes import JSONObject


def field_path(parts: Iterable[str | int]) -> str:
    return ".".join(str(p) for p in parts) or "(root)"


def pruned_fields(value: object, node: JSONObject, path: tuple[str | int, ...] = ()) -> list[str]:
    """Fields of `value` that the schema `node` does not declare. A node that preserves unknown
    fields but declares none (free-form, e.g. labels) accepts anything."""
    if node.get("x-kubernetes-preserve-unknown-fields") and not (
        node.get("properties") or node.get("items")
    ):
        return []
    out: list[str] = []
    if isinstance(value, dict) and node.get("type", "object") == "object":
        props = node.get("properties")
        extra = node.get("additionalProperties")
        for k, v in value.items():
            if props is not None and k in props:
                out += pruned_fields(v, props[k], (*path, k))
            elif isinstance(extra, dict):
                out += pruned_fields(v, extra, (*path, k))
            elif props is not None and not extra:
                out.append(field_path((*path, k)))
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        for i, item in enumerate(value):
            out += pruned_fields(item, node["items"], (*path, i))
    return out
