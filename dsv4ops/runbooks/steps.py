"""One runbook step, by kind: run its commands, wait for its conditions, collect diagnostics,
ask its confirmation, or wait for a person; journal its start (with the preconditions) and its
end (outcome, next step); follow its branch."""

from __future__ import annotations

from typing import NotRequired, TypedDict

from dsv4ops.clock import utc_now_iso
from dsv4ops.runbooks.model import Command, Step, join
from dsv4ops.runbooks.runlog import REHEARSE, STEP_PREFIX
from dsv4ops.runbooks.session import (
    Progress,
    Ran,
    RunbookFailed,
    RunbookStopped,
    Session,
    before,
    command_env,
    resume_hint,
)


class Answer(TypedDict):
    """A person's answer to a confirmation, with who, when and how (None of them: refused,
    since nobody could answer)."""

    answer: bool
    by: NotRequired[str]
    at: NotRequired[str]
    how: NotRequired[str]  # "--yes" or "prompt"
    refused: NotRequired[bool]


class StepEnd(TypedDict, total=False):
    """What a step's action says of its end, journaled with the step (RunLog.end): a line for
    the history (`said`), an outcome other than ok/failed, whether the run stops there, and
    what the action has to show (its confirmation, a command's exit, a wait's detail, a
    diagnostics bundle, who did a manual step and when)."""

    said: str
    outcome: str
    stopped: bool
    confirmation: Answer
    exit: int
    detail: str
    bundle: str
    by: str
    at: str


def rehearse(s: Session, p: Progress) -> None:
    """The `## Rehearse` commands: reproduce the incident on the twin."""
    s.echo("== rehearse: reproduce the incident on the twin")
    if any(c.mutating for c in s.runbook.rehearse) and not (s.yes or s.dry_run):
        answer = _ask(s, f"rehearse changes {s.target}: run it?")
        if not answer["answer"]:
            why = "not interactive (pass --yes)" if answer.get("refused") else "not confirmed"
            raise RunbookStopped(f"stopped at rehearse: {why}; nothing ran.")
    _open(s, p, REHEARSE, snapshot=False)
    ok, code, shown = _commands(s, p, REHEARSE, list(s.runbook.rehearse))
    _close(s, p, ok, outcome="ok" if ok else "failed")
    if not ok:
        raise RunbookFailed(
            f"the rehearsal setup of runbook {s.runbook.name} failed: `{shown}` exited {code}.\n"
            + before(p.history, s.target),
            hint=resume_hint(s, p, None),
        )


def step(s: Session, p: Progress, st: Step) -> Step | None:
    """Run one step; return the step to run next (None: the run is over)."""
    where = f"{STEP_PREFIX}{st.number}"
    _announce(s, where, st)
    _open(s, p, where, snapshot=True)
    ok, info = _ACTIONS[st.action](s, p, st, where)
    branch = st.if_ok if ok else st.if_failed
    nxt = s.runbook.after(st, branch)
    branched = not ok and bool(st.if_failed)
    _close(
        s,
        p,
        ok,
        outcome="ok" if ok else info.pop("outcome", "failed"),
        next=nxt.number if nxt else None,
        branched=branched,
        **info,
    )
    if ok or branched:
        if st.action != "run" or not ok:
            p.history.append(f"{where}: {info.get('said', 'ok' if ok else 'failed')}")
        if branch:
            s.echo(f"   -> {'step ' + str(nxt.number) if nxt else 'end of the runbook'}")
        return nxt
    if info.get("stopped"):
        raise RunbookStopped(
            f"stopped at {where}: {info['said']}.\n" + before(p.history, s.target),
            hint=resume_hint(s, p, st),
        )
    raise RunbookFailed(
        f"{where} of runbook {s.runbook.name} {info.get('said', 'failed')}.\n"
        + before(p.history, s.target),
        hint=resume_hint(s, p, st),
    )


def close_open_step(s: Session, p: Progress, outcome: str) -> None:
    """Journal the end of a step cut short (Ctrl-C), so a resume knows it did not finish."""
    if p.open_step is not None and p.log is not None:
        _close(s, p, False, outcome=outcome)


def _open(s: Session, p: Progress, where: str, *, snapshot: bool) -> None:
    if s.dry_run or p.log is None:
        return
    pre = s.world.snapshot() if snapshot and s.world is not None else None
    p.log.start(where, pre)
    p.open_step = where
    p.opened_at = s.clock.monotonic()


def _close(s: Session, p: Progress, ok: bool, **detail: object) -> None:
    if p.open_step is None or p.log is None:
        return
    where, p.open_step = p.open_step, None
    p.log.end(where, ok, s.clock.monotonic() - p.opened_at, **detail)


def _announce(s: Session, where: str, st: Step) -> None:
    flag = " [changes the target: asks first]" if st.needs_confirmation else ""
    kind = "" if st.action == "run" else f" ({st.action})"
    repeat = "" if st.safe_to_repeat else " [not safe to repeat]"
    s.echo(f"== {where}: {st.title}{flag}{kind}{repeat}")
    for line in st.text.splitlines():
        s.echo(f"   {line}" if line else "")


