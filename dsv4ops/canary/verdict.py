"""Verdicts, suite results and the thresholds they are judged by.

Exit codes (CLI): PASS 0, FAIL 2, INCONCLUSIVE 4. FAIL beats INCONCLUSIVE beats PASS when results
are combined (`all`), because a real failure found in one suite is not undone by another suite
lacking data.
"""

from __future__ import annotations

import enum
import math
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import TYPE_CHECKING

from dsv4ops import exitcodes
from dsv4ops.errors import CanaryError
from dsv4ops.jsontypes import JSONObject
from dsv4ops.profiles.model import CanaryThresholds, Profile
from dsv4ops.profiles.settings import extended, from_record

if TYPE_CHECKING:
    from dsv4ops.canary.workload import Thinking


class Verdict(enum.Enum):
    PASS = "PASS"
    FAIL = "FAIL"
    INCONCLUSIVE = "INCONCLUSIVE"

    @property
    def exit_code(self) -> int:
        return exitcodes.for_verdict(self.value)


_RANK = {Verdict.PASS: 0, Verdict.INCONCLUSIVE: 1, Verdict.FAIL: 2}


def worst(verdicts: list[Verdict]) -> Verdict:
    return max(verdicts, key=_RANK.__getitem__) if verdicts else Verdict.INCONCLUSIVE


@dataclass
class SuiteResult:
    """What a suite found: the verdict, one line per reason, and the numbers behind it."""

    suite: str
    verdict: Verdict
    reasons: list[str] = field(default_factory=list)
    metrics: JSONObject = field(default_factory=dict)
    sub_results: list[SuiteResult] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return self.verdict.exit_code

    def to_json(self) -> JSONObject:
        out: JSONObject = {
            "suite": self.suite,
            "verdict": self.verdict.value,
            "reasons": list(self.reasons),
            "metrics": self.metrics,
        }
        if self.sub_results:
            out["suites"] = [s.to_json() for s in self.sub_results]
        return out


class Findings:
    """Collects reasons while a suite is judged; `FAIL` and `INCONCLUSIVE` reasons are kept apart."""

    def __init__(self) -> None:
        self.failures: list[str] = []
        self.inconclusive: list[str] = []
        self.notes: list[str] = []

    def fail(self, reason: str) -> None:
        self.failures.append(reason)

    def unsure(self, reason: str) -> None:
        self.inconclusive.append(reason)

    def note(self, reason: str) -> None:
        self.notes.append(reason)

    def result(self, suite: str, metrics: JSONObject) -> SuiteResult:
        if self.failures:
            verdict = Verdict.FAIL
        elif self.inconclusive:
            verdict = Verdict.INCONCLUSIVE
        else:
            verdict = Verdict.PASS
        reasons = (
            [f"FAIL: {r}" for r in self.failures]
            + [f"INCONCLUSIVE: {r}" for r in self.inconclusive]
            + [f"note: {r}" for r in self.notes]
        )
        return SuiteResult(suite=suite, verdict=verdict, reasons=reasons, metrics=metrics)


# How much event-loop lag the canary client tolerates before it calls its own receipt stamps
# untrustworthy is the machine's it runs on (the operator's, a CI runner), not the profile's or
# the target's: this variable sets it, and a Thresholds given a value keeps that one.
LAG_ENV = "DSV4OPS_CANARY_LAG_P99_MAX_MS"
DEFAULT_LAG_P99_MAX_MS = 50.0


def client_lag_limit_ms() -> float:
    """$DSV4OPS_CANARY_LAG_P99_MAX_MS, else 50 ms; raises CanaryError for a value it cannot use."""
    raw = os.environ.get(LAG_ENV, "").strip()
    if not raw:
        return DEFAULT_LAG_P99_MAX_MS
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise CanaryError(
            f"{LAG_ENV}={raw!r}: expected milliseconds > 0",
            hint=f"unset it for the default ({DEFAULT_LAG_P99_MAX_MS:g} ms)",
        )
    return value


