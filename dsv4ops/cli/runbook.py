"""`dsv4ops runbook list|show|run|abandon`: the incident procedures under runbooks/, read or
executed, and a stopped run closed.

`run` exits 0 when every step met its expectation, 2 when a step did not (the runbook stops
there; `--resume RUN_ID` continues it), 1 for an unknown runbook, a bad file, a declined or
refused confirmation or a refused resume, 130 on Ctrl-C. It takes the flags every mutating
command takes (cli/_output.py); with `--json` its own lines and its children's output go to
stderr and stdout carries one object: the run, what ran, and how it ended.

`abandon RUN_ID` closes a stopped run that will not be resumed (exit 0), changing nothing on the
target; 1 when it is not an open run of that target, a live process holds it, or it was not
confirmed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from dsv4ops.cli._output import (
    NAMED,
    dry_run_option,
    echo_json,
    echo_lines,
    json_option,
    reason_option,
    table,
    target_option,
    terminal_safe,
    yes_option,
)
from dsv4ops.errors import DsOpsError

if TYPE_CHECKING:
    from dsv4ops.usecases.runbook import Runbook


def _verbs() -> set[str]:
    from dsv4ops.cli import COMMANDS

    return set(COMMANDS) - {"runbook"}


def _load(ref: str) -> Runbook:
    from dsv4ops.usecases.runbook import load_book

    return load_book(ref, _verbs())


@click.group()
def runbook() -> None:
    """Incident procedures a person reads and dsv4ops runs (NAME under runbooks/, or a .md path)."""


@runbook.command("list")
@json_option
def list_cmd(as_json: bool) -> None:
    """Every runbook: name, title, symptom."""
    from dsv4ops.usecases.runbook import runbook_rows

    rows = runbook_rows(_verbs())
    bad = [r for r in rows if r["error"]]
    if as_json:
        echo_json(rows)
    else:
        click.echo(
            table(
                ([r["name"], r["title"], _short(r["symptom"])] for r in rows if not r["error"]),
                ["name", "title", "symptom"],
            )
        )
        for r in bad:  # the file's own words may be in it: terminal-safe
            echo_lines([f"invalid: {r['error']}"], err=True)
    if bad:
        raise DsOpsError(
            f"{len(bad)} of {len(rows)} runbook files are invalid (listed above)",
            hint="fix or remove each file named; the others are listed",
        )


def _short(text: str, width: int = 70) -> str:
    return text if len(text) <= width else text[: width - 3].rstrip() + "..."


@runbook.command("show")
@click.argument("name")
@json_option
def show_cmd(name: str, as_json: bool) -> None:
    """The readable checklist: each step's text, what it does, and which ones ask first."""
    from dsv4ops.usecases.runbook import checklist_lines

    b = _load(name)
    if as_json:
        echo_json(b.to_json())
        return
    echo_lines(checklist_lines(b))  # the runbook file's text: terminal-safe


