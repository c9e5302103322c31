"""One test (at least) per semantic rule; each asserts file:line: key path and the advice."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dsv4ops.canary.verdict import thresholds_from_profile
from dsv4ops.errors import ProfileError
from dsv4ops.profiles import load_profile, load_targets, render
from dsv4ops.profiles.load import list_profiles
from testing.profiles import TRITON_MOE_PATH_YAML, child, targets_yaml

REPO_PROFILES = Path(__file__).resolve().parents[2] / "profiles"


def _err(write: Callable[[str, str], Path], text: str) -> tuple[ProfileError, Path]:
    path = write("p", child(text))
    with pytest.raises(ProfileError) as info:
        load_profile("p")
    return info.value, path


def _codes(write: Callable[[str, str], Path], text: str) -> list[str]:
    write("p", child(text))
    return [w.code for w in load_profile("p").warnings]


def test_gpu_overlap_between_prefill_and_decode(write: Callable[[str, str], Path]) -> None:
    err, path = _err(write, "decode:\n  gpus: [3, 4, 5, 6]\n")
    assert str(err).startswith(f"{path}:4: decode.gpus: GPU(s) [3] are also used by prefill")


def test_tp_must_equal_number_of_gpus(write: Callable[[str, str], Path]) -> None:
    err, path = _err(write, "prefill:\n  tp: 2\n")
    assert str(err).startswith(f"{path}:4: prefill.tp: tp is 2 but prefill.gpus lists 4 GPU(s)")
    assert "tp must be 4" in str(err)


def test_gpus_must_be_contiguous_for_base_gpu_id(write: Callable[[str, str], Path]) -> None:
    err, _ = _err(write, "prefill:\n  gpus: [0, 2]\n  tp: 2\n")
    assert err.key == "prefill.gpus" and "contiguous" in str(err)


def test_gpu_listed_twice(write: Callable[[str, str], Path]) -> None:
    err, _ = _err(write, "prefill:\n  gpus: [0, 0]\n  tp: 2\n")
    assert "listed twice" in str(err)


def test_gpus_must_exist_on_the_target(write: Callable[[str, str], Path], pdir: Path) -> None:
    (pdir / "targets.yaml").write_text(
        (pdir / "targets.yaml").read_text().replace("[0, 1, 2, 3, 4, 5, 6, 7]", "[0, 1, 2, 3]")
    )
    write("p", child(""))
    with pytest.raises(ProfileError) as info:
        render(load_profile("p"), load_targets()["box"])
    assert info.value.key == "decode.gpus" and "[4, 5, 6, 7] are not on target 'box'" in str(
        info.value
    )


@pytest.mark.parametrize(
    ("text", "key", "clash"),
    [
        ("decode:\n  port: 30000\n", "decode.port", "prefill.port"),
        ("router:\n  port: 8998\n", "router.port", "prefill.bootstrap_port"),
        ("router:\n  prometheus_port: 8000\n", "router.prometheus_port", "router.port"),
        ("prefill:\n  bootstrap_port: 30001\n", "decode.port", "prefill.bootstrap_port"),
    ],
)
def test_every_port_distinct(
    write: Callable[[str, str], Path], text: str, key: str, clash: str
) -> None:
    err, _ = _err(write, text)
    assert err.key == key and f"already used by {clash}" in str(err)


def test_port_range_after_target_offset(write: Callable[[str, str], Path]) -> None:
    write("p", child("router:\n  port: 65000\n"))
    p = load_profile("p")
    with pytest.raises(ProfileError, match="65000 \\+ target 'twin-local' port_offset 1000"):
        render(p, load_targets()["twin-local"])


def test_offset_into_the_ephemeral_range_is_refused_naming_the_port(
    pdir: Path,
    write: Callable[[str, str], Path],
) -> None:
    # The old twin-local offset: 30000 -> 50000 collided with client sockets in TIME_WAIT.
    (pdir / "targets.yaml").write_text(targets_yaml(ports_offset=20000))
    with pytest.raises(ProfileError) as info:
        render(load_profile("base"), load_targets()["twin-local"])
    assert info.value.key == "prefill.port"
    assert "30000 + target 'twin-local' port_offset 20000 = 50000" in str(info.value)
    assert "ephemeral port range (32768-60999)" in str(info.value)
    # Offset 0 (the box) renders the profile's own ports; a safe offset renders fine too.
    assert render(load_profile("base"), load_targets()["box"]).component("prefill").port == 30000
    (pdir / "targets.yaml").write_text(targets_yaml(ports_offset=2000))
    assert (
        render(load_profile("base"), load_targets()["twin-local"]).component("prefill").port
        == 32000
    )
    # A port the profile itself puts in the range is refused too, on every target (issue 21:
    # it was once "the profile's choice", and flaked the same way).
    write("p", child("router:\n  prometheus_port: 40000\n"))
    with pytest.raises(ProfileError, match="port 40000 is in Linux's ephemeral port range"):
        load_profile("p")


def test_every_shipped_profile_renders_below_the_ephemeral_range_on_every_target() -> None:
    for path in list_profiles(REPO_PROFILES):
        for target in load_targets(REPO_PROFILES / "targets.yaml").values():
            ports = [p for c in render(load_profile(path), target).components for p in c.ports]
            assert ports and max(ports) < 32768, (path.stem, target.name, ports)


def test_buckets_strictly_increasing(write: Callable[[str, str], Path]) -> None:
    err, path = _err(write, "flags:\n  decode_buckets: [8, 16, 16, 96]\n")
    assert str(err).startswith(
        f"{path}:4: flags.decode_buckets[2]: buckets must be strictly increasing"
    )


def test_buckets_unsorted(write: Callable[[str, str], Path]) -> None:
    err, _ = _err(write, "flags:\n  decode_buckets: [8, 32, 16, 96]\n")
    assert err.key == "flags.decode_buckets[2]" and "16 follows 32" in str(err)


def test_buckets_positive(write: Callable[[str, str], Path]) -> None:
    err, _ = _err(write, "flags:\n  decode_buckets: [0, 8, 96]\n")
    assert err.key == "flags.decode_buckets[0]" and "positive" in str(err)


def test_bad_bucket_spec(write: Callable[[str, str], Path]) -> None:
    err, _ = _err(write, "flags:\n  decode_buckets: step4:96-40\n")
    assert err.key == "flags.decode_buckets" and "LO-HI" in str(err)


def test_largest_bucket_below_max_running_is_an_explained_warning(
    write: Callable[[str, str], Path],
) -> None:
    write("p", child("flags:\n  decode_buckets: [8, 16, 64]\n"))
    (w,) = load_profile("p").warnings
    assert w.code == "buckets-below-max-running" and "64 < max running requests 96" in w.message
    assert "without a CUDA graph" in w.message and ":4: flags.decode_buckets" in w.where


def test_buckets_compared_with_dsv4_default_max_running(write: Callable[[str, str], Path]) -> None:
    assert "buckets-below-max-running" in _codes(
        write, "decode:\n  max_running_requests: null\nflags:\n  decode_buckets: [8, 128]\n"
    )
    assert (
        _codes(
            write,
            "decode:\n  max_running_requests: null\nflags:\n  decode_buckets: sglang-default\n",
        )
        == []
    )


@pytest.mark.parametrize(
    ("attr", "value"),
    [("transfer_backend", "mooncake"), ("page_size", 128), ("kv_cache_dtype", "bfloat16")],
)
def test_kv_settings_identical_on_both_sides(
    write: Callable[[str, str], Path], attr: str, value: object
) -> None:
    err, _ = _err(write, f"decode:\n  {attr}: {value}\n")
    assert err.key == f"decode.{attr}" and "identical" in str(err)


def test_non_nixl_backend_on_both_sides_is_a_warning(write: Callable[[str, str], Path]) -> None:
    codes = _codes(
        write, "prefill:\n  transfer_backend: mooncake\ndecode:\n  transfer_backend: mooncake\n"
    )
    assert codes == ["not-nixl"]


def test_two_batch_overlap_needs_a2a_backend_or_attention_dp(
    write: Callable[[str, str], Path],
) -> None:
    err, path = _err(write, "decode:\n  extra_args: ['--enable-two-batch-overlap']\n")
    assert str(err).startswith(f"{path}:4: decode.extra_args[0]: --enable-two-batch-overlap needs")
    assert "raises ValueError at start-up" in str(err)
    ctx = "'--context-length', '131072'"
    ok = f"decode:\n  extra_args: ['--enable-two-batch-overlap', '--moe-a2a-backend', 'deepep', {ctx}]\n"
    assert _codes(write, ok) == []
    ok_dp = f"decode:\n  extra_args: ['--enable-two-batch-overlap', '--attn-dp-size', '4', {ctx}]\n"
    assert _codes(write, ok_dp) == []
    none = "decode:\n  extra_args: ['--enable-two-batch-overlap', '--moe-a2a-backend=none']\n"
    assert "needs an MoE all-to-all" in str(_err(write, none)[0])


@pytest.mark.parametrize(
    ("flag", "replacement"),
    [
        ("--cuda-graph-bs", "--cuda-graph-bs-decode"),
        ("--cuda-graph-max-bs", "--cuda-graph-max-bs-decode"),
    ],
)
def test_removed_flag_names_the_replacement(
    write: Callable[[str, str], Path], flag: str, replacement: str
) -> None:
    err, path = _err(
        write, f"decode:\n  extra_args: ['--watchdog-timeout', '600', '{flag}', '64']\n"
    )
    assert str(err).startswith(
        f"{path}:4: decode.extra_args[2]: {flag} was removed in SGLang 0.5.23; use {replacement}"
    )


def test_unknown_and_ambiguous_server_flags(write: Callable[[str, str], Path]) -> None:
    err, _ = _err(write, "prefill:\n  extra_args: ['--watchdog-timout', '600']\n")
    assert "not an SGLang 0.5.23 flag; did you mean --watchdog-timeout?" in str(err)
    err, _ = _err(write, "prefill:\n  extra_args: ['--cuda-graph-max']\n")
    assert "ambiguous" in str(err)


def test_flags_the_profile_owns_are_rejected_in_extra_args(
    write: Callable[[str, str], Path],
) -> None:
    err, _ = _err(write, "decode:\n  extra_args: ['--port', '1234']\n")
    assert "--port is set by the profile (decode.port)" in str(err)
    err, _ = _err(write, "decode:\n  extra_args: ['--cuda-graph-bs-decode', '8']\n")
    assert "flags.decode_buckets" in str(err)


def test_deprecated_flag_is_a_warning(write: Callable[[str, str], Path]) -> None:
    assert _codes(write, "prefill:\n  extra_args: ['--disable-cuda-graph']\n") == [
        "deprecated-flag"
    ]


def test_router_extra_args_checked_against_router_flags(write: Callable[[str, str], Path]) -> None:
    assert _codes(write, "router:\n  extra_args: ['--retry-max-retries', '2']\n") == []
    err, _ = _err(write, "router:\n  extra_args: ['--retry-max-retry', '2']\n")
    assert err.key == "router.extra_args[0]" and "sglang-router 0.3.2" in str(err)
    err, _ = _err(write, "router:\n  extra_args: ['--policy', 'random']\n")
    assert "router.policy" in str(err)


def test_hazards_are_warnings(write: Callable[[str, str], Path]) -> None:
    codes = _codes(write, "flags:\n  overlap_schedule: on\n  multi_stream_overlap: on\n")
    assert codes == ["overlap-schedule-wedge", "multi-stream-corruption"]


def test_short_router_health_timeout_warns(write: Callable[[str, str], Path]) -> None:
    assert _codes(write, "router:\n  health_check: {timeout_secs: 5}\n") == ["health-timeout-short"]


def test_multi_stream_env_must_go_through_the_flag(write: Callable[[str, str], Path]) -> None:
    err, _ = _err(write, "decode:\n  env: {SGLANG_OPT_USE_MULTI_STREAM_OVERLAP: '1'}\n")
    assert "flags.multi_stream_overlap" in str(err)


def test_kernel_package_format(write: Callable[[str, str], Path]) -> None:
    assert _codes(write, "kernel_package: dsv4-decode@1.2.0\n" + TRITON_MOE_PATH_YAML) == []
    write("p", child("kernel_package: dsv4-decode@1.2.0\n" + TRITON_MOE_PATH_YAML))
    assert load_profile("p").kernel_package == "dsv4-decode@1.2.0"
    err, _ = _err(write, "kernel_package: dsv4-decode\n")
    assert err.key == "kernel_package" and "name@version" in str(err)


@pytest.mark.parametrize(
    ("decode", "reason"),
    [
        ("", "flashinfer_mxfp4 reads no Triton configs"),
        ("  extra_args: [--moe-runner-backend, triton]\n", "Hidden size mismatch"),
        ("  env: {SGLANG_DSV4_FP4_DEQUANT: '1'}\n", "deep_gemm"),
        ("  extra_args: [--moe-runner-backend, marlin]\n", "reads no Triton configs"),
    ],
)
def test_a_kernel_package_nothing_would_load_is_refused_with_the_reason(  # type: ignore[no-untyped-def]
    write: Callable[[str, str], Path], decode, reason
) -> None:
    err, path = _err(
        write, "kernel_package: dsv4-decode@1.2.0\n" + (f"decode:\n{decode}" if decode else "")
    )
    assert err.key == "kernel_package" and reason in str(err)
    assert f"{path}:3:" in str(
        err
    ) and "nothing in this configuration would load dsv4-decode@1.2.0" in str(err)


def test_canary_fractions_bounded(write: Callable[[str, str], Path]) -> None:
    err, _ = _err(write, "canary:\n  consistency_min_agreement: 95\n")
    assert (
        err.key == "canary.consistency_min_agreement"
        and "expected a number from 0 to 1, got 95" in str(err)
    )


def test_a_probe_tool_call_needs_a_tool_call_parser(
    write: Callable[[str, str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """probe.tool_call required (the default) or auto with model.tool_call_parser null: refused
    at the parser's line, by `profile validate` too; with probe.tool_call off it loads."""
    from dsv4ops.cli import main

    err, path = _err(write, "model:\n  tool_call_parser: null\n")
    assert str(err).startswith(
        f"{path}:4: model.tool_call_parser: probe.tool_call is 'required' but there is no "
        "tool-call parser"
    )
    assert "probe.tool_call: off" in str(err)
    err, _ = _err(write, "model:\n  tool_call_parser: null\nprobe:\n  tool_call: auto\n")
    assert err.key == "model.tool_call_parser" and "probe.tool_call is 'auto'" in str(err)
    assert main(["profile", "validate", "p"]) == 1
    out = capsys.readouterr()
    assert f"{path}:4: model.tool_call_parser: probe.tool_call is 'auto'" in out.out + out.err
    assert "Traceback" not in out.err
    write("p", child('model:\n  tool_call_parser: null\nprobe:\n  tool_call: "off"\n'))
    assert load_profile("p").model.tool_call_parser is None


