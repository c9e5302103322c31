"""`dsv4ops journal --merge` through the real CLI and the real agent (issue 21, F2): the target's
record restored from an old copy keeps the operator's history, says which copy is newer, refuses
mutating commands with the command that merges, and the merge brings every record back."""

from __future__ import annotations

import json

import pytest

from dsv4ops.cli import main
from testing.orchestrate import OrchEnv


def _ids(capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert main(["journal", "--json", "--limit", "0"]) == 0
    return [e["id"] for e in json.loads(capsys.readouterr().out)["entries"]]


def test_a_shorter_record_is_merged_back_by_the_command_the_refusal_names(
    fresh_target: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    for _ in range(2):
        assert main(["stop", "--yes"]) == 0  # nothing runs: each is a journaled stop
    capsys.readouterr()
    both = _ids(capsys)
    record = fresh_target.workdir / "journal.jsonl"
    lines = record.read_bytes().splitlines(keepends=True)
    record.write_bytes(b"".join(lines[: len(lines) // 2]))  # an old copy put back on the box

    assert main(["journal"]) == 4  # UNDECIDED: the history shown is not all of it (issue 39)
    out = capsys.readouterr().out
    assert "HISTORY DIVERGED" in out and "the cache's copy is newer" in out, out
    assert main(["status"]) == 4  # UNKNOWN: what the shorter record says runs may be old
    assert "attention: HISTORY DIVERGED" in capsys.readouterr().out
    assert main(["stop", "--yes"]) == 1
    err = capsys.readouterr().err
    assert (
        f"dsv4ops journal --target {fresh_target.target} --merge" in err
        and "nothing was changed" in err
    )
    assert main(["journal", "--merge"]) == 0
    assert "merged" in capsys.readouterr().out
    assert _ids(capsys) == both  # every operation is back, in its place
    assert main(["stop", "--yes"]) == 0
