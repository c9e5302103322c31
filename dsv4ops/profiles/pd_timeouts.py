"""The PD timeouts a profile sets (one of rules.RULES): the decode's KV waiting timeout and the
prefill's bootstrap timeout, in their sides' env, as whole seconds within bounds.

NIXL sends the decode no failure notice when a transfer fails (sglang#36033): the request waits
the decode's SGLANG_DISAGGREGATION_WAITING_TIMEOUT (300 s by default) producing nothing, and a
room no decode bootstraps holds the prefill for its SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT
(sglang#34692). Too short fails long prompts that are merely slow to prefill; too long holds a
lost request (and its KV) for minutes. SGLang reads both as integers (EnvInt): "90.5" would stop
it at start-up.
"""

from __future__ import annotations

from dsv4ops.constants import PD_BOOTSTRAP_TIMEOUT_ENV, PD_WAITING_TIMEOUT_ENV
from dsv4ops.profiles.excerpt import excerpt
from dsv4ops.profiles.model import Profile
from dsv4ops.profiles.problems import Problems
from dsv4ops.profiles.provenance import Provenance

# Seconds. Below MIN a long prompt's prefill and transfer can outlast it; above MAX a lost
# request holds its decode slot and KV for over an hour.
PD_TIMEOUT_MIN_S = 30
PD_TIMEOUT_MAX_S = 3600
# (side, variable): where each is read; on the other side it does nothing.
PD_TIMEOUTS = (("decode", PD_WAITING_TIMEOUT_ENV), ("prefill", PD_BOOTSTRAP_TIMEOUT_ENV))


def rule_pd_timeouts(p: Profile, prov: Provenance, sink: Problems) -> None:
    for role, name in PD_TIMEOUTS:
        side = p.decode if role == "decode" else p.prefill
        key = f"{role}.env.{name}"
        if not sink.usable(f"{role}.env"):
            continue
        value = side.env_dict.get(name)
        if value is None:
            sink.warn(
                prov,
                "pd-timeout-unset",
                f"{role}.env",
                f"{role}.env sets no {name}: SGLang's 300 s default. A KV transfer that fails "
                "silently (NIXL sends no notice, sglang#36033) holds its request that long; "
                f"set it explicitly ({PD_TIMEOUT_MIN_S}-{PD_TIMEOUT_MAX_S} s)",
            )
        elif not value.isdigit() or not PD_TIMEOUT_MIN_S <= int(value) <= PD_TIMEOUT_MAX_S:
            sink.error(
                prov,
                key,
                f"expected whole seconds from {PD_TIMEOUT_MIN_S} to {PD_TIMEOUT_MAX_S}, got "
                f"{excerpt(value)} (SGLang reads it as an integer; below {PD_TIMEOUT_MIN_S} s "
                "a long prompt's prefill and transfer can outlast it)",
            )
