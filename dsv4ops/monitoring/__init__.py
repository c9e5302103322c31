"""Monitoring between deploys: Prometheus alert rules and scrape configs for the PD unit."""

from __future__ import annotations

from dsv4ops.monitoring.rules import RuleSettings, alert_rules, duration
from dsv4ops.monitoring.scrape import scrape_config

__all__ = ["RuleSettings", "alert_rules", "duration", "scrape_config"]
