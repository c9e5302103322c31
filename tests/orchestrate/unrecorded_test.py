"""A full disk (issue 40) on real full filesystems: small tmpfs mounts on the target's work
directory and the operator's state directory, in a private user and mount namespace
(`unshare -rm`), the twin behind the real router, the real CLI (testing/programs/
orchestrate_full_disk.py runs the scenarios there and reports what it saw).

(a) the agent upload hits ENOSPC: FAILED (2), a clear message, no temp file, no crash;
(b) the journal cannot record 'start decode' once prefill runs: FAILED (2), what runs now as the
    target says, the recover command, not a REFUSED; (d) the records it could not write are kept
    in the operator's cache and the next command writes them to the journal of record;
(c) the operator's journal cache cannot be written: status answers and stop stops, warned;
(e) the target's disk is full when `stop` takes the deploy lock: FAILED (2), nothing changed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testing.orchestrate import OrchEnv, kill_all

pytestmark = [pytest.mark.slow, pytest.mark.router]

PROGRAM = Path(__file__).resolve().parents[2] / "testing" / "programs" / "orchestrate_full_disk.py"


def _namespaces_work(scratch: Path) -> str | None:
    """Why a private mount namespace with a tmpfs cannot be made here (None: it can)."""
    if shutil.which("unshare") is None:
        return "no unshare(1)"
    scratch.mkdir()
    probe = subprocess.run(
        ["unshare", "-rm", "mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(scratch)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return None if probe.returncode == 0 else f"unshare -rm + tmpfs refused: {probe.stderr}"


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("full-disk")
    why = _namespaces_work(root / "probe")
    if why:
        pytest.skip(why)
    try:
        proc = subprocess.run(
            ["unshare", "-rm", sys.executable, str(PROGRAM), str(root)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        yield json.loads(proc.stdout)
    finally:  # the safety net: the program kills what it started (processes outlive a mount)
        kill_all(OrchEnv(root, root, root / "state", root / "work", root, "twin-test", 0))


def test_a_full_disk_at_the_agent_upload_fails_cleanly(seen: dict[str, Any]) -> None:
    run = seen["upload"]
    assert run["code"] == 2, run  # FAILED: act on it; not a bug (3), not a refusal (1)
    assert "No space left on device" in run["err"]
    assert "partial copy was removed, nothing else was changed" in run["err"]
    assert "hint: free space on the target's disk" in run["err"]
    assert "internal error" not in run["err"] and "crash report" not in run["err"]
    assert run["left"] == [] and run["crash"] == []  # no agent.zip.tmp.* left behind
    assert seen["deploy"]["code"] == 0, seen["deploy"]  # with space again, it deploys


def test_a_journal_that_cannot_record_start_decode_fails_naming_what_runs(
    seen: dict[str, Any],
) -> None:
    out = seen["start_decode"]
    assert out["exit"] == 2 and out["status"] == "FAILED", out["message"]
    assert "stopped before 'start decode' (it did not run)" in out["message"]
    assert "No space left on device" in out["message"]
    assert "no automatic rollback was tried" in out["message"]
    # What runs now is what the target runs: the new prefill alone.
    [pid] = out["pids"]
    assert f"Running now: prefill (pid {pid}); not running: decode, router." in out["message"]
    assert "`dsv4ops stop --recover --target " in out["message"]
    assert "Nothing was changed" not in out["message"]


def test_the_records_a_full_disk_refused_are_written_by_the_next_command(
    seen: dict[str, Any],
) -> None:
    out = seen["start_decode"]
    assert "journal record(s) of what happened were kept in" in out["message"]
    assert seen["start_decode"]["recover"]["code"] == 0, out["recover"]
    assert seen["start_decode"]["after"] == 0
    journal = json.loads(out["journal"]["out"])
    [merge] = journal["merges"]  # the kept records, merged into the record once
    assert merge["records"] >= 2
    failed = [e for e in journal["entries"] if e["profile"] == "buckets-step4"]
    assert [e["status"] for e in failed] == ["FAILED"]
    assert "the journal cannot be written" in failed[0]["message"]


def test_status_and_stop_work_with_a_warning_when_the_cache_cannot_be_written(
    seen: dict[str, Any],
) -> None:
    assert seen["redeploy"]["code"] == 0, seen["redeploy"]
    run = seen["cache_full"]
    warning = "warning: cannot write the journal cache"
    assert run["status"]["code"] == 0, run["status"]  # HEALTHY: the unit serves
    assert "HEALTHY" in run["status"]["out"] and warning in run["status"]["err"]
    assert run["stop"]["code"] == 0, run["stop"]
    assert warning in run["stop"]["err"] and run["processes"] == 0
    # Space again: the cache catches up with the record, the stop included.
    journal = json.loads(run["journal"]["out"])
    assert journal["entries"][-1]["kind"] == "stop"
    assert journal["entries"][-1]["status"] == "SUCCEEDED"


def test_stop_on_a_full_target_disk_fails_cleanly_and_changes_nothing(
    seen: dict[str, Any],
) -> None:
    assert seen["redeploy"]["code"] == 0, seen["redeploy"]
    run = seen["target_full_stop"]
    stop = run["stop"]
    assert stop["code"] == 2, stop  # FAILED: the box needs space; not a refusal (1), not a bug
    assert "cannot take the deploy lock on the target" in stop["err"]
    assert "No space left on device" in stop["err"]
    assert "Nothing was changed: whatever ran before runs still." in stop["err"]
    assert "hint: free space on the target's disk" in stop["err"]
    assert "internal error" not in stop["err"] and "Traceback" not in stop["err"]
    assert run["running"] == 3  # prefill, decode and router still serve
    assert run["left"] == []  # no half-written lock file left behind
    # with the target's space back, the next stop (scenario c's) stops the unit
    assert seen["cache_full"]["stop"]["code"] == 0, seen["cache_full"]["stop"]
