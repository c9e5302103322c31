"""`status` compares the kernel package the deployment pinned, the one active on the target and
the one the running decode uses, against a scripted target: the decode log is the only evidence
(the plugin's line and SGLang reading the package's config; /server_info is not)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dsv4ops.cli.status import render
from dsv4ops.deployment import Component
from dsv4ops.errors import DsOpsError
from dsv4ops.journal.store import Journal
from dsv4ops.kernels import loaded_check
from dsv4ops.orchestrate.kernelpkg import KernelSupport, with_kernel_env
from dsv4ops.orchestrate.ops import Operator
from dsv4ops.orchestrate.status import KernelStatus, gather_status
from dsv4ops.orchestrate.status_report import KernelRow, StatusReport
from dsv4ops.sglang_paths import moe_path
from testing.clock import FakeClock
from testing.orchestrate import KERNELS_PKG as PKG
from testing.orchestrate import KERNELS_REF as REF
from testing.orchestrate import SglangControl, make_deployment

DEFAULT_LINE = (
    "[2026-05-01 10:00:00] Using default MoE kernel config. Performance might be sub-optimal!"
)


TRITON_ENV = {"SGLANG_DSV4_FP4_DEQUANT": "1", "SGLANG_ENABLE_JIT_DEEPGEMM": "0"}
PLUGIN_LINE = f"[dsv4ops-kernel-plugin] loaded {PKG} 0.2.0 pid=7 hooks=none"


def _loaded(
    info: str, log: str, expected: str, decode: Component | None = None
) -> tuple[bool, str]:
    moe = moe_path(decode.argv, dict(decode.env)) if decode is not None else None
    check = loaded_check(
        info, log, expected=expected, moe=moe
    )  # what the CLI binds (kernel_support)
    return check.used, check.reason if check.used else f"{check.state}: {check.reason}"


def _state(current: str | None) -> dict[str, Any]:
    packages = {PKG: {"current": current, "previous": None}} if current else {}
    return {"packages": packages, "env": {}}


def kernels_at(current: str | None) -> KernelStatus:
    return KernelStatus(state=lambda: _state(current), loaded=_loaded)


@pytest.fixture
def deployed(tmp_path: Path) -> tuple[SglangControl, Journal]:
    """(control, journal): a deployment pinning REF, deployed and known-good on the fake."""
    journal = Journal("fake", directory=tmp_path, clock=FakeClock())
    control = SglangControl()
    support = KernelSupport(
        present=lambda ref: True,
        env_for=lambda ref: {"SGLANG_MOE_CONFIG_DIR": f"/work/kernels/{PKG}/0.2.0"},
        loaded=_loaded,
    )
    deployment = with_kernel_env(
        replace(make_deployment("kernels-on"), kernel_package=REF), TRITON_ENV
    )
    out = Operator(control, journal, host="fake", clock=FakeClock(), kernels=support).deploy(
        deployment
    )
    assert out.ok, out.message
    control.log_reads = 0  # the deploy's own loaded check read it
    return control, journal


def status(control: SglangControl, journal: Journal, kernels: KernelStatus | None) -> StatusReport:
    return gather_status(control, journal, target="fake", kernels=kernels)


def kernel_of(st: StatusReport) -> KernelRow:
    k = st["kernel_package"]
    assert k is not None, st
    return k


def test_all_three_agree(deployed: tuple[SglangControl, Journal]) -> None:
    control, journal = deployed
    st = status(control, journal, kernels_at("0.2.0"))
    assert st["healthy"] and st["drift"] == [], st
    assert st["kernel_package"] == {
        "deployed": REF,
        "active": REF,
        "active_detail": REF,
        "loaded": REF,
        "loaded_detail": REF,
        "evidence": f"in use: {PLUGIN_LINE} | Using MoE kernel config from /work/kernels/{PKG}/0.2.0/"
        "configs/triton_3_8_0/E=256,N=512,device_name=X,dtype=fp8_w8a8,block_shape=[128, 128].json.",
        "drift": False,
    }
    assert control.log_reads == 1  # the log is the evidence, the twin's /server_info is not
    lines = render(st)
    assert f"kernel package: {REF} (active on target: {REF}; decode loaded: {REF})" in lines
    assert f"  in use: {PLUGIN_LINE} | Using MoE kernel config from /work/kernels/" in "\n".join(
        lines
    )
    assert not any(line.startswith("drift:") for line in lines)


def test_target_switched_after_the_unit_started(deployed: tuple[SglangControl, Journal]) -> None:
    control, journal = deployed
    st = status(control, journal, kernels_at("0.1.0"))
    assert not st["healthy"]
    (line,) = st["drift"]
    assert line.startswith(
        f"kernel package: deployed {REF}, active on target {PKG}@0.1.0, decode loaded {REF}"
    )
    assert kernel_of(st)["drift"] and kernel_of(st)["active"] == f"{PKG}@0.1.0"
    lines = render(st)
    assert lines[0].endswith("NOT HEALTHY")
    assert f"drift: {line}" in lines
    assert any("kernel package: " in x and "DRIFT, see below" in x for x in lines)


def test_twin_decode_reports_no_package(deployed: tuple[SglangControl, Journal]) -> None:
    control, journal = deployed
    control.reported = None
    st = status(control, journal, kernels_at("0.2.0"))
    assert not st["healthy"]
    (line,) = st["drift"]
    assert "decode loaded none (not loaded: no '[dsv4ops-kernel-plugin] loaded' line" in line
    assert "restart the unit with `dsv4ops deploy kernels-on --target " in line
    assert kernel_of(st)["loaded"] is None and kernel_of(st)["drift"]


def test_real_sglang_fell_back_to_default_configs(deployed: tuple[SglangControl, Journal]) -> None:
    control, journal = deployed
    control.twin, control.decode_log = False, f"{PLUGIN_LINE}\n{DEFAULT_LINE}\nready"
    st = status(control, journal, kernels_at("0.2.0"))
    (line,) = st["drift"]
    assert "decode loaded none (loaded, configs not read: plugin loaded (" in line
    assert "SGLang fell back to its default: [2026-05-01" in line and control.log_reads == 1


def test_old_false_positive_no_default_line_is_not_loaded(
    deployed: tuple[SglangControl, Journal],
) -> None:
    """Real SGLang, no default-config line and no plugin line: once "in use", now "not loaded"."""
    control, journal = deployed
    control.twin, control.decode_log = False, "loading\nready"
    st = status(control, journal, kernels_at("0.2.0"))
    (line,) = st["drift"]
    assert "decode loaded none (not loaded: " in line and kernel_of(st)["loaded"] is None


def test_evidence_scrolled_out_of_the_tail_is_unknown_not_absent(
    deployed: tuple[SglangControl, Journal],
) -> None:
    control, journal = deployed
    control.decode_log = "\n".join(f"request {i}" for i in range(2000))  # the tail misses the start
    st = status(control, journal, kernels_at("0.2.0"))
    assert st["drift"] == [] and kernel_of(st)["loaded"] is None
    assert kernel_of(st)["loaded_detail"].startswith(
        "unknown (the decode's start-up lines are no longer in its last 2000 log lines"
    )


def test_a_decode_on_the_flashinfer_path_is_not_used_by_this_backend(tmp_path: Path) -> None:
    journal = Journal("fake", directory=tmp_path, clock=FakeClock())
    control = SglangControl()
    support = KernelSupport(present=lambda ref: True, env_for=lambda ref: {}, loaded=_loaded)
    deployment = replace(make_deployment("kernels-on"), kernel_package=REF)  # no triton env
    out = Operator(control, journal, host="fake", clock=FakeClock(), kernels=support).deploy(
        deployment
    )
    assert not out.ok and out.status == "FAILED"
    assert (
        "is not in use: not used by this backend: flashinfer_mxfp4 reads no Triton configs"
        in " ".join(out.message.split())
    )


def test_real_sglang_with_the_evidence_in_its_log_is_in_use(
    deployed: tuple[SglangControl, Journal],
) -> None:
    control, journal = deployed
    control.twin = False  # no twin_kernel_package: the log alone says it
    st = status(control, journal, kernels_at("0.2.0"))
    assert st["healthy"] and st["drift"] == [], st
    assert kernel_of(st)["loaded"] == REF
    # ...and the pointer moving on the target is still seen.
    st = status(control, journal, kernels_at("0.1.0"))
    (line,) = st["drift"]
    assert f"decode loaded {REF}" in line


def test_unreadable_target_state_and_decode_down(deployed: tuple[SglangControl, Journal]) -> None:
    control, journal = deployed

    def broken() -> None:
        raise DsOpsError("agent: state/kernels.json: bad JSON")

    st = status(control, journal, KernelStatus(state=broken, loaded=_loaded))
    assert st["drift"] == [] and st["healthy"], st
    assert kernel_of(st)["active_detail"] == (
        "unknown (cannot read the target's kernels state: agent: state/kernels.json: bad JSON)"
    )
    st = status(control, journal, None)  # not wired in: shown as not read, nothing claimed
    assert kernel_of(st)["active_detail"].startswith("unknown (the target's kernels state")
    assert st["drift"] == []
    control.running.pop("decode")
    st = status(control, journal, kernels_at("0.2.0"))
    assert kernel_of(st)["loaded_detail"] == "unknown (decode is not running)"
    assert not any(d.startswith("kernel package") for d in st["drift"])
    assert any("decode is not running" in d for d in st["drift"])


def test_profile_without_a_package_is_not_compared(tmp_path: Path) -> None:
    journal = Journal("fake", directory=tmp_path, clock=FakeClock())
    control = SglangControl(reported=None)
    out = Operator(control, journal, host="fake", clock=FakeClock()).deploy(
        make_deployment("baseline")
    )
    assert out.ok
    st = status(control, journal, kernels_at("0.2.0"))
    assert st["kernel_package"] is None and st["drift"] == [] and st["healthy"]
    assert not any(line.startswith("kernel package") for line in render(st))
