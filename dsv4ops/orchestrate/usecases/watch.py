"""`dsv4ops watch`: the deployed unit (from the journal) bound to a Watcher for this session.

Read-only: the Watcher's HTTP client is the supervisor's `http_many` (requests made from the
target, as the deploy probe's are); nothing here can start, stop or signal a process.
"""

from __future__ import annotations

from dsv4ops.errors import DsOpsError
from dsv4ops.monitoring.scrape import decode_log_interval, target_time_scale
from dsv4ops.orchestrate.usecases.session import TargetSession
from dsv4ops.watch import Watcher, WatchSettings, watch_endpoints
from dsv4ops.watch.baseline import baseline_from_operations


def open_watch(session: TargetSession, *, interval_s: float = 5.0, probe_every_s: float = 30.0,
               probe: bool = True) -> Watcher:
    """A Watcher for what the journal says runs on the session's target. Raises DsOpsError
    when nothing is recorded (watch reports on a deployment, never on a guess)."""
    deployed = session.journal.deployed()
    if deployed is None or not deployed.components:
        raise DsOpsError(f"the journal records no running deployment on target "
                         f"{session.target.name!r}: nothing to watch",
                         hint=f"dsv4ops status --target {session.target.name}")
    deployment = deployed.deployment()
    endpoints = watch_endpoints(session.target, deployment)
    settings = WatchSettings(
        interval_s=interval_s,
        probe_every_s=probe_every_s,
        decode_log_interval=decode_log_interval(deployment),
        max_decode_bucket=max(endpoints.decode_buckets, default=None),
        baseline=baseline_from_operations(session.journal.operations(), deployed),
        time_scale=target_time_scale(session.target),
    )
    return Watcher(endpoints, settings, session.supervisor.http_many, session.clock, probe=probe)
