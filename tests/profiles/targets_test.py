"""profiles/targets.py: where a local target's relative paths point."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsv4ops.profiles import load_targets

TARGETS = """schema_version: 1
targets:
  here:
    transport: local
    gpus: [0, 1]
    workdir: ops
    python: env/bin/python
    launcher: sglang
    bind_host: 127.0.0.1
"""


def test_a_relative_local_python_is_relative_to_where_dsv4ops_runs_like_the_workdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The components start in the workdir, where the same relative path names another file
    (the agent ran `env/bin/python` from here and the servers from `ops/`)."""
    (tmp_path / "targets.yaml").write_text(TARGETS)
    monkeypatch.chdir(tmp_path)
    target = load_targets(tmp_path / "targets.yaml")["here"]
    assert target.python == str(tmp_path / "env/bin/python")
    assert target.workdir == str(tmp_path / "ops")
    (tmp_path / "t2.yaml").write_text(TARGETS.replace("env/bin/python", "python3.11"))
    assert load_targets(tmp_path / "t2.yaml")["here"].python == "python3.11"
