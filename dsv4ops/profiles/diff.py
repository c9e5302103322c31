"""Differences between two profiles: resolved values and the rendered argv/env per component.

Secrets never appear (dsv4ops/secrets.py): a value under a secret-named key, and the value of a
secret flag in an argv, are shown as '***'. A changed secret still shows as a change of its env
key (`'***' -> '***'`); a changed secret flag value only changes the commands hash.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypedDict

from dsv4ops.deployment import Deployment
from dsv4ops.profiles.model import Profile
from dsv4ops.secrets import REDACTED, is_secret_key, redact_argv


class ValueChangeJSON(TypedDict):
    key: str
    old: object
    new: object


class CommandDiffJSON(TypedDict):
    """One component's command change as `profile diff --json` prints it."""

    name: str
    removed: list[str]
    added: list[str]
    argv_diff: list[str]
    env: list[ValueChangeJSON]


class HashPair(TypedDict):
    a: str
    b: str


class ProfileDiffJSON(TypedDict):
    """`profile diff --json`: B against A, resolved values, then the rendered commands."""

    a: str
    b: str
    target: str
    values: list[ValueChangeJSON]
    commands: list[CommandDiffJSON]
    commands_hash: HashPair


@dataclass(frozen=True)
class ValueChange:
    key: str
    old: object  # a resolved value as the profile holds it ('***' for a secret)
    new: object


@dataclass(frozen=True)
class ComponentDiff:
    name: str
    removed: tuple[str, ...]  # argv tokens only in A (in order)
    added: tuple[str, ...]  # argv tokens only in B
    argv_diff: tuple[str, ...]  # unified diff lines, one argv token per line
    env_changes: tuple[ValueChange, ...]


def flatten(data: object, prefix: str = "") -> dict[str, object]:
    """{'a': {'b': 1}} → {'a.b': 1}; lists stay whole (they are replaced, never merged)."""
    if isinstance(data, dict):
        out: dict[str, object] = {}
        for key, value in data.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        if not data and prefix:
            out[prefix] = {}
        return out
    if isinstance(data, tuple):
        data = list(data)
    return {prefix: data}


def value_changes(a: Profile, b: Profile) -> list[ValueChange]:
    fa, fb = flatten(a.to_dict()), flatten(b.to_dict())
    fa.pop("name", None)
    fb.pop("name", None)
    return list(_changes(fa, fb))


def _changes(a: Mapping[str, object], b: Mapping[str, object]) -> tuple[ValueChange, ...]:
    """Each key whose value differs or that one side lacks (shown as None), secrets hidden."""
    return tuple(
        ValueChange(k, _hidden(k, a.get(k)), _hidden(k, b.get(k)))
        for k in sorted(set(a) | set(b))
        if k not in a or k not in b or a[k] != b[k]
    )


def _hidden(key: str, value: object) -> object:
    if value is not None and is_secret_key(key.rsplit(".", 1)[-1]):
        return REDACTED
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return redact_argv(value)
    return value


def command_changes(a: Deployment, b: Deployment) -> list[ComponentDiff]:
    out = []
    for ca, cb in zip(a.components, b.components, strict=True):
        argv_a, argv_b = redact_argv(ca.argv), redact_argv(cb.argv)
        matcher = difflib.SequenceMatcher(a=argv_a, b=argv_b, autojunk=False)
        removed: list[str] = []
        added: list[str] = []
        for op, i1, i2, j1, j2 in matcher.get_opcodes():
            if op != "equal":
                removed += argv_a[i1:i2]
                added += argv_b[j1:j2]
        lines = difflib.unified_diff(
            argv_a,
            argv_b,
            f"{a.profile_name}/{ca.name}",
            f"{b.profile_name}/{cb.name}",
            lineterm="",
            n=1,
        )
        envs = _changes(ca.env_dict, cb.env_dict)
        if removed or added or envs:
            out.append(ComponentDiff(ca.name, tuple(removed), tuple(added), tuple(lines), envs))
    return out
