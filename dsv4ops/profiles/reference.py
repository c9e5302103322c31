"""The settings reference of docs/profiles.md, printed from the models of profiles/profile_spec.py
(`dsv4ops profile schema --markdown`): one table per section, each between markers that a test
compares with this output, so the docs cannot drift from what the loader checks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

from dsv4ops.profiles.json_schema import is_section, model_schema
from dsv4ops.profiles.profile_spec import ProfileSpec
from dsv4ops.profiles.schema import TEXT_HELP, TEXT_PATTERNS, JSONProp, json_kind, json_value
from dsv4ops.profiles.target_spec import BoxTarget, EndpointTarget
from dsv4ops.profiles.toggles import TOGGLES, gate_suite, toggle_rows

HEADER = ("| key | type | default | bounds | what it sets |", "|---|---|---|---|---|")


def profile_blocks() -> dict[str, list[str]]:
    """Block name -> table: the top-level keys, one block per section of a profile, then what
    `profile set` toggles."""
    schema = cast(JSONProp, model_schema(ProfileSpec, null_is_default=False))
    properties = schema["properties"]
    keys = {k: p for k, p in properties.items() if not is_section(p)}
    blocks = {"top": model_table(cast(dict[str, object], {**schema, "properties": keys}))}
    for key, prop in properties.items():
        if is_section(prop):
            blocks[key] = model_table(cast(dict[str, object], prop), f"{key}.")
    blocks["toggles"] = toggles_table()
    return blocks


def toggles_table() -> list[str]:
    """What `dsv4ops profile set` takes: each on/off flag's toggle, as its Switch declares it,
    then the buckets (profiles/toggles.py `toggle_rows`)."""
    rows = [
        "| "
        + " | ".join(
            c.replace("|", "\\|") for c in (f"`{usage}`", f"`{key}`", what, f"`{gate_suite(name)}`")
        )
        + " |"
        for name, (usage, key, what) in zip(TOGGLES, toggle_rows(), strict=True)
    ]
    return ["| toggle | key | what it sets | a change gates with |", "|---|---|---|---|", *rows]


def targets_blocks() -> dict[str, list[str]]:
    """Block name -> table: a target of targets.yaml, and a `transport: endpoint` target."""
    return {
        "target": model_table(model_schema(BoxTarget, null_is_default=False), "targets.NAME."),
        "endpoint-target": model_table(
            model_schema(EndpointTarget, null_is_default=False), "targets.NAME."
        ),
    }


def markdown(blocks: dict[str, list[str]]) -> str:
    """The blocks as docs/profiles.md holds them, each between its markers."""
    out = []
    for name, rows in blocks.items():
        out += [begin_marker(name), *rows, end_marker(name), ""]
    return "\n".join(out)


def begin_marker(name: str) -> str:
    return f"<!-- settings:{name}: begin -->"


def end_marker(name: str) -> str:
    return f"<!-- settings:{name}: end -->"


def _shown(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{}" if not value else str(value)
    if value == "":
        return '""'
    return "null" if value is None else f"{value}"


def model_table(schema: dict[str, object], prefix: str = "") -> list[str]:
    """The table of a model's keys, from its JSON Schema (json_schema.model_schema)."""
    return [*HEADER, *_model_rows(cast(JSONProp, schema), prefix)]


def _model_rows(schema: JSONProp, prefix: str) -> Iterator[str]:
    required = schema.get("required", [])
    for key, prop in schema["properties"].items():
        if is_section(prop):
            yield from _model_rows(prop, f"{prefix}{key}.")
            continue
        value, nullable = json_value(prop)
        kind = json_kind(value) + (" or null" if nullable else "")
        default = "required" if key in required else f"`{_shown(prop.get('default'))}`"
        cells = (f"`{prefix}{key}`", kind, default, _model_bounds(value), prop["description"])
        yield "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _model_bounds(value: JSONProp) -> str:
    parts = []
    value = next((s for s in value.get("anyOf", []) if s.get("type") == "array"), value)
    numbers = value["items"] if value.get("type") == "array" else value
    lo, hi = numbers.get("minimum"), numbers.get("maximum")
    if lo is not None and hi is not None:
        parts.append(f"{lo:g}-{hi:g}")
    elif lo is not None:
        parts.append(f">= {lo:g}")
    limit = value.get("maxItems", value.get("maxProperties"))
    if limit is not None:
        parts.append(f"at most {limit} items")
    choices = value.get("enum", [value["const"]] if "const" in value else None)
    if choices is not None:
        parts.append(" / ".join(f"`{c}`" for c in choices))
    kinds = [k for k, pattern in TEXT_PATTERNS.items() if pattern == numbers.get("pattern")]
    if kinds and kinds[0] not in ("argv", "free"):
        parts.append(TEXT_HELP[kinds[0]])
    return ", ".join(parts) or "-"
