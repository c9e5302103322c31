"""`session.reachable`: a target as this machine reaches it, for the HTTP-only verbs (canary,
status of an endpoint target, ab, watch)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsv4ops.errors import ProfileError, TargetError
from dsv4ops.journal.records import Kind, Status
from dsv4ops.journal.store import Journal
from dsv4ops.orchestrate.usecases.session import reachable
from dsv4ops.profiles import load_profile
from testing.orchestrate import make_deployment

REPO = Path(__file__).resolve().parents[3]


def _record(target: str) -> None:
    dep = make_deployment("recorded")
    journal = Journal(target)
    op = journal.begin(Kind.DEPLOY, profile=dep.profile_record(),
                       components=dep.component_records())
    journal.transition(op, Status.RUNNING)
    journal.transition(op, Status.SUCCEEDED, running=op)


def test_a_box_target_is_reached_where_the_journal_says_its_unit_runs() -> None:
    _record("twin-local")
    r = reachable("twin-local")
    assert (r.source, r.endpoint) == ("journal", False)
    assert r.router_url == "http://127.0.0.1:8000"
    assert (r.prefill_urls, r.decode_urls) == (("http://127.0.0.1:30000",),
                                               ("http://127.0.0.1:30001",))
    assert r.metrics_urls == ("http://127.0.0.1:30000/metrics", "http://127.0.0.1:30001/metrics")
    assert r.deployment is not None and r.deployment.profile_name == "recorded"


def test_without_a_record_a_profile_gives_its_rendered_ports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DSV4OPS_PROFILES_DIR", str(REPO / "profiles"))
    r = reachable("twin-local", load_profile("baseline"))
    assert r.source == "profile" and r.deployment is None
    assert r.router_url == "http://127.0.0.1:9000"  # 8000 + twin-local's offset
    assert r.worker_urls == ("http://127.0.0.1:31000", "http://127.0.0.1:31001")
    assert r.router_metrics_url == "http://127.0.0.1:30000/metrics"  # its Prometheus port


def test_nothing_known_is_a_clear_refusal_and_an_unknown_target_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DSV4OPS_PROFILES_DIR", str(REPO / "profiles"))
    with pytest.raises(TargetError, match="records no running deployment on target 'box'"):
        reachable("box")
    with pytest.raises(ProfileError, match="unknown target 'nowhere'; known targets: box"):
        reachable("nowhere", load_profile("baseline"))
