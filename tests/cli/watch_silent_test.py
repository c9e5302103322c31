"""`dsv4ops watch --once` against a unit that accepts connections and never answers (issue 20):
real 127.0.0.1 sockets on every port the journaled deployment names (router, prefill and decode,
their /metrics and /health), a thread accepting and holding each connection silent. The watch
must end within its bound in UNDECIDED (4), never printing OK: nothing answered, so nothing was
observed, not even "down"."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from dsv4ops import exitcodes
from dsv4ops.cli import main
from dsv4ops.journal.records import Kind, Status
from dsv4ops.journal.store import Journal
from testing.orchestrate import make_env
from testing.watch import silent_listeners


def test_once_against_a_silent_unit_is_undecided_never_ok(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from dsv4ops.profiles import get_target
    from dsv4ops.usecases.render import deployment_for

    env = make_env(tmp_path)
    for k, v in env.environ.items():
        monkeypatch.setenv(k, v)
    dep = deployment_for("baseline", get_target(env.target))
    journal = Journal(env.target)
    op = journal.begin(Kind.DEPLOY, **dep.to_record())
    journal.transition(op, Status.RUNNING)
    journal.transition(op, Status.SUCCEEDED, running=op)
    ports = {p for c in dep.components for p in (c.port, c.metrics_port) if p}
    with silent_listeners(ports):
        started = time.monotonic()
        code = main(
            [
                "watch",
                "--once",
                "--json",
                "--interval",
                "0.5",
                "--probe-every",
                "1",
                "--target",
                env.target,
            ]
        )
        took = time.monotonic() - started
    out, err = capsys.readouterr()
    rounds = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert code == exitcodes.UNDECIDED, err + out[-2000:]
    assert rounds and all(r.get("worst") != "ok" for r in rounds), rounds
    assert rounds[-1]["worst"] in ("unknown", "warning") and set(rounds[-1]["unanswered"]) >= {
        "router",
        "decode",
    }
    assert "OK" not in err
    codes = {f["code"] for r in rounds for f in r["findings"]}
    assert not codes & {"component_down", "probe_stalled", "decode_wedged"}, codes  # not observed
    assert took < 120, took
