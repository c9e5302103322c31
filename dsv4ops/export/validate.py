"""Offline checks of an exported RoleBasedGroup before it is printed.

1. JSON Schema: the vendored `openAPIV3Schema` of v1alpha2 (vendor/SOURCE.md), with jsonschema.
2. Undeclared fields: the API server silently drops fields a structural schema does not declare
   (or, under `x-kubernetes-preserve-unknown-fields`, keeps them for a controller whose types
   ignore them), so a field the schema does not declare is an error here, not a field that
   quietly does nothing on the cluster.
3. PD consistency, what an operator of a PD pair gets wrong by hand: the same model, TP size,
   page size, KV-cache dtype and transfer backend on both roles, and the router pointed at the
   prefill's bootstrap port.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from dsv4ops.deployment import argv_value as flag_value
from dsv4ops.errors import DsOpsError
from dsv4ops.export.coordination import coordination_problems
from dsv4ops.export.declared import field_path, pruned_fields
from dsv4ops.jsontypes import JSONObject

PD_SAME = (
    "--model-path",
    "--tp-size",
    "--page-size",
    "--kv-cache-dtype",
    "--disaggregation-transfer-backend",
    "--disaggregation-bootstrap-port",
)


@lru_cache(maxsize=1)
def schema() -> JSONObject:
    text = resources.files("dsv4ops.export").joinpath("vendor/rbg_v1alpha2.schema.json").read_text()
    return dict(json.loads(text))


def schema_problems(manifest: JSONObject) -> list[str]:
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(schema())
    return [
        f"{field_path(e.absolute_path)}: {e.message[:300]}"
        for e in sorted(validator.iter_errors(manifest), key=lambda e: list(e.absolute_path))
    ]


def pd_problems(manifest: JSONObject) -> list[str]:
    roles = {r["name"]: r for r in manifest["spec"]["roles"]}

    def argv(name: str) -> list[str]:
        return list(
            roles[name]["standalonePattern"]["template"]["spec"]["containers"][0]["command"]
        )

    problems = []
    pre, dec, rtr = argv("prefill"), argv("decode"), argv("router")
    for flag in PD_SAME:
        if flag_value(pre, flag) != flag_value(dec, flag):
            problems.append(
                f"{flag}: prefill {flag_value(pre, flag)!r} != decode {flag_value(dec, flag)!r}"
            )
    boot = flag_value(pre, "--disaggregation-bootstrap-port")
    for i, a in enumerate(rtr):
        if a == "--prefill" and (i + 2 >= len(rtr) or rtr[i + 2] != boot):
            problems.append(
                f"router --prefill {rtr[i + 1] if i + 1 < len(rtr) else ''}: bootstrap "
                f"port is not the prefill's {boot}"
            )
    deps = {n: tuple(r.get("dependencies", ())) for n, r in roles.items()}
    if deps.get("decode") != ("prefill",) or set(deps.get("router", ())) != {"prefill", "decode"}:
        problems.append(f"dependencies {deps}: expected decode -> prefill and router -> both")
    return problems


def group_problems(manifest: JSONObject) -> list[str]:
    """Schema, pruned fields and PD consistency of the RoleBasedGroup."""
    problems = schema_problems(manifest)
    problems += [
        f"{p}: not declared by the RoleBasedGroup schema (dropped or ignored)"
        for p in pruned_fields(manifest, schema())
    ]
    return problems + pd_problems(manifest)


def check(manifest: JSONObject) -> None:
    """Raise DsOpsError listing every problem (schema, pruned fields, PD consistency)."""
    _raise(group_problems(manifest))


def check_documents(docs: list[JSONObject]) -> None:
    """What `export rbg` prints: the group, its CoordinatedPolicy when N:N, and the pairing of
    the two (coordination.py). Raises DsOpsError listing every problem."""
    groups = [d for d in docs if d.get("kind") == "RoleBasedGroup"]
    policies = [d for d in docs if d.get("kind") == "CoordinatedPolicy"]
    problems = [] if len(groups) == 1 else [f"expected one RoleBasedGroup, got {len(groups)}"]
    problems += [p for g in groups for p in group_problems(g)]
    if groups:
        problems += coordination_problems(groups[0], policies)
    _raise(problems)


def _raise(problems: list[str]) -> None:
    if problems:
        raise DsOpsError(
            "the exported RoleBasedGroup does not validate:\n  " + "\n  ".join(problems),
            hint="this is a dsv4ops bug or an option the schema cannot express",
        )
