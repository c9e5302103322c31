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
# Decode iterations between two metric reports when `--decode-log-interval` is not given
# (srt/arg_groups/fields/observability.py L136-139).
SGLANG_DEFAULT_DECODE_LOG_INTERVAL = 40

ENV_PREFIX = "DSV4OPS_"
TWIN_ENV_PREFIX = "DSV4_TWIN_"

TARGETS_FILE = "targets.yaml"


def profiles_dir() -> Path:
    """Directory holding profiles: $DSV4OPS_PROFILES_DIR, else ./profiles."""
    return Path(os.environ.get("DSV4OPS_PROFILES_DIR", "profiles"))


def state_dir() -> Path:
    """Operator-side state (journal, crash reports): $DSV4OPS_STATE_DIR, else ./.dsv4ops."""
    return Path(os.environ.get("DSV4OPS_STATE_DIR", ".dsv4ops"))
