"""A scripted stand-in for the runbook engine's world (preconditions, waits, diagnostics)."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from dsv4ops.runbooks.model import Condition

HEALTHY: dict[str, Any] = {
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
        self.state = copy.deepcopy(HEALTHY)
        self.failing: set[str] = set()
        self.waited: list[list[str]] = []
        self.bundles: list[tuple[str, int]] = []

    def snapshot(self) -> dict[str, Any]:
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
