"""The profile's kernel package in the deploy path, against a scripted target: preflight refuses
an absent package, the workers get its config dir, a decode that did not load it is rolled back,
and the added env is not drift."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from dsv4ops.deployment import Component, Deployment
from dsv4ops.errors import DeployError
from dsv4ops.journal.records import Operation
from dsv4ops.journal.store import Journal
from dsv4ops.orchestrate.drift import process_drift, profile_drift
from dsv4ops.orchestrate.kernelpkg import KernelSupport, config_dir_env
from dsv4ops.orchestrate.ops import Operator
from dsv4ops.remote.base import ProcessState
from dsv4ops.sglang_paths import plugin_env
from testing.clock import FakeClock
from testing.orchestrate import FakeControl, make_deployment

REF = "dsv4-decode-kernels@0.2.0"
DIR = "/work/kernels/dsv4-decode-kernels/0.2.0"


def _op(o: Operation | None) -> str:
    assert o is not None  # the journal names an operation here
    return o.op


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    return Journal("fake", directory=tmp_path, clock=FakeClock())


Seen = list[tuple[str, str, str, Component | None]]


def support(*, present: bool = True, used: bool = True, seen: Seen | None = None) -> KernelSupport:
    def loaded(info: str, log: str, expected: str, decode: Component | None) -> tuple[bool, str]:
        if seen is not None:
            seen.append((info, log, expected, decode))
        return (True, "in use: evidence") if used else (False, "not loaded: no plugin line")

    return KernelSupport(
        present=lambda ref: present,
        env_for=lambda ref: plugin_env("dsv4-decode-kernels", DIR),
        loaded=loaded,
    )


def operator(control: FakeControl, journal: Journal, kernels: KernelSupport) -> Operator:
    return Operator(control, journal, host="fake", clock=FakeClock(), kernels=kernels)


def with_package(name: str, offset: int = 0) -> Deployment:
    return replace(make_deployment(name, offset), kernel_package=REF)


def test_absent_package_fails_preflight_and_changes_nothing(journal: Journal) -> None:
    control = FakeControl()
    with pytest.raises(DeployError) as info:
        operator(control, journal, support(present=False)).deploy(with_package("baseline"))
    msg = str(info.value)
    assert f"kernel package {REF} is not installed on the target" in msg
    assert "Nothing was changed" in msg and "kernels deploy" in msg
    assert control.actions() == [] and journal.operations() == []


def test_workers_get_the_config_dir_and_decode_is_checked_before_the_router(
    journal: Journal,
) -> None:
    control = FakeControl()
    seen: Seen = []
    out = operator(control, journal, support(seen=seen)).deploy(with_package("baseline"))
    assert out.ok, out.message
    assert out.op_id is not None  # the operation ran, so it was journaled
    op = journal.get(out.op_id)
    envs = {c["name"]: c["env"] for c in op.components}
    assert envs["decode"]["SGLANG_MOE_CONFIG_DIR"] == DIR
    assert envs["prefill"]["SGLANG_MOE_CONFIG_DIR"] == DIR
    assert envs["decode"]["SGLANG_PLUGINS"] == "dsv4_decode_kernels"
    assert envs["decode"]["PYTHONPATH"] == f"{DIR}/site"
    assert "SGLANG_MOE_CONFIG_DIR" not in envs["router"] and "SGLANG_PLUGINS" not in envs["router"]
    assert envs["decode"]["X"] == "baseline"  # the profile's own env is kept
    assert op.profile is not None  # the journal recorded it
    assert op.profile["kernel_package"] == REF
    # The rendered hash is kept: rollback and working-copy drift compare profile with profile.
    assert op.profile is not None  # the journal recorded it
    assert op.profile["commands_hash"] == with_package("baseline").commands_hash
    steps = [s.name for s in op.steps if s.phase == "done"]
    check = f"check decode loaded kernel package {REF}"
    assert steps.index("wait until decode is ready (/health 200)") < steps.index(check)
    assert steps.index(check) < steps.index("start router")
    decode = seen[0][3] if seen else None
    assert (
        decode is not None and seen[0][2] == REF and decode.name == "decode"
    )  # its argv/env: the MoE path


def test_package_not_used_rolls_back_with_the_reason(journal: Journal) -> None:
    control = FakeControl()
    good_out = operator(control, journal, support()).deploy(make_deployment("baseline"))
    assert good_out.op_id is not None  # the operation ran, so it was journaled
    good = journal.get(good_out.op_id)
    out = operator(control, journal, support(used=False)).deploy(
        with_package("kernels", offset=100), fallback=(good, good.deployment())
    )
    assert not out.ok and out.status == "ROLLED_BACK", out.message
    assert f"check decode loaded kernel package {REF}" in out.message
    assert "is not in use: not loaded: no plugin line" in out.message
    assert _op(journal.deployed()) == good.op


def test_added_env_is_not_drift(journal: Journal) -> None:
    control = FakeControl()
    out = operator(control, journal, support()).deploy(with_package("baseline"))
    assert out.op_id is not None  # the operation ran, so it was journaled
    deployed = journal.get(out.op_id).deployment()
    # What runs carries the env the deploy added (the agent records the env it started with).
    states = {
        c.name: ProcessState(c.name, 1, True, started_at="t", argv=c.argv, env=dict(c.env))
        for c in deployed.components
    }
    assert process_drift(states, deployed, {}) == []
    rendered_now = with_package("baseline")  # the working copy renders no config dir
    assert profile_drift(deployed, rendered_now) == []
    # A real change next to it is still reported, and only for the changed component.
    changed = replace(
        rendered_now,
        commands_hash="",
        components=tuple(
            replace(c, env={**c.env, "X": "new"}) if c.name == "decode" else c
            for c in rendered_now.components
        ),
    )
    (line,) = profile_drift(deployed, changed)
    assert "different commands for decode than" in line


def test_config_dir_env_pins_the_profile_version() -> None:
    state = {
        "packages": {"dsv4-decode-kernels": {"current": "0.3.0", "config_dir": "/w/k/d/0.3.0"}},
        "env": {"SGLANG_MOE_CONFIG_DIR": "/w/k/d/0.3.0"},
    }
    assert config_dir_env(state, "/w", "dsv4-decode-kernels@0.3.0") == {
        "SGLANG_MOE_CONFIG_DIR": "/w/k/d/0.3.0",
        "SGLANG_PLUGINS": "dsv4_decode_kernels",
        "PYTHONPATH": "/w/k/d/0.3.0/site",
    }
    # Installed but not current (a newer one was deployed since): the pinned version's root.
    pinned = config_dir_env(state, "/w/", "dsv4-decode-kernels@0.2.0")
    assert pinned["SGLANG_MOE_CONFIG_DIR"] == "/w/kernels/dsv4-decode-kernels/0.2.0"
    assert pinned["PYTHONPATH"] == "/w/kernels/dsv4-decode-kernels/0.2.0/site"
    assert config_dir_env(None, "/w", "p@1")["SGLANG_MOE_CONFIG_DIR"] == "/w/kernels/p/1"
