"""The one error boundary: user mistake → 1 line + exit 1, bug → 3 + report, Ctrl-C → 130; and
the option types every command shares."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import click
import pytest

from dsv4ops import cli as cli_pkg
from dsv4ops.cli._output import Named, env_not_empty
from dsv4ops.cli._params import FiniteFloatRange
from dsv4ops.errors import DsOpsError
from testing.cli import REPO, TIME_CEILING_S
from testing.orchestrate import OrchEnv
from tests.exitcodes_test import LEAVES


@click.command()
def user_mistake() -> None:
    raise DsOpsError("the thing is wrong", hint="do it right")


@click.command()
def bug() -> None:
    raise RuntimeError("boom")


@click.command()
def interrupted() -> None:
    raise KeyboardInterrupt


@click.command()
def confirming() -> None:
    click.confirm("change the box?", abort=True)


@pytest.fixture(autouse=True)
def _test_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    commands = dict(cli_pkg.COMMANDS)
    for name in ("user_mistake", "bug", "interrupted", "confirming"):
        commands[name.replace("_", "-")] = (__name__, name, "test command")
    monkeypatch.setattr(cli_pkg, "COMMANDS", commands)


def test_user_mistake_exits_1_with_one_line_and_hint(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_pkg.main(["user-mistake"]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == ["error: the thing is wrong", "hint: do it right"]
    assert "Traceback" not in err


def test_bug_exits_3_with_short_report(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_pkg.main(["bug"]) == 3
    err = capsys.readouterr().err
    assert "internal error: RuntimeError: boom" in err and "Traceback" not in err
    report = Path(err.split("crash report: ")[1].strip())
    assert report.is_file() and "RuntimeError: boom" in report.read_text()


def test_keyboard_interrupt_exits_130(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_pkg.main(["interrupted"]) == 130


def test_version_is_the_release_pyproject_ships(capsys: pytest.CaptureFixture[str]) -> None:
    # The newest CHANGELOG release is held to the same number (tests/architecture).
    shipped = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    assert cli_pkg.main(["--version"]) == 0
    assert capsys.readouterr().out == f"dsv4ops, version {shipped['project']['version']}\n"


@pytest.mark.parametrize(
    ("answer", "code", "said"),
    [
        ("n\n", 1, "not confirmed: nothing was changed"),  # a "no" is a refusal (issue 40)
        ("", 1, "not confirmed: nothing was changed"),  # end of input: no "yes" either
        (KeyboardInterrupt, 130, "interrupted"),  # Ctrl-C at the prompt
    ],
)
def test_a_confirmation_declined_is_refused_and_ctrl_c_at_it_is_interrupted(
    answer: object,
    code: int,
    said: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import io

    if answer is KeyboardInterrupt:

        def ctrl_c(prompt: str = "") -> str:
            raise KeyboardInterrupt

        monkeypatch.setattr(click.termui, "visible_prompt_func", ctrl_c)
    else:
        monkeypatch.setattr("sys.stdin", io.StringIO(str(answer)))
    assert cli_pkg.main(["confirming"]) == code
    assert capsys.readouterr().err.splitlines()[-1] == said


def test_bad_profile_through_the_real_command_is_exit_1_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("schema_version: 1\nmodle: {}\n")
    assert cli_pkg.main(["profile", "render", str(bad)]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert (
        lines[0].startswith(f"error: {bad}:2: modle: unknown key")
        and lines[1] == "hint: did you mean 'model'?"
    )


def test_usage_error_is_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_pkg.main(["profile", "render"]) == 1
    assert "Missing argument" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        # an unknown option (click 8.5 quotes it by repr) and an extra argument (quoted as
        # typed: a title-setting OSC, which click's CSI-only stripping off a terminal misses)
        ["deploy", "--no\x1bcsuch"],
        ["status", "extra\x1b]0;owned\x07"],
    ],
    ids=["option", "extra-argument"],
)
def test_a_usage_error_quotes_the_command_line_escaped(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """What click quotes of the command line reaches the terminal escaped, as every other
    message does; its usage and hint lines stay as they were."""
    assert cli_pkg.main(argv) == 1  # refused, as every usage mistake
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err, err
    assert "\\x1b" in err and err.startswith("Usage: dsv4ops "), err
    assert "Try 'dsv4ops " in err and "Error: " in err, err


def test_ctx_exit_code_is_kept() -> None:
    """A command that ends with ctx.exit(n) (e.g. a canary verdict) must exit n, not 0."""
    import click

    from dsv4ops import cli as cli_mod

    @click.command(name="exits-four")
    @click.pass_context
    def exits_four(ctx: click.Context) -> None:
        ctx.exit(4)

    cli_mod.cli.add_command(exits_four)
    try:
        assert cli_mod.main(["exits-four"]) == 4
    finally:
        cli_mod.cli.commands.pop("exits-four", None)


# --- the option types every command shares (cli/_params.py), over every option of every command
FLOAT_OPTIONS = [
    (f"{' '.join(path)} {param.opts[0]}", param)
    for path, cmd in LEAVES
    for param in cmd.params
    if isinstance(param.type, click.types.FloatParamType)
]


def test_every_float_option_is_found() -> None:
    names = {name for name, _ in FLOAT_OPTIONS}
    assert {"canary --duration", "ab --block-duration", "buckets plan --window"} <= names


@pytest.mark.parametrize(("name", "param"), FLOAT_OPTIONS, ids=[n for n, _ in FLOAT_OPTIONS])
def test_no_float_option_takes_nan_or_infinity(name: str, param: click.Parameter) -> None:
    """A range passes nan (every comparison with it is false): `canary --duration inf` loaded
    the box without end, `ab --block-duration nan --dry-run` estimated "nan h"."""
    assert isinstance(param.type, FiniteFloatRange), name
    for value in ("nan", "inf", "-inf"):  # as typed on the command line
        with pytest.raises(click.BadParameter, match="finite|not in the range"):
            param.type_cast_value(click.Context(click.Command("x")), value)


def test_through_the_command_line_nan_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        cli_pkg.main(["ab", "baseline", "overlap-on", "--block-duration", "nan", "--dry-run"]) == 1
    )
    err = capsys.readouterr().err
    assert "Invalid value for '--block-duration': nan is not a finite number" in err, err


REASON_COMMANDS = [
    " ".join(path) for path, cmd in LEAVES if any(p.name == "reason" for p in cmd.params)
]


def test_every_reason_option_is_found() -> None:
    assert {"deploy", "rollback", "stop", "ab", "profile set"} <= set(REASON_COMMANDS)


@pytest.mark.parametrize("command", REASON_COMMANDS)
def test_a_reason_with_an_escape_sequence_or_a_bidi_override_is_refused(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A reason is journaled and shown to the next operator; deploy, rollback and stop took
    one with an escape sequence (only `profile set` refused it). Refused before the command
    runs (its other arguments are never looked at), naming the character, never echoing it."""
    for reason, code_point in (("a\x1b[2Jb", "U+001B"), ("abc\u202edef", "U+202E")):
        assert cli_pkg.main([*command.split(), "--reason", reason]) == 1
        err = capsys.readouterr().err
        assert f"'--reason' / '-m': holds the control character {code_point}" in err, err
        assert "\x1b" not in err and "\u202e" not in err


