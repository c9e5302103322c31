"""Values SGLang, the router or the canary would choke on are refused at file:line: key (issue 11)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dsv4ops.profiles import load_profile, validate_profile
from testing.cli import run_cli
from testing.profiles import child

# (YAML from line 3 of a profile extending base, the key named, a fragment of the message).
# Base: decode max_running_requests 96, buckets step8.
REFUSED = [
    ("canary:\n  corruption_max_rate: .nan\n", "canary.corruption_max_rate", "finite number"),
    ("canary:\n  hang_deadline_s: .inf\n", "canary.hang_deadline_s", "finite number"),
    ("canary:\n  first_token_deadline_s: -.inf\n", "canary.first_token_deadline_s", "finite"),
    ("canary:\n  stress_duration_s: 1.0e+300\n", "canary.stress_duration_s", "from 0 to 86400"),
    (
        "canary:\n  sweep_concurrency: [8, 100000]\n",
        "canary.sweep_concurrency[1]",
        "from 1 to 4096",
    ),
    ("canary:\n  sawtooth_max_drop_pct: 250\n", "canary.sawtooth_max_drop_pct", "from 0 to 100"),
    (
        "decode:\n  max_running_requests: " + "1" + "0" * 30 + "\n",
        "decode.max_running_requests",
        "from 1 to 8192",
    ),
    ("decode:\n  mem_fraction_static: 1.5\n", "decode.mem_fraction_static", "from 0.05 to 0.99"),
    ("decode:\n  page_size: 1048576\n", "decode.page_size", "from 1 to 1024"),
    ("decode:\n  gpus: [4, 5, 6, 100000]\n", "decode.gpus[3]", "from 0 to 255"),
    (
        "router:\n  health_check:\n    interval_secs: 99999999999\n",
        "router.health_check.interval_secs",
        "from 1 to 3600",
    ),
    ("router:\n  port: 70000\n", "router.port", "from 1 to 65535"),
    # issue 21, F10: a port a client socket may hold at any moment (Linux's ephemeral range)
    ("router:\n  port: 40000\n", "router.port", "ephemeral port range (32768-60999)"),
    ("decode:\n  port: 32768\n", "decode.port", "ephemeral port range"),
    (
        "flags:\n  decode_buckets: [8, 16, 128]\n",
        "flags.decode_buckets[2]",
        "above max running requests 96",
    ),
    (
        "flags:\n  decode_buckets: sglang-default:512\n",
        "flags.decode_buckets",
        "above max running requests 96",
    ),
    (
        "flags:\n  decode_buckets: step4:40-200\n",
        "flags.decode_buckets",
        "above max running requests 96",
    ),
    (
        "flags:\n  decode_buckets: step8:1-1000000000\n",
        "flags.decode_buckets",
        "1 <= LO < HI <= 8192",
    ),
    (
        "flags:\n  decode_buckets: sglang-default:99999999\n",
        "flags.decode_buckets",
        "from 1 to 8192",
    ),
    ("flags:\n  decode_buckets: step1:1-8000\n", "flags.decode_buckets", "at most 512"),
    (
        "flags:\n  decode_buckets: step" + "9" * 5000 + "\n",
        "flags.decode_buckets",
        "unknown bucket spec",
    ),
    (
        "decode:\n  extra_args: ['--watchdog-timeout', '600', 'junk']\n",
        "decode.extra_args[2]",
        "'junk' is not a flag",
    ),
    (
        "decode:\n  extra_args: [oops, '--skip-server-warmup']\n",
        "decode.extra_args[0]",
        "unrecognized arguments",
    ),
    ("prefill:\n  extra_args: ['-h']\n", "prefill.extra_args[0]", "options start with --"),
    (
        "prefill:\n  extra_args: ['--watchdog-timeout']\n",
        "prefill.extra_args[0]",
        "--watchdog-timeout expects a value",
    ),
    (
        "router:\n  extra_args: ['--request-timeout-secs', '60', '90']\n",
        "router.extra_args[2]",
        "sglang-router 0.3.2 would exit",
    ),
    ("model:\n  served_name: ''\n", "model.served_name", "empty or blank"),
    ("model:\n  served_name: ' '\n", "model.served_name", "empty or blank"),
    ('model:\n  served_name: "dsv4\\n"\n', "model.served_name", "control character U+000A"),
    (
        'model:\n  served_name: "dsv4\\u200b"\n',
        "model.served_name",
        "invisible or space character U+200B",
    ),
    ("model:\n  served_name: deepseek v4\n", "model.served_name", "U+0020"),
    ("model:\n  path: ''\n", "model.path", "empty or blank"),
    ("model:\n  reasoning_parser: deepseek-v9\n", "model.reasoning_parser", "expected one of"),
    (
        "router:\n  health_check:\n    endpoint: health\n",
        "router.health_check.endpoint",
        "starting with '/'",
    ),
    (
        'router:\n  health_check:\n    endpoint: "/he alth"\n',
        "router.health_check.endpoint",
        "U+0020",
    ),
    (
        'prefill:\n  env:\n    NCCL_DEBUG: "IN\\0FO"\n',
        "prefill.env.NCCL_DEBUG",
        "control character U+0000",
    ),
    ('decode:\n  extra_args: ["--served-model-name\\r"]\n', "decode.extra_args[0]", "U+000D"),
    ("decode:\n  env: {A: .nan}\n", "decode.env", "expected a mapping of NAME: value strings"),
    (
        "decode:\n  extra_args: ['--watchdog-timeout', .inf]\n",
        "decode.extra_args",
        "expected a list of strings",
    ),
    (
        "decode:\n  extra_args: [" + ", ".join(["--skip-server-warmup"] * 300) + "]\n",
        "decode.extra_args",
        "at most 256",
    ),
    ("description: " + "x" * 20000 + "\n", "description", "at most 16384"),
    ('description: "\\e[2J"\n', "description", "control character U+001B"),
]


@pytest.mark.parametrize(
    ("text", "key", "fragment"), REFUSED, ids=[r[1] + ":" + r[2][:20] for r in REFUSED]
)
def test_each_value_is_refused_at_its_file_line_and_key(
    write: Callable[[str, str], Path], text: str, key: str, fragment: str
) -> None:
    path = write("bad", child(text))
    problems = validate_profile("bad")
    assert [p.key for p in problems] == [key], problems
    (problem,) = problems
    assert problem.path == str(path) and problem.line == text.count("\n") + 2, problem
    assert fragment in problem.message, problem.message
    assert len(str(problem)) < len(str(path)) + 400  # a bounded message, whatever the value


def test_the_cli_lists_them_with_exit_1(write: Callable[[str, str], Path], pdir: Path) -> None:
    path = write(
        "bad",
        child(
            "canary:\n"  # 3
            "  corruption_max_rate: .nan\n"  # 4
            "decode:\n"  # 5
            "  max_running_requests: 1000000000000000000000000000000\n"  # 6
            "  extra_args: ['--watchdog-timeout', '600', 'junk']\n"  # 7
            "model:\n"  # 8
            '  served_name: "\\u200b"\n'  # 9
            "prefill:\n"  # 10
            '  env: {NCCL_DEBUG: "a\\0b"}\n'  # 11
            "router:\n"  # 12
            "  health_check: {endpoint: health}\n"  # 13
        ),
    )
    run = run_cli("profile", "validate", "bad", profiles_dir=pdir)
    assert run.code == 1 and "Traceback" not in run.text, run.text
    keys = [
        "4: canary.corruption_max_rate",
        "6: decode.max_running_requests",
        "7: decode.extra_args[2]",
        "9: model.served_name",
        "11: prefill.env.NCCL_DEBUG",
        "13: router.health_check.endpoint",
    ]
    lines = run.err.splitlines()
    # One error line per problem, in file order, each naming file:line: key.
    assert [line.split(": ", 1)[1].split(": ")[0:2] for line in lines[:-1]] == [
        [f"{path}:{k.split(': ')[0]}", k.split(": ")[1]] for k in keys
    ], run.err
    assert lines[-1] == "error: 6 problems in 1 profile"


@pytest.mark.parametrize(
    "text",
    [
        "flags:\n  decode_buckets: [8, 16, 96]\n",  # up to max running exactly
        "flags:\n  decode_buckets: step4:40-96\n",
        "flags:\n  decode_buckets: sglang-default\n",
        "decode:\n  max_running_requests: null\nflags:\n  decode_buckets: sglang-default\n",
        "decode:\n  extra_args: ['--watchdog-timeout', '600', '--skip-server-warmup']\n",
        "decode:\n  extra_args: ['--watchdog-timeout=600', '--json-model-override-args', '{\"a\": 1}']\n",
        "decode:\n  extra_args: ['--allowed-media-domains', 'a.example', 'b.example']\n",
        "decode:\n  extra_args: ['--chunked-prefill-size', '-1']\n",  # a negative number is a value
        "decode:\n  mem_fraction_static: 0.88\n",
        "canary:\n  corruption_max_rate: 1\n  first_token_deadline_s: 3600\n",
        'description: "two\\nlines\\tand a tab"\n',
        "model:\n  served_name: deepseek-v4-flash\n",
        "model:\n  served_name: null\n  reasoning_parser: null\n",
        "router:\n  health_check: {endpoint: /health_generate}\n",
    ],
)
def test_real_values_are_still_accepted(write: Callable[[str, str], Path], text: str) -> None:
    write("fine", child(text))
    assert validate_profile("fine") == []
    load_profile("fine")
