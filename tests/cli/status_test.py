"""`dsv4ops status` without a running deployment: the router row says what it saw."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsv4ops.cli import main
from dsv4ops.cli.status import _router_details
from dsv4ops.orchestrate.status_report import ComponentRow
from testing.orchestrate import OrchEnv


def test_status_says_the_router_is_not_running_instead_of_none(
    env: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing runs: NOT HEALTHY, and a script sees it (exit 2, not 0)."""
    code = main(["status", "--target", env.target])
    out = capsys.readouterr().out
    assert code == 2 and "NOT HEALTHY" in out.splitlines()[0]
    router = next(line for line in out.splitlines() if line.startswith("router"))
    assert "router not running" in router and "None" not in out


def test_status_readiness_detail_when_the_router_does_not_answer() -> None:
    row: ComponentRow = {
        "name": "router",
        "alive": True,
        "pid": 1,
        "started_at": None,
        "port": 30000,
        "ports_open": {},
        "exit_code": None,
        "healthy": False,
    }
    silent: ComponentRow = {**row, "readiness": None, "readiness_error": "timed out"}
    assert _router_details(silent) == "readiness unreachable (timed out)"
    assert (
        _router_details({**row, "readiness": 200, "workers": []})
        == "readiness 200; workers unknown"
    )


def test_a_stack_nobody_recorded_is_unmanaged_not_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 20: ports that answer with no deploy in the journal are positive evidence that
    something runs there, and of nothing else: UNMANAGED, exit 4 (UNDECIDED), never DOWN."""
    from dsv4ops.profiles import get_target
    from dsv4ops.usecases.render import deployment_for
    from testing.orchestrate import make_env
    from testing.watch import silent_listeners

    env = make_env(tmp_path)
    for k, v in env.environ.items():
        monkeypatch.setenv(k, v)
    router = deployment_for("baseline", get_target(env.target)).component("router").port
    with silent_listeners({router}):
        code = main(["status", "--target", env.target])
        out = capsys.readouterr().out
        assert code == 4, out
        assert f"target {env.target}: UNMANAGED" in out
        assert f"UNMANAGED: answers on :{router}, no deploy in the journal" in out
        assert main(["status", "--json", "--target", env.target]) == 4
        doc = json.loads(capsys.readouterr().out)
        assert (doc["status"], doc["exit"], doc["unmanaged"]["ports"]) == ("UNMANAGED", 4, [router])
    assert main(["status", "--target", env.target]) == 2  # nothing answers now: NOT HEALTHY
    out = capsys.readouterr().out
    assert "UNMANAGED" not in out and "NOT HEALTHY" in out  # never stopped: not STOPPED


def test_unmanaged_is_checked_on_the_ports_of_the_profile_deployed_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A profile on other ports than baseline's was deployed, then stopped: a stack answering
    on its router port is UNMANAGED (exit 4), and baseline's ports are not what is looked at."""
    from dsv4ops.journal.records import Kind, Status
    from dsv4ops.journal.store import Journal
    from dsv4ops.profiles import get_target
    from dsv4ops.usecases.render import deployment_for
    from testing.orchestrate import commit_all, make_env
    from testing.ports import free_ports
    from testing.watch import silent_listeners

    env = make_env(tmp_path)
    for k, v in env.environ.items():
        monkeypatch.setenv(k, v)
    router, prom = free_ports(2)
    (env.profiles_dir / "moved.yaml").write_text(
        "schema_version: 1\nextends: baseline\ndescription: baseline on other router ports\n"
        f"router:\n  port: {router - env.offset}\n  prometheus_port: {prom - env.offset}\n"
    )
    commit_all(env, "moved")
    target = get_target(env.target)
    moved = deployment_for("moved", target)
    assert moved.component("router").port == router
    journal = Journal(env.target)
    op = journal.begin(Kind.DEPLOY, **moved.to_record())
    journal.transition(op, Status.RUNNING)
    journal.transition(op, Status.SUCCEEDED, running=op)
    stop = journal.begin(Kind.STOP)
    journal.transition(stop, Status.RUNNING)
    journal.transition(stop, Status.SUCCEEDED, running="")
    with silent_listeners({router}):
        assert main(["status", "--json", "--target", env.target]) == 4
        doc = json.loads(capsys.readouterr().out)
    assert (doc["status"], doc["unmanaged"]["ports"]) == ("UNMANAGED", [router]), doc
    assert "the ports of moved, deployed last" in doc["unmanaged"]["why"]
    baseline_router = deployment_for("baseline", target).component("router").port
    with silent_listeners({baseline_router}):
        assert main(["status", "--json", "--target", env.target]) == 2  # not moved's ports
        assert json.loads(capsys.readouterr().out)["unmanaged"] is None
    # nothing answers: the journal's last word is the stop, so the unit is STOPPED (exit 2)
    assert main(["status", "--json", "--target", env.target]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert (doc["status"], doc["stopped"]["op"], doc["stopped"]["last_profile"]) == (
        "STOPPED",
        stop,
        "moved",
    )
