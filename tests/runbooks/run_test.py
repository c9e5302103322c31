from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from dsv4ops.runbooks.parse import RunbookError, parse_runbook
from dsv4ops.runbooks.run import (
    RunbookFailed,
    RunbookStopped,
    Session,
    check_rehearsal_target,
    run,
)
from testing.runbooks import FakeExecutor, incident_present

BOOK = """\
# Wedge

1. Confirm: look.
   ```dsv4ops
   dsv4ops status --target {target}
   dsv4ops canary --target {target} --suite smoke  # expect exit 2
   ```
2. Check: by eye.
3. Recover: restart.
   ```dsv4ops
   dsv4ops rollback --target {target}
   ```
4. Prove: it.
   ```dsv4ops
   dsv4ops canary --target {target} --suite abort-cascade
   ```

## Rehearse
```dsv4ops
dsv4ops deploy overlap-on --target {target} --no-canary
```
"""


def session(
    ex: FakeExecutor, *, answers: Sequence[bool] = (True,), **kw: Any
) -> tuple[Session, list[str], list[str]]:
    out: list[str] = []
    asked: list[str] = []
    replies = list(answers)

    def confirm(q: str) -> bool:
        asked.append(q)
        return replies.pop(0)

    s = Session(
        runbook=parse_runbook(BOOK, path="wedge.md"),
        target="twin-test",
        execute=ex,
        confirm=confirm,
        pause=lambda msg: asked.append(msg),
        echo=out.append,
        **kw,
    )
    return s, out, asked


def test_runs_every_step_in_order_with_expectations() -> None:
    ex = FakeExecutor()
    s, out, asked = session(ex)
    ran = run(s)
    assert [c[1] for c in ex.calls] == ["status", "canary", "rollback", "canary"]
    assert ex.calls[2] == ["dsv4ops", "rollback", "--target", "twin-test", "--yes"]
    assert all(e == {"DSV4OPS_TARGET": "twin-test"} for e in ex.envs)
    assert [r.code for r in ran] == [0, 2, 0, 0]
    assert asked == [
        "step 2 is manual: press Enter when it is done (Ctrl-C stops the runbook)",
        "step 3 changes twin-test: run it?",
    ]
    assert out[-1] == "runbook wedge: every step met its expectation (4 command(s))"
    assert "$ dsv4ops canary --target twin-test --suite smoke  # expect exit 2" in out


def test_stops_at_first_unexpected_exit_and_says_what_happened() -> None:
    ex = FakeExecutor(lambda argv: 0)  # the smoke canary PASSes: not the incident
    s, out, asked = session(ex)
    with pytest.raises(RunbookFailed) as exc:
        run(s)
    assert exc.value.exit_code == 2
    assert [c[1] for c in ex.calls] == ["status", "canary"]  # nothing after the failure
    msg = str(exc.value)
    assert msg.startswith(
        "step 1 of runbook wedge failed: `dsv4ops canary --target twin-test --suite smoke` "
        "exited 0, expected 2.\n"
    )
    assert "Before it:\n  step 1: `dsv4ops status --target twin-test` exited 0 as expected\n" in msg
    assert "whatever state those commands left it: check `dsv4ops status --target twin-test`" in msg
    assert (
        exc.value.hint
        == "once handled, resume with `dsv4ops runbook run wedge.md --target twin-test --from 1`"
    )
    assert asked == []


def test_failure_later_lists_earlier_steps_including_manual() -> None:
    ex = FakeExecutor(lambda argv: 2 if argv[1] == "rollback" else incident_present(argv))
    s, _, _ = session(ex)
    with pytest.raises(RunbookFailed) as exc:
        run(s)
    msg = str(exc.value)
    assert (
        "step 3 of runbook wedge failed: `dsv4ops rollback --target twin-test --yes` exited 2"
        in msg
    )
    assert "step 2: manual" in msg and "--suite smoke` exited 2 as expected" in msg


def test_from_starts_at_that_step() -> None:
    ex = FakeExecutor()
    s, _, asked = session(ex, start=3)
    run(s)
    assert [c[1] for c in ex.calls] == ["rollback", "canary"]
    s, _, _ = session(FakeExecutor(), start=9)
    with pytest.raises(RunbookError, match="wedge has no step 9 .steps: 1, 2, 3, 4."):
        run(s)


def test_dry_run_runs_nothing_and_asks_nothing() -> None:
    ex = FakeExecutor()
    s, out, asked = session(ex, dry_run=True, rehearse=True)
    assert run(s) == []
    assert ex.calls == [] and asked == []
    assert "$ dsv4ops deploy overlap-on --target twin-test --no-canary --yes" in out
    assert "$ dsv4ops rollback --target twin-test --yes" in out
    assert out[-1] == "dry run: 5 command(s) would run"


def test_declined_confirmation_runs_nothing_after() -> None:
    ex = FakeExecutor()
    s, _, asked = session(ex, answers=[False])
    with pytest.raises(RunbookStopped) as exc:
        run(s)
    assert exc.value.exit_code == 1
    assert [c[1] for c in ex.calls] == ["status", "canary"]
    assert str(exc.value).startswith("stopped at step 3: not confirmed; nothing after it ran.")
    assert asked[-1] == "step 3 changes twin-test: run it?"


def test_yes_asks_nothing_and_does_not_wait() -> None:
    ex = FakeExecutor()
    s, out, asked = session(ex, yes=True)
    run(s)
    assert asked == [] and len(ex.calls) == 4
    assert "   (step 2 is manual; --yes given, not waiting)" in out


def test_rehearse_runs_setup_first_and_asks_for_it() -> None:
    ex = FakeExecutor()
    s, _, asked = session(ex, rehearse=True, answers=[True, True])
    run(s)
    assert ex.calls[0] == [
        "dsv4ops",
        "deploy",
        "overlap-on",
        "--target",
        "twin-test",
        "--no-canary",
        "--yes",
    ]
    assert asked[0] == "rehearse changes twin-test: run it?"


def test_missing_variable_stops_before_anything_runs() -> None:
    text = BOOK.replace(
        "dsv4ops rollback --target {target}", "dsv4ops deploy {profile} --target {target}"
    )
    ex = FakeExecutor()
    s, _, _ = session(ex)
    s.runbook = parse_runbook(text, path="wedge.md")
    with pytest.raises(RunbookError, match=r"no value for \{profile\}"):
        run(s)
    assert ex.calls == []


def test_interrupt_says_what_ran_and_propagates() -> None:
    def interrupted(argv: list[str]) -> int:
        if "smoke" in argv:
            raise KeyboardInterrupt
        return 0

    ex = FakeExecutor(interrupted)
    s, out, _ = session(ex)
    with pytest.raises(KeyboardInterrupt):
        run(s)
    assert out[-1].startswith(
        "interrupted.\nBefore it:\n  step 1: `dsv4ops status --target twin-test` exited 0"
    )


def test_rehearsal_only_on_twin_targets() -> None:
    launchers = {"box": "sglang", "twin-local": "twin"}
    check_rehearsal_target("twin-local", launchers)
    with pytest.raises(
        RunbookError, match="runs only on a twin target; 'box' has launcher 'sglang'"
    ):
        check_rehearsal_target("box", launchers)
    with pytest.raises(RunbookError, match="unknown target 'nope'"):
        check_rehearsal_target("nope", launchers)
