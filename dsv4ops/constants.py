"""File names, versions and defaults shared across the package."""

from __future__ import annotations

import os
from pathlib import Path

PROFILE_SCHEMA_VERSION = 1
SGLANG_VERSION = "0.5.23"
SGLANG_ROUTER_VERSION = "0.3.2"
# The box's sglang 0.5.23 pins torch 2.14.1, which pins triton 3.8.0.
BOX_TRITON_VERSION = "3.8.0"
BOX_TORCH_VERSION = "2.14.1"
BOX_ARCH = "sm_120"
BOX_DEVICE_NAME = "NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition"
# The most streams a canary level opens (the profile's concurrency settings and `canary -c`):
# `-c 100000` on one client was all connect timeouts of its own making, judged FAIL.
MAX_CONCURRENCY = 4096
# Decode iterations between two metric reports when `--decode-log-interval` is not given
# (srt/arg_groups/fields/observability.py L136-139).
SGLANG_DEFAULT_DECODE_LOG_INTERVAL = 40
# A line through two concurrency levels fits them exactly (R² 1 by construction): the sweep's
# step law needs a third level to be tested by (canary/suites/sweep_law.py), and a profile's
# canary.sweep_concurrency that lists fewer can never give one (profiles/rules.py refuses it).
MIN_SWEEP_LAW_LEVELS = 3
# The A/B's bounds (`ab`). Each block deploys the box (minutes of model load) before it measures,
# so a budget of more blocks, a longer block or warm-up, is days of wall time nobody meant: the
# design itself never sizes more than 32 blocks (ab/sequential.py MAX_LOOKS), and 128 blocks is
# already a day or so on the box. The bounds also keep the design computable: its boundaries
# spend alpha over the looks (alpha * (1/looks)^3 at the first), which past ~50000 looks is
# below what a float can tell from 0 (`--blocks 100000` crashed in the normal quantile).
AB_MAX_BLOCKS = 128
AB_MAX_BLOCK_S = 3 * 3600.0  # 8 blocks (a usual budget) of 3 h is a day
AB_MAX_WARMUP_S = 3600.0
# A sweep's staircase within one block: each level is judged at its Bonferroni share of alpha.
AB_MAX_LEVELS = 32

# Seconds an SSH target's calls ride out a dropped connection (remote/rideout.py): a blip is
# seconds; a box that stays away longer is an outage the operator should hear about.
SSH_RECONNECT_S = 30.0

ENV_PREFIX = "DSV4OPS_"
TWIN_ENV_PREFIX = "DSV4_TWIN_"

TARGETS_FILE = "targets.yaml"


PROJECT_ENV = "DSV4OPS_PROJECT"
# What marks a dsv4ops project, the way `.git` marks a repository.
PROJECT_MARKER = Path("profiles") / TARGETS_FILE
PROJECT_HINT = (
    "run dsv4ops inside a dsv4ops project (a directory holding profiles/targets.yaml, or "
    "below one), or point at it with --project DIR or DSV4OPS_PROJECT"
)

# Every environment variable the CLI reads, with what it does: `dsv4ops --help` lists them
# (tests/cli/main_test.py checks every DSV4OPS_ name in the package is here).
ENVIRONMENT: tuple[tuple[str, str], ...] = (
    ("DSV4OPS_TARGET", "default --target of every command that takes one"),
    (
        PROJECT_ENV,
        "the project directory (as --project); else found by walking up from the "
        "current directory to the one holding profiles/targets.yaml",
    ),
    ("DSV4OPS_PROFILES_DIR", "profiles directory (default: PROJECT/profiles)"),
    (
        "DSV4OPS_STATE_DIR",
        "operator-side state: journals, crash reports (default: PROJECT/.dsv4ops)",
    ),
    ("DSV4OPS_RUNBOOKS_DIR", "runbooks directory (default: PROJECT/runbooks)"),
    ("DSV4OPS_KERNELS_DIR", "kernel source tree (default: the package's own)"),
    ("DSV4OPS_AOT_PYTHON", "Python of the Triton ahead-of-time compile venv (default: .venv-aot)"),
    ("DSV4OPS_SMG_PYTHON", "Python of the SMG router venv on this machine (default: .venv-smg)"),
    (
        "DSV4OPS_SPARSE_DECODE_ATTN",
        "1 in a decode's env (set by the profile): the kernel plugin replaces SGLang's decode "
        "attention",
    ),
    (
        "DSV4OPS_READY_TIMEOUT_S",
        "readiness wait per component, seconds (default: 1200); also the most a stop's grace, "
        "the drain and the probe's request may take",
    ),
    ("DSV4OPS_EVENT_LOOP", "the canary's event loop: uvloop (default) or asyncio"),
    (
        "DSV4OPS_CANARY_LAG_P99_MAX_MS",
        "event-loop lag p99 this machine's canary client tolerates before a suite is "
        "INCONCLUSIVE (default: 50)",
    ),
    ("DSV4OPS_PROGRESS_EVERY_S", "seconds between two progress lines off a terminal (default: 10)"),
    (
        "DSV4OPS_RUNBOOK_URL",
        "where the runbooks are published: the alert rules' runbook links "
        "(monitoring render --runbook-url)",
    ),
    ("DSV4OPS_RUNBOOK_RUN", "set by `runbook run` for the commands it runs (journal link)"),
    (
        "_DSV4OPS_COMPLETE",
        'shell completion: eval "$(_DSV4OPS_COMPLETE=bash_source dsv4ops)" '
        "(zsh_source, fish_source)",
    ),
)


def project_dir() -> Path:
    """The project: $DSV4OPS_PROJECT, else the nearest directory at or above the current one that
    holds profiles/targets.yaml (as git finds `.git`), else the current directory (whose missing
    files then fail with PROJECT_HINT)."""
    env = os.environ.get(PROJECT_ENV)
    if env:
        return Path(env).expanduser().absolute()
    here = Path.cwd()
    for directory in (here, *here.parents):
        if (directory / PROJECT_MARKER).is_file():
            return directory
    return here


def profiles_dir() -> Path:
    """Directory holding profiles: $DSV4OPS_PROFILES_DIR, else PROJECT/profiles."""
    env = os.environ.get("DSV4OPS_PROFILES_DIR")
    return Path(env) if env else project_dir() / "profiles"


def state_dir() -> Path:
    """Operator-side state (journal, crash reports): $DSV4OPS_STATE_DIR, else PROJECT/.dsv4ops."""
    env = os.environ.get("DSV4OPS_STATE_DIR")
    return Path(env) if env else project_dir() / ".dsv4ops"


# SGLang 0.5.23's PD timeouts (sglang/srt/environ.py:759, 763; EnvInt, seconds, 300 each): the
# decode fails a request whose KV never arrives after WAITING (NIXL sends no failure notice,
# sglang#36033), the prefill a room no decode bootstrapped after BOOTSTRAP (sglang#34692).
PD_WAITING_TIMEOUT_ENV = "SGLANG_DISAGGREGATION_WAITING_TIMEOUT"  # decode side
PD_BOOTSTRAP_TIMEOUT_ENV = "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT"  # prefill side
SGLANG_PD_TIMEOUT_DEFAULT_S = 300
