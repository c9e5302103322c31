"""`session.reachable`: a target as this machine reaches it, for the HTTP-only verbs (canary,
status of an endpoint target, ab, watch)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsv4ops.apikey import ApiKeyError
from dsv4ops.errors import CanaryError, ProfileError, TargetError
from dsv4ops.journal.records import Kind, Status
from dsv4ops.journal.store import FileBackend, Journal
from dsv4ops.profiles import load_profile
from dsv4ops.usecases.canary import resolve_endpoint
from dsv4ops.usecases.session import reachable
from testing.orchestrate import journal_session, make_deployment

REPO = Path(__file__).resolve().parents[2]


_session = journal_session


def _record(target: str, journal: Journal | None = None) -> None:
    dep = make_deployment("recorded")
    journal = journal or Journal(target)
    op = journal.begin(
        Kind.DEPLOY, profile=dep.profile_record(), components=dep.component_records()
    )
    journal.transition(op, Status.RUNNING)
    journal.transition(op, Status.SUCCEEDED, running=op)


def test_a_box_target_is_reached_where_the_journal_says_its_unit_runs() -> None:
    _record("twin-local")
    r = reachable(_session("twin-local"))
    assert (r.source, r.endpoint) == ("journal", False)
    assert r.router_url == "http://127.0.0.1:8000"
    assert (r.prefill_urls, r.decode_urls) == (
        ("http://127.0.0.1:30000",),
        ("http://127.0.0.1:30001",),
    )
    assert r.metrics_urls == ("http://127.0.0.1:30000/metrics", "http://127.0.0.1:30001/metrics")
    assert r.deployment is not None and r.deployment.profile_name == "recorded"


def test_without_a_record_a_profile_gives_its_rendered_ports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DSV4OPS_PROFILES_DIR", str(REPO / "profiles"))
    r = reachable(_session("twin-local"), load_profile("baseline"))
    assert r.source == "profile" and r.deployment is None
    assert r.router_url == "http://127.0.0.1:9000"  # 8000 + twin-local's offset
    assert r.worker_urls == ("http://127.0.0.1:31000", "http://127.0.0.1:31001")
    assert r.router_metrics_url == "http://127.0.0.1:30000/metrics"  # its Prometheus port


def test_nothing_known_is_a_clear_refusal_and_an_unknown_target_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DSV4OPS_PROFILES_DIR", str(REPO / "profiles"))
    with pytest.raises(TargetError, match="records no running deployment on target 'box'"):
        reachable(_session("box"))
    with pytest.raises(ProfileError, match="unknown target 'nowhere'; known targets: box"):
        _session("nowhere")


def test_the_canary_reads_the_journal_deploy_wrote_not_this_machines_cache(
    tmp_path: Path,
) -> None:
    """The session's journal (the target's record, which deploy writes) decides where the canary
    sends load, even when this machine's cache of it has never seen the deployment (deployed
    from another operator's machine)."""
    record = Journal("twin-local", backend=FileBackend(tmp_path / "target-record.jsonl"))
    _record("twin-local", record)
    assert Journal("twin-local").deployed() is None  # the local cache knows nothing
    endpoint = resolve_endpoint(_session("twin-local", record), None, None)
    assert endpoint.base_url == "http://127.0.0.1:8000"
    assert endpoint.worker_urls == ("http://127.0.0.1:30000", "http://127.0.0.1:30001")
    with pytest.raises(CanaryError, match="records no running deployment"):
        resolve_endpoint(_session("twin-local"), None, None)


KEYED = "schema_version: 1\nextends: baseline\nrouter:\n  api_key:\n    env: SESSION_TEST_KEY\n"


def test_a_cluster_and_a_bare_url_carry_the_key_their_profile_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An endpoint target sends the `router.api_key` of the profile it runs; a `--url` canary
    the one `--api-key-env` names, else its `--profile`'s. Never the key in an argument."""
    import shutil

    profiles = tmp_path / "profiles"
    shutil.copytree(REPO / "profiles", profiles)
    (profiles / "keyed.yaml").write_text(KEYED)
    (profiles / "targets.yaml").write_text(
        "schema_version: 1\ntargets:\n  cluster:\n    description: a keyed cluster\n"
        "    transport: endpoint\n    router_url: http://127.0.0.1:9\n    profile: keyed\n"
    )
    monkeypatch.setenv("DSV4OPS_PROFILES_DIR", str(profiles))
    monkeypatch.setenv("SESSION_TEST_KEY", "cluster-key-1234")
    monkeypatch.setenv("OTHER_KEY", "other-key-5678")
    r = reachable(_session("cluster"))
    assert r.router_key is not None and r.router_key.env == "SESSION_TEST_KEY"
    # status sends no key: it neither loads the profile nor needs it to exist here
    assert reachable(_session("cluster"), key=False).router_key is None
    (profiles / "keyed.yaml").unlink()
    assert reachable(_session("cluster"), key=False).router_url == "http://127.0.0.1:9"
    with pytest.raises(ProfileError):
        reachable(_session("cluster"))  # the key of a profile that is not here: said, not guessed
    (profiles / "keyed.yaml").write_text(KEYED)
    bearer = {"Authorization": "Bearer cluster-key-1234"}
    assert resolve_endpoint(_session("cluster"), None, None).headers == bearer

    url = "http://127.0.0.1:9"
    assert resolve_endpoint(None, None, url).headers == {}  # nothing named: no key sent
    assert resolve_endpoint(None, "keyed", url).headers == bearer
    named = resolve_endpoint(None, "keyed", url, api_key_env="OTHER_KEY")
    assert named.headers == {"Authorization": "Bearer other-key-5678"}
    monkeypatch.delenv("OTHER_KEY")
    with pytest.raises(ApiKeyError, match="environment variable OTHER_KEY is not set"):
        resolve_endpoint(None, None, url, api_key_env="OTHER_KEY")
