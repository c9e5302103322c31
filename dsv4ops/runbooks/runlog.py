"""A runbook run as a journal operation of its own (kind `runbook`), through the Journal API only.

The run's `begin` record carries the runbook's name in `reason`; its first step record, `run`,
carries what was asked (runbook, path, target, variables) as JSON in `detail`. Each runbook step
is a journal step named `step N`: `start` with the preconditions snapshot, then `done` or
`failed` with the outcome, the next step and, for a confirmation, who answered and when. A run is
RUNNING while its process runs it; a failure, a refusal or Ctrl-C end it INTERRUPTED (with the
`--resume RUN_ID` command that continues it); it ends SUCCEEDED. A killed process cannot say so:
the header records the process that owns the run (pid, start ticks, boot id, host, as the deploy
lock's holder does), and `run_state` reads a RUNNING run whose owner is gone as INTERRUPTED, so
nothing is shown RUNNING after its process ended.
"""

from __future__ import annotations

import json
import secrets
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypedDict

from dsv4ops.errors import DsOpsError, JournalError
from dsv4ops.journal.commands import command
from dsv4ops.journal.records import Kind, Operation, Status
from dsv4ops.journal.store import Journal
from dsv4ops.jsontypes import JSONObject
from dsv4ops.remote.procident import dead_here, identity
from dsv4ops.runbooks.catalogue import run_command
from dsv4ops.runbooks.model import RunbookError
from dsv4ops.runbooks.preconditions import Snapshot
from dsv4ops.whoami import local_host


class Resume(TypedDict):
    """A resume of a run: who resumed it and why (None: no reason given)."""

    who: str | None
    reason: str | None


class RunbookStopped(DsOpsError):
    """A confirmation was declined or could not be asked; nothing after it ran (exit 1)."""


STEP_PREFIX = "step "
REHEARSE = "rehearse"
HEADER = "run"


@dataclass(frozen=True)
class Holder:
    """The process a run's begin, or a resume's claim, names as the run's owner."""

    who: str
    owner: dict[str, object]
    releases: bool  # it writes a release when it stops (records from before that do not)
    claim: str | None = None  # the claim's token; None: the run's own begin

    @property
    def key(self) -> str:
        """What a claim that takes the run over from this holder names (`over`)."""
        return self.claim or "begin"


@dataclass
class RunRecord:
    """What the journal says about one run, folded for --resume."""

    op: str
    runbook: str
    target: str
    variables: dict[str, str]
    status: Status
    done: dict[int, JSONObject] = field(default_factory=dict)  # step -> end detail
    started: dict[int, JSONObject] = field(default_factory=dict)  # step -> start detail
    in_flight: int | None = None  # started, never ended (a killed run)
    last: int | None = None  # the last step that ended
    rehearsed: bool = False
    owner: dict[str, object] = field(default_factory=dict)  # the process running it (last header)
    path: str = ""  # the runbook's path as the run was given it
    digest: str = ""  # the runbook text's sha256 when the run began ("" before it was recorded)
    step_digests: dict[str, str] = field(default_factory=dict)
    header_records: int = 0  # `run` records so far (each resume adds one)
    claims: list[JSONObject] = field(default_factory=list)  # each resume's claim, in order
    holder: Holder | None = None  # who took the run last (None: released)
    held: bool = False  # the holder's process holds it still: a resume refuses

    @property
    def resume_at(self) -> int | str | None:
        """The step to continue with: the one in flight, the one after the last ok step (its
        recorded `next`, "end" when it ended the run), or the one that failed (None: from the
        start)."""
        if self.in_flight is not None:
            return self.in_flight
        if self.last is None:
            return None
        end = self.done[self.last]
        if end.get("outcome") == "ok" or end.get("branched"):
            nxt = end.get("next")
            return "end" if nxt is None else int(nxt)
        return self.last

    def preconditions(self) -> JSONObject | None:
        """The snapshot recorded when the step to resume (or the last one) started."""
        at = self.resume_at
        for n in (at, self.last):
            if isinstance(n, int) and n in self.started:
                snap = self.started[n].get("preconditions")
                if isinstance(snap, dict):
                    return snap
        return None


