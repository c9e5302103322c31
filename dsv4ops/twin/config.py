"""The twin's tunables: every one is an env var prefixed DSV4_TWIN_ (documented in docs/twin.md).

Defaults are the seeds' numbers (step law 18 ms + 1.05 ms/request, ~5 ms of the fixed term hidden
by the overlap scheduler) or SGLang 0.5.23's own defaults (timeouts). Model time is scaled to wall
time by DSV4_TWIN_TIME_SCALE: wall_seconds = model_seconds * time_scale.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

PREFIX = "DSV4_TWIN_"
# slow_health: /health waits health_delay_s first, as behind a long chunked prefill (only when
# forced: the twin models no chunked prefill of its own).
# lost_transfer: a share of the decode's KV transfers never completes and nothing says so, as
# NIXL sends no failure notice (sglang#36033): the request waits out the waiting timeout.
HAZARD_NAMES = ("degrade", "wedge", "corrupt", "slow_health", "lost_transfer", "stream_tools")
# Which side of the TP desync rank 0 (the only rank that reports metrics) is on when the decode
# wedges: "blocked" (it spins in the collective, its gauges freeze) or "idle" (it dropped the
# batch and idles while the other ranks spin; it republishes idle values).
WEDGE_RANK0 = ("blocked", "idle")
# When sglang:realtime_tokens_total{mode="decode"} moves: every decode iteration (0.5.23's code)
# or only at each --decode-log-interval (the counter's help text; the worst case for a detector).
REALTIME_TOKENS = ("per_iteration", "per_log_interval")


class TwinConfigError(ValueError):
    """A DSV4_TWIN_* variable has a value the twin cannot use."""


@dataclass(frozen=True)
class TwinConfig:
    time_scale: float = 1.0
    step_a_ms: float = 18.0
    step_b_ms: float = 1.05
    overlap_hidden_ms: float = 5.0
    # A decode step that runs no CUDA graph (above the largest captured bucket, or graphs off)
    # costs this many times the law's step: kernel launches no graph hides (docs/twin.md).
    eager_factor: float = 2.0
    prefill_ms_per_token: float = 0.1
    model_load_s: float = 60.0
    capture_s_per_bucket: float = 0.25
    warmup_s: float = 1.0
    degrade_fail_fraction: float = 0.3
    lost_transfer_fraction: float = 0.5  # the lost_transfer hazard's share (by room)
    wedge_aborts: int = 8
    wedge_window_s: float = 2.0
    corrupt_prob: float = 0.05
    corrupt_min_bs: int = 64
    seed: int = 0
    event_log: str | None = None
    force: frozenset[str] = field(default_factory=frozenset)
    hazards_off: bool = False
    health_timeout_s: float = 20.0
    # Model seconds /health waits with the slow_health hazard, as behind a long chunked prefill:
    # it fails /health without a wedge (sglang#22511).
    health_delay_s: float = 60.0
    waiting_timeout_s: float = 300.0
    bootstrap_timeout_s: float = 300.0
    # the corrupt hazard's output shapes (twin/corruption.py); one is picked per corrupted request
    corrupt_shapes: tuple[str, ...] = ("dropped_call", "cross_talk", "dsml_in_content")
    # the stream_tools hazard (twin/corruption.py): a streaming tool-call parser that breaks calls
    # under load only; 5 % is the top of sglang#36339's 2.5-5 % rate, 16 vllm#48089's onset
    stream_tools_prob: float = 0.05
    stream_tools_min_bs: int = 16
    stream_tools_shapes: tuple[str, ...] = (
        "stream_args",
        "arguments_wrapper",
        "calls_in_one_delta",
    )
    reasoning_tokens: int = 32  # reasoning tokens per request with thinking on
    # SGLang's decode->prefill heartbeat (environ.py:761-762; conn.py:479-485 clamps both)
    heartbeat_interval_s: float = 5.0
    heartbeat_max_failure: int = 2
    # Seconds the schedulers take to release and exit after ShutdownReq (estimate; SGLang
    # SIGKILLs them after 15 s, tokenizer_manager.py:456)
    scheduler_exit_s: float = 3.0
    sigterm_tick_s: float = 5.0  # sigterm_watchdog's asyncio.sleep(5) (tokenizer_manager.py:3510)
    wedge_rank0: str = "blocked"
    # Step-time variation for A/B tests (perf.StepVariation); 0 = the seeds' law exactly.
    step_noise_pct: float = 0.0
    step_drift_pct_per_min: float = 0.0
    drift_epoch: float | None = None  # unix seconds the drift counts from (default: start)
    # Deploy-to-deploy variation (perf.deploy_offset): a per-start factor on the decode step law.
    deploy_variation_pct: float = 0.0
    deploy_seed: int | None = None  # default: seed
    deploy_counter: str | None = None  # file counting starts (the offset's stream index)
    realtime_tokens: str = "per_iteration"

    def wall(self, model_seconds: float) -> float:
        """Model seconds → wall seconds."""
        return model_seconds * self.time_scale


_FLOATS = {
    "TIME_SCALE": "time_scale",
    "STEP_A_MS": "step_a_ms",
    "STEP_B_MS": "step_b_ms",
    "OVERLAP_HIDDEN_MS": "overlap_hidden_ms",
    "EAGER_FACTOR": "eager_factor",
    "PREFILL_MS_PER_TOKEN": "prefill_ms_per_token",
    "MODEL_LOAD_S": "model_load_s",
    "CAPTURE_S_PER_BUCKET": "capture_s_per_bucket",
    "WARMUP_S": "warmup_s",
    "DEGRADE_FAIL_FRACTION": "degrade_fail_fraction",
    "LOST_TRANSFER_FRACTION": "lost_transfer_fraction",
    "WEDGE_WINDOW_S": "wedge_window_s",
    "CORRUPT_PROB": "corrupt_prob",
    "STREAM_TOOLS_PROB": "stream_tools_prob",
    "SCHEDULER_EXIT_S": "scheduler_exit_s",
    "SIGTERM_TICK_S": "sigterm_tick_s",
    "STEP_NOISE_PCT": "step_noise_pct",
    "STEP_DRIFT_PCT_PER_MIN": "step_drift_pct_per_min",
    "DRIFT_EPOCH": "drift_epoch",
    "DEPLOY_VARIATION_PCT": "deploy_variation_pct",
    "HEALTH_DELAY_S": "health_delay_s",
}
_INTS = {
    "WEDGE_ABORTS": "wedge_aborts",
    "CORRUPT_MIN_BS": "corrupt_min_bs",
    "STREAM_TOOLS_MIN_BS": "stream_tools_min_bs",
    "SEED": "seed",
    "DEPLOY_SEED": "deploy_seed",
    "REASONING_TOKENS": "reasoning_tokens",
}
# SGLang's own env vars for the same timeouts; the DSV4_TWIN_ names override them.
_SGLANG_TIMEOUTS = {
    "health_timeout_s": ("SGLANG_HEALTH_CHECK_TIMEOUT", "HEALTH_TIMEOUT_S"),
    "waiting_timeout_s": ("SGLANG_DISAGGREGATION_WAITING_TIMEOUT", "WAITING_TIMEOUT_S"),
    "bootstrap_timeout_s": ("SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT", "BOOTSTRAP_TIMEOUT_S"),
    "heartbeat_interval_s": ("SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL", "HEARTBEAT_INTERVAL_S"),
}


def _check_bounds(values: Mapping[str, object]) -> None:
    """The bounds a number's own parse does not hold (TwinConfigError)."""
    if values.get("time_scale", 1.0) == 0:
        raise TwinConfigError(f"{PREFIX}TIME_SCALE must be > 0")
    if float(values.get("eager_factor", 1.0)) < 1.0:  # type: ignore[arg-type]  # a number
        raise TwinConfigError(f"{PREFIX}EAGER_FACTOR must be >= 1 (eager is never faster)")


