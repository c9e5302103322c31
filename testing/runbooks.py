"""Test helpers and doubles for `dsv4ops.runbooks` (one module per package area).

- fake_executor: A scripted stand-in for the runbook session's command executor (nothing runs).
- fake_world: A scripted stand-in for the runbook engine's world (preconditions, waits, diagnostics).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence

from dsv4ops.runbooks.model import Condition
from dsv4ops.runbooks.preconditions import Snapshot

# The runbooks the package ships (runbooks/*.md), by name: what `runbook list` lists, in its order.
SHIPPED_RUNBOOKS = (
    "bootstrap-degradation",
    "bucket-tuning",
    "decode-wedge",
    "drain-and-stop",
    "flag-change",
    "kernel-rollout",
    "overlap-ab",
    "pd-safe-restart",
    "router-change",
    "tool-call-corruption",
)

# --- fake_executor (was testing/runbooks.py) ---


def incident_present(argv: list[str]) -> int:
    """The wedge is there: the smoke canary FAILs (2), everything else succeeds."""
    return 2 if "smoke" in argv else 0


class FakeExecutor:
    """Exit codes from a script; records every argv and env it is given, runs nothing."""

    def __init__(self, code_for: Callable[[list[str]], int] = incident_present) -> None:
        self.code_for = code_for
        self.calls: list[list[str]] = []
        self.envs: list[dict[str, str]] = []

    def __call__(self, argv: Sequence[str], env: Mapping[str, str]) -> int:
        self.calls.append(list(argv))
        self.envs.append(dict(env))
        return self.code_for(list(argv))


# --- fake_world (was testing/runbooks.py) ---

HEALTHY: Snapshot = {
    "healthy": True,
    "components": {
        n: {"alive": True, "healthy": True, "running": 0, "queued": 0}
        for n in ("prefill", "decode", "router")
    },
    "deployed": {"op": "d-1", "profile": "baseline", "commit": "abc123"},
}


class FakeWorld:
    """Snapshots from `self.state` (edit it to change the target); waits hold unless listed in
    `failing` (by condition text); diagnostics return a fixed path."""

    def __init__(self) -> None:
        self.state: Snapshot = copy.deepcopy(HEALTHY)
        self.failing: set[str] = set()
        self.waited: list[list[str]] = []
        self.bundles: list[tuple[str, int]] = []
        # Called once, at the first snapshot: a test interleaves another operator there (a
        # resume has read the run and checks the target before it claims the run).
        self.at_first_snapshot: Callable[[], object] | None = None

    def snapshot(self) -> Snapshot:
        hook, self.at_first_snapshot = self.at_first_snapshot, None
        if hook is not None:
            hook()
        return copy.deepcopy(self.state)

    def wait(self, conditions: Sequence[Condition], timeout_s: float) -> tuple[bool, str]:
        self.waited.append([c.text for c in conditions])
        bad = [c.text for c in conditions if c.text in self.failing]
        if bad:
            return False, f"after {timeout_s:g} s: not {', '.join(bad)}"
        return True, "held after 0.0 s"

    def diagnostics(self, run_id: str, max_bytes: int) -> str:
        self.bundles.append((run_id, max_bytes))
        return f"/tmp/bundle-{run_id}"
