"""Verdicts, suite results and the thresholds they are judged by.

Exit codes (CLI): PASS 0, FAIL 2, INCONCLUSIVE 4. FAIL beats INCONCLUSIVE beats PASS when results
are combined (`all`), because a real failure found in one suite is not undone by another suite
lacking data.
"""

from __future__ import annotations

import enum
import math
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, NotRequired, TypedDict

from pydantic import Field, ValidationError

from dsv4ops import exitcodes
from dsv4ops.errors import CanaryError, DsOpsError
from dsv4ops.jsontypes import JSONObject
from dsv4ops.profiles.excerpt import excerpt
from dsv4ops.profiles.model import Profile
from dsv4ops.profiles.schema import describe
from dsv4ops.settings import CanaryThresholds

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


class Kind(enum.Enum):
    """What a reason is about, decided by the judge that writes it, where it writes it: each
    reason of a result carries one (`SuiteResult.findings`, `findings[].kind` in the JSON report),
    so a reader acts on the kind and never parses the reason's words."""

    # what the server did wrong (FAIL; a hang, a latency or a decay is INCONCLUSIVE when the client
    # stalled)
    ERRORS = "errors"  # requests failed (a 5xx, a broken stream, a deadline)
    WORKER_DOWN = "worker_down"  # a worker's /metrics port refused to the end
    HANG = "hang"  # the watchdog's hangs: no first token, a stall, a freeze
    WEDGE = "wedge"  # the abort cascade's freeze
    NO_RECOVERY = "no_recovery"  # running/queued never back to baseline after the cascade
    ABORT_IGNORED = "abort_ignored"  # streams kept streaming after /abort_request
    TOOL_CORRUPTION = "tool_corruption"
    NO_TOOL_CALLS = "no_tool_calls"  # the model made none: tools off or the wrong parser
    INCONSISTENT = "inconsistent"  # greedy output differs between concurrency 1 and under load
    GARBLED = "garbled"  # U+FFFD in the output
    DECAY = "decay"  # soak: throughput decayed over the steady window
    LATENCY = "latency"  # a p99 over its limit
    # doubts: why a judge could not judge (INCONCLUSIVE)
    REFUSED = "refused"  # the server refused requests (4xx): as a note when few
    BLIND = "blind"  # no evidence: nothing completed, no call or pair checked, no level measured
    CLIENT_LAG = "client_lag"  # the client's own event-loop lag: its stamps are not the server's
    CLIENT_CPU = "client_cpu"  # the client used more CPU than its bound: client-bound
    NO_STEP_LAW = "no_step_law"  # the sweep's fit is no step law (too few levels, slope <= 0)
    POOR_FIT = "poor_fit"  # the step law's R² under its bound
    OFF_LAW = "off_law"  # levels where the fitted law predicts no positive step
    TOO_SHORT = "too_short"  # soak: too few seconds at full load to judge a decay
    NO_METRICS = "no_metrics"  # worker metrics unavailable where the judge needs them
    NOT_DECODING = "not_decoding"  # abort cascade: too few streams decoding when it started
    UNADDRESSED = "unaddressed"  # abort cascade: streams the router let no abort id through for
    SKIPPED = "skipped"  # a check the profile turns off (tool calls a model cannot make)
    THINKING_BUDGET = "thinking_budget"  # reasoning used the max_tokens before the call
    NOTE = "note"  # a note without a kind of its own


Level = Literal["FAIL", "INCONCLUSIVE", "note"]


class ReasonRecord(TypedDict):
    """A reason as report.json lists it (Reason.to_json): `suite` where results are combined."""

    level: Level
    kind: str
    reason: str
    suite: NotRequired[str]


@dataclass(frozen=True)
class Reason:
    """One reason of a result: its level, its kind (typed, for readers) and its words (for
    people). `line` is the reason as `SuiteResult.reasons` lists it."""

    level: Level
    kind: Kind
    text: str
    suite: str | None = None  # set where results are combined (`all`)

    @property
    def line(self) -> str:
        return f"{self.level}: {self.text}"

    def to_json(self) -> ReasonRecord:
        out: ReasonRecord = {"level": self.level, "kind": self.kind.value, "reason": self.line}
        if self.suite is not None:
            out["suite"] = self.suite
        return out


