"""`dsv4ops profile list|show|validate|render|diff|set`: the profiles read, checked and rendered
for a target (printed values never carry secrets: redacted here), and `profile set`: a
profile's operational flags toggled into a new profile (or in place) and git committed, the
commit naming the command that made it."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dsv4ops.errors import ProfileError
from dsv4ops.jsontypes import JSONObject

if TYPE_CHECKING:
    from dsv4ops.profiles.diff import ProfileDiffJSON
    from dsv4ops.profiles.model import Target
    from dsv4ops.profiles.problems import ProblemJSON as ProblemJSON  # cli/profile.py's
    from dsv4ops.profiles.problems import ValidateResult as ValidateResult  # and its table
    from dsv4ops.profiles.setter import SetResult


def _target(name: str | None) -> Target:
    """The target to render for: --target, else the production box."""
    from dsv4ops.profiles import get_target

    return get_target(name or "box")


def profile_rows() -> list[dict[str, object]]:
    """`profile list`: each shipped profile's summary, or its name and error when it is bad."""
    from dsv4ops.profiles import list_profiles, load_profile
    from dsv4ops.profiles.views import summary

    rows: list[dict[str, object]] = []
    for path in list_profiles():
        try:
            rows.append(summary(load_profile(path)))
        except ProfileError as exc:
            rows.append({"name": path.stem, "error": str(exc)})
    return rows


def list_columns() -> list[str]:
    """`profile list`'s columns, each on/off flag's among them."""
    from dsv4ops.profiles.views import LIST_COLUMNS

    return list(LIST_COLUMNS)


def profile_details(name: str, rev: str | None) -> JSONObject:
    """`profile show`: the resolved values (after extends and defaults) and warnings, at git
    revision `rev` when given; secrets (env tokens, --api-key values) redacted."""
    from dsv4ops.profiles import load_profile
    from dsv4ops.profiles.views import details
    from dsv4ops.secrets import redact_tree

    data: JSONObject = redact_tree(details(load_profile(name, git_rev=rev)))
    return data


def validate_profiles(names: list[str], target: str | None) -> list[ValidateResult]:
    """`profile validate`: one result per profile (default: every shipped one), with every
    problem of its file, against every target (or `target`)."""
    from dsv4ops.profiles.views import validate_many

    return validate_many(names, target)


@dataclass(frozen=True)
class RenderedCommand:
    """One component's command as printed: secrets shown as '***'."""

    name: str
    host: str
    port: int
    env: dict[str, str]
    argv: list[str]


@dataclass(frozen=True)
class RenderedProfile:
    """`profile render`: the exact commands of a profile for a target, redacted for printing
    (the deploy renders in-process and keeps the real values)."""

    json: dict[str, object]
    commands: list[RenderedCommand]
    warnings: list[str]


def render_profile(name: str, target: str | None) -> RenderedProfile:
    from dsv4ops.profiles import load_profile, render
    from dsv4ops.secrets import redact_argv, redact_env, redact_tree

    rendered = render(load_profile(name), _target(target))
    return RenderedProfile(
        redact_tree({**rendered.to_json(), "commands_hash": rendered.commands_hash}),
        [
            RenderedCommand(c.name, c.host, c.port, redact_env(c.env), redact_argv(c.argv))
            for c in rendered.components
        ],
        [str(w) for w in rendered.warnings],  # as printed: `where: message`
    )


def profile_diff(
    a: str, b: str, target: str | None, *, rev_a: str | None, rev_b: str | None
) -> ProfileDiffJSON:
    """`profile diff`: how B differs from A, resolved values then rendered argv and env."""
    from dsv4ops.profiles.views import diff_report

    return diff_report(a, b, _target(target), rev_a=rev_a, rev_b=rev_b)


def set_toggles() -> list[tuple[str, str, str]]:
    """What `profile set` takes: (usage, key, what it sets) of each toggle, from its
    declaration (profiles/toggles.py `toggle_rows`)."""
    from dsv4ops.profiles.toggles import toggle_rows

    return toggle_rows()


def set_profile_flags(
    name: str,
    toggles: tuple[str, ...],
    *,
    as_name: str | None,
    in_place: bool,
    commit: bool,
    reason: str | None,
    dry_run: bool = False,
    target: str | None = None,
) -> SetResult:
    """Apply `toggles` (profiles/toggles.py `TOGGLES`: NAME=on|off, buckets=SPEC) to profile
    `name`. With `dry_run` everything is checked and the diff returned, nothing written; with
    `target` the result must also render for that target. Raises DsOpsError or ProfileError
    (profiles/setter.py: nothing written then)."""
    from dsv4ops.profiles import get_target
    from dsv4ops.profiles.setter import set_flags

    command = "dsv4ops profile set " + shlex.join(
        [name, *toggles] + (["--as", as_name] if as_name else [])
    )
    return set_flags(
        name,
        list(toggles),
        as_name=as_name,
        in_place=in_place,
        commit=commit,
        command=command,
        reason=reason,
        dry_run=dry_run,
        target=get_target(target) if target else None,
    )


def schema_mark(*, markdown: bool) -> str:
    """What every output of `profile schema` holds near its start (its -o replaces only a file
    that does): the JSON Schema's "Generated by" comment, the tables' first marker."""
    from dsv4ops.profiles import json_schema, reference

    if markdown:
        return reference.begin_marker("").removesuffix(": begin -->")  # "<!-- settings:"
    return json_schema.GENERATED.split(" from ", 1)[0]  # "Generated by `dsv4ops profile schema`"


def profile_schema(*, targets: bool, markdown: bool) -> str:
    """`profile schema`: the JSON Schema of a profile file (of targets.yaml with `targets`), or
    with `markdown` the settings reference tables of docs/profiles.md; both derived from the
    one declaration of the keys (profiles/profile_spec.py)."""
    from dsv4ops.profiles import json_schema, reference

    if markdown:
        return reference.markdown(
            reference.targets_blocks() if targets else reference.profile_blocks()
        )
    return json_schema.to_text(
        json_schema.targets_json_schema() if targets else json_schema.profile_json_schema()
    )
