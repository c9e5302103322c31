"""An endpoint target (a cluster's router, no SSH) against a real twin PD pair behind the real
sglang-router: the HTTP verbs work through it, the process verbs refuse and change nothing."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsv4ops.cli import main
from dsv4ops.journal.store import Journal
from dsv4ops.profiles import get_target
from dsv4ops.remote import Supervisor, connect
from dsv4ops.usecases.session import TargetSession, reachable
from testing.orchestrate import FAST_TWIN_ENV, SHIPPED_PROFILES
from testing.twin import TwinStack, twin_stack

pytestmark = pytest.mark.slow


# What the baseline profile gives both servers that the canary relies on: the parsers (else the
# twin, like SGLang, leaves tool-call markup in the content) and /metrics.
SERVER_ARGS = (
    "--served-model-name",
    "deepseek-v4-flash",
    "--tool-call-parser",
    "deepseekv4",
    "--reasoning-parser",
    "deepseek-v4",
    "--enable-metrics",
)


@pytest.fixture(scope="module")
def stack() -> Iterator[TwinStack]:
    with twin_stack(
        router=True, env=FAST_TWIN_ENV, prefill_args=SERVER_ARGS, decode_args=SERVER_ARGS
    ) as s:
        yield s


@pytest.fixture
def cluster(stack: TwinStack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> TwinStack:
    """profiles/ with the shipped profiles and a target `cluster` at the stack's router."""
    profiles = tmp_path / "profiles"
    shutil.copytree(SHIPPED_PROFILES, profiles)
    assert stack.router is not None
    (profiles / "targets.yaml").write_text(f"""schema_version: 1
targets:
  cluster:
    description: the twin pair behind the real router, as a cluster would be reached
    transport: endpoint
    router_url: {stack.router.url}
    metrics:
      prefill: [{stack.prefill.url}]
      decode: [{stack.decode.url}]
      router: http://127.0.0.1:{stack.router.prometheus_port}
    profile: baseline
    namespace: inference
    replicas: 2
""")
    monkeypatch.setenv("DSV4OPS_PROFILES_DIR", str(profiles))
    return stack


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _pids(stack: TwinStack) -> dict[str, int | None]:
    return {name: p.pid for name, p in stack.procs.items() if p.alive()}


def test_reachable_resolves_the_endpoint_target_to_its_urls(cluster: TwinStack) -> None:
    t = get_target("cluster")  # an endpoint target: reached without its journal
    r = reachable(
        TargetSession(t, Supervisor(connect("local"), "/nonexistent"), Journal("cluster"))
    )
    assert cluster.router is not None
    assert (r.source, r.endpoint, r.profile) == ("endpoint", True, "baseline")
    assert r.router_url == cluster.router.url
    assert r.worker_urls == (cluster.prefill.url, cluster.decode.url)
    assert r.metrics_urls == (f"{cluster.prefill.url}/metrics", f"{cluster.decode.url}/metrics")
    assert r.router_metrics_url == cluster.router.metrics_url