def _commands(
    s: Session, p: Progress, where: str, commands: list[Command]
) -> tuple[bool, int, str]:
    """Run commands in order; stop at the first unexpected exit: (ok, its code, its text)."""
    for cmd in commands:
        argv = cmd.resolve(p.values)
        shown = join(argv)
        s.echo(f"$ {shown}" + (f"  # expect exit {cmd.expect_text()}" if cmd.expect != {0} else ""))
        if s.dry_run:
            p.would_run += 1
            continue
        code = s.execute(argv, command_env(s, p))
        p.ran.append(Ran(where, shown, code))
        if code not in cmd.expect:
            return False, code, shown
        p.history.append(f"{where}: `{shown}` exited {code} as expected")
    return True, 0, ""


def _ask(s: Session, question: str) -> Answer:
    """A person's answer with who and when; --yes answers yes. A run nobody can answer is
    refused rather than guessed."""
    if s.yes:
        return {"answer": True, "by": s.who(), "at": utc_now_iso(s.clock), "how": "--yes"}
    if not s.interactive:
        return {"answer": False, "refused": True}
    answer = s.confirm(question)
    return {"answer": bool(answer), "by": s.who(), "at": utc_now_iso(s.clock), "how": "prompt"}


def _refusal(where: str) -> StepEnd:
    return {
        "outcome": "refused",
        "stopped": True,
        "said": "it needs a confirmation and this run is not interactive; nothing after it "
        "ran (pass --yes to answer yes)",
    }


def _run(s: Session, p: Progress, st: Step, where: str) -> tuple[bool, StepEnd]:
    info: StepEnd = {}
    if st.needs_confirmation and not s.dry_run:
        answer = _ask(s, f"{where} changes {s.target}: run it?")
        if answer.get("refused"):
            return False, _refusal(where)
        info["confirmation"] = answer
        if not answer["answer"]:
            return False, {
                **info,
                "outcome": "declined",
                "stopped": True,
                "said": "not confirmed; nothing after it ran",
            }
    ok, code, shown = _commands(s, p, where, list(st.commands))
    if ok:
        return True, {**info, "said": f"{len(st.commands)} command(s) as expected"}
    cmd = next(c for c in st.commands if join(c.resolve(p.values)) == shown)
    return False, {
        **info,
        "exit": code,
        "said": f"failed: `{shown}` exited {code}, expected {cmd.expect_text()}",
    }


def _wait(s: Session, p: Progress, st: Step, where: str) -> tuple[bool, StepEnd]:
    for c in st.conditions:
        s.echo(f"   until {c.text}")
    s.echo(f"   (at most {st.timeout_s:g} s)")
    if s.dry_run or s.world is None:
        return True, {"said": "dry run"}
    ok, detail = s.world.wait(st.conditions, st.timeout_s)
    s.echo(f"   {detail}")
    return ok, {"detail": detail, "said": detail if ok else f"timed out: {detail}"}


def _diagnostics(s: Session, p: Progress, st: Step, where: str) -> tuple[bool, StepEnd]:
    if s.dry_run or s.world is None:
        s.echo("   (would collect the diagnostics bundle)")
        return True, {"said": "dry run"}
    bundle = s.world.diagnostics(p.run_id or "no-run", st.max_bytes)
    s.echo(f"   diagnostics bundle: {bundle}")
    return True, {"bundle": bundle, "said": f"diagnostics in {bundle}"}


def _confirm(s: Session, p: Progress, st: Step, where: str) -> tuple[bool, StepEnd]:
    s.echo(f"   ? {st.question}")
    if s.dry_run:
        return True, {"said": "dry run"}
    answer = _ask(s, st.question)
    if answer.get("refused"):
        return False, _refusal(where)
    said = f"{'yes' if answer['answer'] else 'no'} from {answer['by']} at {answer['at']}"
    s.echo(f"   answered {said}")
    if answer["answer"]:
        return True, {"confirmation": answer, "said": f"confirmed: {said}"}
    return False, {
        "confirmation": answer,
        "outcome": "declined",
        "stopped": not st.if_failed,
        "said": f"answered no ({said})",
    }


def _manual(s: Session, p: Progress, st: Step, where: str) -> tuple[bool, StepEnd]:
    if s.dry_run:
        return True, {"said": "manual"}
    if s.yes or not s.interactive:
        s.echo(
            f"   ({where} is manual; {'--yes given' if s.yes else 'not interactive'}, not waiting)"
        )
        return True, {"said": "manual (not waited for)"}
    s.pause(f"{where} is manual: press Enter when it is done (Ctrl-C stops the runbook)")
    return True, {"said": "manual", "by": s.who(), "at": utc_now_iso(s.clock)}


_ACTIONS = {
    "run": _run,
    "wait": _wait,
    "diagnostics": _diagnostics,
    "confirm": _confirm,
    "manual": _manual,
}
