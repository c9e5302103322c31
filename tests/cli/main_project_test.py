"""dsv4ops works from any directory of its project (issue 23, item 2): it finds the project the
way git finds a repository, `--project DIR` / DSV4OPS_PROJECT override, and `--help` lists every
environment variable the CLI reads."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from dsv4ops.constants import ENVIRONMENT

REPO = Path(__file__).resolve().parents[2]
# Variables of other programs the package sets or passes on, not read by the CLI itself.
NOT_READ_BY_THE_CLI: set[str] = set()


def _run(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("DSV4OPS_")}
    return subprocess.run(
        [sys.executable, "-m", "dsv4ops", *args],
        cwd=cwd,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(REPO / "profiles", project / "profiles")
    shutil.copytree(REPO / "runbooks", project / "runbooks")
    return project


def test_a_command_run_below_the_project_root_finds_the_project(tmp_path: Path) -> None:
    project = _project(tmp_path)
    deep = project / "reports" / "today"
    deep.mkdir(parents=True)
    proc = _run("profile", "render", "baseline", "--target", "box", "--json", cwd=deep)
    assert proc.returncode == 0, proc.stderr
    listed = _run("runbook", "list", cwd=deep)
    assert listed.returncode == 0 and "decode-wedge" in listed.stdout, listed.stderr
    # the state (journals, crash reports) is the project's, not the directory's
    assert not (deep / ".dsv4ops").exists()


def test_outside_any_project_the_error_says_how_to_point_at_one(tmp_path: Path) -> None:
    project = _project(tmp_path)
    elsewhere = tmp_path / "home"
    elsewhere.mkdir()
    proc = _run("status", "--target", "twin-local", cwd=elsewhere)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "cannot read targets file" in proc.stderr
    assert "--project DIR" in proc.stderr and "DSV4OPS_PROJECT" in proc.stderr
    for args, env in ((("--project", str(project)), {}), ((), {"DSV4OPS_PROJECT": str(project)})):
        proc = _run(*args, "profile", "render", "baseline", "--target", "box", cwd=elsewhere, **env)
        assert proc.returncode == 0, (args, env, proc.stderr)
        assert "--disaggregation-mode prefill" in proc.stdout


def _variables_in_the_package() -> set[str]:
    names: set[str] = set()
    for path in (REPO / "dsv4ops").rglob("*.py"):
        if "twin" in path.relative_to(REPO / "dsv4ops").parts:
            continue  # the twin's DSV4_TWIN_* are docs/twin.md's, not the CLI's
        names |= set(re.findall(r"\"(DSV4OPS_[A-Z0-9_]+)\"", path.read_text()))
    return names


def test_help_lists_every_environment_variable_the_cli_reads() -> None:
    proc = _run("--help", cwd=REPO)
    assert proc.returncode == 0
    found = _variables_in_the_package() - NOT_READ_BY_THE_CLI
    assert {"DSV4OPS_TARGET", "DSV4OPS_PROJECT", "DSV4OPS_STATE_DIR"} <= found  # the scan works
    missing = sorted(n for n in found if n not in proc.stdout)
    assert not missing, f"add to dsv4ops/constants.py ENVIRONMENT: {missing}"
    assert {name for name, _ in ENVIRONMENT} >= found
    assert "--project DIR" in proc.stdout


def test_shell_completion_is_documented_and_works(tmp_path: Path) -> None:
    proc = _run(cwd=tmp_path, _DSV4OPS_COMPLETE="bash_source")
    assert proc.returncode == 0 and "_dsv4ops_completion" in proc.stdout, proc.stderr
    assert "_DSV4OPS_COMPLETE=bash_source dsv4ops" in (REPO / "README.md").read_text()
    words = subprocess.run(
        [sys.executable, "-m", "dsv4ops"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={
            **os.environ,
            "_DSV4OPS_COMPLETE": "bash_complete",
            "COMP_WORDS": "dsv4ops dep",
            "COMP_CWORD": "1",
        },
    )
    assert "deploy" in words.stdout, words.stderr
