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
    braces = _render(tmp_path / "braces", "--runbook-url", "http://wiki/{{ $labels.job }}")
    assert braces.returncode == 1 and "{, }" in braces.stderr, braces.stderr  # a Go template


def test_out_replaces_only_what_it_wrote_and_leaves_someone_elses_file(tmp_path: Path) -> None:
    """`--out /etc/prometheus` (instead of a directory of its own) replaced Prometheus's own
    prometheus.yml without a word. A file this command did not write is left alone and nothing
    is written; --force replaces it and keeps it as NAME.bak; its own files it replaces."""
    mine = "global: {scrape_interval: 15s}  # the operator's own\n"
    (tmp_path / "prometheus.yml").write_text(mine)
    refused = _render(tmp_path)
    assert refused.returncode == 1, refused.stderr
    assert "prometheus.yml exists and was not written by `dsv4ops monitoring render`" in (
        refused.stderr
    )
    assert "--force" in refused.stderr and "Traceback" not in refused.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prometheus.yml"]
    assert (tmp_path / "prometheus.yml").read_text() == mine
    forced = _render(tmp_path, "--force")
    assert forced.returncode == 0, forced.stderr
    assert (tmp_path / "prometheus.yml.bak").read_text() == mine
    assert _yaml.safe_load((tmp_path / "prometheus.yml").read_text())["scrape_configs"]
    again = _render(tmp_path, "--runbook-url", BASE)  # its own files: replaced, no --force
    assert again.returncode == 0, again.stderr
    assert _links(tmp_path)[0].startswith(BASE + "/runbooks/")
    assert (tmp_path / "prometheus.yml.bak").read_text() == mine
    fifo = tmp_path / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / "dsv4ops-alerts.yml")  # read as it was, it blocked the render
    stuck = _render(fifo)
    assert stuck.returncode == 1 and "dsv4ops-alerts.yml exists and was not" in stuck.stderr
