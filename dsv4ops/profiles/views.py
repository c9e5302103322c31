"""Plain-data views of profiles for the CLI (list rows, show, validate results, diff report)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from dsv4ops.constants import PROJECT_HINT
from dsv4ops.errors import ProfileError
from dsv4ops.jsontypes import JSONObject
from dsv4ops.profiles.diff import (
    ProfileDiffJSON,
    ValueChange,
    ValueChangeJSON,
    command_changes,
    value_changes,
)
from dsv4ops.profiles.load import check_profile_file, list_profiles, load_profile
from dsv4ops.profiles.model import Profile, Target
from dsv4ops.profiles.problems import ValidateResult
from dsv4ops.profiles.profile_spec import SWITCHES
from dsv4ops.profiles.render import render
from dsv4ops.profiles.targets import load_targets

# `profile list`'s columns: the name, each on/off flag's (summary), the buckets, the description.
LIST_COLUMNS = ("name", *(switch.column for _, switch in SWITCHES), "buckets", "description")


def buckets_text(p: Profile) -> str:
    spec = p.flags.decode_buckets
    shown = spec if isinstance(spec, str) else "list"
    return f"{shown} ({len(p.decode_buckets)} sizes, max {p.decode_buckets[-1]})"


def summary(p: Profile) -> JSONObject:
    extends = p.chain[1] if len(p.chain) > 1 else None
    return {
        "name": p.name,
        "path": p.path,
        "extends": extends,
        **{switch.column: "on" if getattr(p.flags, f) else "off" for f, switch in SWITCHES},
        "buckets": buckets_text(p),
        "description": p.description,
        "warnings": len(p.warnings),
    }


def details(p: Profile) -> JSONObject:
    data = {k: _lists(v) for k, v in p.to_dict().items()}
    data["chain"] = list(p.chain)
    data["warnings"] = [asdict(w) for w in p.warnings]
    return data


def _change(c: ValueChange) -> ValueChangeJSON:
    return {"key": c.key, "old": _lists(c.old), "new": _lists(c.new)}


def _lists(data: object) -> object:
    if isinstance(data, dict):
        return {k: _lists(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_lists(v) for v in data]
    return data


def validate_many(refs: list[str], target_name: str | None) -> list[ValidateResult]:
    """Validate each profile (all shipped ones if refs is empty) against the targets.

    One result per profile; a failed one lists every problem of its file (`problems`, sorted by
    file and line; `error` is the first as one line).
    """
    targets = load_targets()
    if target_name is not None:
        if target_name not in targets:
            raise ProfileError(
                f"unknown target '{target_name}'; known targets: {', '.join(sorted(targets))}"
            )
        targets = {target_name: targets[target_name]}
    paths: list[str | Path] = [*refs] or [*list_profiles()]
    if not paths:
        raise ProfileError(
            "no profiles found", hint=PROJECT_HINT + " (or set DSV4OPS_PROFILES_DIR)"
        )
    results: list[ValidateResult] = []
    for ref in paths:
        name = ref.stem if isinstance(ref, Path) else ref
        check = check_profile_file(ref, targets=targets.values())
        profile = check.profile
        if profile is None:
            results.append(
                {
                    "profile": str(name),
                    "ok": False,
                    "error": str(check.problems[0]),
                    "problems": [p.to_json() for p in check.problems],
                    "warnings": [],
                }
            )
            continue
        for target in targets.values():
            render(profile, target)  # the targets were checked above; this renders the commands
        results.append(
            {
                "profile": profile.name,
                "path": profile.path,
                "ok": True,
                "error": None,
                "problems": [],
                "targets": sorted(targets),
                "warnings": [asdict(w) for w in profile.warnings],
            }
        )
    return results


def diff_report(
    a_ref: str, b_ref: str, target: Target, *, rev_a: str | None = None, rev_b: str | None = None
) -> ProfileDiffJSON:
    a, b = load_profile(a_ref, git_rev=rev_a), load_profile(b_ref, git_rev=rev_b)
    ra, rb = render(a, target), render(b, target)
    return {
        "a": a.name + (f"@{rev_a}" if rev_a else ""),
        "b": b.name + (f"@{rev_b}" if rev_b else ""),
        "target": target.name,
        "values": [_change(c) for c in value_changes(a, b)],
        "commands": [
            {
                "name": c.name,
                "removed": list(c.removed),
                "added": list(c.added),
                "argv_diff": list(c.argv_diff),
                "env": [{"key": e.key, "old": e.old, "new": e.new} for e in c.env_changes],
            }
            for c in command_changes(ra, rb)
        ],
        "commands_hash": {"a": ra.commands_hash, "b": rb.commands_hash},
    }
