"""`dsv4ops watch`: the deployed unit (from the journal) bound to a Watcher for this session.

Read-only: the Watcher's HTTP client is the supervisor's `http_many` (requests made from the
target, as the deploy probe's are); nothing here can start, stop or signal a process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsv4ops.apikey import auth_headers
from dsv4ops.errors import DsOpsError, RecordedSettingError
from dsv4ops.monitoring.scrape import target_time_scale
from dsv4ops.usecases.session import TargetSession
from dsv4ops.watch import Watcher, WatchSettings, watch_endpoints
from dsv4ops.watch.baseline import baseline_from_operations
from dsv4ops.watch.endpoints import cluster_watch_endpoints
from dsv4ops.watch.stream import ProbeStream

# Watch stops no process: a recorded stop grace is not read (a damaged one is only named).
WATCH_UNREAD = ("stop_grace_s",)

if TYPE_CHECKING:  # the values the CLI draws and serves, re-exported for its annotations
    from dsv4ops.watch.exporter import FindingsExporter as FindingsExporter
    from dsv4ops.watch.loop import Round as Round
    from dsv4ops.watch.readings import ServerReading as ServerReading


def open_watch(
    session: TargetSession,
    *,
    interval_s: float = 5.0,
    probe_every_s: float = 30.0,
    probe: bool = True,
) -> Watcher:
    """A Watcher for what the journal says runs on the session's target. Raises DsOpsError
    when nothing is recorded (watch reports on a deployment, never on a guess)."""
    if session.target.endpoint is not None:
        return _open_cluster_watch(
            session, interval_s=interval_s, probe_every_s=probe_every_s, probe=probe
        )
    deployed = session.journal.deployed()
    if deployed is None or not deployed.components:
        raise DsOpsError(
            f"the journal records no running deployment on target "
            f"{session.target.name!r}: nothing to watch",
            hint=f"dsv4ops status --target {session.target.name}",
        )
    deployment = deployed.deployment(unread=WATCH_UNREAD)
    endpoints = watch_endpoints(session.target, deployment)
    settings = WatchSettings(
        interval_s=interval_s,
        probe_every_s=probe_every_s,
        decode_log_interval=deployment.decode_log_interval,
        max_decode_bucket=max(endpoints.decode_buckets, default=None),
        baseline=baseline_from_operations(session.journal.operations(), deployed),
        time_scale=target_time_scale(session.target),
        tool_calls=deployment.canary.tool_calls,
    )
    stream = _probe_stream(session, endpoints.model) if probe else None
    # A local target's URLs are this machine's: its scrapes skip the agent process.
    confirm = (
        stream.http_many if stream is not None and session.target.transport == "local" else None
    )
    return Watcher(
        endpoints,
        settings,
        session.supervisor.http_many,
        session.clock,
        probe=probe,
        stream=stream,
        scrape_http=confirm,
    )


def recorded_notes(session: TargetSession) -> list[RecordedSettingError]:
    """The damaged fields of the watched deployment's record that watch does not need (it
    watches anyway; deploy, rollback and stop refuse until they are mended), for the CLI to
    name. A field watch needs is named by open_watch's RecordedSettingError."""
    from dsv4ops.orchestrate.status_recorded import recorded_damage

    deployed = session.journal.deployed()
    if session.target.endpoint is not None or deployed is None or not deployed.components:
        return []
    try:
        observed = deployed.deployment(unread=WATCH_UNREAD)
    except RecordedSettingError:
        observed = None
    return recorded_damage(deployed, observed)


def _probe_stream(session: TargetSession, model: str) -> ProbeStream | None:
    """The probe stream through the unit's router as this machine reaches it (watch/stream.py):
    one generation held open, so a wedge is found within 3 s of its last token."""
    from dsv4ops.usecases.session import reachable

    try:
        # not the stop grace, as open_watch: a damaged one cost watch its stream without a word
        reach = reachable(session, unread=WATCH_UNREAD)
    except DsOpsError:
        return None  # the scrapes and probes still judge the unit, as before
    # the workers' limits size the stream (their context length): asked of them directly, as
    # the canary does, since the router's own /v1/models card does not carry it
    workers = (*reach.decode_urls, *reach.prefill_urls)
    headers = auth_headers(reach.router_key)  # the router's key, when it requires one
    return ProbeStream(reach.router_url, model, worker_urls=workers, headers=headers)


def _open_cluster_watch(
    session: TargetSession, *, interval_s: float, probe_every_s: float, probe: bool
) -> Watcher:
    """An endpoint target (a cluster): its router and servers as targets.yaml names them,
    reached from this machine; the profile it names (if any) gives the model and buckets. No
    journal baseline: dsv4ops did not deploy it, so `throughput_below_baseline` stays quiet."""
    from dsv4ops.usecases.session import reachable

    reach = reachable(session)
    missing = [
        key
        for key, have in (
            ("metrics.router", reach.router_metrics_url),
            ("metrics.decode", reach.decode_urls),
        )
        if not have
    ]
    if missing:
        raise DsOpsError(
            f"target {session.target.name!r} is an endpoint without {' and '.join(missing)}: "
            "watch judges the unit by the router's and the decode's metrics",
            hint="add them to its entry in profiles/targets.yaml (docs/kubernetes.md)",
        )
    model: str = "default"
    buckets: tuple[int, ...] = ()
    if reach.profile:
        from dsv4ops.canary import buckets_from_profile
        from dsv4ops.profiles import load_profile

        profile = load_profile(reach.profile)
        model, buckets = profile.model.request_name, buckets_from_profile(profile)
    endpoints = cluster_watch_endpoints(
        reach.router_url,
        str(reach.router_metrics_url),
        reach.prefill_urls,
        reach.decode_urls,
        model=model,
        decode_buckets=buckets,
    )
    settings = WatchSettings(
        interval_s=interval_s,
        probe_every_s=probe_every_s,
        decode_log_interval=reach.decode_log_interval,
        max_decode_bucket=max(endpoints.decode_buckets, default=None),
        baseline=None,
        time_scale=1.0,
    )
    stream = _probe_stream(session, model) if probe else None
    # an endpoint target's URLs are this machine's already
    return Watcher(
        endpoints,
        settings,
        session.supervisor.http_many,
        session.clock,
        probe=probe,
        stream=stream,
        scrape_http=stream.http_many if stream is not None else None,
    )


def serve_findings(port: int) -> tuple[FindingsExporter, int]:
    """The findings as Prometheus metrics on 127.0.0.1:`port` (0: any free port): the exporter
    and the port it listens on. DsOpsError when it cannot listen there."""
    from dsv4ops.watch.exporter import FindingsExporter

    exporter = FindingsExporter()
    try:
        return exporter, exporter.serve(port)
    except OSError as exc:
        exporter.close()
        raise DsOpsError(
            f"--prometheus-port {port}: cannot listen on 127.0.0.1: {exc.strerror or exc}"
        ) from None
