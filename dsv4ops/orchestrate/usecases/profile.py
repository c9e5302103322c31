"""`dsv4ops profile set`: toggle a profile's operational flags into a new profile (or in place)
and git commit the result, the commit naming the command that made it."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dsv4ops.profiles.setter import SetResult


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
    """Apply `toggles` (overlap=on|off, multi-stream-overlap=on|off, buckets=SPEC) to profile
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
