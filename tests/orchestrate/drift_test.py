from __future__ import annotations

from typing import Any

from dsv4ops.deployment import Component, Deployment
from dsv4ops.orchestrate.drift import (
    KernelReading,
    kernel_package_drift,
    process_drift,
    profile_drift,
)
from dsv4ops.remote.base import ProcessState
from testing.orchestrate import make_deployment


def _states(
    d: Deployment, pids: dict[str, int] | None = None, **override: Any
) -> dict[str, ProcessState]:
    out = {}
    for c in d.components:
        out[c.name] = ProcessState(
            c.name,
            (pids or {}).get(c.name, 10),
            True,
            started_at="t0",
            argv=c.argv,
            env=dict(c.env),
        )
    out.update(override)
    return out


def test_no_drift_when_everything_matches() -> None:
    d = make_deployment("b")
    rec = {n: {"pid": 10, "started_at": "t0"} for n in ("prefill", "decode", "router")}
    assert process_drift(_states(d), d, rec) == []


def test_restarted_outside_the_tool_and_down_and_changed_argv() -> None:
    d = make_deployment("b")
    rec = {n: {"pid": 10, "started_at": "t0"} for n in ("prefill", "decode", "router")}
    states = _states(d, pids={"decode": 77})
    states["router"] = ProcessState("router", 5, False, exit_code=1)
    states["prefill"] = ProcessState(
        "prefill", 10, True, started_at="t0", argv=(*d.component("prefill").argv, "--x"), env={}
    )
    drift = process_drift(states, d, rec)
    assert any("decode was restarted outside dsv4ops" in s and "pid 77" in s for s in drift)
    assert any("router is not running (exit code 1)" in s for s in drift)
    assert any("prefill runs a different command" in s and "--x" in s for s in drift)


def test_processes_without_a_recorded_deployment() -> None:
    d = make_deployment("b")
    assert "no current deployment" in process_drift(_states(d), None, {})[0]


def test_profile_changed_in_working_copy() -> None:
    d = make_deployment("b")
    c = d.component("decode")
    changed = Deployment(
        "b",
        (
            d.component("prefill"),
            Component("decode", (*c.argv, "--new"), c.env, c.host, c.port, c.ports),
            d.component("router"),
        ),
    )
    assert "renders different commands for decode" in profile_drift(d, changed)[0]
    assert profile_drift(d, d) == []


# ------------------------------------------------------------------ kernel package drift

PKG = "dsv4-decode-kernels"
X, Y = f"{PKG}@0.2.0", f"{PKG}@0.1.0"


def test_kernel_package_all_three_agree_or_cannot_be_told() -> None:
    assert kernel_package_drift("k", X, KernelReading(X), KernelReading(X), target="t") == []
    # Real SGLang does not name what it loaded: unknown is shown, never counted as drift.
    unknown = KernelReading(None, known=False, detail="real SGLang does not report it")
    assert kernel_package_drift("k", X, KernelReading(X), unknown, target="t") == []
    assert unknown.text() == "unknown (real SGLang does not report it)"
    # A profile that names no package is not compared (its own env decides).
    assert kernel_package_drift("k", None, KernelReading(Y), KernelReading(None), target="t") == []


def test_kernel_package_switched_on_the_target_after_the_unit_started() -> None:
    (line,) = kernel_package_drift("k", X, KernelReading(Y), KernelReading(X), target="t")
    assert line.startswith(f"kernel package: deployed {X}, active on target {Y}, decode loaded {X}")
    # The running decode is what was deployed: re-point the target, or pin Y and redeploy the unit.
    assert f"`dsv4ops kernels rollback --name {PKG} --to 0.2.0 --target t`" in line
    assert f"set `kernel_package: {Y}` in profile k and run `dsv4ops deploy k --target t`" in line
    assert "Never restart decode alone" in line and "--only" not in line


def test_kernel_package_decode_did_not_load_the_deployed_one() -> None:
    fell_back = KernelReading(None, detail="server fell back to default MoE configs: Using default")
    (line,) = kernel_package_drift("k", X, KernelReading(X), fell_back, target="t")
    assert f"active on target {X}, decode loaded none (server fell back to default" in line
    assert (
        f"restart the unit with `dsv4ops deploy k --target t` (prefill, decode and router together) to load {X}"
        in line
    )
    assert "kernels rollback" not in line
    (line,) = kernel_package_drift("k", X, KernelReading(Y), KernelReading(Y), target="t")
    assert f"decode loaded {Y}" in line and "`dsv4ops deploy k --target t`" in line
    assert f"after `dsv4ops kernels rollback --name {PKG} --to 0.2.0 --target t`" in line
    # Nothing current on the target: no "serve that one" advice for a package that is not there.
    none = KernelReading(None, detail=f"no version of {PKG} is current on the target")
    (line,) = kernel_package_drift("k", X, none, KernelReading(X), target="t")
    assert f"active on target none (no version of {PKG} is current" in line
    assert "kernel_package:" not in line.split(" — ", 1)[1]