def test_canary_thinking_needs_a_reasoning_parser(write: Callable[[str, str], Path]) -> None:
    write("p", child("canary:\n  thinking: true\n  thinking_budget_tokens: 2048\n"))
    canary = load_profile("p").canary
    assert canary.thinking is True and canary.thinking_budget_tokens == 2048
    th = thresholds_from_profile(load_profile("p"))  # what the canary then runs with
    assert th.thinking is True and th.thinking_mode().extra_tokens() == 2048
    err, _ = _err(write, "model:\n  reasoning_parser: null\ncanary:\n  thinking: true\n")
    assert "canary.thinking" in str(err) and "reasoning_parser" in str(err)


def test_a_sweep_with_fewer_than_three_levels_is_refused(
    write: Callable[[str, str], Path],
) -> None:
    # issue 38: a line through two levels fits them by construction (R² 1), so a two-level
    # sweep printed a "law" with a negative slope; the profile that asks for one is refused
    write("p", child("canary:\n  sweep_concurrency: [8, 16, 16]\n"))
    with pytest.raises(ProfileError) as info:
        load_profile("p")
    assert info.value.key == "canary.sweep_concurrency"
    assert "2 distinct level(s); the sweep needs at least 3" in str(info.value)
    write("p", child("canary:\n  sweep_concurrency: [8, 12, 16]\n"))
    assert load_profile("p").canary.sweep_concurrency == (8, 12, 16)


