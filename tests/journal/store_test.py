from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dsv4ops.errors import JournalError
from dsv4ops.journal.records import Kind, Operation, Status
from dsv4ops.journal.schema import StatusRecord
from dsv4ops.journal.store import Journal, journal_path
from dsv4ops.jsontypes import JSONObject
from testing.clock import FakeClock
from testing.journal import gate_step, records


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    return Journal("twin-local", directory=tmp_path, clock=FakeClock())


def _op(o: Operation | None) -> str:
    assert o is not None
    return o.op


def _deploy(journal: Journal, name: str, ok: bool = True) -> str:
    op = journal.begin(
        Kind.DEPLOY,
        profile={"name": name, "git_commit": "abc"},
        components=[{"name": "prefill", "argv": ["python"]}],
        reason="test",
    )
    journal.transition(op, Status.RUNNING)
    journal.step(op, "start prefill", "start")
    journal.step(op, "start prefill", "done", duration_s=0.5)
    gate_step(journal, op, "PASS (smoke: PASS)")  # its gate passed
    if ok:
        journal.transition(
            op, Status.SUCCEEDED, running=op, processes={"prefill": {"pid": 1}}, known_good=True
        )
    return op


def test_lifecycle_is_persisted_at_every_transition(journal: Journal) -> None:
    op = journal.begin(Kind.DEPLOY, profile={"name": "baseline"})
    assert journal.get(op).status is Status.PENDING
    journal.transition(op, Status.RUNNING)
    assert journal.get(op).status is Status.RUNNING
    journal.transition(op, Status.SUCCEEDED, running=op)
    got = journal.get(op)
    assert got.status is Status.SUCCEEDED and got.ended is not None
    statuses = [r.status.value for r in records(journal) if isinstance(r, StatusRecord)]
    assert statuses == ["PENDING", "RUNNING", "SUCCEEDED"]


def test_illegal_transition_is_refused(journal: Journal) -> None:
    op = _deploy(journal, "baseline")
    with pytest.raises(JournalError, match="SUCCEEDED -> RUNNING"):
        journal.transition(op, Status.RUNNING)


def test_last_known_good_and_deployed(journal: Journal) -> None:
    a = _deploy(journal, "baseline")
    b = journal.begin(Kind.DEPLOY, profile={"name": "buckets"})
    journal.transition(b, Status.RUNNING)
    journal.transition(b, Status.ROLLED_BACK, message="probe failed", running=a)
    assert _op(journal.last_known_good()) == a
    assert _op(journal.deployed()) == a
    s = journal.begin(Kind.STOP)
    journal.transition(s, Status.RUNNING)
    journal.transition(s, Status.SUCCEEDED, running="")
    assert journal.deployed() is None
    assert _op(journal.last_known_good()) == a


def test_in_flight_names_the_open_step(journal: Journal) -> None:
    op = journal.begin(Kind.DEPLOY, profile={"name": "baseline"})
    journal.transition(op, Status.RUNNING)
    journal.step(op, "stop router", "start")
    journal.step(op, "stop router", "done")
    journal.step(op, "start decode", "start")
    (flying,) = journal.in_flight()
    assert flying.op == op and flying.step_in_flight == "start decode"
    assert flying.summary()["in_flight"] == "start decode"


def test_torn_last_line_is_skipped_and_next_append_stays_valid(journal: Journal) -> None:
    a = _deploy(journal, "baseline")
    with open(journal.path, "ab") as f:
        f.write(b'{"v":1,"type":"status","op":"' + a.encode())  # crash mid-write
    assert journal.get(a).status is Status.SUCCEEDED
    assert journal.skipped_lines
    b = _deploy(journal, "other")
    assert journal.get(b).status is Status.SUCCEEDED
    assert len(journal.operations()) == 2


