"""`dsv4ops profile list|show|validate|render|diff|set|schema` (click only translates; the work
is in the profile use cases)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from dsv4ops.cli._output import (
    FC,
    NAMED,
    dry_run_option,
    echo_json,
    echo_lines,
    env_not_empty,
    json_option,
    output_option,
    reason_option,
    table,
    target_option,
    terminal_safe,
    write_or_echo,
    yes_option,
)
from dsv4ops.errors import DsOpsError, ProfileError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from dsv4ops.usecases.profile import ProblemJSON, ValidateResult


def _target_opt(f: FC) -> FC:
    return click.option(
        "--target",
        "-t",
        "target",
        type=NAMED,
        default=None,
        envvar="DSV4OPS_TARGET",
        callback=env_not_empty,
        help="Target from profiles/targets.yaml (default: the production box).",
    )(f)


@click.group()
def profile() -> None:
    """Validate, render, diff and toggle deployment profiles (a name under profiles/ or a path)."""


@profile.command("list")
@json_option
def list_cmd(as_json: bool) -> None:
    """List the shipped profiles."""
    from dsv4ops.usecases.profile import list_columns, profile_rows

    rows = profile_rows()
    if as_json:
        echo_json(rows)
        return
    cols = list_columns()
    click.echo(table(([r.get(c, r.get("error", "")) for c in cols] for r in rows), cols))


@profile.command("show")
@click.argument("name")
@click.option(
    "--rev", type=NAMED, default=None, help="Show the profile as it was at this git revision."
)
@json_option
def show_cmd(name: str, rev: str | None, as_json: bool) -> None:
    """Show a profile's resolved values (after extends and defaults) and its warnings."""
    from dsv4ops._yaml import dump
    from dsv4ops.usecases.profile import profile_details

    # Printed output never carries secrets (env tokens, --api-key values).
    data = profile_details(name, rev)
    if as_json:
        echo_json(data)
        return
    click.echo(dump({k: v for k, v in data.items() if k != "warnings"}).rstrip())
    echo_lines(f"warning: {w['where']}: {w['message']}" for w in data["warnings"])


@profile.command("validate")
@click.argument("names", nargs=-1)
@_target_opt
@json_option
def validate_cmd(names: tuple[str, ...], target: str | None, as_json: bool) -> None:
    """Check profiles (default: every shipped profile) against every target (or --target).

    Lists every problem of each file (file:line: key: message), not just the first; exit 1 if any.
    """
    from dsv4ops.usecases.profile import validate_profiles

    results = validate_profiles(list(names), target)
    failed = [r for r in results if not r["ok"]]
    n_problems = sum(len(r["problems"]) for r in failed)
    summary = f"{_count(n_problems, 'problem')} in {_count(len(failed), 'profile')}"
    if as_json:
        echo_json(results)
    elif len(results) == 1 and failed:
        # One profile: its problems are error lines on stderr, like the error boundary prints.
        problems = failed[0]["problems"]
        if len(problems) == 1:
            raise _as_error(problems[0])
        for p in problems:
            click.secho(terminal_safe(f"error: {_problem_line(p)}"), fg="red", err=True)
            echo_lines([f"hint: {p['hint']}"] if p["hint"] else [], err=True)
        raise DsOpsError(summary)
    else:
        echo_lines(line for r in results for line in _result_lines(r))
        if failed:
            click.echo(summary)
    if failed:
        raise DsOpsError(f"{len(failed)} of {len(results)} profiles are invalid")


def _result_lines(r: ValidateResult) -> Iterator[str]:
    """One profile's lines of the `validate` table: ok, or each problem (and its hint), then
    its warnings."""
    if r["ok"]:
        yield f"ok    {r['profile']}"
    for p in r["problems"]:
        yield f"FAIL  {r['profile']}  {_problem_line(p)}"
        if p["hint"]:
            yield f"      hint: {p['hint']}"
    for w in r["warnings"]:
        yield f"      warning: {w['where']}: {w['message']}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _as_error(problem: ProblemJSON) -> ProfileError:
    return ProfileError(
        problem["message"],
        path=problem["path"],
        line=problem["line"],
        key=problem["key"],
        hint=problem["hint"],
    )


def _problem_line(problem: ProblemJSON) -> str:
    return str(_as_error(problem))  # file:line: key: message


@profile.command("render")
@click.argument("name")
@_target_opt
@json_option
def render_cmd(name: str, target: str | None, as_json: bool) -> None:
    """Print the exact prefill, decode and router commands."""
    from dsv4ops.usecases.profile import render_profile

    # Printed commands never carry secrets: a value under a secret env key or after a secret flag
    # is shown as '***' (the deploy renders in-process and keeps the real values).
    rendered = render_profile(name, target)
    if as_json:
        echo_json(rendered.json)
        return
    for comp in rendered.commands:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in comp.env.items())
        click.echo(f"# {comp.name} ({comp.host}:{comp.port})")
        click.echo((env + " " if env else "") + shlex.join(comp.argv) + "\n")
    echo_lines((f"warning: {w}" for w in rendered.warnings), err=True)


