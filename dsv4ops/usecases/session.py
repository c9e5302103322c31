"""What a use case runs against: one target, its supervisor, its journal and the clock; and
`reachable`, what of a target this machine can reach over HTTP (the router, the servers)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dsv4ops.apikey import ApiKeyRef
from dsv4ops.clock import Clock, SystemClock
from dsv4ops.constants import SGLANG_DEFAULT_DECODE_LOG_INTERVAL
from dsv4ops.deployment import WORKERS
from dsv4ops.errors import TargetError
from dsv4ops.waits import QUIET, WaitObserver

if TYPE_CHECKING:
    from dsv4ops.deployment import Deployment
    from dsv4ops.journal.store import Journal
    from dsv4ops.profiles.model import Profile, Target
    from dsv4ops.remote.supervisor import Supervisor


@dataclass
class TargetSession:
    """Built by the CLI's composition root (`cli/_context.open_target`); closed by the CLI."""

    target: Target
    supervisor: Supervisor
    journal: Journal
    clock: Clock = field(default_factory=SystemClock)
    waits: WaitObserver = QUIET  # what shows a long step while it runs (the CLI's: cli/_live.py)

    def close(self) -> None:
        self.supervisor.close()
        self.supervisor.executor.close()


@dataclass(frozen=True)
class Reachable:
    """A target as this machine reaches it: base URLs (no path) of its router and servers."""

    target: str
    router_url: str
    prefill_urls: tuple[str, ...]  # /metrics, /health, /abort_request live here
    decode_urls: tuple[str, ...]
    source: str  # "endpoint" (targets.yaml), "journal" (the deployed unit) or "profile" (render)
    # The router's Prometheus /metrics (its own port), when known.
    router_metrics_url: str | None = None
    # The deployment the journal recorded (its canary settings, buckets, model), when known.
    deployment: Deployment | None = None
    endpoint: bool = False  # a cluster: its controller owns restarts
    profile: str | None = None  # the profile an endpoint target says its cluster runs
    # The decode's --decode-log-interval as started (the canary's freeze window); SGLang's
    # default when unknown (an endpoint target).
    decode_log_interval: int = SGLANG_DEFAULT_DECODE_LOG_INTERVAL
    # Where the router's API key lives on this machine (None: it requires none). Every client
    # of the router (canary, ab, watch) sends `apikey.auth_headers(router_key)`.
    router_key: ApiKeyRef | None = None

    @property
    def worker_urls(self) -> tuple[str, ...]:
        return self.prefill_urls + self.decode_urls

    @property
    def metrics_urls(self) -> tuple[str, ...]:
        """The servers' /metrics (SGLang serves it on the API port with --enable-metrics)."""
        return tuple(f"{u}/metrics" for u in self.worker_urls)


def reachable(
    session: TargetSession,
    profile: Profile | None = None,
    *,
    key: bool = True,
    unread: Collection[str] = (),
) -> Reachable:
    """What of the session's target can be reached, for the HTTP-only verbs (canary, ab, watch,
    status of an endpoint target):

    1. an endpoint target (`transport: endpoint`): its router_url and metrics URLs as written;
    2. else the unit the session's journal records as deployed there (its ports as recorded):
       the target's own record, the one deploy writes, not a local file of this machine's;
    3. else, with `profile`, that profile's ports as rendered for the target.

    `key=False`: an endpoint target's key is not looked up (its profile not loaded), for a
    reader that sends no key (status reads the router's /readiness, which answers anyone).
    `unread`: fields of the recorded components the reader does not need (watch stops no
    process: not the stop grace; Component.from_record).
    Raises TargetError when none applies, ProfileError for a bad profile."""
    target = session.target
    name = target.name
    if target.endpoint is not None:
        e = target.endpoint
        prom = f"{e.router_metrics}/metrics" if e.router_metrics else None
        return Reachable(
            name,
            e.router_url,
            e.prefill,
            e.decode,
            "endpoint",
            prom,
            endpoint=True,
            profile=e.profile,
            router_key=_endpoint_key(profile, e.profile) if key else None,
        )
    op = session.journal.deployed()
    if op is not None and op.components:
        d = op.deployment(unread=unread)
        return _from_components(name, d, "journal", d)
    if profile is not None:
        from dsv4ops.profiles import render

        return _from_components(name, render(profile, target), "profile")
    raise TargetError(
        f"the journal records no running deployment on target {name!r}",
        hint="pass --profile P to use its rendered ports, or --url",
    )


def _endpoint_key(profile: Profile | None, named: str | None) -> ApiKeyRef | None:
    """The key a cluster's router requires: the `router.api_key` of the profile it runs (the one
    passed, else the one the endpoint target names), as for a unit dsv4ops deployed."""
    if profile is None and named:
        from dsv4ops.profiles import load_profile

        profile = load_profile(named)
    return profile.router_key if profile is not None else None


def _from_components(
    name: str, d: Deployment, source: str, recorded: Deployment | None = None
) -> Reachable:
    comps = {c.name: c for c in d.components}
    one = {role: (comps[role].client_url(),) if role in comps else () for role in WORKERS}
    router = comps["router"]
    return Reachable(
        name,
        router.client_url(),
        one["prefill"],
        one["decode"],
        source,
        router.metrics_url,
        deployment=recorded,
        decode_log_interval=d.decode_log_interval,
        router_key=router.api_key,
    )