class SuiteResultJSON(TypedDict):
    """A suite's result as report.json's `canary.suites` and `canary --json` hold it."""

    suite: str
    verdict: str
    reasons: list[str]
    findings: list[ReasonRecord]
    metrics: JSONObject  # the suite's numbers, as it measured them (report.json's keys)
    suites: NotRequired[list[SuiteResultJSON]]  # a composite suite's parts


@dataclass
class SuiteResult:
    """What a suite found: the verdict, one line per reason (`findings`: the same reasons with
    their kinds), and the numbers behind it."""

    suite: str
    verdict: Verdict
    reasons: list[str] = field(default_factory=list)
    metrics: JSONObject = field(default_factory=dict)
    sub_results: list[SuiteResult] = field(default_factory=list)
    findings: list[Reason] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return self.verdict.exit_code

    def to_json(self) -> SuiteResultJSON:
        out: SuiteResultJSON = {
            "suite": self.suite,
            "verdict": self.verdict.value,
            "reasons": list(self.reasons),
            "findings": [r.to_json() for r in self.findings],
            "metrics": self.metrics,
        }
        if self.sub_results:
            out["suites"] = [s.to_json() for s in self.sub_results]
        return out


class Findings:
    """Collects reasons while a suite is judged, each with its kind; `FAIL` and `INCONCLUSIVE`
    reasons are kept apart."""

    def __init__(self) -> None:
        self.found: list[Reason] = []

    def fail(self, reason: str, kind: Kind) -> None:
        self.found.append(Reason("FAIL", kind, reason))

    def unsure(self, reason: str, kind: Kind) -> None:
        self.found.append(Reason("INCONCLUSIVE", kind, reason))

    def note(self, reason: str, kind: Kind = Kind.NOTE) -> None:
        self.found.append(Reason("note", kind, reason))

    def _texts(self, level: Level) -> list[str]:
        return [r.text for r in self.found if r.level == level]

    @property
    def failures(self) -> list[str]:
        return self._texts("FAIL")

    @property
    def inconclusive(self) -> list[str]:
        return self._texts("INCONCLUSIVE")

    @property
    def notes(self) -> list[str]:
        return self._texts("note")

    def result(self, suite: str, metrics: JSONObject) -> SuiteResult:
        if self.failures:
            verdict = Verdict.FAIL
        elif self.inconclusive:
            verdict = Verdict.INCONCLUSIVE
        else:
            verdict = Verdict.PASS
        order: tuple[Level, ...] = ("FAIL", "INCONCLUSIVE", "note")
        found = [r for level in order for r in self.found if r.level == level]
        return SuiteResult(
            suite=suite,
            verdict=verdict,
            reasons=[r.line for r in found],
            metrics=metrics,
            findings=found,
        )


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


# The tool-call parsers SGLang 0.5.23 serves through deepseek-recipe (chat_encoding.py
# `resolve_chat_encoding_spec`: deepseekv4 -> dsv4, deepseekv41 -> dsv41): the recipe renders the
# prompt and streams a call while it is decoded.
RECIPE_TOOL_CALL_PARSERS = frozenset({"deepseekv4", "deepseekv41"})


