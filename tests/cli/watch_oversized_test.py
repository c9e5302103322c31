"""`dsv4ops watch --once` end to end against a unit whose decode exports 10^6 series (issue 40:
~50 MB a scrape, which watch held whole: 1.2 GB and 92 s a round). Real HTTP servers on every
port the journaled deployment names, the real CLI, target agent and readers: watch stops reading
at its cap, names the decode's /metrics as the endpoint that sent too much, still reads the
others, and exits 4 (a warning: the decode is there but unseen), never OK and never "down"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsv4ops import exitcodes
from dsv4ops.cli import main
from dsv4ops.journal.records import Kind, Status
from dsv4ops.journal.store import Journal
from testing.orchestrate import make_env
from testing.watch import Body, FakeServer, metrics_unit, runaway_metrics

ROUTER_TEXT = b'# TYPE smg_worker_health gauge\nsmg_worker_health{worker="w"} 1\n'


def test_once_names_the_oversized_metrics_endpoint_and_exits_warning(
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
    prefill = FakeServer("prefill", running=1, tokens=10).text().encode()
    bodies: dict[int, Body] = {
        p: (lambda: [prefill]) for c in dep.components for p in (c.port, c.metrics_port) if p
    }
    bodies[dep.component("router").metrics_port] = lambda: [ROUTER_TEXT]
    decode = dep.component("decode")
    bodies[decode.metrics_port] = runaway_metrics
    with metrics_unit(bodies) as sent:
        code = main(
            [
                *("watch", "--once", "--json", "--interval", "0.5", "--probe-every", "0"),
                *("--target", env.target),
            ]
        )
    out, err = capsys.readouterr()
    rounds = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert code == exitcodes.UNDECIDED, err + out[-2000:]
    last = rounds[-1]
    assert last["worst"] == "warning", last
    findings = {(f["code"], f["component"]): f for f in last["findings"]}
    assert set(findings) == {("metrics_oversized", "decode")}, last["findings"]
    url = f"http://{decode.probe_host}:{decode.metrics_port}/metrics"
    assert findings["metrics_oversized", "decode"]["evidence"][0].startswith(url)
    assert last["components"]["prefill"]["running"] == 1.0  # the others are still read
    codes = {f["code"] for r in rounds for f in r["findings"]}
    assert "component_down" not in codes and all(r["worst"] != "ok" for r in rounds)
    assert not sent.whole[decode.metrics_port]  # every read hung up before the body's end


def test_the_live_view_shows_the_server_unread_not_down() -> None:
    from dsv4ops.cli.watch import render
    from dsv4ops.remote.results import HttpReply
    from dsv4ops.watch import Round
    from dsv4ops.watch.detect import Detector
    from dsv4ops.watch.readings import RouterReading, Scrape, server_reading
    from dsv4ops.watch.settings import WatchSettings

    url = "http://127.0.0.1:31001/metrics"
    unread = server_reading("decode", HttpReply(200, "", None, 0.1, oversized=True), url=url)
    scrape = Scrape(0.0, {"decode": unread}, RouterReading())
    r = Round(
        1, "2026-12-06T00:00:00Z", scrape, (), tuple(Detector(WatchSettings()).observe(scrape))
    )
    lines = render(r)
    assert lines[0].endswith("round 1: WARNING")
    assert lines[1] == "  decode  UNREAD (/metrics sent more than 8 MiB: not read)", lines
    assert lines[-1].startswith("WARNING metrics_oversized (decode)", 2), lines
    assert url in lines[-1] and "-> runbooks/pd-safe-restart.md" in lines[-1]
