"""Output helpers shared by commands: JSON printing, tables (tabulate imported lazily) and the
terminal's safety: text that came from the network (a worker URL the router lists, a /metrics
body, an error a server sent) can hold ESC sequences or line breaks that rewrite the screen or
forge lines ("worker ... ok"). Every line a command prints in text mode goes through
`terminal_safe`, which shows each control character as its escape (`\x1b`, `\n`)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TypeVar

import click

from dsv4ops.errors import DsOpsError
from dsv4ops.plaintext import CONTROL, reason_problem

# A command function a click option decorates (returned as it came, with the option added).
FC = TypeVar("FC", bound=Callable[..., object])

# Whether this invocation printed its JSON document: the error boundary (cli/__init__.py) then
# adds no second object to stdout (the document says how it ended: `exit`, `error`).
PRINTED: list[bool] = []


def terminal_safe(text: str, *, keep_newlines: bool = False) -> str:
    """`text` as one printable line: every control character as its Python escape (with
    `keep_newlines`, a message's own line breaks stay)."""

    def escape(m: re.Match[str]) -> str:
        c = m.group()
        return c if keep_newlines and c == "\n" else c.encode("unicode_escape").decode("ascii")

    return CONTROL.sub(escape, text)


class Block(str):
    """A multi-line block built from already escaped cells (a table): printed as it is."""


def echo_lines(lines: Iterable[str], *, err: bool = False) -> None:
    """Print each line made terminal-safe (a Block keeps its own line breaks)."""
    for line in lines:
        click.echo(line if isinstance(line, Block) else terminal_safe(str(line)), err=err)


def echo_json(data: object) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))
    PRINTED.append(True)


def table(rows: Iterable[Sequence[object]], headers: Sequence[str]) -> str:
    """A table whose cells are terminal-safe (a cell with a line break stays one row)."""
    from tabulate import tabulate

    safe = [
        [c if c is None or isinstance(c, int | float) else terminal_safe(str(c)) for c in r]
        for r in rows
    ]
    return Block(tabulate(safe, headers=list(headers), tablefmt="simple"))


def output_option(what: str) -> Callable[[FC], FC]:
    """`-o/--output FILE` of a command that prints one document (`write_or_echo`)."""

    def deco(f: FC) -> FC:
        return click.option(
            "-o",
            "--output",
            "output",
            type=OutputPath(dir_okay=False, path_type=Path),
            default=None,
            help=f"Write {what} here (default: stdout).",
        )(f)

    return deco


# How much of an existing -o file is read for the mark of the command that wrote it.
MARK_WITHIN = 1024


def write_or_echo(text: str, output: Path | None, *, mark: str) -> bool:
    """`text` on stdout, or into `output` (an unwritable path is a clear error, never a
    traceback); True when it was written to the file. An existing file is replaced only when
    it is empty or was written by the same command: `mark` (what every output of the command
    holds near its start) within its first MARK_WITHIN characters. Anything else (a profile,
    the docs a table belongs in) is refused, nothing written: `-o` never eats a file by a slip."""
    if output is None:
        click.echo(text, nl=False)
        return False
    try:
        with output.open(encoding="utf-8", errors="replace") as f:
            head = f.read(MARK_WITHIN)
    except FileNotFoundError:
        head = ""
    except OSError:
        head = ""  # a directory or an unreadable path: the write below says why
    if head.strip() and mark not in head:
        raise DsOpsError(
            f"-o {output}: that file exists and was not written by this command (it lacks "
            f"{mark!r}); nothing was written",
            hint="give another path, or move that file away first if it is to be replaced",
        )
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise DsOpsError(f"-o {output}: cannot write: {exc.strerror or exc}") from None
    return True


def json_option(f: FC) -> FC:
    return click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")(f)


# The flags every mutating command takes, with one meaning everywhere (README; the list of
# mutating commands is tests/exitcodes_test.py's, which checks each takes them from here).
YES_HELP = "Do not ask for confirmation."
REASON_HELP = "Why (recorded in the journal; profile set: first in the commit message)."


def yes_option(f: FC) -> FC:
    return click.option("--yes", "-y", is_flag=True, help=YES_HELP)(f)


def reason_option(f: FC) -> FC:
    return click.option(
        "--reason", "-m", "reason", default=None, help=REASON_HELP, callback=_plain_reason
    )(f)


def _plain_reason(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """A reason is journaled and shown to the next operator: an escape sequence or a bidi
    override in it is refused here, for every verb, by the rule `profile set`'s commit applies
    too (plaintext.reason_problem; line breaks and tabs are text)."""
    problem = reason_problem(value) if value else None
    if problem is not None:
        raise click.BadParameter(problem)
    return value


def accept_inconclusive_option(f: FC) -> FC:
    """One meaning for deploy and ab: a deploy gate that cannot judge keeps the deployment,
    recorded as accepted (it ranks below a pass); without it an INCONCLUSIVE rolls back."""
    return click.option(
        "--accept-inconclusive-canary",
        "accept_inconclusive",
        is_flag=True,
        help="Keep the deployment when the canary cannot judge (INCONCLUSIVE); FAIL still rolls back.",
    )(f)


def dry_run_option(f: FC) -> FC:
    return click.option("--dry-run", is_flag=True, help="Print what it would do; change nothing.")(
        f
    )


def target_option(f: FC) -> FC:
    return click.option(
        "--target",
        "-t",
        "target",
        type=NAMED,
        default=None,
        envvar="DSV4OPS_TARGET",
        callback=env_not_empty,
        help="Target name from profiles/targets.yaml (default: twin-local).",
    )(f)


# A value that names something (a target, a profile, an image, a file) and is empty is a
# script's unset variable (`--target "$T"`), never a choice: it used to fall back to the default
# silently, so `stop --target "$T"` stopped the default target.
EMPTY = (
    "an empty value names nothing (an unset shell variable?); leave the option out for its default"
)


class Named(click.ParamType[str]):
    """Text that names something: refused when empty or only blanks."""

    name = "text"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> str:
        text = str(value)
        if not text.strip():
            # an argument has no default to fall back to: only the first half of the advice
            self.fail(
                EMPTY.split(";")[0] if isinstance(param, click.Argument) else EMPTY, param, ctx
            )
        return text


NAMED = Named()


class OutputPath(click.Path):
    """click.Path for a file to write, refusing an empty name (click made it ".", a directory,
    and the write then failed as "-o .: cannot write")."""

    def convert(  # type: ignore[override]  # click's stubs type `value` as the converted result
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> object:
        if isinstance(value, str) and not value.strip():
            self.fail(EMPTY, param, ctx)
        return super().convert(value, param, ctx)  # type: ignore[arg-type]


def env_not_empty(ctx: click.Context, param: click.Parameter, value: object) -> object:
    """click reads an environment variable set but empty as unset, so `DSV4OPS_TARGET=` fell
    back to the default target: refused, naming the variable."""
    var = getattr(param, "envvar", None)
    if value is None and isinstance(var, str) and os.environ.get(var) == "":
        raise click.BadParameter(
            f"{var} is set but empty; unset it for the default, or set it to a name",
            ctx=ctx,
            param=param,
        )
    return value