@runbook.command("run")
@click.argument("name")
@target_option
@yes_option  # also: a manual step is not waited at (the answer is recorded as --yes)
@dry_run_option
@reason_option
@json_option
@click.option(
    "--rehearse",
    is_flag=True,
    help="First run the runbook's Rehearse setup (twin targets only) to reproduce the incident.",
)
@click.option(
    "--from",
    "start",
    type=click.IntRange(min=0),
    default=None,
    metavar="STEP",
    help="Start at this step number (a new run).",
)
@click.option(
    "--resume",
    "resume",
    default=None,
    metavar="RUN_ID",
    help="Continue a journaled run where it stopped, once its preconditions are re-checked.",
)
@click.option(
    "--var",
    "variables",
    multiple=True,
    metavar="NAME=VALUE",
    help="Value for a {NAME} placeholder (repeatable).",
)
def run_cmd(
    name: str,
    target: str | None,
    yes: bool,
    dry_run: bool,
    rehearse: bool,
    start: int | None,
    resume: str | None,
    variables: tuple[str, ...],
    reason: str | None,
    as_json: bool,
) -> None:
    """Run NAME's steps against --target, journaled; stop at the first unexpected outcome.

    --yes answers yes to every confirmation and does not wait at manual steps."""
    import sys

    from dsv4ops.cli._context import open_target, progress_printer
    from dsv4ops.usecases.runbook import run_runbook, run_target

    b = _load(name)
    target, known = run_target(target, rehearse=rehearse)
    if not rehearse and not known:
        raise click.BadParameter(f"unknown target {target!r}", param_hint="--target")
    if rehearse and not b.rehearse:
        raise click.UsageError(f"runbook {terminal_safe(b.name)} has no '## Rehearse' section")
    ctx = None if dry_run else open_target(target, verb="runbook run")
    try:
        run_runbook(
            b,
            target,
            ctx,
            echo=progress_printer(as_json),
            confirm=_confirm,
            pause=_pause,
            variables=_parse_vars(variables),
            yes=yes,
            dry_run=dry_run,
            rehearse=rehearse,
            start=start,
            resume=resume,
            interactive=sys.stdin.isatty(),
            reason=reason,
            report=echo_json if as_json else None,
        )
    finally:
        if ctx is not None:
            ctx.close()


def _confirm(question: str) -> bool:
    """y/N; Ctrl-C at the prompt is Ctrl-C for the runbook (summary and resume command)."""
    try:
        # on stderr: under --json stdout carries only the run's object
        # the question is the runbook file's text: terminal-safe
        return bool(click.confirm(terminal_safe(question), default=False, err=True))
    except click.Abort:
        raise KeyboardInterrupt from None


def _parse_vars(pairs: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for p in pairs:
        key, sep, value = p.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{p!r} is not NAME=VALUE", param_hint="--var")
        if key == "target":
            raise click.BadParameter("{target} comes from --target", param_hint="--var")
        out[key] = value
    return out


def _pause(msg: str) -> None:
    """Wait for Enter (what was typed is not used); Ctrl-C stops the runbook."""
    try:
        click.prompt(
            terminal_safe(msg), default="", show_default=False, prompt_suffix=" ", err=True
        )
    except click.Abort:
        raise KeyboardInterrupt from None


@runbook.command("abandon")
@click.argument("run_id", metavar="RUN_ID", type=NAMED)
@target_option
@yes_option
@dry_run_option
@reason_option
@json_option
def abandon_cmd(
    run_id: str, target: str | None, yes: bool, dry_run: bool, reason: str | None, as_json: bool
) -> None:
    """Close a stopped run that will not be resumed: `status` stops listing it, and
    `--resume` refuses it. Nothing on the target changes; what its steps did stays done."""
    import sys

    from dsv4ops.cli._context import open_target
    from dsv4ops.usecases.runbook import abandon_run

    session = open_target(target, verb="runbook abandon")
    try:
        out = abandon_run(
            session,
            run_id,
            reason=reason,
            confirm=_ask,
            interactive=sys.stdin.isatty(),
            yes=yes,
            dry_run=dry_run,
        )
    finally:
        session.close()
    if as_json:
        echo_json(out.to_json())
        return
    if out.dry_run:
        echo_lines(
            [
                f"would abandon run {out.run} of {out.runbook} on {out.target} (stopped at "
                f"{out.stopped_at}, {out.was}); dry run: nothing changed"
            ]
        )
        return
    echo_lines(
        [
            f"run {out.run} of {out.runbook} on {out.target}: ABANDONED "
            f"(it had stopped at {out.stopped_at}, {out.was})",
            "nothing on the target changed; what its steps did stays done "
            f"({out.shown_by} shows them)",
        ]
    )


def _ask(question: str) -> bool:
    """y/N on stderr; Ctrl-C or end of input at the prompt is a no."""
    try:
        return bool(click.confirm(terminal_safe(question), default=False, err=True))
    except click.Abort:
        return False