def test_format_errors_name_file_and_line_and_leave_the_rest_readable(journal: Journal) -> None:
    """Issue 39: a bad line is named file:line; what the rest says is still read; an operation
    is refused until the line is mended (known-good could depend on it)."""
    op = _deploy(journal, "baseline")
    with open(journal.path, "a") as f:
        f.write(
            json.dumps({"v": 1, "type": "status", "op": "x", "ts": "t", "status": "WEIRD"}) + "\n"
        )
    assert [o.op for o in journal.operations()] == [op]
    (why, hint) = journal.warnings()
    assert re.search(r"twin-local\.jsonl:\d+: unknown status 'WEIRD'", why) and "sed -n" in hint
    with pytest.raises(JournalError, match=r"twin-local\.jsonl:\d+: unknown status 'WEIRD'"):
        journal.begin(Kind.DEPLOY)
    journal.begin(Kind.STOP)  # the brake always works: a stop takes nothing known-good on trust
    with open(journal.path, "w") as f:
        f.write(json.dumps({"v": 99, "type": "begin"}) + "\n")
    assert records(journal) == [] and "version 99" in journal.warnings()[0]


def test_secrets_never_reach_the_file(journal: Journal, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_supersecretvalue")
    journal.begin(
        Kind.DEPLOY,
        profile={"name": "p", "env": {"HF_TOKEN": "hf_supersecretvalue", "OK": "1"}},
        components=[{"argv": ["python", "--api-key", "k3y-material", "--port", "1"]}],
        reason="pasted hf_supersecretvalue by mistake",
    )
    text = journal.path.read_text()
    assert "hf_supersecretvalue" not in text and "k3y-material" not in text
    assert '"OK":"1"' in text and "--port" in text


def test_unsafe_target_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(JournalError):
        journal_path("../etc", tmp_path)


def test_journal_lives_under_state_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DSV4OPS_STATE_DIR", str(tmp_path))
    assert Journal("box").path == tmp_path / "journal" / "box.jsonl"


def test_process_killed_mid_operation_leaves_a_readable_journal(tmp_path: Path) -> None:
    # A real process appends records and is SIGKILLed between steps: the journal stays readable
    # and says which step was in flight.
    script = textwrap.dedent(
        f"""
        import os, signal
        from dsv4ops.journal.store import Journal
        from dsv4ops.journal.records import Kind, Operation, Status
        j = Journal("box", directory={str(tmp_path)!r})
        op = j.begin(Kind.DEPLOY, profile={{"name": "baseline"}})
        j.transition(op, Status.RUNNING)
        j.step(op, "start decode", "start")
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], timeout=30)
    assert proc.returncode == -9
    (op,) = Journal("box", directory=tmp_path).in_flight()
    assert op.status is Status.RUNNING and op.step_in_flight == "start decode"
    assert os.stat(journal_path("box", tmp_path)).st_mode & 0o777 == 0o600


def test_journal_scrubs_every_kind_of_secret() -> None:
    """Env values by key name and secret flag values (incl. --admin-api-key) never reach disk."""
    from dsv4ops.journal import records

    record = {
        "env": {"HF_TOKEN": "t1", "OPENAI_KEY": "k1", "DB_PASS": "p1", "PATH": "/bin"},
        "argv": ["python", "--admin-api-key", "a1", "--api-key=a2", "--port", "1"],
    }
    out = records.scrub(record)
    assert out["env"] == {"HF_TOKEN": "***", "OPENAI_KEY": "***", "DB_PASS": "***", "PATH": "/bin"}
    assert out["argv"] == ["python", "--admin-api-key", "***", "--api-key=***", "--port", "1"]


def test_journal_keeps_settings_that_only_mention_tokens() -> None:
    """Canary thresholds like first_token_deadline_s are recorded as values, not '***'."""
    from dsv4ops.journal import records

    data = {"canary": {"first_token_deadline_s": 60.0, "max_tokens": 64}, "env": {"HF_TOKEN": "t"}}
    assert records.scrub(data) == {
        "canary": {"first_token_deadline_s": 60.0, "max_tokens": 64},
        "env": {"HF_TOKEN": "***"},
    }


def test_a_runbook_run_is_never_in_flight_deployed_or_known_good(
    journal: Journal, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An open run (a runbook waiting to be resumed) must not block or be abandoned by the
    deploys it runs, nor make status report an interrupted operation."""
    good = _deploy(journal, "baseline")
    run = journal.begin(Kind.RUNBOOK, reason="runbook decode-wedge")
    journal.transition(run, Status.RUNNING)
    journal.step(run, "step 1", "start")
    monkeypatch.setenv("DSV4OPS_RUNBOOK_RUN", run)
    child = _deploy(journal, "overlap-on")
    assert journal.in_flight() == []
    assert journal.deployed_is_unknown() is None
    assert _op(journal.deployed()) == child
    assert [o.op for o in journal.known_good()] == [child, good]
    ops = {o.op: o for o in journal.operations()}
    assert ops[child].runbook_run == run and ops[good].runbook_run is None
    assert ops[run].runbook_run is None  # a run does not point to itself
    assert ops[child].summary()["runbook_run"] == run


def test_an_operation_merged_in_comes_before_what_began_after_the_merge_within_one_second() -> None:
    """The merge is the first thing a command does: an operation merged from an operator-side
    journal began before anything begun after the merge record, even when both have the same
    seconds-precision timestamp (a CI failure: the crashed deploy listed after the kernel switch)."""
    from dsv4ops.journal.schema import parse_record
    from testing.journal import fold, place_merged

    ts = "2026-12-01T16:01:04Z"
    raw: list[JSONObject] = [
        {"type": "merge", "op": "m", "ts": ts, "user": "u", "ops": ["d-1"]},
        {
            "type": "begin",
            "op": "d-1",
            "kind": "deploy",
            "ts": ts,
            "user": "u",
            "profile": {"name": "baseline"},
        },
        {
            "type": "begin",
            "op": "k-1",
            "kind": "kernels",
            "ts": ts,
            "user": "u",
            "profile": {"name": "pkg"},
        },
    ]
    records = [parse_record({"v": 1, **r}, "x") for r in raw]
    native_first = [records[0], records[2], records[1]]  # the cache order after a merge
    assert [o.op for o in place_merged(fold(native_first), native_first)] == ["d-1", "k-1"]


def test_free_text_in_a_record_is_scrubbed_of_every_argv_shape(journal: Journal) -> None:
    """issue 21, F3: a failure message quoting a log tail or an argv (`"--api-key v"` in one
    string, `--api-key=` then the value, ServerArgs) is written with the values hidden."""
    op = journal.begin(
        Kind.DEPLOY,
        components=[{"argv": ["python", "--api-key sekr1t-1", "--api-key=", "sekr1t-2"]}],
        reason="decode died: ServerArgs(admin_api_key='sekr1t-3') --control-plane-api-keys sekr1t-4",
    )
    journal.step(op, "start decode", "failed", detail="log: --ssl-keyfile-password=sekr1t-5")
    assert "sekr1t" not in journal.path.read_text()
    assert journal.get(op).components[0]["argv"] == ["python", "--api-key ***", "--api-key=", "***"]


def _on_disk(journal: Journal) -> list[JSONObject]:
    return [json.loads(line) for line in journal.path.read_text().splitlines()]


def test_a_deferred_step_record_goes_out_with_the_next_append_stamped_when_it_was_made(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    journal = Journal("twin-local", directory=tmp_path, clock=clock)
    op = journal.begin(Kind.DEPLOY, profile={"name": "baseline"}, reason="test")
    journal.step(op, "wait decode", "start")
    journal.step(op, "wait decode", "done", duration_s=1.0, defer=True)
    stamped = _on_disk(journal)[-1]["ts"]
    assert [r.get("phase") for r in _on_disk(journal)][-1] == "start"  # not written yet
    clock.advance(5.0)
    journal.step(op, "probe", "start")
    last = _on_disk(journal)[-2:]
    assert [(r["name"], r["phase"]) for r in last] == [("wait decode", "done"), ("probe", "start")]
    assert last[0]["ts"] == stamped != last[1]["ts"]  # stamped when made, not when written


def test_a_read_and_the_end_of_the_lock_write_a_deferred_record(tmp_path: Path) -> None:
    journal = Journal("twin-local", directory=tmp_path, clock=FakeClock())
    op = journal.begin(Kind.DEPLOY, profile={"name": "baseline"}, reason="test")
    journal.step(op, "probe", "start")
    journal.step(op, "probe", "done", defer=True)
    assert journal.get(op).steps[-1].phase == "done"  # this object's reads see its records
    assert _on_disk(journal)[-1]["phase"] == "done"
    with journal.under_lock(op):
        journal.step(op, "gate", "start")
        journal.step(op, "gate", "done", defer=True)
    assert _on_disk(journal)[-1]["name"] == "gate"  # written under the lock it was made under
    journal.step(op, "wait", "done", defer=True)
    journal.flush()
    assert _on_disk(journal)[-1]["name"] == "wait"


def test_a_deferred_record_whose_append_failed_is_kept_for_the_next(tmp_path: Path) -> None:
    journal = Journal("twin-local", directory=tmp_path, clock=FakeClock())
    op = journal.begin(Kind.DEPLOY, profile={"name": "baseline"}, reason="test")
    journal.step(op, "wait", "done", defer=True)
    real = journal.backend.append
    calls = []

    def failing(data: bytes, *, lock_op: str | None) -> None:
        calls.append(data)
        raise JournalError("target unreachable")

    journal.backend.append = failing  # type: ignore[method-assign]
    with pytest.raises(JournalError):
        journal.step(op, "probe", "start")
    journal.backend.append = real  # type: ignore[method-assign]
    journal.step(op, "probe", "start")
    names = [(r.get("name"), r.get("phase")) for r in _on_disk(journal)]
    assert names[-2:] == [("wait", "done"), ("probe", "start")]
    assert names.count(("wait", "done")) == 1


def test_records_a_full_disk_refuses_are_kept_and_written_by_the_next_append(
    tmp_path: Path,
) -> None:
    from testing.journal import FullDiskBackend

    backend = FullDiskBackend(tmp_path / "j.jsonl")
    journal = Journal("t", backend=backend, clock=FakeClock())
    op = journal.begin(Kind.DEPLOY, profile={"name": "p"}, reason="r")
    journal.keep_unwritten = True  # an operation began: what happens next is never dropped
    backend.full = True
    with pytest.raises(JournalError, match="No space left"):
        journal.step(op, "start decode", "start")
    with pytest.raises(JournalError):
        journal.end_unread(op, Status.FAILED, message="stopped", running="?")
    assert [(r.TYPE, getattr(r, "status", None)) for r in journal.unwritten()] == [
        ("step", None),
        ("status", Status.FAILED),
    ]
    backend.full = False
    journal.flush()  # space again: written in order, once
    assert journal.unwritten() == []
    assert journal.get(op).status is Status.FAILED
    assert [s.name for s in journal.get(op).steps] == ["start decode"]


def test_unwritten_records_go_to_the_backends_fallback(tmp_path: Path) -> None:
    from testing.journal import FullDiskBackend

    backend = FullDiskBackend(tmp_path / "j.jsonl")
    journal = Journal("t", backend=backend, clock=FakeClock())
    op = journal.begin(Kind.STOP)
    journal.keep_unwritten = True
    backend.full = True
    with pytest.raises(JournalError):
        journal.step(op, "stop router", "start")
    assert journal.keep_elsewhere() == str(tmp_path / "j.kept")
    assert journal.unwritten() == [] and len(backend.kept) == 1
    assert json.loads(backend.kept[0])["name"] == "stop router"


def test_before_an_operation_began_a_refused_record_is_not_kept(tmp_path: Path) -> None:
    from testing.journal import FullDiskBackend

    backend = FullDiskBackend(tmp_path / "j.jsonl")
    journal = Journal("t", backend=backend, clock=FakeClock())
    backend.full = True
    with pytest.raises(JournalError):
        journal.begin(Kind.DEPLOY)  # refused: nothing happened, nothing to keep
    assert journal.unwritten() == []


def test_an_id_prefix_finds_one_operation_and_an_empty_id_finds_none(journal: Journal) -> None:
    """An empty id is a prefix of every id: with one operation journaled it named that one, so a
    `runbook abandon ""` (or any command taking an id) acted on whatever was there."""
    op = journal.begin(Kind.STOP)
    assert journal.get(op[:8]).op == op
    for empty in ("", "  "):
        with pytest.raises(JournalError, match="an empty operation id names no journal entry"):
            journal.get(empty)