@profile.command("diff")
@click.argument("a")
@click.argument("b")
@click.option(
    "--rev-a", type=NAMED, default=None, help="Read A (and its extends chain) at this git revision."
)
@click.option("--rev-b", type=NAMED, default=None, help="Read B at this git revision.")
@_target_opt
@json_option
def diff_cmd(
    a: str, b: str, rev_a: str | None, rev_b: str | None, target: str | None, as_json: bool
) -> None:
    """Show how B differs from A: resolved values, then the rendered argv and env."""
    from dsv4ops.usecases.profile import profile_diff

    report = profile_diff(a, b, target, rev_a=rev_a, rev_b=rev_b)
    if as_json:
        echo_json(report)
        return
    click.echo(f"--- {report['a']}\n+++ {report['b']}")
    for ch in report["values"]:
        click.echo(f"{ch['key']}: {ch['old']!r} -> {ch['new']!r}")
    for comp in report["commands"]:
        click.echo(f"\n[{comp['name']}] argv")
        for line in comp["argv_diff"][2:]:
            click.echo(line)
        for ch in comp["env"]:
            click.echo(f"env {ch['key']}: {ch['old']!r} -> {ch['new']!r}")
    if not report["values"] and not report["commands"]:
        click.echo("(no differences)")


class _SetCommand(click.Command):
    """`profile set`, whose help lists the toggles as their declarations say (`set_toggles`),
    read only when the help is shown: starting the CLI loads no profile model."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from dsv4ops.usecases.profile import set_toggles

        with formatter.section("Toggles"):
            formatter.write_dl([(usage, f"{key}: {what}") for usage, key, what in set_toggles()])
        super().format_epilog(ctx, formatter)


@profile.command("set", cls=_SetCommand, context_settings={"ignore_unknown_options": False})
@click.argument("name")
@click.argument("toggles", nargs=-1, required=True)
@click.option(
    "--as", "as_name", type=NAMED, default=None, help="Write a new profile NEW that extends NAME."
)
@click.option("--in-place", is_flag=True, help="Edit NAME itself instead of writing a new profile.")
@click.option("--no-commit", is_flag=True, help="Write the file but do not git commit it.")
@reason_option
@yes_option
@dry_run_option
@json_option
@target_option
def set_cmd(
    name: str,
    toggles: tuple[str, ...],
    as_name: str | None,
    in_place: bool,
    no_commit: bool,
    reason: str | None,
    yes: bool,
    dry_run: bool,
    as_json: bool,
    target: str | None,
) -> None:
    """Set on/off flags (FLAG=on|off) or the decode buckets (buckets=SPEC) and git commit it.

    It asks nothing (--yes is accepted, as every mutating command takes it); --dry-run checks
    everything and prints the diff, writing nothing; --target also checks that the result
    renders for that target; --reason goes first in the commit message. If git refuses the
    commit (a pre-commit hook), the file and the git index are put back as they were."""
    from dsv4ops.usecases.profile import set_profile_flags

    del yes  # nothing to confirm: the change is one commit, `git revert` undoes it
    result = set_profile_flags(
        name,
        toggles,
        as_name=as_name,
        in_place=in_place,
        commit=not no_commit,
        reason=reason,
        dry_run=dry_run,
        target=target,
    )
    if as_json:
        echo_json(result.to_json())
        return
    click.echo(f"{'would write' if dry_run else 'wrote'} {result.path}")
    for line in result.changes:
        click.echo(f"  {line}")
    echo_lines((f"warning: {w}" for w in result.warnings), err=True)  # as `render` says them
    if dry_run:
        click.echo(result.diff.rstrip("\n"))
        click.echo("dry run: nothing was written or committed")
    else:
        click.echo(
            f"committed {result.commit[:12]}" if result.commit else "not committed (--no-commit)"
        )
    sys.stdout.flush()


@profile.command("schema")
@click.option("--targets", is_flag=True, help="The schema of targets.yaml instead of a profile's.")
@click.option(
    "--markdown", is_flag=True, help="The settings reference tables (docs/profiles.md) instead."
)
@output_option("it")
def schema_cmd(targets: bool, markdown: bool, output: Path | None) -> None:
    """Print the JSON Schema (draft 2020-12) of a profile file, for editors and CI.

    Derived from the loader's own declaration of every key (types, bounds, choices, defaults);
    profiles/schema/ ships it and every shipped YAML names it on its first line
    (`# yaml-language-server: $schema=...`). The loader still checks more than it can say:
    rules across keys and files (docs/profiles.md, "The JSON Schema (editors and CI)")."""
    from dsv4ops.usecases.profile import profile_schema, schema_mark

    text = profile_schema(targets=targets, markdown=markdown)
    if write_or_echo(text, output, mark=schema_mark(markdown=markdown)):
        click.echo(f"wrote {output}")
