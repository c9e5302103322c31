"""Helpers for the orchestrate and CLI tests on a twin environment (testing/orchestrate_env.py):
its module-scoped lifetime, `dsv4ops ARGS --target T` in-process, the Operator as the CLI
composes it, and the check that the baseline was restored."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest

from dsv4ops.cli import main
from testing.orchestrate_env import OrchEnv, kill_all, make_env, our_processes


def module_env(
    tmp_path_factory: pytest.TempPathFactory, extra_twin_env: dict[str, str] | None = None
) -> Iterator[OrchEnv]:
    """Body of a module-scoped environment fixture: build it, then stop and kill everything."""
    env = make_env(tmp_path_factory.mktemp("orch"), extra_twin_env=extra_twin_env)
    yield env
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.environ.items():
            mp.setenv(k, v)
        with contextlib.suppress(Exception):
            main(["stop", "--target", env.target, "--yes", "--recover"])
    kill_all(env)
    assert our_processes(env) == [], "orphaned processes after the module's teardown"


def cli(
    env: OrchEnv, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, Any, str]:  # stdout: parsed JSON with --json, else text
    """Run `dsv4ops ARGS --target T`; parse stdout as JSON when --json was given."""
    code = main([*args, "--target", env.target])
    out, err = capsys.readouterr()
    if "--json" in args and out.strip():
        return code, json.loads(out), err
    return code, out, err


def cli_operator(env: OrchEnv, progress=None, **kw):
    """(Operator, TargetContext) for the env's target, as the CLI composes them."""
    from dsv4ops.cli._context import open_target
    from dsv4ops.orchestrate.usecases.compose import operator_for

    ctx = open_target(env.target, verb="test")
    op = operator_for(
        ctx,
        progress=progress or (lambda _l: None),
        canary=None,
        model="deepseek-v4-flash",
        command="test",
    )
    for k, v in kw.items():  # settings the CLI composes differently (e.g. kernels=None)
        assert hasattr(op.settings, k), f"Operator has no setting {k!r}"
        setattr(op.settings, k, v)
    return op, ctx


def deploy_via_operator(env: OrchEnv, profile: str, progress=None, **kw):
    """Deploy like the CLI does (fallback = last known-good from git), with a progress hook."""
    from dsv4ops.orchestrate.restore import fallback_for
    from dsv4ops.orchestrate.usecases import render as R

    op, ctx = cli_operator(env, progress)
    try:
        new = R.deployment_for(profile, ctx.target)
        fallback = fallback_for(ctx.journal, R.render_at_commit(ctx.target))
        return op.deploy(new, fallback=fallback, run_canary=False, **kw)
    finally:
        ctx.close()


def assert_baseline_restored(env: OrchEnv, capsys: pytest.CaptureFixture[str]) -> None:
    """Previous deployment restored and healthy, exactly our three processes, journal consistent."""
    from dsv4ops.journal.store import Journal

    code, st, err = cli(env, capsys, "status", "--json")
    assert code == 0, err
    assert st["healthy"], st
    assert st["deployed"]["profile"] == "baseline"
    assert st["drift"] == [] and st["attention"] == [] and st["lock"] is None
    assert len(our_processes(env)) == 3, "orphaned or missing processes"
    pids = sorted(c["pid"] for c in st["components"])
    assert pids == our_processes(env)
    j = Journal(env.target)
    assert j.in_flight() == [] and j.skipped_lines == []
