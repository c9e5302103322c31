"""The kernel package rules (dsv4ops/profiles/kernel_rules.py): the sparse decode attention switch
only where its hook is registered and its path runs, and the shipped `kernels-attn` A/B arm."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dsv4ops.cli import main
from dsv4ops.errors import ProfileError
from dsv4ops.profiles import load_profile, load_targets, render
from testing.profiles import child

REPO_PROFILES = Path(__file__).resolve().parents[2] / "profiles"
PKG = "kernel_package: dsv4-decode-kernels@0.1.0\n"
SWITCH = "decode:\n  env: {DSV4OPS_SPARSE_DECODE_ATTN: '1'}\n"  # line 4 of the child profile


def _err(write: Callable[[str, str], Path], text: str) -> tuple[ProfileError, Path]:
    path = write("p", child(text))
    with pytest.raises(ProfileError) as info:
        load_profile("p")
    return info.value, path


def test_the_switch_without_a_kernel_package_is_refused_at_its_line(
    write: Callable[[str, str], Path],
) -> None:
    err, path = _err(write, SWITCH)
    assert err.key == "decode.env.DSV4OPS_SPARSE_DECODE_ATTN"
    assert str(err).startswith(f"{path}:4: ") and "no kernel_package is pinned" in str(err)


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (
            "[--decode-attention-backend, triton]",
            "--decode-attention-backend triton: only the dsv4",
        ),
        ("[--attention-backend=flashinfer]", "--attention-backend flashinfer: only the dsv4"),
        ("[--device, npu]", "--device npu: the sm_120 entry point is CUDA's"),
    ],
)
def test_the_switch_where_the_decode_never_calls_the_entry_point_is_refused(
    write: Callable[[str, str], Path], args: str, reason: str
) -> None:
    text = PKG + SWITCH + f"  extra_args: {args}\n"
    err, path = _err(write, text)
    assert str(err).startswith(f"{path}:5: ")  # the switch's line (kernel_package is line 3)
    assert "never calls" in str(err) and reason in str(err)


def test_a_switch_value_other_than_1_or_0_is_refused(write: Callable[[str, str], Path]) -> None:
    err, _ = _err(write, "decode:\n  env: {DSV4OPS_SPARSE_DECODE_ATTN: 'true'}\n")
    assert "expected '1' (on) or '0' (off), got 'true'" in str(err)


def test_a_package_with_the_switch_needs_no_triton_moe_path(
    write: Callable[[str, str], Path],
) -> None:
    """The attention hook loads the package, so the MoE path may stay on flashinfer_mxfp4; the
    switch off, the same pin is refused as before, naming the switch as one way out."""
    write("p", child(PKG + SWITCH))
    assert load_profile("p").kernel_package == "dsv4-decode-kernels@0.1.0"
    err, _ = _err(write, PKG + "decode:\n  env: {DSV4OPS_SPARSE_DECODE_ATTN: '0'}\n")
    assert "nothing in this configuration would load" in str(err)
    assert "DSV4OPS_SPARSE_DECODE_ATTN: '1'" in str(err)


def test_kernels_attn_is_the_baseline_plus_the_package_and_the_switch() -> None:
    base = load_profile(REPO_PROFILES / "baseline.yaml")
    attn = load_profile(REPO_PROFILES / "kernels-attn.yaml")
    assert attn.warnings == ()
    assert attn.kernel_package and attn.kernel_package.startswith("dsv4-decode-kernels@")
    assert attn.decode.env_dict == {**base.decode.env_dict, "DSV4OPS_SPARSE_DECODE_ATTN": "1"}
    assert attn.flags == base.flags and attn.decode.extra_args == base.decode.extra_args
    box = load_targets(REPO_PROFILES / "targets.yaml")["box"]
    decode = render(attn, box).component("decode")
    assert decode is not None and dict(decode.env)["DSV4OPS_SPARSE_DECODE_ATTN"] == "1"


def test_profile_validate_names_file_and_line(
    write: Callable[[str, str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path = write("p", child(SWITCH))
    assert main(["profile", "validate", "p"]) == 1
    err = capsys.readouterr().err
    assert f"error: {path}:4: decode.env.DSV4OPS_SPARSE_DECODE_ATTN:" in err
    assert "Traceback" not in err
