from __future__ import annotations

import subprocess
import sys

import pytest

from dsv4ops.twin.args import StartupError, parse_args

BASE = ["--model-path", "/models/DSV4"]


def _launch(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dsv4ops.twin.launch_server", *BASE, *args],
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.parametrize("flag", ["--cuda-graph-bs", "--cuda-graph-max-bs"])
def test_removed_cuda_graph_flags_fail_like_sglang_with_ambiguous_option(flag: str) -> None:
    result = _launch([flag, "64"])
    assert result.returncode == 2
    assert f"ambiguous option: {flag} could match" in result.stderr


def test_two_batch_overlap_without_a2a_or_attention_dp_refuses_to_start() -> None:
    result = _launch(["--tp-size", "4", "--enable-two-batch-overlap"])
    assert result.returncode == 1
    assert "--enable-two-batch-overlap requires" in result.stderr


def test_two_batch_overlap_with_a2a_backend_or_attention_dp_is_accepted() -> None:
    assert (
        parse_args(
            [*BASE, "--enable-two-batch-overlap", "--moe-a2a-backend", "deepep", "--tp-size", "4"]
        ).ep_size
        == 4
    )
    assert parse_args([*BASE, "--enable-two-batch-overlap", "--attn-dp-size", "2"])


def test_unknown_sglang_flags_are_accepted_and_the_honoured_ones_parsed() -> None:
    args = parse_args(
        [
            *BASE,
            "--trust-remote-code",
            "--mem-fraction-static",
            "0.85",
            "--tp",
            "4",
            "--disaggregation-mode",
            "decode",
            "--cuda-graph-bs-decode",
            "32",
            "40",
            "--disable-overlap-schedule",
            "--served-model-name",
            "dsv4",
            "--enable-metrics",
        ]
    )
    assert args.tp_size == 4  # argparse prefix match, as in SGLang
    assert args.mode == "decode"
    assert args.cuda_graph_bs_decode == (32, 40)
    assert not args.overlap_schedule
    assert args.served_model_name == "dsv4"
    assert "--trust-remote-code" in args.ignored and "--mem-fraction-static" in args.ignored


def test_startup_error_is_a_plain_exception_for_callers() -> None:
    with pytest.raises(StartupError):
        parse_args([*BASE, "--enable-two-batch-overlap"])


def test_bad_twin_env_value_fails_with_one_line() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "dsv4ops.twin.launch_server", *BASE],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": "/usr/bin:/bin", "DSV4_TWIN_TIME_SCALE": "fast"},
    )
    assert result.returncode == 1
    assert "DSV4_TWIN_TIME_SCALE='fast': expected a float" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_flag_sglang_does_not_know_exits_2_with_argparses_message() -> None:
    result = _launch(["--some-future-flag", "7"])
    assert result.returncode == 2
    assert "sglang serve: error: unrecognized arguments: --some-future-flag 7" in result.stderr
    assert "Traceback" not in result.stderr


def test_every_real_sglang_flag_is_accepted_with_its_arity() -> None:
    from dsv4ops.profiles._flag_tables import SGLANG_SERVER_TABLE
    from dsv4ops.twin.args import build_parser

    parser = build_parser()
    declared = set(parser._option_string_actions) - {"-h", "--help"}
    assert declared == set(SGLANG_SERVER_TABLE)  # exactly the real parser's 559 flags
    args = parse_args(
        [
            *BASE,
            "--mem-fraction-static",
            "0.85",
            "--trust-remote-code",
            "--attention-backend",
            "dsv4",
            "--gc-threshold",
            "1",
            "2",
        ]
    )
    assert args.ignored == (
        "--mem-fraction-static",
        "--trust-remote-code",
        "--attention-backend",
        "--gc-threshold",
    )
    with pytest.raises(SystemExit) as exc:  # a real flag with a bad choice: argparse's exit 2
        parse_args([*BASE, "--attention-backend", "no-such-backend"])
    assert exc.value.code == 2