class RunLog:
    """Writes one run's records; `load` reads one back."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.op = ""

    def begin(
        self,
        runbook: str,
        path: str,
        target: str,
        variables: dict[str, str],
        *,
        digest: str = "",
        step_digests: dict[str, str] | None = None,
        reason: str | None = None,
    ) -> str:
        # `runbook NAME`, then the operator's --reason after ": " (status reads the name back)
        why = f"runbook {runbook}" + (f": {reason}" if reason else "")
        self.op = self.journal.begin(Kind.RUNBOOK, reason=why)
        self.journal.transition(self.op, Status.RUNNING)
        header = {
            "runbook": runbook,
            "path": path,
            "target": target,
            "variables": variables,
            "sha256": digest,
            "steps": step_digests or {},
            "owner": owner(),
            "releases": True,  # this owner writes a release when it stops (see `fold_run`)
        }
        self.journal.step(self.op, HEADER, "done", detail=json.dumps(header, sort_keys=True))
        return self.op

    def reopen(
        self, rec: RunRecord, who: str, reason: str | None = None, *, over: str | None = None
    ) -> None:
        """Claim the run for this resume (`claim`), and move an INTERRUPTED run back to RUNNING.
        The claim carries the resume's --reason (`resumes` reads them back), as the run's begin
        carries its own."""
        self.claim(rec, who, reason, over=over, doing="resumed")
        if self.journal.get(rec.op).status is Status.INTERRUPTED:
            self.journal.transition(rec.op, Status.RUNNING)

    def claim(
        self,
        rec: RunRecord,
        who: str,
        reason: str | None = None,
        *,
        over: str | None = None,
        doing: str,
    ) -> None:
        """Take the run for this process (a resume, or an abandon: `doing`). The claim is
        appended, then the run is read back: the journal of record orders the appends, and a
        claim holds the run only when no earlier claim (or the run's own process) still held it
        when it was appended (`fold_run`). So of two claims racing, whichever read the run first,
        the one that reached the journal second gets RunbookStopped before it changes anything.
        The claim names this process as the run's owner. `over`: the holder (Holder.key) a
        person said is gone, on a machine where that cannot be checked: this claim takes the
        run from it."""
        claim = {
            "resumed": True,
            "after": rec.header_records,
            "claim": secrets.token_hex(8),
            "who": who,
            "owner": owner(),
            "releases": True,
        }
        if doing != "resumed":
            claim["doing"] = doing
        if reason:
            claim["reason"] = reason
        if over:
            claim["over"] = over
        self.journal.step(rec.op, HEADER, "done", detail=json.dumps(claim, sort_keys=True))
        now = fold_run(self.journal.get(rec.op))
        if now.holder is None or now.holder.claim != claim["claim"]:
            outcome = (
                "this resume did not start: nothing ran"
                if doing == "resumed"
                else f"it was not {doing}: nothing changed"
            )
            by = now.holder.who if now.holder else "another operator"
            raise RunbookStopped(
                # ended meanwhile: another's claim won and ended it (an abandon does at once)
                f"run {rec.op} ended {now.status.value} meanwhile, by {by}; {outcome}"
                if now.status.terminal
                else f"run {rec.op} is being resumed by {by} (their claim reached the journal "
                f"first); {outcome}",
                hint=f"follow it with {command('journal', self.journal.target)}; act on it only "
                "once it has stopped",
            )
        self.op = rec.op

    def stop(self, message: str) -> None:
        """The run stopped where `--resume` continues it (the message names the command)."""
        if not self.op:
            return
        # released before INTERRUPTED is written: a resume reading the run in between sees the
        # release, never an INTERRUPTED run whose live process still holds it
        self.journal.step(self.op, HEADER, "done", detail=json.dumps({"released": True}))
        if self.journal.get(self.op).status is Status.RUNNING:
            self.journal.transition(self.op, Status.INTERRUPTED, message=message)

    def start(self, where: str, preconditions: Snapshot | None) -> None:
        detail = json.dumps({"preconditions": preconditions}, sort_keys=True, default=str)
        self.journal.step(self.op, where, "start", detail=detail)

    def end(self, where: str, ok: bool, duration_s: float, **detail: object) -> None:
        self.journal.step(
            self.op,
            where,
            "done" if ok else "failed",
            duration_s=duration_s,
            detail=json.dumps(detail, sort_keys=True, default=str),
        )

    def finish(self, message: str) -> None:
        self.journal.transition(self.op, Status.SUCCEEDED, message=message)


def load(journal: Journal, run_id: str) -> RunRecord:
    """The run with this id (or unique prefix). Raises RunbookError when it is not a run."""
    try:
        op = journal.get(run_id)
    except JournalError as exc:
        raise RunbookError(
            str(exc), hint=f"{command('journal', journal.target)} lists the runs (kind runbook)"
        ) from None
    if op.kind is not Kind.RUNBOOK:
        raise RunbookError(f"journal entry {op.op} is a {op.kind.value}, not a runbook run")
    return fold_run(op)


def fold_run(op: Operation) -> RunRecord:
    header: JSONObject = {}
    rec = RunRecord(op.op, "", "", {}, op.status)
    for s in op.steps:
        detail = _json(s.detail)
        if s.name == HEADER:
            rec.header_records += 1
            _fold_header(rec, op, detail)
            if "runbook" in detail:
                header = detail
            continue
        if s.name == REHEARSE:
            rec.rehearsed = rec.rehearsed or s.phase == "done"
            continue
        if not s.name.startswith(STEP_PREFIX):
            continue
        n = int(s.name.removeprefix(STEP_PREFIX))
        if s.phase == "start":
            rec.started[n] = detail
            rec.in_flight = n
        else:
            rec.done[n] = detail
            rec.last = n
            rec.in_flight = None
    rec.held = rec.holder is not None and holds(rec.holder, op)
    rec.runbook = str(header.get("runbook", ""))
    rec.path = str(header.get("path", ""))
    rec.target = str(header.get("target", ""))
    rec.variables = {str(k): str(v) for k, v in (header.get("variables") or {}).items()}
    rec.digest = str(header.get("sha256") or "")
    steps = header.get("steps")
    rec.step_digests = {str(k): str(v) for k, v in steps.items()} if isinstance(steps, dict) else {}
    return rec


def _fold_header(rec: RunRecord, op: Operation, detail: Mapping[str, object]) -> None:
    """The run's begin holds it; a release lets it go; a claim takes it only when nobody holds
    it (a claim appended while another live process held the run lost, and holds nothing)."""
    if detail.get("released"):
        rec.holder = None
        return
    claim = bool(detail.get("resumed") and "claim" in detail)
    if claim:
        rec.claims.append(dict(detail))
    elif "runbook" not in detail:
        return
    # a run that ended takes no claim (a resume that read it open and claimed it after the
    # winner finished it must not run its steps again)
    if claim and rec.holder is not None:
        taken_over = detail.get("over") == rec.holder.key  # a person said its process is gone
        if op.status.terminal or (holds(rec.holder, op) and not taken_over):
            return
    who = detail.get("owner")
    rec.holder = Holder(
        who=str(detail.get("who") or op.user) if claim else op.user,
        owner=dict(who) if isinstance(who, dict) else {},
        releases=bool(detail.get("releases")),
        claim=str(detail["claim"]) if claim else None,
    )
    if rec.holder.owner:
        rec.owner = rec.holder.owner


def held_by(rec: RunRecord) -> tuple[str, str | None] | None:
    """Who holds the run, said once for every command that refuses a held run: ("run R is being
    resumed|run by WHO (pid P[ on HOST])", HOST when that process runs on another machine, where
    only that machine can tell it is gone, else None); None when no live process holds it."""
    if not rec.held or rec.holder is None:
        return None
    where = rec.holder.owner.get("host")
    elsewhere = str(where) if where and where != local_host() else None
    held = (
        f"run {rec.op} is being {'resumed' if rec.holder.claim else 'run'} by "
        f"{rec.holder.who or 'another operator'} (pid {rec.holder.owner.get('pid')}"
        + (f" on {elsewhere})" if elsewhere else ")")
    )
    return held, elsewhere


def holds(holder: Holder, op: Operation) -> bool:
    """Does the process a header or claim names still hold the run? Not once the run ended;
    not once its process is gone (judged on its own machine: another machine's is taken as
    alive). A record from before releases were written holds only a RUNNING run."""
    if op.status.terminal:
        return False
    if not holder.releases and op.status is not Status.RUNNING:
        return False
    return not dead_here(holder.owner) if holder.owner else op.status is Status.RUNNING


def resumes(op: Operation) -> list[Resume]:
    """Each resume of the run, in order: {"who", "reason"} (reason None when none was given)."""
    return [{"who": c.get("who"), "reason": c.get("reason")} for c in fold_run(op).claims]


def owner() -> dict[str, object]:
    """This process, as the run's owner: pid, start ticks, boot id and host (the deploy lock's
    holder identity, remote/procident.py), so liveness is judged by the process, not the pid."""
    import os

    return {"pid": os.getpid(), **identity(os.getpid()), "host": local_host()}


def run_state(op: Operation) -> tuple[str, str | None]:
    """(the run's true state, what to do): RUNNING only while its owner process lives. A
    RUNNING run whose owner is gone (killed; judged on the owner's machine, else "cannot tell")
    is INTERRUPTED. The note names the resume command for an open run."""
    rec = fold_run(op)
    resume = (
        f"{run_command(rec.runbook, rec.path, rec.target)} --resume {shlex.quote(op.op)}"
        if rec.runbook
        else None
    )
    # a run that will not be resumed is closed by `runbook abandon` (runbooks/abandon.py)
    close = f" (or close it: {command('runbook abandon', rec.target, op.op)})" if rec.target else ""
    if op.status is Status.RUNNING:
        if rec.owner and dead_here(rec.owner):
            return (
                Status.INTERRUPTED.value,
                f"its process (pid {rec.owner.get('pid')}) ended without ending the run; "
                f"resume with `{resume}`{close}",
            )
        where = rec.owner.get("host") if rec.owner else None
        mine = rec.owner and where == local_host()
        return Status.RUNNING.value, (
            None
            if mine
            else f"run by a process on {where or 'an unknown host'}; if it "
            f"is gone, resume with `{resume}`"
        )
    if op.status is Status.INTERRUPTED:
        return Status.INTERRUPTED.value, f"resume with `{resume}`{close}"
    return op.status.value, None


def _json(text: str | None) -> JSONObject:
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}
