"""The one Deployment value: its hash, its ports, and its journal record (dsv4ops/deployment.py)."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from dsv4ops.deployment import Component, Deployment, commands_hash
from dsv4ops.errors import DeployError, RecordedSettingError
from dsv4ops.journal.records import Kind
from dsv4ops.journal.store import Journal
from dsv4ops.profiles import load_profile, load_targets, render
from dsv4ops.profiles.model import Target
from dsv4ops.routerkind import RouterKind
from dsv4ops.settings import CanaryThresholds
from testing.clock import FakeClock
from testing.orchestrate import make_deployment, with_recorded

REPO = Path(__file__).resolve().parents[1]
# tiny-cpu is the real-SGLang-on-CPU rehearsal profile (target sglang-cpu), never the box's.
SHIPPED = sorted(
    p.stem for p in (REPO / "profiles").glob("*.yaml") if p.stem not in ("targets", "tiny-cpu")
)

# sha256 of the commands each shipped profile renders for the `box` target, computed by the
# version before issue 12 (profiles.Rendered.commands_hash). The journal, drift and restore
# compare deployments by this hash: a change here makes every recorded deployment look drifted.
# Pinned again when a shipped profile's commands change on purpose (issue 44: the DSV4 decode's
# --context-length, sglang#40442, and the PD timeouts in the env, sglang#36033); the formula is
# checked below as it was.
PINNED_BOX_HASHES = {
    "baseline": "1f1efd0c60b6a050a7d872f5dfd5f03d37867ce47e8a194c0a2ded2c15285b7d",
    "buckets-step4": "d44bd3c5936187ef5c6677ef65ab4f2c69a706bbd7bbef41911134ad785153ec",
    "multi-stream-on": "9b34856d25e0a60e7f152c3c9481fbb07c3942ec4797614e1e215277a6e33b5b",
    "overlap-on": "f7b70bc515e0a3b53836083d15363e294def0adbb3da1b531fe97046008dae83",
    # issue 43: the baseline behind SMG (its PD timeouts and decode context length from issue 44)
    "smg": "83d73b0a39b8d479e2997746af44172e1dbdf1632ff080c8125d243175029b65",
    # issue 41: the baseline plus the kernel package's attention switch
    "kernels-attn": "7092827147f2c5bdd4be02b94284bbc50affaca51a3e926a221f977dfb9a18bd",
}

# The baseline of tests/journal/fixtures/pre_issue12_baseline.yaml, the profile that journal
# was recorded from.
PRE_ISSUE12_BASELINE_HASH = "022720ea64ad37243259562827e25b9611f695547aba487da70c1f39fb7fa077"


def _targets() -> dict[str, Target]:
    return load_targets(REPO / "profiles" / "targets.yaml")


def _render(name: str, target: str = "box") -> Deployment:
    return render(load_profile(str(REPO / "profiles" / f"{name}.yaml")), _targets()[target])


def _value(argv: tuple[str, ...], flag: str) -> int:
    return int(argv[argv.index(flag) + 1])


def test_every_shipped_profile_is_pinned() -> None:
    assert sorted(PINNED_BOX_HASHES) == SHIPPED


@pytest.mark.parametrize("name", sorted(PINNED_BOX_HASHES))
def test_commands_hash_equals_the_pre_issue12_hash(name: str) -> None:
    d = _render(name)
    assert d.commands_hash == PINNED_BOX_HASHES[name]
    # The old formula, written out: name/argv/sorted env in start order, compact sorted JSON.
    payload = [
        {"name": c.name, "argv": list(c.argv), "env": dict(sorted(c.env.items()))}
        for c in d.components
    ]
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    assert d.commands_hash == hashlib.sha256(blob).hexdigest()
    # Component order does not matter, and a rebuilt value computes the same hash.
    assert commands_hash(tuple(reversed(d.components))) == d.commands_hash
    assert replace(d, commands_hash="").commands_hash == d.commands_hash


def test_hash_changes_with_argv_and_env() -> None:
    d = _render("baseline")
    decode = d.component("decode")
    for changed in (replace(decode, argv=(*decode.argv, "--x")), replace(decode, env={"A": "1"})):
        comps = tuple(changed if c.name == "decode" else c for c in d.components)
        assert commands_hash(comps) != d.commands_hash


@pytest.mark.parametrize("name", SHIPPED)
@pytest.mark.parametrize("target", ["box", "twin-local"])
def test_ports_computed_from_the_profile(name: str, target: str) -> None:
    profile = load_profile(str(REPO / "profiles" / f"{name}.yaml"))
    off = _targets()[target].port_offset
    d = render(profile, _targets()[target])
    prefill, decode, router = d.in_order()
    assert prefill.metrics_port == prefill.port == profile.prefill.port + off
    assert decode.metrics_port == decode.port == profile.decode.port + off
    assert router.metrics_port == profile.router.prometheus_port + off != router.port
    assert prefill.bootstrap_port == profile.bootstrap_port + off
    assert decode.bootstrap_port is None and router.bootstrap_port is None
    # ... and they are the ports the commands really use.
    assert router.metrics_port == _value(router.argv, "--prometheus-port")
    assert prefill.bootstrap_port == _value(prefill.argv, "--disaggregation-bootstrap-port")
    for c in (prefill, decode, router):
        assert c.port == _value(c.argv, "--port") and c.metrics_port in c.ports
        assert c.metrics_url == f"http://{c.host}:{c.metrics_port}/metrics"


def test_box_is_probed_on_loopback_and_reached_by_name() -> None:
    router = _render("baseline").component("router")
    assert router.bind_host == "0.0.0.0"
    assert router.url("/health") == "http://127.0.0.1:8000/health"  # from the target itself
    assert router.client_url() == "http://dsv4-box:8000"  # from the operator's machine


def test_render_carries_what_the_journal_and_canary_need() -> None:
    profile = load_profile(str(REPO / "profiles" / "baseline.yaml"))
    d = render(profile, _targets()["box"])
    assert d.profile_name == "baseline" and d.target == "box"
    assert d.model_name == profile.model.request_name == "deepseek-v4-flash"
    assert d.decode_buckets == profile.decode_buckets
    assert d.canary == profile.canary and d.probe == profile.probe  # the dump, read back
    assert d.kernel_package == profile.kernel_package and d.recorded.content == profile.to_dict()


def test_record_round_trip_through_the_journal(tmp_path: Path) -> None:
    d = replace(_render("buckets-step4"), git_commit="abc123", profile_path="p.yaml")
    journal = Journal("box", directory=tmp_path, clock=FakeClock())
    rec = d.to_record()
    op_id = journal.begin(Kind.DEPLOY, profile=rec["profile"], components=rec["components"])
    back = Journal("box", directory=tmp_path).get(op_id).deployment()
    assert back.components == d.components and back.commands_hash == d.commands_hash
    assert (back.profile_name, back.git_commit, back.profile_path) == (
        "buckets-step4",
        "abc123",
        "p.yaml",
    )
    assert back.model_name == d.model_name and back.decode_buckets == d.decode_buckets
    assert back.kernel_package == d.kernel_package and back.source_op == op_id
    assert back.canary == d.canary and back.probe == d.probe


def test_secrets_are_redacted_in_records_and_the_real_hash_kept(tmp_path: Path) -> None:
    d = _render("baseline")
    decode = d.component("decode")
    secret = replace(
        decode,
        argv=(*decode.argv, "--api-key", "s3cret-value", "--admin-api-key=adm1n-value"),
        env={**decode.env, "HF_TOKEN": "hf_tokenvalue"},
    )
    d = Deployment("baseline", tuple(secret if c.name == "decode" else c for c in d.components))
    rec = d.to_record()
    text = json.dumps(rec)
    assert "s3cret-value" not in text and "adm1n-value" not in text and "hf_tokenvalue" not in text
    (drec,) = (c for c in rec["components"] if c["name"] == "decode")
    assert drec["env"]["HF_TOKEN"] == "***" and "--admin-api-key=***" in drec["argv"]
    journal = Journal("box", directory=tmp_path, clock=FakeClock())
    op_id = journal.begin(Kind.DEPLOY, profile=rec["profile"], components=rec["components"])
    assert "s3cret-value" not in journal.path.read_text()
    back = journal.get(op_id).deployment()
    assert back.component("decode").has_redacted_values
    assert not back.component("prefill").has_redacted_values
    # The recorded hash is the one over the real values, not over the redacted record.
    assert back.commands_hash == d.commands_hash != commands_hash(back.components)


def test_pre_issue12_journal_still_loads(tmp_path: Path) -> None:
    # Written by the version before the one Deployment value: component records without
    # metrics_port, bootstrap_port and bind_host.
    fixture = Path(__file__).parent / "journal" / "fixtures" / "pre_issue12_deploy_box.jsonl"
    begin = json.loads(fixture.read_text().splitlines()[0])
    assert begin["type"] == "begin" and "metrics_port" not in begin["components"][2]
    (tmp_path / "box.jsonl").write_bytes(fixture.read_bytes())
    (op,) = Journal("box", directory=tmp_path).operations()
    back = op.deployment()
    # the baseline that journal was recorded from (the shipped one has changed since: issue 44)
    then_profile = load_profile(str(fixture.parent / "pre_issue12_baseline.yaml"))
    now = render(then_profile, _targets()["box"])
    assert back.commands_hash == PRE_ISSUE12_BASELINE_HASH == now.commands_hash
    assert back.components == now.components  # every port and the bind host recovered
    assert back.component("router").metrics_port == 29000
    assert back.component("prefill").bootstrap_port == 8998
    assert back.component("decode").url("/health") == "http://127.0.0.1:30001/health"
    assert back.git_commit == "0123456789abcdef0123456789abcdef01234567"


def test_a_deployment_needs_the_three_components() -> None:
    d = _render("baseline")
    with pytest.raises(DeployError, match="needs exactly prefill, decode, router"):
        Deployment("x", d.components[:2])
    with pytest.raises(DeployError, match="recorded no components"):
        Deployment.from_record({"name": "x"}, [], source_op="op-1")


def test_component_defaults_metrics_port_to_the_api_port() -> None:
    c = Component("decode", ("python",), {}, "127.0.0.1", 30001, (30001,))
    assert c.metrics_port == 30001 and c.bootstrap_port is None and c.probe_host == "127.0.0.1"


@pytest.mark.parametrize(
    ("content", "key"),
    [
        ({"router": {"kind": "nginx"}}, "router.kind"),
        ({"router": "smg"}, "router"),
        ({"model": {"path": ["/m"]}}, "model.path"),
        ({"canary": {"tool_calls": "no"}}, "canary.tool_calls"),
        ({"probe": {"tool_call": None}}, "probe.tool_call"),
    ],
)
def test_a_recorded_section_that_does_not_fit_is_named_never_defaulted(
    content: dict[str, object], key: str
) -> None:
    d = replace(with_recorded(make_deployment("a"), content=content), source_op="d-1")
    with pytest.raises(RecordedSettingError) as info:
        d.check_recorded()
    assert (info.value.op, info.value.key) == ("d-1", key)
    assert "dsv4ops deploy a --target TARGET" in (info.value.hint or "")


def test_a_record_from_before_the_sections_reads_as_that_release_ran() -> None:
    d = with_recorded(make_deployment("a"), content={"model": {"path": "/m"}})
    assert (d.model_name, d.router_kind) == ("/m", RouterKind.SGLANG_ROUTER)
    assert d.canary == CanaryThresholds() and d.probe.tool_call == "required"
    assert with_recorded(d).model_name == "default"


@pytest.mark.parametrize("fixture", ["first_6e6d7b0.jsonl", "pre_issue12_deploy_box.jsonl"])
def test_a_recorded_profile_is_carried_typed_and_stored_again_byte_for_byte(fixture: str) -> None:
    """Issue 42 item 2: the deployment carries the recorded profile and flags and reads them
    only through their declarations; a rollback that records it again stores exactly what
    it read (and the commands hash it recorded), so existing journals stay valid."""
    path = Path(__file__).parent / "journal" / "fixtures" / fixture
    begins = [json.loads(line) for line in path.read_text().splitlines()]
    begins = [r for r in begins if r.get("type") == "begin" and r.get("components")]
    assert begins
    for rec in begins:
        back = Deployment.from_record(rec["profile"], rec["components"], source_op=rec["op"])
        back.check_recorded()  # every section and flag fits its declaration
        stored = json.dumps(back.profile_record(), sort_keys=True)
        assert stored == json.dumps(rec["profile"], sort_keys=True)
        assert back.commands_hash == rec["profile"]["commands_hash"]
        assert back.decode_buckets == tuple(rec["profile"]["flags"]["decode_buckets"])
        assert back.switches["overlap_schedule"] is rec["profile"]["flags"]["overlap_schedule"]


def test_only_the_deployment_reads_its_recorded_profile() -> None:
    """No second reader: outside deployment.py, nothing reads the carried profile or flags
    as data (`.recorded.content`, `.recorded.flags`, `.recorded.read`, `.recorded.record`);
    everyone asks the Deployment's typed readers."""
    package = Path(__file__).parent.parent / "dsv4ops"
    pattern = re.compile(r"\.recorded\.(content|flags|read|record)\b")
    readers = [
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if path.name != "deployment.py" and pattern.search(path.read_text(encoding="utf-8"))
    ]
    assert readers == []
