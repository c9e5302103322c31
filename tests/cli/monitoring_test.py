"""`dsv4ops monitoring render --runbook-url BASE`: every alert links a runbook an operator can
open from Alertmanager or Grafana (issue 23, item 7)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from dsv4ops import _yaml

REPO = Path(__file__).resolve().parents[2]
BASE = "https://git.example.com/ops/dsv4ops/blob/main"


def _render(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "dsv4ops",
            "monitoring",
            "render",
            "baseline",
            "--target",
            "box",
            "--out",
            str(tmp_path),
            *args,
        ],
        cwd=REPO,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def _links(tmp_path: Path) -> list[str]:
    rules = _yaml.safe_load((tmp_path / "dsv4ops-alerts.yml").read_text())
    return [r["annotations"]["runbook"] for g in rules["groups"] for r in g["rules"]]


def test_alerts_link_runbooks_under_the_configured_base(tmp_path: Path) -> None:
    proc = _render(tmp_path, "--runbook-url", BASE + "/")
    assert proc.returncode == 0, proc.stderr
    links = _links(tmp_path)
    assert links and all(link.startswith(BASE + "/runbooks/") for link in links), links
    for link in links:  # each names a runbook the project ships
        assert (REPO / link.removeprefix(BASE + "/")).is_file(), link
    from_env = _render(tmp_path / "env", DSV4OPS_RUNBOOK_URL=BASE)
    assert from_env.returncode == 0 and _links(tmp_path / "env") == links


def test_without_a_base_the_links_stay_project_paths_and_a_bad_base_is_refused(
    tmp_path: Path,
) -> None:
    assert _render(tmp_path).returncode == 0
    assert all(link.startswith("runbooks/") for link in _links(tmp_path))
    bad = _render(tmp_path / "bad", "--runbook-url", "wiki/runbooks")
    assert bad.returncode == 1 and "--runbook-url" in bad.stderr and "http" in bad.stderr
    assert "Traceback" not in bad.stderr and not (tmp_path / "bad").exists()
