"""KV transfers that never complete (one of detect.py's detectors).

NIXL sends the decode no failure notice when a transfer fails (sglang#36033): the request sits in
the decode's transfer queue producing no token until SGLANG_DISAGGREGATION_WAITING_TIMEOUT (300 s
by default) fails it, and only then does a failure counter move. The evidence watch has before
that is the decode's `num_decode_transfer_queue_reqs` gauge: a healthy transfer takes well under a
second, so a queue that never empties for the whole window means at least its lowest count of
requests waited that long with no token. Under a load so heavy that transfers queue back to back
for a minute the gauge cannot tell such a queue from a held one: the finding is a warning, with
the counts and whether the decode still decodes other work as its evidence.
"""

from __future__ import annotations

from collections.abc import Callable

from dsv4ops.watch.findings import Basis, Finding
from dsv4ops.watch.readings import ServerReading
from dsv4ops.watch.settings import WatchSettings


class TransferWatch:
    """Since when the decode's transfer queue has held a request on every scrape, its lowest
    count since, and the decode's progress counter then."""

    def __init__(self, settings: WatchSettings) -> None:
        self.s = settings
        self._since: float | None = None
        self._floor = 0.0
        self._tokens_then: float | None = None

    def observe(
        self, now: float, decode: ServerReading, scaled: Callable[[float], str]
    ) -> list[Finding]:
        pending = decode.queues.get("transfer") if decode.up else None
        if not pending:
            self._since = None
            return []
        if self._since is None:
            self._since, self._floor, self._tokens_then = now, pending, decode.decode_tokens
            return []
        self._floor = min(self._floor, pending)
        held = now - self._since
        if held < self.s.wall(self.s.kv_stuck_s):
            return []
        before, tokens = self._tokens_then, decode.decode_tokens
        moved = before is not None and tokens is not None and tokens > before
        return [
            Finding(
                "kv_transfer_stuck",
                "decode",
                "requests wait for KV transfers that do not complete: no token for them",
                (
                    f"num_decode_transfer_queue_reqs >= {self._floor:g} on every scrape for "
                    f"{scaled(held)} (now {pending:g}; threshold {self.s.kv_stuck_s:g} s)",
                    "realtime_tokens_total{mode=decode} moved meanwhile: the decode serves "
                    "other requests"
                    if moved
                    else "realtime_tokens_total{mode=decode} did not move meanwhile",
                    "no failure notice comes (NIXL, sglang#36033): the decode fails them only "
                    "after its SGLANG_DISAGGREGATION_WAITING_TIMEOUT (`dsv4ops status` shows it)",
                ),
                (Basis.KV_TRANSFER, Basis.PROGRESS_COUNTER),
            )
        ]
