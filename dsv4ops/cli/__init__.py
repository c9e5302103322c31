"""CLI composition root: the click group, lazy sub-command loading and the one error boundary.

Exit codes: one table for every command, `dsv4ops/exitcodes.py` (printed by `--help`): this
boundary maps what a command raised or returned onto it (DsOpsError: its `exit_code`; click's
usage errors: REFUSED; anything else: BUG; Ctrl-C: INTERRUPTED). With `--json`, an error is also
one JSON object on stdout (`error`, `hint`, `exit`), the human line staying on stderr.
Sub-command modules are imported only when used, so `dsv4ops --help` stays fast and never loads
fabric, aiohttp, torch or triton.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import signal
import sys
import threading
import traceback
import typing
from collections.abc import Iterator, Sequence
from types import FrameType

import click

from dsv4ops import __version__, exitcodes
from dsv4ops.constants import ENVIRONMENT, PROJECT_ENV
from dsv4ops.errors import DsOpsError, Terminated

# name -> (module, attribute, one-line help). Order is the order shown in --help.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "profile": (
        "dsv4ops.cli.profile",
        "profile",
        "Validate, render, diff and toggle deployment profiles.",
    ),
    "deploy": (
        "dsv4ops.cli.deploy",
        "deploy",
        "Deploy a profile: the PD pair and router as one unit.",
    ),
    "status": ("dsv4ops.cli.status", "status", "Show what runs on a target, its health and drift."),
    "rollback": (
        "dsv4ops.cli.rollback",
        "rollback",
        "Redeploy the last known-good (or a named) deployment.",
    ),
    "stop": (
        "dsv4ops.cli.stop",
        "stop",
        "Drain and stop router, decode and prefill, in that order.",
    ),
    "journal": ("dsv4ops.cli.journal", "journal", "List deployments, rollbacks and stops."),
    "canary": ("dsv4ops.cli.canary", "canary", "Run stress canaries and report verdicts."),
    "kernels": (
        "dsv4ops.cli.kernels",
        "kernels",
        "Build, verify, deploy and roll back kernel packages.",
    ),
    "runbook": (
        "dsv4ops.cli.runbook",
        "runbook",
        "List, show and run incident runbooks (rehearse on the twin).",
    ),
    "monitoring": (
        "dsv4ops.cli.monitoring",
        "monitoring",
        "Render Prometheus alert rules and scrape configs.",
    ),
    "export": (
        "dsv4ops.cli.export",
        "export",
        "Export a profile to Kubernetes (an SGLang RoleBasedGroup).",
    ),
    "buckets": (
        "dsv4ops.cli.buckets",
        "buckets",
        "Plan decode CUDA-graph buckets from observed traffic.",
    ),
    "ab": (
        "dsv4ops.cli.ab",
        "ab",
        "A/B two profiles on one box, in alternating blocks; keep the winner.",
    ),
    "twin": (
        "dsv4ops.cli.twin",
        "twin",
        "Force the twin's hazards (twin targets only; rehearsals).",
    ),
    "watch": (
        "dsv4ops.cli.watch",
        "watch",
        "Watch the deployed unit: findings with evidence and runbooks.",
    ),
}


class LazyGroup(click.Group):
    """A group whose sub-commands live in modules imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        spec = COMMANDS.get(cmd_name)
        if spec is None:
            return super().get_command(ctx, cmd_name)  # commands added with add_command
        module_name, attr, _ = spec
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            return _unavailable(cmd_name)
        command: click.Command = getattr(module, attr)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Use the static help so --help imports no sub-command module.
        rows = [(name, help_) for name, (_, _, help_) in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _unavailable(name: str) -> click.Command:
    @click.command(name=name, context_settings={"ignore_unknown_options": True})
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    def cmd(args: tuple[str, ...]) -> None:
        raise DsOpsError(f"'{name}' is not available in this build of dsv4ops")

    return cmd


EXIT_CODES_HELP = "Exit codes (every command):\n\n\b\n" + "\n".join(exitcodes.table_lines())


def _environment_epilog() -> str:
    # `\b` keeps click from re-wrapping the table.
    rows = "\n".join(f"  {name:<25} {what}" for name, what in ENVIRONMENT)
    return f"\b\nEnvironment:\n{rows}"


def _set_project(_ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    # Through the environment, so the commands a runbook runs as children find it too; main()
    # puts the variable back as it was (the in-process CLI of the tests runs many commands).
    if value:
        os.environ[PROJECT_ENV] = os.path.abspath(os.path.expanduser(value))


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=EXIT_CODES_HELP + "\n\n" + _environment_epilog(),
)
@click.version_option(__version__, prog_name="dsv4ops")
@click.option(
    "--project",
    metavar="DIR",
    expose_value=False,
    is_eager=True,
    callback=_set_project,
    help="The dsv4ops project (the directory holding profiles/targets.yaml); default: "
    "found by walking up from the current directory, or $DSV4OPS_PROJECT.",
)
def cli() -> None:
    """dsv4ops: operate a DeepSeek-V4-Flash prefill/decode deployment on SGLang.

    Profiles under profiles/ describe the deployment; targets say where it runs (the box over SSH,
    or the twin on this machine). Every mutating command is journaled. Run it anywhere inside
    the project; shell completion: eval "$(_DSV4OPS_COMPLETE=bash_source dsv4ops)".
    """


def _crash_report(exc: BaseException, argv: Sequence[str]) -> str | None:
    """Write a short crash report next to the journal; return its path (None if unwritable)."""
    from dsv4ops.constants import state_dir

    try:
        directory = state_dir() / "crash"
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"crash-{os.getpid()}.txt"
        body = (
            f"dsv4ops {__version__}\npython {sys.version.split()[0]}\n"
            f"argv: {list(argv)}\n\n" + "".join(traceback.format_exception(exc))
        )
        path.write_text(body)
        return str(path)
    except OSError:
        return None


class _ReaderMayLeave(io.TextIOBase):
    """sys.stdout while a command runs. When the reader of a pipe leaves (`status | head`), a
    write fails with EPIPE, which click turns into its exit 1 with no word, in the middle of the
    command: `status` exiting 2 exited 1. Here the rest of the output is dropped instead and the
    command finishes, so its exit code is its own (README's table), decided where it always is."""

    def __init__(self, inner: io.TextIOBase | typing.TextIO) -> None:
        super().__init__()
        self.inner, self.gone = inner, False

    @property  # type: ignore[override]  # read-only at run time too (io.TextIOBase's)
    def encoding(self) -> str:  # click picks its writer by it
        return str(getattr(self.inner, "encoding", None) or "utf-8")

    def writable(self) -> bool:
        return True

    @property
    def buffer(self) -> typing.BinaryIO:
        """The binary stream under it, for click's bytes (shell completion writes them): an
        AttributeError where there is none, which click reads as "write text"."""
        return typing.cast(typing.BinaryIO, self.inner.buffer)  # type: ignore[union-attr]

    def isatty(self) -> bool:
        return self.inner.isatty()

    def fileno(self) -> int:
        return self.inner.fileno()

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                return self.inner.write(text)
            except BrokenPipeError:
                self._leave()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self.inner.flush()
            except BrokenPipeError:
                self._leave()

    def _leave(self) -> None:
        self.gone = True
        # What the real stdout still buffers would fail again at its flush when Python exits
        # (exit code 120): it goes to /dev/null instead. A captured stdout has no descriptor.
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.inner.fileno())
            os.close(devnull)


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """While the command runs, SIGTERM raises `Terminated` (a KeyboardInterrupt): every command
    ends on it as on Ctrl-C. Only where SIGTERM has its default action (the main thread of a
    process nobody else set a handler in), and put back after."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
        yield
        return

    def handle(_signum: int, _frame: FrameType | None) -> None:
        raise Terminated()

    signal.signal(signal.SIGTERM, handle)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit code (never raises for user mistakes)."""
    args = list(sys.argv[1:] if argv is None else argv)
    project = os.environ.get(PROJECT_ENV)
    stdout = sys.stdout
    sys.stdout = _ReaderMayLeave(stdout)
    try:
        with _sigterm_as_interrupt():
            return _run(args)
    finally:
        sys.stdout = stdout
        if project is None:
            os.environ.pop(PROJECT_ENV, None)
        else:
            os.environ[PROJECT_ENV] = project


