"""canary: stress canaries against an OpenAI-compatible endpoint (load generator, suites,
verdicts, reports). Public API: `run_suite`, `suites_for_change`, `SuiteResult`, `Verdict`,
`Thresholds`, `thresholds_from_profile`."""

from __future__ import annotations

from dsv4ops.canary.runner import SUITE_NAMES, run_suite, suites_for_change
from dsv4ops.canary.verdict import (
    SuiteResult,
    Thresholds,
    Verdict,
    buckets_from_profile,
    thresholds_from_profile,
)

__all__ = [
    "SUITE_NAMES",
    "SuiteResult",
    "Thresholds",
    "Verdict",
    "buckets_from_profile",
    "run_suite",
    "suites_for_change",
    "thresholds_from_profile",
]
