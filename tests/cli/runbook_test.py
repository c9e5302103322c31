"""`dsv4ops runbook ...` through the real CLI: list/show/refusals in process, and one end-to-end
run of a test-local runbook whose commands run as real child processes against an isolated
twin target (status and profile validate: nothing is deployed)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from dsv4ops.cli import main
from dsv4ops.journal.store import Journal
from dsv4ops.runbooks.runlog import fold_run
from testing.cli import EVIL, SHOWN, printable, read_until
from testing.orchestrate import OrchEnv, add_real_box, make_env
from testing.runbooks import SHIPPED_RUNBOOKS

RUNBOOKS = Path(__file__).resolve().parents[2] / "runbooks"

SHORT = """\
# Short check

**Symptom.** none: a test.

1. Look: at the target and its baseline profile.
   ```dsv4ops
   dsv4ops status --target {target}  # expect exit 0 or 2
   dsv4ops profile validate baseline --target {target}
   ```
2. Missing: a profile that does not exist is a user error (exit 1).
   ```dsv4ops
   dsv4ops profile validate no-such-profile --target {target}  # expect exit 1
   ```
"""


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> OrchEnv:
    e = make_env(tmp_path)
    for k, v in e.environ.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("DSV4OPS_RUNBOOKS_DIR", str(RUNBOOKS))
    return e


def test_end_to_end_run_through_the_real_cli(
    env: OrchEnv, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    book = tmp_path / "short.md"
    book.write_text(SHORT)
    code = main(["runbook", "run", str(book), "--target", env.target])
    out, err = capfd.readouterr()
    assert code == 0, out + err
    assert f"$ dsv4ops status --target {env.target}" in out
    assert f"target {env.target}" in out  # the child's own status output, streamed through
    assert "no-such-profile" in err  # the child's error, expected
    assert out.rstrip().endswith("runbook short: every step met its expectation (3 command(s))")

    book.write_text(SHORT.replace("  # expect exit 1", ""))
    code = main(["runbook", "run", str(book), "--target", env.target, "--from", "2"])
    out, err = capfd.readouterr()
    assert code == 2
    assert "dsv4ops status" not in out  # --from 2 skipped step 1
    assert (
        "step 2 of runbook short failed: `dsv4ops profile validate no-such-profile --target "
        f"{env.target}` exited 1, expected 0.\nBefore it: nothing.\n" in err
    )
    assert f"check `dsv4ops status --target {env.target}`" in err
    # The run stopped at a failed step and its process ended: INTERRUPTED, never RUNNING, and
    # the journal says which command resumes it (issue 20).
    assert main(["journal", "--json", "--target", env.target]) == 0
    run = json.loads(capfd.readouterr().out)["entries"][-1]
    assert run["kind"] == "runbook" and run["status"] == "INTERRUPTED", run
    assert f"--resume {run['id']}" in run["next"]


def test_list_and_show(env: OrchEnv, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runbook", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == list(SHIPPED_RUNBOOKS)
    assert rows[2]["symptom"].startswith("`sglang:num_running_reqs` on the decode stays > 0")
    assert main(["runbook", "show", "decode-wedge"]) == 0
    out = capsys.readouterr().out
    # The checklist a person reads: every step's text, what it does, its command or condition.
    assert "[ ] 5. Recover: only a restart clears the wedge" in out
    assert "       [asks first, not safe to repeat]" in out
    assert (
        "       $ dsv4ops rollback --target {target} --reason 'decode wedge (runbook decode-wedge)'"
        in out
    )
    assert "       until http decode /health 503  (at most 60 s)" in out
    assert "       ? Is the overlap scheduler on in the deployed profile (status above)?" in out


def test_refusals_are_user_errors(env: OrchEnv, capsys: pytest.CaptureFixture[str]) -> None:
    add_real_box(env)
    assert main(["runbook", "run", "nope", "--target", env.target]) == 1
    assert "no runbook named 'nope'" in capsys.readouterr().err
    assert main(["runbook", "run", "decode-wedge", "--target", "box", "--rehearse"]) == 1
    assert "runs only on a twin target; 'box' has launcher 'sglang'" in capsys.readouterr().err
    assert main(["runbook", "run", "flag-change", "--target", env.target, "--dry-run"]) == 1
    assert "flag-change.md: no value for {change}, {new}, {profile}" in capsys.readouterr().err
    assert main(["runbook", "run", "decode-wedge", "--target", "elsewhere"]) == 1
    assert "unknown target 'elsewhere'" in capsys.readouterr().err


def test_a_runbooks_directory_that_is_not_there_is_said_not_listed_empty(
    env: OrchEnv, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`runbook list` of a wrong DSV4OPS_RUNBOOKS_DIR (or project) printed an empty table and
    exit 0, as if the project had no runbooks; `show` said "have: none"."""
    for directory, what in (
        (env.root / "nowhere", "does not exist"),
        (Path("/dev/null"), "is not a directory"),
    ):
        monkeypatch.setenv("DSV4OPS_RUNBOOKS_DIR", str(directory))
        for argv in (["runbook", "list"], ["runbook", "list", "--json"], ["runbook", "show", "x"]):
            assert main(argv) == 1, argv
            err = capsys.readouterr().err
            assert f"runbooks directory {directory} {what}" in err, err
            assert "DSV4OPS_RUNBOOKS_DIR" in err and "have: none" not in err, err