def test_a_dsv4_decode_without_a_context_length_warns_citing_the_upstream_measurement(
    write: Callable[[str, str], Path],
) -> None:
    """sglang#40442: the DSV4 decode graph width follows --context-length (131072 instead of 1M
    gave 2.68x decode throughput): a DSV4 decode that leaves it to the model is warned about."""
    write("p", child("decode:\n  extra_args: []\n"))
    (w,) = load_profile("p").warnings
    assert w.code == "dsv4-context-length-unset" and ":4: decode.extra_args" in w.where
    assert "sglang#40442" in w.message and "2.68x" in w.message and "--context-length" in w.message
    assert _codes(write, "decode:\n  extra_args: [--context-length, '131072']\n") == []
    assert _codes(write, "decode:\n  extra_args: ['--context-length=131072']\n") == []
    # a model that is not DSV4 (tiny-cpu's Llama) has no such graph width to size
    other = "model:\n  path: ../model\n  tool_call_parser: qwen\n  reasoning_parser: null\n"
    assert _codes(write, other + "decode:\n  extra_args: []\n") == []
    # the shipped DSV4 profiles say theirs
    for name in ("baseline", "overlap-on", "buckets-step4"):
        assert load_profile(REPO_PROFILES / f"{name}.yaml").decode.extra_args[-2:] == [
            "--context-length",
            "1048576",
        ]
