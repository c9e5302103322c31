"""`dsv4ops monitoring render`: the alert rules, the Prometheus scrape config and the Grafana
dashboard for a profile as rendered for a target (pure: nothing is read from the target)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from dsv4ops.errors import DsOpsError

if TYPE_CHECKING:
    from dsv4ops.monitoring.dashboard import Dashboard
    from dsv4ops.monitoring.rules import RuleFile
    from dsv4ops.monitoring.scrape import PrometheusConfig


@dataclass(frozen=True)
class MonitoringFiles:
    """What `monitoring render` prints or writes, as plain data (YAML or JSON when written)."""

    prometheus: PrometheusConfig  # prometheus.yml
    rules: RuleFile  # dsv4ops-alerts.yml
    dashboard: Dashboard  # dsv4ops-dashboard.json


def render_monitoring(
    profile_ref: str,
    target_name: str | None,
    *,
    scrape_interval_s: float,
    max_step_ms: float,
    law_a_ms: float,
    law_b_ms: float,
    runbook_url: str | None,
) -> MonitoringFiles:
    """The monitoring of the profile on the target. Raises ProfileError, or DsOpsError for a bad
    --runbook-url."""
    from dsv4ops.monitoring import RuleSettings, alert_rules, scrape_config
    from dsv4ops.monitoring.dashboard import dashboard
    from dsv4ops.monitoring.rules import check_runbook_url
    from dsv4ops.monitoring.scrape import target_time_scale
    from dsv4ops.profiles import get_target, load_profile, render

    if runbook_url is not None:
        try:
            runbook_url = check_runbook_url(runbook_url)
        except ValueError as exc:
            raise DsOpsError(f"--runbook-url {runbook_url!r}: {exc}") from None
    p = load_profile(profile_ref)
    t = get_target(target_name)
    deployment = render(p, t)
    settings = RuleSettings(
        scrape_interval_s=scrape_interval_s,
        max_step_ms=max_step_ms,
        decode_log_interval=deployment.decode_log_interval,
        max_decode_bucket=max(p.decode_buckets, default=None),
        time_scale=target_time_scale(t),
        runbook_url=runbook_url,
        router_kind=deployment.router_kind,
    )
    rules = alert_rules(settings)
    config = scrape_config(
        deployment,
        settings,
        rules_file="dsv4ops-alerts.yml",
        profile_name=p.name,
        target_name=t.name,
    )
    board = dashboard(
        a_ms=law_a_ms,
        b_ms=law_b_ms,
        max_bucket=settings.max_decode_bucket,
        router_kind=deployment.router_kind,
        title=f"DSV4 PD unit: {p.name} on {t.name}",
    )
    return MonitoringFiles(config, rules, board)