# --- an empty value of an option that names something is refused, never the default
TARGET_OPTIONS = [
    (" ".join(path), param)
    for path, cmd in LEAVES
    for param in cmd.params
    if param.name == "target"
]


def test_every_target_option_refuses_an_empty_name_and_an_empty_variable() -> None:
    assert {"stop", "deploy", "rollback", "status", "profile validate"} <= {
        n for n, _ in TARGET_OPTIONS
    }
    for name, param in TARGET_OPTIONS:
        assert isinstance(param.type, Named) and param.callback is env_not_empty, name


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["stop", "--target", "", "--dry-run"], "'--target' / '-t'"),
        (["export", "rbg", "baseline", "--image", ""], "'--image'"),
        (["export", "rbg", "baseline", "-o", ""], "'-o' / '--output'"),
        (["canary", "--suite", "smoke", "--profile", " "], "'--profile' / '-p'"),
        (["buckets", "plan", "--profile", ""], "'--profile'"),
        # `--to "$ID"` with ID unset rolled back to the last known-good / the previous package
        (["rollback", "--to", "", "--dry-run"], "'--to'"),
        (["kernels", "rollback", "--to", " ", "--dry-run"], "'--to'"),
        (["kernels", "rollback", "--name", "", "--dry-run"], "'--name'"),
        (["profile", "show", "baseline", "--rev", ""], "'--rev'"),  # showed the working copy
        (["profile", "diff", "baseline", "baseline", "--rev-b", ""], "'--rev-b'"),
        (["canary", "--suite", "smoke", "--model", ""], "'--model'"),
        (["runbook", "abandon", ""], "'RUN_ID'"),  # an empty prefix matches every id
    ],
)
def test_an_empty_name_is_refused_naming_the_option(
    args: list[str],
    option: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`stop --target "$T"` with T unset stopped the default target (and ignored
    DSV4OPS_TARGET); `--image ''` used the default image; `-o ''` wrote to "."."""
    monkeypatch.setenv("DSV4OPS_TARGET", "twin-fast")
    assert cli_pkg.main(args) == 1
    out, err = capsys.readouterr()
    assert f"Invalid value for {option}: an empty value names nothing" in err, err
    assert out == "", out  # no plan, no manifest: nothing ran


def test_an_empty_target_variable_is_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DSV4OPS_TARGET", "")
    assert cli_pkg.main(["stop", "--dry-run"]) == 1
    out, err = capsys.readouterr()
    assert "DSV4OPS_TARGET is set but empty" in err and out == "", err


# --- a reader that leaves (`dsv4ops status | head`) keeps the command's own exit code
def test_a_closed_stdout_keeps_the_commands_exit_code(fresh_target: OrchEnv) -> None:
    """`status` of a target where nothing runs exits 2 (NOT HEALTHY); with its pipe's reader
    gone before it writes (as `| head` leaves one), click made it 1 with no word. The read end
    is closed before the process starts, so every write fails: no race."""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "dsv4ops", "status", "--target", fresh_target.target],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            cwd=REPO,
            timeout=TIME_CEILING_S,
        )
    finally:
        os.close(write)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
