"""The bounds an operation's steps run under, per launcher (usecases/compose.timeouts_for), and
the stop grace each component gets: the one it was deployed with. Values and why:
dsv4ops/timings.py."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from dsv4ops.deployment import START_ORDER, Deployment
from dsv4ops.timings import DRAIN_S, PROBE_REQUEST_S, READY_OTHER_S, READY_S, STOP_GRACE_S


@dataclass(frozen=True)
class Timeouts:
    """Seconds. Ready waits are per component (a real DSV4 prefill loads weights for minutes).
    The stop grace is each component's own, as deployed (`Component.stop_grace_s`);
    `stop_grace_cap_s` cuts it where one is set (the twin, $DSV4OPS_READY_TIMEOUT_S)."""

    ready_s: Mapping[str, float] = field(default_factory=lambda: dict(READY_S))
    stop_grace_cap_s: float | None = None
    drain_s: float = DRAIN_S
    probe_request_s: float = PROBE_REQUEST_S
    probe_rounds: int = 2

    def ready_for(self, name: str) -> float:
        return self.ready_s.get(name, READY_OTHER_S)

    def grace_for(
        self, name: str, *, started: Mapping[str, float], running: Deployment | None
    ) -> float:
        """The stop grace of `name` as it runs: the one of the deployment this operation started
        it from (`started`), else of the running deployment the journal recorded, never of the
        profile being deployed now (a new grace applies to the processes deployed with it); the
        default when neither knows it (nothing recorded). Cut to the cap where there is one."""
        grace = started.get(name)
        if grace is None and running is not None and name in START_ORDER:
            grace = running.component(name).stop_grace_s
        grace = STOP_GRACE_S if grace is None else grace
        cap = self.stop_grace_cap_s
        return grace if cap is None else min(grace, cap)
