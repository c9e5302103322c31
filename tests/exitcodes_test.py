"""The one exit-code table (dsv4ops/exitcodes.py), walked through every command the CLI
registers: each leaf command's failure modes end in the table's code (with `--json`, also one
JSON object on stdout), and no module picks a number of its own, so a new command cannot drift.
"""

from __future__ import annotations

import ast
import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import click
import pytest

from dsv4ops import cli as cli_pkg
from dsv4ops import exitcodes
from dsv4ops.errors import DeployError, DsOpsError
from testing.package_ast import modules

README = Path(__file__).resolve().parents[1] / "README.md"


def leaf_commands() -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """(path of names, command) for every leaf command the CLI registers, groups walked."""
    for name, (module, attr, _help) in cli_pkg.COMMANDS.items():
        yield from _walk((name,), getattr(importlib.import_module(module), attr))


def _walk(
    path: tuple[str, ...], cmd: click.Command
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    if isinstance(cmd, click.Group):
        for sub in cmd.list_commands(click.Context(cmd)):
            found = cmd.get_command(click.Context(cmd), sub)
            assert found is not None
            yield from _walk((*path, sub), found)
    else:
        yield path, cmd


LEAVES = sorted(leaf_commands(), key=lambda item: item[0])
IDS = [" ".join(p) for p, _ in LEAVES]


def _json_object(out: str) -> dict[str, Any]:
    (line,) = [ln for ln in out.splitlines() if ln.strip()]  # exactly one object on stdout
    doc: dict[str, Any] = json.loads(line)
    return doc


def test_the_walk_sees_every_registered_command() -> None:
    assert {p[0] for p, _ in LEAVES} == set(cli_pkg.COMMANDS)
    assert ("kernels", "deploy") in {p for p, _ in LEAVES} and len(LEAVES) > len(cli_pkg.COMMANDS)


@pytest.mark.parametrize(("path", "cmd"), LEAVES, ids=IDS)
def test_a_usage_mistake_is_refused_with_one_json_error(
    path: tuple[str, ...], cmd: click.Command, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli_pkg.main([*path, "--no-such-option", "--json"])
    out, err = capsys.readouterr()
    assert code == exitcodes.REFUSED, err
    doc = _json_object(out)
    assert doc["exit"] == exitcodes.REFUSED and "no-such-option" in doc["error"] and "hint" in doc
    assert "no-such-option" in err and "Traceback" not in err  # the human line too


@pytest.mark.parametrize(("path", "cmd"), LEAVES, ids=IDS)
@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (DsOpsError("refused: the lock is held", hint="wait"), exitcodes.REFUSED),
        (DeployError("the deploy failed and was rolled back"), exitcodes.FAILED),
        (RuntimeError("a bug"), exitcodes.BUG),
        (KeyboardInterrupt(), exitcodes.INTERRUPTED),
    ],
    ids=["refused", "failed", "bug", "interrupted"],
)
def test_every_failure_mode_of_every_command_ends_in_the_table(
    path: tuple[str, ...],
    cmd: click.Command,
    raised: BaseException,
    expected: int,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """Whatever a command's body raises, the one boundary gives the table's code: no command
    catches and renumbers it on its own way out."""
    monkeypatch.setenv("DSV4OPS_STATE_DIR", str(tmp_path))  # the bug's crash report goes here

    def body(*_a: object, **_kw: object) -> NoReturn:
        raise raised

    monkeypatch.setattr(cmd, "callback", body)
    args = [*path, *_required_arguments(cmd)]
    json_flag = any("--json" in p.opts for p in cmd.params if isinstance(p, click.Option))
    code = cli_pkg.main([*args, *(["--json"] if json_flag else [])])
    out, err = capsys.readouterr()
    assert code == expected, err
    if json_flag:
        doc = _json_object(out)
        assert doc["exit"] == expected and doc["error"]


def _required_arguments(cmd: click.Command) -> list[str]:
    """A value for each required argument (the body never reads them: it is replaced)."""

    def value(p: click.Parameter) -> str:
        if isinstance(p.type, click.Choice):
            return str(p.type.choices[0])
        return "1" if isinstance(p.type, click.types._NumberParamTypeBase) else "x"

    out: list[str] = []
    for p in cmd.params:
        if isinstance(p, click.Argument) and p.required:
            out += [value(p)] * (p.nargs if p.nargs > 0 else 1)
        elif isinstance(p, click.Option) and p.required:
            out += [p.opts[0], value(p)]
    return out


def test_no_module_picks_an_exit_number_of_its_own() -> None:
    """`exit_code = 2` or `sys.exit(3)` outside exitcodes.py would be a second table."""
    bad = []
    for mod in modules():
        if mod.name in ("dsv4ops.exitcodes",) or mod.name.startswith(
            ("dsv4ops.twin", "dsv4ops.remote.agent")
        ):
            continue  # the twin and the target agent are programs of their own
        if mod.name in ("dsv4ops.kernels.aot_worker", "dsv4ops.kernels.interp_check"):
            continue  # worker programs run apart (their exit is read by their caller)
        for node in ast.walk(mod.tree):
            if (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "exit_code" for t in node.targets)
                and isinstance(node.value, ast.Constant)
            ):
                bad.append(f"{mod.path}:{node.lineno}: exit_code = {node.value.value}")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "exit"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and node.args[0].value not in (0,)
            ):
                bad.append(f"{mod.path}:{node.lineno}: exit({node.args[0].value})")
    assert not bad, "use dsv4ops.exitcodes:\n" + "\n".join(bad)


