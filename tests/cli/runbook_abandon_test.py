"""`dsv4ops runbook abandon` through the real CLI: a stopped run closed (status stops listing
it, --resume refuses it), a run a live process holds refused, the same run closed once that
process was killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dsv4ops.cli import main
from dsv4ops.journal.records import Status
from dsv4ops.journal.store import Journal
from testing.cli import read_until
from testing.orchestrate import OrchEnv, make_env

STOPS = """\
# Stops

**When.** a test.

1. Look: at the target.
   ```dsv4ops
   dsv4ops profile validate baseline --target {target}
   ```
2. Missing: a profile that does not exist (the run stops here).
   ```dsv4ops
   dsv4ops profile validate no-such-profile --target {target}
   ```
"""
HELD = """\
# Held

**When.** a test.

1. Verify: a wait nobody meets here (nothing is deployed).
   ```step
   kind: wait
   until: status healthy
   timeout: 60
   ```
"""


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> OrchEnv:
    e = make_env(tmp_path)
    for k, v in e.environ.items():
        monkeypatch.setenv(k, v)
    return e


def _open_runs(env: OrchEnv, capfd: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    main(["status", "--json", "--target", env.target])  # nothing deployed: exit 4, still a report
    return [o for o in json.loads(capfd.readouterr().out)["open"] if o["kind"] == "runbook"]


def test_a_stopped_run_is_abandoned_and_then_neither_listed_nor_resumed(
    env: OrchEnv, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    book = tmp_path / "stops.md"
    book.write_text(STOPS)
    assert main(["runbook", "run", str(book), "--target", env.target, "--json"]) == 2
    run_id = json.loads(capfd.readouterr().out)["run"]
    (listed,) = _open_runs(env, capfd)
    close = f"dsv4ops runbook abandon {run_id} --target {env.target}"
    assert listed["id"] == run_id and close in str(listed["next"]), listed

    # off a terminal it asks first, so without --yes nothing changes
    assert main(["runbook", "abandon", run_id, "--target", env.target]) == 1
    _, err = capfd.readouterr()
    assert "was not abandoned: it asks first, and no terminal is there; nothing changed" in err
    assert Journal(env.target).get(run_id).status is Status.INTERRUPTED

    steps = len(Journal(env.target).get(run_id).steps)
    assert main(["runbook", "abandon", run_id, "--target", env.target, "--dry-run"]) == 0
    out_text = capfd.readouterr().out
    assert f"would abandon run {run_id} of stops on {env.target} (stopped at step 2" in out_text
    op = Journal(env.target).get(run_id)
    assert op.status is Status.INTERRUPTED and len(op.steps) == steps  # nothing written

    argv = ["runbook", "abandon", run_id, "--target", env.target, "--yes", "--json"]
    assert main([*argv, "-m", "fixed by hand"]) == 0
    out = json.loads(capfd.readouterr().out)
    assert out["status"] == "ABANDONED" and out["run"] == run_id and out["runbook"] == "stops"
    assert out["stopped_at"] == "step 2" and out["was"] == "INTERRUPTED", out
    assert out["dry_run"] is False
    op = Journal(env.target).get(run_id)
    assert op.status is Status.ABANDONED and "fixed by hand" in (op.message or "")
    assert _open_runs(env, capfd) == []
    assert main(["journal", "--json", "--target", env.target]) == 0
    entry = json.loads(capfd.readouterr().out)["entries"][-1]
    assert entry["id"] == run_id and entry["status"] == "ABANDONED", entry

    resume = ["runbook", "run", str(book), "--target", env.target, "--resume", run_id, "--yes"]
    assert main(resume) == 1
    out_text, err = capfd.readouterr()
    assert f"run {run_id} ended ABANDONED; there is nothing to resume" in err
    assert "$ dsv4ops" not in out_text  # no step ran
    assert main(argv) == 1
    assert "already ended ABANDONED" in capfd.readouterr().err


def test_a_run_its_live_process_holds_is_refused_and_abandoned_once_it_was_killed(
    env: OrchEnv, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    book = tmp_path / "held.md"
    book.write_text(HELD)
    proc = subprocess.Popen(
        [sys.executable, "-m", "dsv4ops", "runbook", "run", str(book), "--target", env.target],
        env=dict(os.environ),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        read_until(proc, "(at most 60 s)")  # it runs step 1: waiting
        run_id = Journal(env.target).operations()[-1].op
        argv = ["runbook", "abandon", run_id, "--target", env.target, "--yes"]
        assert main(argv) == 1
        _, err = capfd.readouterr()
        assert f"run {run_id} is being run by " in err and f"(pid {proc.pid})" in err, err
        assert "it was not abandoned: nothing changed" in err
        assert proc.poll() is None  # the run goes on
        assert Journal(env.target).get(run_id).status is Status.RUNNING
    finally:
        proc.send_signal(signal.SIGKILL)  # killed: it can end nothing in the journal
        proc.communicate(timeout=30)
    assert main(argv) == 0
    out, _ = capfd.readouterr()
    assert f"run {run_id} of held on {env.target}: ABANDONED" in out, out
    assert "(it had stopped at step 1, INTERRUPTED)" in out  # its process was gone
    assert Journal(env.target).get(run_id).status is Status.ABANDONED