def _number(env: Mapping[str, str], name: str, kind: type[int] | type[float]) -> float | int | None:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return None
    try:
        value = kind(raw)
    except ValueError:
        raise TwinConfigError(f"{name}={raw!r}: expected a {kind.__name__}") from None
    if not math.isfinite(value):
        raise TwinConfigError(f"{name}={raw!r}: must be a finite number")
    if value < 0:
        raise TwinConfigError(f"{name}={raw!r}: must not be negative")
    return value


def _shapes(env: Mapping[str, str]) -> dict[str, tuple[str, ...]]:
    """The corrupt and stream_tools hazards' shapes set in `env`."""
    from .corruption import check_shapes, check_stream_shapes

    values = {}
    for suffix, attr, check in (
        ("CORRUPT_SHAPES", "corrupt_shapes", check_shapes),
        ("STREAM_TOOLS_SHAPES", "stream_tools_shapes", check_stream_shapes),
    ):
        raw = env.get(PREFIX + suffix, "").strip()
        try:
            if raw:
                values[attr] = check(raw.split(","))
        except ValueError as exc:
            raise TwinConfigError(f"{PREFIX}{suffix}={raw!r}: {exc}") from None
    return values


def load_config(env: Mapping[str, str] | None = None) -> TwinConfig:
    """Read the DSV4_TWIN_* variables. Raises TwinConfigError on a bad value."""
    env = os.environ if env is None else env
    values: dict[str, object] = {}
    for suffix, attr in _FLOATS.items():
        v = _number(env, PREFIX + suffix, float)
        if v is not None:
            values[attr] = v
    for suffix, attr in _INTS.items():
        v = _number(env, PREFIX + suffix, int)
        if v is not None:
            values[attr] = v
    for attr, (sglang_name, suffix) in _SGLANG_TIMEOUTS.items():
        for name in (sglang_name, PREFIX + suffix):
            v = _number(env, name, float)
            if v is not None:
                values[attr] = v
    failures = _number(env, "SGLANG_DISAGGREGATION_HEARTBEAT_MAX_FAILURE", int)
    if failures is not None:
        values["heartbeat_max_failure"] = max(int(failures), 1)  # conn.py:483-485
    if "heartbeat_interval_s" in values:
        values["heartbeat_interval_s"] = max(float(values["heartbeat_interval_s"]), 2.0)  # type: ignore[arg-type]  # a number: _number
    _check_bounds(values)
    force_raw = env.get(PREFIX + "FORCE", "")
    force = frozenset(h.strip() for h in force_raw.split(",") if h.strip())
    unknown = force - set(HAZARD_NAMES)
    if unknown:
        raise TwinConfigError(
            f"{PREFIX}FORCE={force_raw!r}: unknown hazard(s) {sorted(unknown)}; "
            f"choose from {', '.join(HAZARD_NAMES)}"
        )
    hazards_raw = env.get(PREFIX + "HAZARDS", "auto").strip().lower()
    if hazards_raw not in ("auto", "on", "off"):
        raise TwinConfigError(f"{PREFIX}HAZARDS={hazards_raw!r}: expected auto or off")
    values.update(_shapes(env))
    for suffix, attr, choices in (
        ("WEDGE_RANK0", "wedge_rank0", WEDGE_RANK0),
        ("REALTIME_TOKENS", "realtime_tokens", REALTIME_TOKENS),
    ):
        raw = env.get(PREFIX + suffix, "").strip().lower()
        if raw and raw not in choices:
            raise TwinConfigError(f"{PREFIX}{suffix}={raw!r}: expected {' or '.join(choices)}")
        if raw:
            values[attr] = raw
    return TwinConfig(
        **values,  # type: ignore[arg-type]
        event_log=env.get(PREFIX + "EVENT_LOG") or None,
        deploy_counter=env.get(PREFIX + "DEPLOY_COUNTER") or None,
        force=force,
        hazards_off=hazards_raw == "off",
    )