def test_the_canary_passes_through_the_endpoint_target(
    cluster: TwinStack, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(
        capsys, "canary", "--target", "cluster", "--suite", "smoke", "--duration", "3", "--json"
    )
    report = json.loads(out)
    assert code == 0, report["reasons"]
    assert report["verdict"] == "PASS", report
    summary = report["metrics"]["summary"]
    assert summary["completed"] >= 1 and summary["failed"] == 0, summary
    # The router got the load and the metrics URLs were read (else the canary says so).
    assert not any("worker metrics unavailable" in r for r in report["reasons"]), report["reasons"]


def test_status_reads_the_router_and_its_workers(
    cluster: TwinStack, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(capsys, "status", "--target", "cluster", "--json")
    assert code == 0, err
    st = json.loads(out)
    assert st["transport"] == "endpoint" and st["healthy"] is True
    assert st["router"]["readiness"] == 200
    listed = {(w["type"], w["url"], w["healthy"]) for w in st["router"]["workers"]}
    assert {t for t, _u, _h in listed} == {"prefill", "decode"}, listed
    assert all(h for _t, _u, h in listed), listed
    assert "kubectl apply -f -" in st["restarts"]
    code, out, _ = _run(capsys, "status", "--target", "cluster")
    assert code == 0 and "HEALTHY (router readiness 200)" in out and "worker (as the router" in out


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ("deploy", "baseline", "--yes"),
            "dsv4ops export rbg baseline --replicas 2 --namespace inference | kubectl apply -f -",
        ),
        (
            ("deploy", "baseline", "--dry-run"),
            "dsv4ops export rbg baseline --replicas 2 --namespace inference | kubectl apply -f -",
        ),
        (
            ("rollback", "--yes"),
            "dsv4ops export rbg baseline --replicas 2 --namespace inference | kubectl apply -f -",
        ),
        (("stop", "--yes"), "kubectl delete rolebasedgroup baseline -n inference"),
        (
            ("kernels", "rollback"),
            "--kernel-image IMAGE --replicas 2 --namespace inference | kubectl apply",
        ),
    ],
)
def test_process_verbs_refuse_print_the_cluster_command_and_change_nothing(
    cluster: TwinStack, capsys: pytest.CaptureFixture[str], args: tuple[str, ...], line: str
) -> None:
    before = _pids(cluster)
    code, out, err = _run(capsys, *args, "--target", "cluster")
    assert code == 1, (out, err)
    assert "the cluster's controller owns restarts, and nothing was changed" in err, err
    assert line in err, err
    assert "Traceback" not in err
    assert _pids(cluster) == before and len(before) == 3  # every process untouched
    assert Journal("cluster").operations() == []  # nothing journaled, no lock taken


def test_a_router_that_does_not_answer_is_not_called_healthy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from testing.ports import free_ports

    (port,) = free_ports(1)
    (tmp_path / "targets.yaml").write_text(
        "schema_version: 1\ntargets:\n  gone:\n    transport: endpoint\n"
        f"    router_url: http://127.0.0.1:{port}\n"
    )
    monkeypatch.setenv("DSV4OPS_PROFILES_DIR", str(tmp_path))
    code, out, err = _run(capsys, "status", "--target", "gone", "--json")
    assert code == 4, err  # nothing answered: UNKNOWN, never HEALTHY nor exit 0
    st = json.loads(out)
    assert st["healthy"] is False and st["router"]["readiness"] is None
    assert st["status"] == "UNKNOWN" and st["exit"] == 4
    assert st["router"]["readiness_error"]  # says why: nothing answered
    code, out, _ = _run(capsys, "status", "--target", "gone")
    assert code == 4 and "UNKNOWN" in out and "HEALTHY (" not in out
    assert "restarts: owned by the cluster's controller" in out


def test_watch_judges_the_cluster_through_the_endpoint_target(cluster: TwinStack) -> None:
    """`dsv4ops watch --target cluster`: the router's and servers' metrics and the probes go from
    this machine to the URLs targets.yaml names; a decode that goes away is reported."""
    from dsv4ops.cli._context import open_target
    from dsv4ops.usecases.watch import open_watch

    session = open_target("cluster", verb="watch", http_only=True, read_only=True)
    try:
        watcher = open_watch(session, interval_s=1.0, probe_every_s=0.0)
        assert watcher.endpoints.via == "operator"
        assert watcher.endpoints.model == "deepseek-v4-flash"  # the baseline profile's name
        quiet = watcher.tick()
        assert quiet.scrape.router.up and all(s.up for s in quiet.scrape.servers.values()), quiet
        assert [p.status for p in quiet.probes] == ["ok", "ok"], quiet.probes
        assert quiet.findings == (), quiet.findings
        cluster.kill("decode")  # the cluster's decode pod gone: seen from this machine
        try:
            seen = [f for _ in range(3) for f in watcher.tick().findings]
        finally:
            cluster.restart("decode")
        down = [f for f in seen if f.code == "component_down"]
        assert down and down[0].component == "decode", seen
    finally:
        session.close()


def test_watch_refuses_an_endpoint_without_the_metrics_it_judges_by(
    cluster: TwinStack, capsys: pytest.CaptureFixture[str]
) -> None:
    import os

    path = Path(os.environ["DSV4OPS_PROFILES_DIR"]) / "targets.yaml"
    text = path.read_text()
    path.write_text(
        "\n".join(line for line in text.splitlines() if "router: http" not in line) + "\n"
    )
    code, out, err = _run(capsys, "watch", "--target", "cluster", "--once")
    assert code != 0 and "metrics.router" in err and "Traceback" not in err, (code, out, err)
