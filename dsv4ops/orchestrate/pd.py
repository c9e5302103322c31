"""The PD pair rule: prefill and decode are restarted together, never one against the other.

The bootstrap-degradation incident: on the production box, restarting only the decode against a
long-running prefill left the NIXL bootstrap state degraded and KV transfers failing silently
while both sides reported healthy (see docs/deploy.md and sglang#33789). So a request to
restart only one worker becomes a restart of the pair, unless the operator passes the loudly
named override.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from dsv4ops.deployment import START_ORDER, WORKERS
from dsv4ops.errors import DeployError

OVERRIDE_FLAG = "--i-know-decode-only-restart-breaks-kv-transfer"
WARNING = "WARNING: PD pair partially restarted:"
PAIR_REASON = (
    "restarting {asked} alone against a running {other} degraded the NIXL bootstrap state in "
    "production (KV transfers failed while both reported healthy); restarting the pair instead"
)


@dataclass(frozen=True)
class RestartScope:
    components: tuple[str, ...]  # in start order
    note: str | None  # one line explaining an upgrade to a pair restart (or the override)
    partial: bool  # True when some component keeps running through the deploy


def restart_scope(
    requested: Iterable[str] | None, *, allow_partial_pair: bool = False
) -> RestartScope:
    """Which components a deploy restarts. None/empty means all. Raises DeployError on bad names."""
    asked = tuple(dict.fromkeys(requested or ()))
    unknown = [n for n in asked if n not in START_ORDER]
    if unknown:
        raise DeployError(
            f"unknown component(s) {', '.join(unknown)}; choose from {', '.join(START_ORDER)}"
        )
    if not asked or set(asked) == set(START_ORDER):
        return RestartScope(START_ORDER, None, False)
    workers = [n for n in asked if n in WORKERS]
    if len(workers) == 1:
        (one,) = workers
        other = "prefill" if one == "decode" else "decode"
        if allow_partial_pair:
            # Loud on purpose (printed, in --json notes, and in the journal's message): this is
            # the restart that broke KV transfer silently in production.
            note = (
                f"{WARNING} {OVERRIDE_FLAG}: restarting {one} ALONE against the running {other}, "
                "as asked; the bootstrap-degradation incident says this can break KV transfer "
                "silently while both report healthy"
            )
            chosen = set(asked)
        else:
            note = PAIR_REASON.format(asked=one, other=other)
            chosen = set(asked) | set(WORKERS)
    else:
        note = None
        chosen = set(asked)
    if chosen & set(WORKERS):
        # A restarted worker pair always re-registers with a restarted router: the router caches
        # worker state (health, circuit breakers), so the whole set goes round.
        chosen.add("router")
    components = tuple(n for n in START_ORDER if n in chosen)
    return RestartScope(components, note, set(components) != set(START_ORDER))
