"""`dsv4ops canary`: where the load goes and what judges it, then the suite.

The endpoint is `--url` as given, else what `session.reachable` finds for the target: an
endpoint target's router and metrics URLs, the deployed PD unit as the journal recorded it, or
(with `--profile`) that profile's ports as rendered for the target. The thresholds and decode
buckets come from `--profile`, else from the endpoint target's `profile:`, else from the deployed
profile's record, else the defaults.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dsv4ops.apikey import ApiKeyRef, auth_headers
from dsv4ops.constants import SGLANG_DEFAULT_DECODE_LOG_INTERVAL
from dsv4ops.errors import CanaryError, TargetError
from dsv4ops.orchestrate.engine import Progress
from dsv4ops.routerkind import RouterKind

if TYPE_CHECKING:
    from dsv4ops.canary import SuiteResult, Thresholds
    from dsv4ops.profiles.model import Profile
    from dsv4ops.usecases.session import TargetSession


@dataclass(frozen=True)
class CanaryEndpoint:
    base_url: str  # the OpenAI-compatible endpoint (the router)
    worker_urls: tuple[str, ...]  # prefill/decode servers: /metrics and /abort_request
    thresholds: Thresholds
    buckets: tuple[int, ...]
    model: str  # the name requests ask for
    # the decode's --decode-log-interval (sizes the metrics freeze window); SGLang's default
    # when only a --url is known
    decode_log_interval: int = SGLANG_DEFAULT_DECODE_LOG_INTERVAL
    # what every request to the router carries (its API key; empty when it requires none)
    headers: Mapping[str, str] = field(default_factory=dict)
    # which router base_url is, from the deployment's record; None: not known (`--url`)
    router: RouterKind | None = None


def resolve_endpoint(
    session: TargetSession | None,
    profile_ref: str | None,
    url: str | None,
    worker_urls: Sequence[str] = (),
    model: str | None = None,
    api_key_env: str | None = None,
) -> CanaryEndpoint:
    """Where to send load and how to judge it: `url` as given, else what the session's target
    reaches (its journal of record: the deployment deploy recorded). With `url`, requests carry
    the key in `api_key_env`, else the profile's `router.api_key`. Raises CanaryError when
    nothing is known, ApiKeyError when the key named cannot be read."""
    from dsv4ops.canary import Thresholds, buckets_from_profile, thresholds_from_profile

    profile = _load(profile_ref)
    thresholds = thresholds_from_profile(profile) if profile is not None else Thresholds()
    buckets = buckets_from_profile(profile) if profile is not None else ()
    name = model or _model_of(profile)
    if url or session is None:
        if not url:
            raise CanaryError("the canary needs --url or a target")
        key = ApiKeyRef(env=api_key_env) if api_key_env else None
        if key is None and profile is not None:
            key = profile.router_key
        return CanaryEndpoint(
            url,
            tuple(worker_urls),
            thresholds,
            buckets,
            name or "default",
            headers=auth_headers(key),
        )
    from dsv4ops.usecases.session import reachable

    try:
        reach = reachable(session, profile)
    except TargetError as exc:  # nothing to send load to: the canary could not run
        raise CanaryError(exc.message, hint=exc.hint) from None
    if profile is None and reach.profile:  # an endpoint target names the profile it runs
        from dsv4ops.profiles import load_profile

        profile = load_profile(reach.profile)
        thresholds, buckets = thresholds_from_profile(profile), buckets_from_profile(profile)
        name = name or _model_of(profile)
    d = reach.deployment
    if d is not None:
        if profile is None:  # judged as the deployed profile was recorded
            from dsv4ops.usecases.gate import thresholds_of

            thresholds = thresholds_of(d)
            buckets = d.decode_buckets
        name = name or d.model_name
    workers = tuple(worker_urls) or reach.worker_urls
    return CanaryEndpoint(
        reach.router_url,
        workers,
        thresholds,
        buckets,
        name or "default",
        decode_log_interval=reach.decode_log_interval,
        headers=auth_headers(reach.router_key),
        router=d.router_kind if d is not None else None,
    )


def run_canary(
    endpoint: CanaryEndpoint,
    suite: str,
    *,
    concurrency: int | None = None,
    duration_s: float | None = None,
    rate_per_s: float | None = None,
    report_dir: str | None = None,
    progress: Progress | None = None,
) -> SuiteResult:
    """Run one suite (or `all`) against the endpoint; blocking. Raises CanaryError."""
    from dsv4ops.canary import run_suite

    return run_suite(
        suite,
        endpoint.base_url,
        worker_urls=endpoint.worker_urls,
        thresholds=endpoint.thresholds,
        buckets=endpoint.buckets,
        concurrency=concurrency,
        duration_s=duration_s,
        report_dir=report_dir,
        progress=progress,
        model=endpoint.model,
        rate_per_s=rate_per_s,
        decode_log_interval=endpoint.decode_log_interval,
        headers=endpoint.headers,
        router=endpoint.router,
    )


def _load(profile_ref: str | None) -> Profile | None:
    if not profile_ref:
        return None
    from dsv4ops.profiles import load_profile

    return load_profile(profile_ref)


def _model_of(profile: Profile | None) -> str | None:
    """The name requests ask for (`deployment.served_model_name`'s rule, from a profile)."""
    return profile.model.request_name if profile is not None else None
