"""Deployment profiles: load (with extends and provenance), check, and render to exact commands.

Contract 1 (docs/architecture.md): load_profile, load_targets, render → Deployment
(the one value of `dsv4ops.deployment`), Component.
"""

from __future__ import annotations

from dsv4ops.profiles.load import list_profiles, load_profile, profile_path, validate_profile
from dsv4ops.profiles.model import (
    CanaryThresholds,
    Component,
    Deployment,
    Profile,
    ProfileWarning,
    Target,
)
from dsv4ops.profiles.problems import Problem
from dsv4ops.profiles.render import render
from dsv4ops.profiles.targets import DEFAULT_TARGET, get_target, load_targets

__all__ = [
    "DEFAULT_TARGET",
    "CanaryThresholds",
    "Component",
    "Deployment",
    "Problem",
    "Profile",
    "ProfileWarning",
    "Target",
    "get_target",
    "list_profiles",
    "load_profile",
    "load_targets",
    "profile_path",
    "render",
    "validate_profile",
]
