"""`dsv4ops export rbg -o FILE`: the manifest replaces only a manifest it wrote before."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dsv4ops.cli import main

PROFILES = Path(__file__).resolve().parents[2] / "profiles"


def test_dash_o_never_replaces_a_profile_and_renews_its_own_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`export rbg baseline -o profiles/baseline.yaml` replaced the profile with the manifest."""
    profiles = tmp_path / "profiles"
    shutil.copytree(PROFILES, profiles)
    monkeypatch.setenv("DSV4OPS_PROFILES_DIR", str(profiles))
    profile = profiles / "baseline.yaml"
    before = profile.read_bytes()
    assert main(["export", "rbg", "baseline", "-o", str(profile)]) == 1
    out, err = capsys.readouterr()
    assert err.startswith(f"error: -o {profile}: that file exists and was not written by "), err
    assert "nothing was written" in err and out == "", out
    assert profile.read_bytes() == before

    manifest = tmp_path / "rbg.yaml"
    assert main(["export", "rbg", "baseline", "-o", str(manifest)]) == 0
    assert main(["export", "rbg", "smg", "-o", str(manifest), "--router-image", "smg:1"]) == 0
    capsys.readouterr()
    assert manifest.read_text().startswith("# dsv4ops export rbg smg: ")  # renewed, another one
