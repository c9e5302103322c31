"""The sparse decode attention in the deploy gate and `status`: a profile that switched it on
(decode env DSV4OPS_SPARSE_DECODE_ATTN=1) deploys only when the decode's log shows a call that
took the package's kernel, and status shows the route the plugin took. Against a scripted
target, through the CLI's own binding of the check (usecases/compose.decode_uses_package)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from dsv4ops.cli.status import render
from dsv4ops.journal.store import Journal
from dsv4ops.orchestrate.kernelpkg import KernelSupport, with_kernel_env
from dsv4ops.orchestrate.ops import Operator
from dsv4ops.orchestrate.outcome import Outcome
from dsv4ops.orchestrate.status import KernelStatus, gather_status
from dsv4ops.usecases.compose import decode_uses_package
from testing.clock import FakeClock
from testing.orchestrate import KERNELS_PKG as PKG
from testing.orchestrate import KERNELS_REF as REF
from testing.orchestrate import SglangControl, make_deployment

SWITCH = {"DSV4OPS_SPARSE_DECODE_ATTN": "1"}  # on the baseline's flashinfer MoE path
HOOKED = (
    f"[dsv4ops-kernel-plugin] loaded {PKG} 0.2.0 pid=7 hooks=sparse_decode_attn:replace:"
    "sglang.kernels.ops.attention.flash_mla_sm120.flash_mla_with_kvcache_sm120"
)
OURS = (
    "[dsv4ops-kernel-plugin] sparse-decode-attn pid=7 first call ours: "
    "the package's flash_mla_paged kernel"
)
ORIGINAL = (
    "[dsv4ops-kernel-plugin] sparse-decode-attn pid=7 first call original: SGLang's own "
    "(our kernel did not import: ModuleNotFoundError('triton'))"
)


def _deploy(tmp_path: Path, decode_log: str) -> tuple[Outcome, SglangControl, Journal]:
    journal = Journal("fake", directory=tmp_path, clock=FakeClock())
    control = SglangControl(twin=False, decode_log=decode_log)
    support = KernelSupport(
        present=lambda ref: True, env_for=lambda ref: {}, loaded=decode_uses_package
    )
    deployment = with_kernel_env(
        replace(make_deployment("kernels-attn"), kernel_package=REF), SWITCH
    )
    out = Operator(control, journal, host="fake", clock=FakeClock(), kernels=support).deploy(
        deployment
    )
    return out, control, journal


def test_a_decode_that_took_our_kernel_deploys_and_status_shows_the_route(
    tmp_path: Path,
) -> None:
    out, control, journal = _deploy(tmp_path, f"{HOOKED}\n{ORIGINAL}\n{OURS}\nready")
    assert out.ok, out.message
    kernels = KernelStatus(
        state=lambda: {"packages": {PKG: {"current": "0.2.0"}}}, loaded=decode_uses_package
    )
    st = gather_status(control, journal, target="fake", kernels=kernels)
    k = st["kernel_package"]
    assert st["healthy"] and k is not None and k["loaded"] == REF, st
    assert k["evidence"] == f"in use: {HOOKED} | {OURS}"
    assert f"  in use: {HOOKED} | {OURS}" in render(st)


def test_a_decode_whose_calls_all_went_to_sglangs_original_fails_the_deploy(
    tmp_path: Path,
) -> None:
    out, _, _ = _deploy(tmp_path, f"{HOOKED}\n{ORIGINAL}\nready")
    assert not out.ok and out.status == "FAILED"
    message = " ".join(out.message.split())
    assert f"kernel package {REF} is not in use: loaded, attention not ours:" in message
    assert "none to the package's kernel" in message and "did not import" in message


def test_a_decode_without_the_hook_or_without_a_call_fails_the_deploy(tmp_path: Path) -> None:
    unhooked, _, _ = _deploy(tmp_path / "a", f"{HOOKED.split(' hooks=')[0]} hooks=none\nready")
    assert not unhooked.ok
    assert "loaded, attention not hooked" in " ".join(unhooked.message.split())
    idle, _, _ = _deploy(tmp_path / "b", f"{HOOKED}\nready")
    assert not idle.ok
    assert "loaded, no attention call yet" in " ".join(idle.message.split())
