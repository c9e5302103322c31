"""The Prometheus configuration for one deployed PD unit: a scrape job per component, the rules.

Rendered from the same Deployment that `dsv4ops profile render` prints, so the scrape targets
are exactly where that profile's servers serve `/metrics` (the API port of each SGLang server,
which needs `--enable-metrics`; the router's `--prometheus-port`).
"""

from __future__ import annotations

from typing import Protocol, TypedDict
from urllib.parse import urlsplit

from dsv4ops.monitoring.rules import RuleSettings, duration
from dsv4ops.profiles.model import Target

JOBS = ("prefill", "decode", "router")


class StaticConfig(TypedDict):
    targets: list[str]
    labels: dict[str, str]


class ScrapeJob(TypedDict):
    job_name: str
    metrics_path: str
    static_configs: list[StaticConfig]


# prometheus.yml ("global" is a keyword), its keys in the order they are written.
PrometheusConfig = TypedDict(
    "PrometheusConfig",
    {"global": dict[str, str], "rule_files": list[str], "scrape_configs": list[ScrapeJob]},
)


class _Scraped(Protocol):
    @property
    def metrics_url(self) -> str: ...


class ScrapedUnit(Protocol):
    """What scrape_config reads of a rendered Deployment: each component's /metrics URL."""

    def component(self, name: str) -> _Scraped: ...


def scrape_config(
    deployment: ScrapedUnit,
    settings: RuleSettings,
    *,
    rules_file: str,
    profile_name: str,
    target_name: str,
) -> PrometheusConfig:
    """prometheus.yml as a mapping; `deployment` is profiles.render's result."""
    interval = duration(settings.scrape_interval_s, settings.time_scale)
    jobs: list[ScrapeJob] = []
    for name in JOBS:
        c = deployment.component(name)
        url = urlsplit(c.metrics_url)
        jobs.append(
            {
                "job_name": f"dsv4-{name}",
                "metrics_path": url.path or "/metrics",
                "static_configs": [
                    {
                        "targets": [url.netloc],
                        "labels": {
                            "dsv4_profile": profile_name,
                            "dsv4_target": target_name,
                            "component": name,
                        },
                    }
                ],
            }
        )
    return {
        "global": {
            "scrape_interval": interval,
            "evaluation_interval": interval,
            "scrape_timeout": interval,
        },
        "rule_files": [rules_file],
        "scrape_configs": jobs,
    }


def target_time_scale(target: Target) -> float:
    """A twin target's DSV4_TWIN_TIME_SCALE (wall seconds per model second); 1 otherwise."""
    env = target.twin_env_dict
    try:
        scale = float(env.get("DSV4_TWIN_TIME_SCALE", 1.0))
    except ValueError:
        return 1.0
    return scale if 0 < scale <= 1000 else 1.0