@dataclass(frozen=True)
class Thresholds(CanaryThresholds):
    """Everything a suite is judged by: the profile's `canary` section (`CanaryThresholds`,
    declared once in profiles/model.py, inherited here with its defaults), then the canary-side
    settings no profile sets. The one way from a profile to a verdict is `judging(profile.canary)`;
    from a journal record, `recorded(deployment.canary_settings)`.
    """

    watchdog_tick_s: float = 0.1
    # Client self-check (reference load-generators.md §4.4: above these the numbers are the
    # client's, not the server's).
    client_cpu_max: float = 0.9
    loop_lag_p99_max_ms: float = field(default_factory=client_lag_limit_ms)
    max_error_rate: float = 0.0
    ttft_p99_max_ms: float | None = None
    itl_p99_max_ms: float | None = None
    max_tokens: int = 64
    smoke_concurrency: int = 4
    corruption_turns: int = 3
    consistency_prompts: int = 8
    abort_streams: int = 32
    sweep_level_s: float = 6.0
    sweep_max_tokens: int = 512
    sweep_min_r2: float = 0.9
    soak_concurrency: int = 16
    # SGLang's deepseekv4 parser streams nothing while a call's DSML is decoded (one delta when
    # it closes): ~70 tokens, 7 s at 100 ms a step. The corruption suite, where every stream is
    # a tool call, tolerates this much silence before it calls a stream stalled or the server
    # frozen (the abort-cascade and smoke suites keep stall_s / freeze_s).
    tool_call_silence_s: float = 15.0
    # The profile's canary.tool_calls: false for a model that cannot echo the request's nonce
    # (the tiny CPU model): no suite sends a tool-call request, and each verdict says so.
    tool_calls: bool = True

    def tool_calls_off_reason(self) -> str | None:
        """The verdict's line when the profile turned the tool-call checks off, else None."""
        if self.tool_calls:
            return None
        return "tool-call checks off by the profile (canary.tool_calls: false): none was sent"

    def with_overrides(self, **changes: object) -> Thresholds:
        """Copy with the known, well-typed values of `changes` (others keep the defaults: a
        record from an older journal may hold a redacted '***' where a number belongs)."""
        kept: JSONObject = {}
        for f in fields(self):
            if f.name not in changes or changes[f.name] is None:
                continue
            value, default = changes[f.name], getattr(self, f.name)
            numeric = isinstance(default, int | float) and not isinstance(default, bool)
            if numeric and (isinstance(value, bool) or not isinstance(value, int | float)):
                continue
            if isinstance(default, bool) and not isinstance(value, bool):
                continue
            kept[f.name] = value
        return replace(self, **kept)

    @classmethod
    def judging(cls, settings: CanaryThresholds) -> Thresholds:
        """The thresholds of a profile's canary section, the canary-side ones at their defaults."""
        return extended(Thresholds, settings)

    @classmethod
    def recorded(cls, section: Mapping[str, object] | None) -> Thresholds:
        """The thresholds of a canary section as a journal recorded it (a value it cannot use
        keeps the default: settings.from_record)."""
        return cls.judging(from_record(CanaryThresholds, section))

    def to_json(self) -> JSONObject:
        return asdict(self)

    def thinking_mode(self) -> Thinking:
        """The workload's view of `thinking` (workload.Thinking)."""
        from dsv4ops.canary.workload import Thinking

        return Thinking(on=self.thinking, budget=self.thinking_budget_tokens)


def thresholds_from_profile(profile: Profile) -> Thresholds:
    """The thresholds a loaded profile's `canary` section sets (the others at their defaults)."""
    return Thresholds.judging(profile.canary)


def buckets_from_profile(profile: Profile) -> tuple[int, ...]:
    """The decode CUDA-graph buckets the profile resolves to (empty when unknown)."""
    return tuple(profile.flags.decode_buckets)