def test_dry_run_rehearsal_on_a_twin_target(
    env: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["runbook", "run", "decode-wedge", "--target", env.target, "--rehearse", "--dry-run"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert f"$ dsv4ops deploy overlap-on --target {env.target} --no-canary --yes" in out
    assert out.rstrip().endswith("dry run: 6 command(s) would run")


def test_a_branch_cycle_and_an_oversized_runbook_are_refused_before_anything_runs(
    env: OrchEnv, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """issue 21, F4 and F10: `if-ok: 1` on step 1 printed 413k lines in 10 s with --dry-run."""
    loop = tmp_path / "loop.md"
    loop.write_text(
        SHORT.replace("   ```\n2. Missing", "   ```\n   ```step\n   if-ok: 1\n   ```\n2. Missing")
    )
    for extra in (["--dry-run"], ["--yes"]):
        assert main(["runbook", "run", str(loop), "--target", env.target, *extra]) == 1
        err = capsys.readouterr().err
        assert "loop.md:11: the branches make a cycle (step 1 -> step 1)" in err, err
    big = tmp_path / "big.md"
    big.write_text(SHORT + "\n" + "x" * (1 << 20))
    assert main(["runbook", "run", str(big), "--target", env.target, "--dry-run"]) == 1
    assert "a runbook is at most 1024 KiB" in capsys.readouterr().err


def test_json_run_prints_one_object_and_journals_the_reason(
    env: OrchEnv, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """`runbook run --json`: the children's output and the run's own lines go to stderr, stdout
    is one object saying how the run ended and how to resume it; --reason is journaled."""
    book = tmp_path / "short.md"
    book.write_text(SHORT.replace("  # expect exit 1", ""))
    code = main(
        [
            "runbook",
            "run",
            str(book),
            "--target",
            env.target,
            "--from",
            "2",
            "--json",
            "--reason",
            "drill 42",
        ]
    )
    out, err = capfd.readouterr()
    assert code == 2, out + err
    doc = json.loads(out)  # the whole of stdout is one document
    assert doc["exit"] == 2 and "step 2 of runbook short failed" in doc["error"]
    assert [r["exit"] for r in doc["ran"]] == [1] and doc["run"]
    assert doc["resume"] == (
        f"dsv4ops runbook run {book} --target {env.target} --resume {doc['run']}"
    )
    assert "no-such-profile" in err and "$ dsv4ops profile validate" in err
    assert main(["journal", "--json", "--target", env.target]) == 0
    run = json.loads(capfd.readouterr().out)["entries"][-1]
    assert run["id"] == doc["run"] and "drill 42" in json.dumps(run), run


def test_a_resumed_run_journals_its_own_reason(
    env: OrchEnv, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """`runbook run --resume RUN --reason WHY` journals WHY with that resume, as a fresh run
    journals its own; `journal --json` lists each resume of the run with who and why."""
    book = tmp_path / "short.md"
    book.write_text(SHORT.replace("  # expect exit 1", ""))
    first = ["runbook", "run", str(book), "--target", env.target, "--from", "2"]
    assert main([*first, "--json", "--reason", "drill 42"]) == 2
    run_id = json.loads(capfd.readouterr().out)["run"]
    resume = ["runbook", "run", str(book), "--target", env.target, "--resume", run_id, "--yes"]
    assert main([*resume, "--json", "--reason", "second look"]) == 2  # step 2 fails again
    assert json.loads(capfd.readouterr().out)["run"] == run_id
    assert main(["journal", "--json", "--target", env.target]) == 0
    (run,) = [e for e in json.loads(capfd.readouterr().out)["entries"] if e["id"] == run_id]
    assert "drill 42" in run["reason"]
    assert [r["reason"] for r in run["resumes"]] == ["second look"], run
    assert run["resumes"][0]["who"]


def test_show_and_a_dry_run_print_the_runbook_file_escaped(
    env: OrchEnv, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A runbook file's text (its title, a step's) with an ESC or BEL in it is shown escaped."""
    book = tmp_path / "hostile.md"
    book.write_text(SHORT.replace("1. Look:", f"1. Look{EVIL}:"))
    for args in (["show", str(book)], ["run", str(book), "--target", env.target, "--dry-run"]):
        code = main(["runbook", *args])
        both = printable(capsys)
        assert code == 0, both
        assert f"Look{SHOWN}" in both, both


HELD = """\
# Held

**When.** a test.

1. Decide: go on?
   ```step
   kind: confirm
   question: Go on?
   ```
2. Verify: a wait nobody meets here (nothing is deployed).
   ```step
   kind: wait
   until: status healthy
   timeout: 60
   ```
"""


def test_a_run_being_resumed_by_a_live_process_is_not_resumed_again(
    env: OrchEnv, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A second `--resume` of a run another process is resuming (here waiting in step 2) stops
    before anything runs, naming who holds it; it claims nothing."""
    book = tmp_path / "held.md"
    book.write_text(HELD)
    assert main(["runbook", "run", str(book), "--target", env.target, "--json"]) == 1
    run_id = json.loads(capfd.readouterr().out)["run"]  # not interactive: stopped at step 1
    resume = ["runbook", "run", str(book), "--target", env.target, "--resume", run_id, "--yes"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "dsv4ops", *resume],
        env=dict(os.environ),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        head = read_until(proc, "(at most 60 s)")  # it claimed the run and waits in step 2
        assert f"resuming run {run_id}" in head, head
        assert main(resume) == 1
        out, err = capfd.readouterr()
        assert f"run {run_id} is being resumed by " in err, out + err
        assert "nothing ran" in err and "resuming run" not in out, out + err
        assert proc.poll() is None  # the first resume goes on
        assert len(fold_run(Journal(env.target).get(run_id)).claims) == 1
    finally:
        proc.kill()
        proc.communicate(timeout=30)


def test_an_empty_resume_id_and_a_resumed_dry_run_are_refused_before_anything_runs(
    env: OrchEnv, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """`--resume ""` is a resume without an id (it started a new run from step 1); `--resume R
    --dry-run` says which flags a resume takes (it said the journal was missing)."""
    book = tmp_path / "short.md"
    book.write_text(SHORT)
    base = ["runbook", "run", str(book), "--target", env.target]
    assert main([*base, "--resume", ""]) == 1
    out, err = capfd.readouterr()
    assert "--resume takes a run id; it was given an empty one" in err, out + err
    assert "$ dsv4ops" not in out and "journaled as run" not in out, out
    assert main(["journal", "--json", "--target", env.target]) == 0
    entries = json.loads(capfd.readouterr().out)["entries"]
    assert not [e for e in entries if e["kind"] == "runbook"], entries
    for flag in (["--dry-run"], ["--from", "2"]):
        assert main([*base, "--resume", "r-1", *flag]) == 1
        out, err = capfd.readouterr()
        assert "--resume continues a run as recorded: no --from, --rehearse or --dry-run" in err
        assert "$ dsv4ops" not in out, out


def test_the_printed_resume_command_runs_the_same_runbook_file(
    env: OrchEnv,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A runbook run from a file (not a name under runbooks/), in a directory whose name has a
    space and a `$`: the resume command it prints, and the one `journal` names, are pasteable
    (the path as given, shell-quoted) and resume that run; a runbook run by name is named."""
    folder = tmp_path / "on call $USER"
    folder.mkdir()
    book = folder / "d.md"
    book.write_text(SHORT.replace("  # expect exit 1", ""))  # step 2 fails
    assert main(["runbook", "run", str(book), "--target", env.target, "--from", "2"]) == 2
    _, err = capfd.readouterr()
    hint = err.split("once handled, resume with `", 1)[1].split("`", 1)[0]
    assert main(["journal", "--json", "--target", env.target]) == 0
    run = json.loads(capfd.readouterr().out)["entries"][-1]
    close = f"dsv4ops runbook abandon {run['id']} --target {env.target}"
    assert run["next"] == f"resume with `{hint}` (or close it: `{close}`)", run
    argv = shlex.split(hint)  # as a shell reads what the operator pastes
    assert argv[:4] == ["dsv4ops", "runbook", "run", str(book)], argv
    assert main([*argv[1:], "--yes"]) == 2  # step 2 fails again: it resumed the run
    out, _ = capfd.readouterr()
    assert f"resuming run {run['id']} of d on {env.target} at step 2" in out, out

    # by name: the name, which finds the file from anywhere
    monkeypatch.setenv("DSV4OPS_RUNBOOKS_DIR", str(folder))
    assert main(["runbook", "run", "d", "--target", env.target, "--from", "2", "--json"]) == 2
    doc = json.loads(capfd.readouterr().out)
    assert doc["resume"] == f"dsv4ops runbook run d --target {env.target} --resume {doc['run']}"


STOPS = """\
# Stops

**When.** a test.

1. Stop: with a reason that reads like a flag.
   ```dsv4ops
   dsv4ops stop --target {target} --yes -m --dry-run
   ```
"""


def test_a_dry_run_flag_that_is_an_options_value_still_asks_first(
    env: OrchEnv, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """`stop -m --dry-run` stops (click reads "--dry-run" as the reason): `runbook show` marks it
    as asking first and a run without a person to ask refuses it; a --var value that swallows a
    dry run's flag, or names another target, is refused before anything runs."""
    book = tmp_path / "stops.md"
    book.write_text(STOPS)
    assert main(["runbook", "show", str(book), "--json"]) == 0
    doc = json.loads(capfd.readouterr().out)
    assert doc["steps"][0]["commands"][0]["mutating"] is True, doc
    assert main(["runbook", "show", str(book)]) == 0
    assert "<- asks first" in capfd.readouterr().out
    assert main(["runbook", "run", str(book), "--target", env.target]) == 1
    out, err = capfd.readouterr()
    assert "$ dsv4ops stop" not in out and "not interactive" in out + err, out + err

    book.write_text(STOPS.replace("--yes -m --dry-run", "{why} --dry-run"))
    args = ["runbook", "run", str(book), "--target", env.target]
    assert main([*args, "--var", "why=-m"]) == 1
    out, err = capfd.readouterr()
    assert "would change the target" in err and "$ dsv4ops stop" not in out, out + err
    book.write_text(STOPS.replace("--yes -m --dry-run", "--dry-run {opt}"))
    assert main([*args, "--var", "opt=--target=elsewhere"]) == 1
    out, err = capfd.readouterr()
    assert "goes to target 'elsewhere'" in err and "$ dsv4ops stop" not in out, out + err


def test_a_placeholder_for_the_command_itself_is_refused_at_parse_time(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """`dsv4ops twin {verb} wedge` would pick at run time a command `runbook show` cannot
    classify (with verb=hazard: a mutating one, never asked): refused, naming file:line."""
    book = tmp_path / "verb.md"
    for command in ("dsv4ops twin {verb} wedge --yes", "dsv4ops {verb} --target {target}"):
        book.write_text(STOPS.replace("dsv4ops stop --target {target} --yes -m --dry-run", command))
        assert main(["runbook", "show", str(book)]) == 1
        err = capfd.readouterr().err
        assert f"{book}:7: '{{verb}}' picks the command at run time" in err, err


def test_one_bad_file_does_not_hide_the_other_runbooks(
    env: OrchEnv,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`runbook list` with an empty .md, a broken link and a directory named x.md beside a good
    runbook: the good one is listed, each bad one named with why, and the list exits 1."""
    books = tmp_path / "books"
    books.mkdir()
    (books / "good.md").write_text(SHORT)
    (books / "empty.md").write_text("")
    (books / "dangling.md").symlink_to(books / "nowhere.md")
    (books / "folder.md").mkdir()
    monkeypatch.setenv("DSV4OPS_RUNBOOKS_DIR", str(books))
    assert main(["runbook", "list"]) == 1
    out, err = capfd.readouterr()
    assert "good" in out and "Short check" in out, out + err
    for bad in ("empty", "dangling", "folder"):
        assert "invalid: " in err and str(books / f"{bad}.md") in err, err
        assert bad not in out, out
    assert "dangling.md: it is a broken link" in err and "folder.md: it is a directory" in err
    assert "3 of 4 runbook files are invalid" in err, err
    assert main(["runbook", "list", "--json"]) == 1
    rows = {r["name"]: r for r in json.loads(capfd.readouterr().out)}
    assert rows["good"]["error"] is None and rows["good"]["steps"] == 2, rows
    assert all(rows[b]["error"] for b in ("empty", "dangling", "folder")), rows
