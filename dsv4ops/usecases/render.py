"""Profiles rendered into Deployments for a target: from the working copy (deploy, drift) or
read from git at a recorded commit (rollback), each with its git provenance."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from dsv4ops.deployment import Deployment
from dsv4ops.profiles.model import Target


def deployment_for(profile_ref: str, target: Target) -> Deployment:
    """Load the profile from the working copy and render it for the target."""
    from dsv4ops.profiles import load_profile, render
    from dsv4ops.profiles.committed import clean_head_commit

    profile = load_profile(profile_ref)
    return replace(
        render(profile, target),
        profile_path=str(Path(profile.path).resolve()),
        git_commit=clean_head_commit(profile),
    )


def render_at_commit(target: Target) -> Callable[[str, str], Deployment]:
    """For rollback: read the profile file (and its chain) at a commit, render it for target."""
    from dsv4ops.profiles import load_profile, render

    def build(path: str, commit: str) -> Deployment:
        profile = load_profile(path, git_rev=commit)
        return replace(render(profile, target), profile_path=path, git_commit=commit)

    return build


def render_now(target: Target) -> Callable[[str], Deployment]:
    """For drift: the named profile as the working copy renders it now."""
    return lambda name: deployment_for(name, target)