def _run(args: list[str]) -> int:
    from dsv4ops.cli import _output

    as_json = "--json" in args
    _output.PRINTED.clear()
    try:
        # standalone_mode=False makes click return the exit code of ctx.exit(n) instead of
        # calling sys.exit; keep it rather than flattening every exit to 0.
        rv = cli.main(args=args, prog_name="dsv4ops", standalone_mode=False)
    except DsOpsError as exc:
        from dsv4ops.cli._output import terminal_safe  # an error may quote what a server sent

        click.secho(f"error: {terminal_safe(str(exc), keep_newlines=True)}", fg="red", err=True)
        if exc.hint:
            click.echo(f"hint: {terminal_safe(exc.hint, keep_newlines=True)}", err=True)
        return _json_error(as_json, str(exc), exc.hint, exc.exit_code)
    except click.exceptions.Abort as exc:
        # click raises Abort for a "no" at a confirmation, for the end of input there, and for
        # Ctrl-C at the prompt (from the KeyboardInterrupt, kept as its __context__). Only the
        # last is an interruption; a "no" is a refusal: nothing was changed (issue 40).
        if isinstance(exc.__context__, KeyboardInterrupt):
            click.echo("interrupted", err=True)
            return _json_error(as_json, "interrupted", None, exitcodes.INTERRUPTED)
        click.echo("not confirmed: nothing was changed", err=True)
        return _json_error(as_json, "not confirmed: nothing was changed", None, exitcodes.REFUSED)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        return _json_error(as_json, "interrupted", None, exitcodes.INTERRUPTED)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        _show_terminal_safe(exc)
        # click's usage error is its 2; ours is REFUSED (2 means "observed to be wrong")
        code = exitcodes.REFUSED if exc.exit_code == 2 else exc.exit_code
        return _json_error(as_json, exc.format_message(), None, code)
    except SystemExit as exc:  # a command that calls sys.exit(code) on purpose
        return int(exc.code or 0) if isinstance(exc.code, int | None) else exitcodes.REFUSED
    except Exception as exc:  # noqa: BLE001 - this is the boundary for bugs
        from dsv4ops.cli._output import terminal_safe  # a bug's message may quote any input

        report = _crash_report(exc, args)
        shown = terminal_safe(str(exc), keep_newlines=True)
        click.secho(f"internal error: {type(exc).__name__}: {shown}", fg="red", err=True)
        click.echo(
            f"this is a bug in dsv4ops; crash report: {report or '(could not be written)'}",
            err=True,
        )
        return _json_error(
            as_json,
            f"internal error: {type(exc).__name__}: {exc}",
            f"crash report: {report or '(could not be written)'}",
            exitcodes.BUG,
        )
    return rv if isinstance(rv, int) else exitcodes.OK


def _show_terminal_safe(exc: click.ClickException) -> None:
    """click's own message (usage, "Try ... --help", "Error: ..."), with what it quotes of the
    command line escaped: an option or value typed or pasted with an escape sequence would
    otherwise reach the terminal as one."""
    import io

    from dsv4ops.cli._output import terminal_safe

    shown = io.StringIO()
    exc.show(file=shown)
    click.echo(terminal_safe(shown.getvalue().rstrip("\n"), keep_newlines=True), err=True)


def _json_error(as_json: bool, message: str, hint: str | None, code: int) -> int:
    """With --json, the error as one JSON object on stdout (a script reads stdout); return code."""
    from dsv4ops.cli import _output

    if as_json and not _output.PRINTED:  # else the document printed says it (`exit`, `error`)
        import json

        click.echo(json.dumps({"error": message, "hint": hint, "exit": code}))
    return code
