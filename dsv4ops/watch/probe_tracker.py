"""The probe rounds' side of watch's findings: consecutive stalled rounds, and failures and
corruption seen within the failure window (detect.py's Detector owns one and asks it each round).
"""

from __future__ import annotations

from collections.abc import Sequence

from dsv4ops.watch.findings import Basis, Finding
from dsv4ops.watch.probe import CORRUPT, FAILED, STALLED, ProbeOutcome
from dsv4ops.watch.settings import WatchSettings


class ProbeTracker:
    """Consecutive stalled rounds, and failures and corruption seen within the failure window."""

    def __init__(self, settings: WatchSettings) -> None:
        self.s = settings
        self.stalled_rounds = 0
        self.last_stall = ""
        self._stall_started: float | None = None
        self._failed: tuple[float, str] | None = None
        self._unauthorized: tuple[float, str] | None = None
        self._corrupt: tuple[float, str] | None = None
        self.rounds = 0

    def round(self, now: float, outcomes: Sequence[ProbeOutcome], *, healthy: bool) -> None:
        self.rounds += 1
        stalls = [o for o in outcomes if o.status == STALLED]
        if stalls:
            self._stall_started = now if not self.stalled_rounds else self._stall_started
            self.stalled_rounds += 1
            self.last_stall = f"{stalls[0].kind}: {stalls[0].detail}"
        else:
            self.stalled_rounds, self._stall_started = 0, None
        for o in outcomes:
            if o.status == FAILED and o.unauthorized:
                self._unauthorized = (now, f"{o.kind} probe: {o.detail}")
            elif o.status == FAILED and healthy:
                self._failed = (now, f"{o.kind} probe: {o.detail}")
            elif o.status == CORRUPT:
                self._corrupt = (now, f"{o.kind} probe: {o.detail}")

    def findings(
        self, now: float, decode_progress_at: float | None, *, decode_read: bool = True
    ) -> list[Finding]:
        out = []
        window = self.s.wall(self.s.failure_window_s)
        if (
            self.stalled_rounds >= self.s.stalled_probes
            and self._stall_started is not None
            and decode_read
        ):
            evidence = (f"{self.stalled_rounds} probe rounds in a row stalled", self.last_stall)
            # a move seen after the first stalled round began: the decode decodes other work
            if decode_progress_at is not None and decode_progress_at > self._stall_started:
                out.append(
                    Finding(
                        "pd_transfer_degraded",
                        "unit",
                        "probes stall while the decode keeps decoding other work",
                        (
                            *evidence,
                            "realtime_tokens_total{mode=decode} still moves: "
                            "requests are lost between prefill and decode",
                        ),
                    )
                )
            else:
                out.append(
                    Finding(
                        "probe_stalled",
                        "unit",
                        "probes get no answer and the decode makes no progress",
                        evidence,
                        (Basis.PROBE_ROUNDS, Basis.PROGRESS_COUNTER),
                    )
                )
        if self._failed and now - self._failed[0] <= window:
            out.append(
                Finding(
                    "probe_failed_while_healthy",
                    "unit",
                    "probes fail while every /health is green",
                    (self._failed[1], "/health never exercises the KV transfer"),
                )
            )
        if self._unauthorized and now - self._unauthorized[0] <= window:
            out.append(
                Finding(
                    "probe_unauthorized",
                    "router",
                    "the router refuses this machine's probes: the unit is not judged end to end",
                    (
                        self._unauthorized[1],
                        "the API key watch sends (the profile's router.api_key) is not the "
                        "router's; nothing about the prefill or decode follows from it",
                    ),
                )
            )
        if self._corrupt and now - self._corrupt[0] <= window:
            out.append(
                Finding(
                    "tool_call_corruption",
                    "decode",
                    "a probe's tool call came back " "corrupted",
                    (self._corrupt[1],),
                )
            )
        return out
