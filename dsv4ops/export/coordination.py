"""Offline checks of the N:N coordinated rollout: the CoordinatedPolicy `export rbg` prints
beside the group, and its pairing with the group's roles.

The CoordinatedPolicy's own CRD is not vendored; its envelope (apiVersion, kind, metadata,
spec.policies[].roles/strategy) is written here from RBG's v1alpha2 type (CoordinatedPolicySpec
at the vendored commit: policies, each with roles (min 1) and a strategy). The strategy itself
is checked against `vendor/rbg_v1alpha1_coordination_strategy.schema.json`, the coordination
strategy of the vendored RoleBasedGroup CRD (v1alpha1 `spec.coordination[].strategy`, the same
rollingUpdate fields, percentages only), so every field it sets is one the vendored schema
declares. Then the pairing: no policy for 1:1 (any maxSkew stalls, sgl-project/rbg#307); for
N:N one policy named like the group, pairing prefill with decode, maxSkew one pair's share,
each role rolling one replica at a time.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from dsv4ops.export.declared import pruned_fields
from dsv4ops.export.rbg import API_VERSION, pair_share
from dsv4ops.jsontypes import JSONObject

ONE_AT_A_TIME = {"maxUnavailable": 1, "maxSurge": 0}


@lru_cache(maxsize=1)
def strategy_schema() -> JSONObject:
    path = "vendor/rbg_v1alpha1_coordination_strategy.schema.json"
    return dict(json.loads(resources.files("dsv4ops.export").joinpath(path).read_text()))


def policy_schema() -> JSONObject:
    """The CoordinatedPolicy envelope (from the v1alpha2 Go type) around the vendored strategy."""
    text = {"type": "string"}
    return {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": API_VERSION},
            "kind": {"const": "CoordinatedPolicy"},
            "metadata": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": text,
                    "namespace": text,
                    "labels": {"type": "object", "additionalProperties": text},
                },
            },
            "spec": {
                "type": "object",
                "required": ["policies"],
                "properties": {
                    "policies": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "required": ["roles", "strategy"],
                            "properties": {
                                "roles": {"type": "array", "minItems": 1, "items": text},
                                "strategy": strategy_schema(),
                            },
                        },
                    }
                },
            },
        },
    }


def policy_problems(policy: JSONObject) -> list[str]:
    from jsonschema import Draft202012Validator

    node = policy_schema()
    errors = sorted(Draft202012Validator(node).iter_errors(policy), key=lambda e: list(e.path))
    out = [
        f"CoordinatedPolicy {'.'.join(map(str, e.absolute_path)) or '(root)'}: "
        f"{e.message[:300]}"
        for e in errors
    ]
    return out + [
        f"CoordinatedPolicy {p}: not declared by its schema (dropped or ignored)"
        for p in pruned_fields(policy, node)
    ]


def coordination_problems(group: JSONObject, policies: list[JSONObject]) -> list[str]:
    """The group's worker replicas and the policies printed with it, checked as a pair."""
    roles = {r["name"]: r for r in group["spec"]["roles"]}
    n = {name: roles[name].get("replicas", 1) for name in ("prefill", "decode") if name in roles}
    if n.get("prefill") != n.get("decode"):
        return [f"prefill:decode replicas {n.get('prefill')}:{n.get('decode')}: expected N:N"]
    pairs = n.get("prefill", 1)
    if pairs <= 1:
        return (
            [
                "CoordinatedPolicy with 1:1 roles: its maxSkew stalls the rollout "
                "(sgl-project/rbg#307)"
            ]
            if policies
            else []
        )
    if len(policies) != 1:
        return [f"{pairs}:{pairs} roles need one CoordinatedPolicy, got {len(policies)}"]
    policy = policies[0]
    problems = policy_problems(policy)
    if problems:
        return problems
    meta, gmeta = policy["metadata"], group["metadata"]
    if (meta.get("name"), meta.get("namespace")) != (gmeta["name"], gmeta.get("namespace")):
        problems.append(
            f"CoordinatedPolicy {meta.get('name')!r}: the controller reads the one "
            f"named like the group ({gmeta['name']!r}, same namespace)"
        )
    rules = policy["spec"]["policies"]
    if len(rules) != 1 or sorted(rules[0]["roles"]) != ["decode", "prefill"]:
        problems.append(
            f"CoordinatedPolicy roles {[r['roles'] for r in rules]}: expected one "
            "policy pairing prefill with decode"
        )
    skew = rules[0]["strategy"].get("rollingUpdate", {}).get("maxSkew")
    if skew != pair_share(pairs):
        problems.append(
            f"CoordinatedPolicy maxSkew {skew!r}: expected {pair_share(pairs)} "
            f"(one pair of {pairs})"
        )
    for name in ("prefill", "decode"):
        step = roles[name].get("rolloutStrategy", {}).get("rollingUpdate", {})
        if {k: step.get(k) for k in ONE_AT_A_TIME} != ONE_AT_A_TIME:
            problems.append(f"role {name} rollingUpdate {step}: expected {ONE_AT_A_TIME}")
    return problems
