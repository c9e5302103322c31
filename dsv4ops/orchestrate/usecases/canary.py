"""`dsv4ops canary`: where the load goes and what judges it, then the suite.

The endpoint is `--url` as given, else the target's deployed PD unit as the journal recorded it
(or, with `--profile`, as that profile renders for the target). The thresholds and decode
buckets come from `--profile`, else from the deployed profile's record, else the defaults.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dsv4ops.constants import SGLANG_DEFAULT_DECODE_LOG_INTERVAL
from dsv4ops.deployment import WORKERS
from dsv4ops.errors import CanaryError
from dsv4ops.orchestrate.engine import Progress

if TYPE_CHECKING:
    from dsv4ops.canary import SuiteResult, Thresholds
    from dsv4ops.profiles.model import Profile


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


def resolve_endpoint(
    target: str | None,
    profile_ref: str | None,
    url: str | None,
    worker_urls: Sequence[str] = (),
    model: str | None = None,
) -> CanaryEndpoint:
    """Where to send load and how to judge it. Raises CanaryError when nothing is known."""
    from dsv4ops.canary import Thresholds, buckets_from_profile, thresholds_from_profile

    profile = _load(profile_ref)
    thresholds = thresholds_from_profile(profile) if profile is not None else Thresholds()
    buckets = buckets_from_profile(profile) if profile is not None else ()
    name = model or _model_of(profile)
    if url:
        return CanaryEndpoint(url, tuple(worker_urls), thresholds, buckets, name or "default")
    from dsv4ops.journal.store import Journal
    from dsv4ops.profiles import DEFAULT_TARGET

    target = target or DEFAULT_TARGET
    op = Journal(target).deployed()
    log_interval = SGLANG_DEFAULT_DECODE_LOG_INTERVAL
    if op is not None and op.components:
        d = op.deployment()
        comps = {c.name: c.client_url() for c in d.components}
        log_interval = d.decode_log_interval  # what the running decode was started with
        if profile is None:  # judged as the deployed profile was recorded
            thresholds = thresholds_from_profile(d.canary_settings)
            buckets = d.decode_buckets
        name = name or d.model_name
    elif profile is not None:
        from dsv4ops.profiles import get_target, render

        rendered = render(profile, get_target(target))
        comps = {c.name: c.client_url() for c in rendered.components}
        log_interval = rendered.decode_log_interval
    else:
        raise CanaryError(
            f"the journal records no running deployment on target {target!r}",
            hint="pass --profile P to use its rendered ports, or --url",
        )
    workers = tuple(worker_urls) or tuple(comps[n] for n in WORKERS if n in comps)
    return CanaryEndpoint(comps["router"], workers, thresholds, buckets, name or "default",
                          decode_log_interval=log_interval)


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
    )


def _load(profile_ref: str | None) -> Profile | None:
    if not profile_ref:
        return None
    from dsv4ops.profiles import load_profile

    return load_profile(profile_ref)


def _model_of(profile: Profile | None) -> str | None:
    """The name requests ask for (`deployment.served_model_name`'s rule, from a profile)."""
    return profile.model.request_name if profile is not None else None