def test_help_and_readme_state_the_one_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_pkg.main(["--help"]) == exitcodes.OK
    out = capsys.readouterr().out
    readme = README.read_text()
    for line in exitcodes.table_lines():
        assert line.strip() in " ".join(out.split()) or " ".join(line.split()) in " ".join(
            out.split()
        )
        code, name, _ = line.split(None, 2)
        assert f"| {code} | {name} |" in readme, f"README lacks the row of {name}"


@pytest.mark.parametrize(("word", "code"), [("HEALTHY", 0), ("NOT HEALTHY", 2), ("UNKNOWN", 4)])
def test_status_words_map_onto_the_table(word: str, code: int) -> None:
    assert exitcodes.for_health(word) == code


@pytest.mark.parametrize(("verdict", "code"), [("PASS", 0), ("FAIL", 2), ("INCONCLUSIVE", 4)])
def test_canary_verdicts_map_onto_the_table(verdict: str, code: int) -> None:
    from dsv4ops.canary.verdict import Verdict

    assert exitcodes.for_verdict(verdict) == Verdict(verdict).exit_code == code


# Every registered leaf command is named in exactly one of these: a new command fails
# test_every_command_is_classified until someone decides whether it changes something (a
# target, the journal, a profile's git history) and so owes the mutating flags.
MUTATING = {
    ("deploy",),
    ("rollback",),
    ("stop",),
    ("kernels", "deploy"),
    ("kernels", "rollback"),
    ("ab",),
    ("runbook", "run"),
    ("runbook", "abandon"),  # ends a run's record in the journal; nothing on the target
    ("twin", "hazard"),
    ("profile", "set"),
}
READ_ONLY = {
    ("buckets", "plan"),
    ("canary",),
    ("export", "rbg"),
    ("journal",),
    ("kernels", "build"),
    ("kernels", "list"),
    ("kernels", "verify"),
    ("monitoring", "render"),
    ("profile", "diff"),
    ("profile", "list"),
    ("profile", "render"),
    ("profile", "schema"),  # prints or writes the schema file; never touches a target
    ("profile", "show"),
    ("profile", "validate"),
    ("runbook", "list"),
    ("runbook", "show"),
    ("status",),
    ("watch",),
}
SAME_FLAGS = ("--yes", "--reason", "--dry-run", "--json", "--target")


def test_every_command_is_classified() -> None:
    leaves = {p for p, _ in LEAVES}
    assert not MUTATING & READ_ONLY
    assert leaves - MUTATING - READ_ONLY == set(), "classify the new command(s) above"
    assert (MUTATING | READ_ONLY) - leaves == set(), "a classified command is gone"


@pytest.mark.parametrize("path", sorted(MUTATING), ids=[" ".join(p) for p in sorted(MUTATING)])
def test_every_mutating_command_takes_the_same_flags(path: tuple[str, ...]) -> None:
    from dsv4ops.cli import _output

    cmd = dict(LEAVES)[path]
    opts = {o: p for p in cmd.params if isinstance(p, click.Option) for o in p.opts}
    missing = [f for f in SAME_FLAGS if f not in opts]
    assert not missing, f"{' '.join(path)} lacks {missing}"
    # one definition (cli/_output.py): the same spelling, short forms and help everywhere
    assert opts["--yes"].is_flag and opts["--yes"].opts == ["--yes", "-y"]
    assert opts["--yes"].help == _output.YES_HELP
    assert (
        opts["--reason"].opts == ["--reason", "-m"] and opts["--reason"].help == _output.REASON_HELP
    )
    assert opts["--dry-run"].is_flag and "nothing" in (opts["--dry-run"].help or "")
    assert opts["--json"].is_flag and opts["--json"].name == "as_json"
    assert opts["--target"].envvar == "DSV4OPS_TARGET"