class Thresholds(CanaryThresholds):
    """Everything a suite is judged by: the profile's `canary` section (`CanaryThresholds`,
    declared once in dsv4ops/settings.py, inherited here with its defaults), then the canary-side
    settings no profile sets. The one way to a verdict is `judging(section)`: from a profile,
    `judging(profile.canary)`; from a journal record, `judging(deployment.canary)`. Frozen: a
    changed copy is `model_copy(update=...)`.
    """

    watchdog_tick_s: float = 0.1
    # Client self-check (reference load-generators.md §4.4: above these the numbers are the
    # client's, not the server's).
    client_cpu_max: float = 0.9
    loop_lag_p99_max_ms: float = Field(default_factory=client_lag_limit_ms)
    max_error_rate: float = 0.0
    ttft_p99_max_ms: float | None = None
    itl_p99_max_ms: float | None = None
    max_tokens: int = 64
    smoke_concurrency: int = 4
    corruption_turns: int = 3
    consistency_prompts: int = 8
    abort_streams: int = 32
    sweep_max_tokens: int = 512
    sweep_min_r2: float = 0.9
    soak_concurrency: int = 16
    # A tool-call parser that streams nothing while a call is decoded (one delta when it closes:
    # SGLang's function-call detectors, qwen's and the box's old deepseekv4 one, ~70 tokens, 7 s
    # at 100 ms a step): the corruption suite, where every stream is a tool call, tolerates this
    # much silence before it calls a stream stalled or the server frozen (the abort-cascade and
    # smoke suites keep stall_s / freeze_s). 0.5.23 serves deepseekv4 and deepseekv41 through
    # deepseek-recipe, which streams a call while it is decoded (a header, then argument pieces;
    # twin/recipe.py): no silence to allow for (`tool_call_silence`, docs/canary.md).
    tool_call_silence_s: float = 15.0
    # The deployment's --tool-call-parser (None: not known, the allowance kept)
    tool_call_parser: str | None = None

    def tool_call_silence(self) -> float:
        """Seconds of silence the corruption suite allows a tool-call stream: none for a parser
        0.5.23 serves through deepseek-recipe (it streams the call as it is decoded), else
        `tool_call_silence_s` (a detector that sends the call when it closes, or not known)."""
        if self.tool_call_parser in RECIPE_TOOL_CALL_PARSERS:
            return 0.0
        return self.tool_call_silence_s

    def tool_calls_off_reason(self) -> str | None:
        """The verdict's line when the profile turned the tool-call checks off, else None."""
        if self.tool_calls:
            return None
        return "tool-call checks off by the profile (canary.tool_calls: false): none was sent"

    def with_overrides(self, **changes: object) -> Thresholds:
        """Copy with `changes` (an A/B's workload overrides, usecases/ab_plan.py); a None is
        no override, a list is the tuple the model holds. The changed values are validated by
        the model itself (its types, bounds and strictness, as a profile's canary section is):
        a key that is no threshold, or a value the threshold does not take, raises DsOpsError
        naming the key, the value and what it takes; nothing is dropped without a word."""
        cls = type(self)
        for name, value in changes.items():
            if name not in cls.model_fields:
                raise DsOpsError(
                    f"canary override {name}={excerpt(value)}: no such threshold",
                    hint="the thresholds are the canary section's keys (docs/profiles.md)",
                )
        given = {name: value for name, value in changes.items() if value is not None}
        try:  # the overrides alone: a held value outside today's bounds (recorded) stays held
            checked = cls.model_validate(given)
        except ValidationError as exc:
            unfit = str(exc.errors(include_url=False)[0]["loc"][0])
            raise DsOpsError(
                f"canary override {unfit}={excerpt(given[unfit], key=unfit)}: expected "
                f"{describe(cls.model_fields[unfit])}",
                hint="nothing was changed; give the override as its threshold takes it",
            ) from None
        return self.model_copy(update={name: getattr(checked, name) for name in given})

    @classmethod
    def judging(cls, settings: CanaryThresholds) -> Thresholds:
        """The thresholds of a profile's canary section, the canary-side ones at their defaults.
        Copied, not validated again: a recorded value outside today's bounds is read as recorded
        (CanaryThresholds.from_record; docs/deploy.md, "Recorded settings")."""
        held = {name: getattr(settings, name) for name in CanaryThresholds.model_fields}
        return cls().model_copy(update=held)

    def to_json(self) -> dict[str, object]:
        return self.model_dump()

    def thinking_mode(self) -> Thinking:
        """The workload's view of `thinking` (workload.Thinking)."""
        from dsv4ops.canary.workload import Thinking

        return Thinking(on=self.thinking, budget=self.thinking_budget_tokens)


def thresholds_from_profile(profile: Profile) -> Thresholds:
    """The thresholds a loaded profile's `canary` section sets (the others at their defaults),
    with the tool-call parser its model is served with."""
    return Thresholds.judging(profile.canary).model_copy(
        update={"tool_call_parser": profile.model.tool_call_parser}
    )


def buckets_from_profile(profile: Profile) -> tuple[int, ...]:
    """The decode CUDA-graph buckets the profile resolves to (empty when unknown)."""
    return profile.decode_buckets
