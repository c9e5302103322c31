"""Fetch /metrics from a server (blocking, httpx) for callers outside an event loop.

The canary scrapes inside its asyncio loop with its own aiohttp session and the same parser
(`dsv4ops.metrics.prom`); this module is for status/deploy checks.
"""

from __future__ import annotations

import httpx

from dsv4ops.errors import DsOpsError
from dsv4ops.metrics.prom import ServerGauges, parse_text, server_gauges


class ScrapeError(DsOpsError):
    """/metrics could not be fetched."""


def metrics_url(base_url: str) -> str:
    """`http://h:p` → `http://h:p/metrics`; a URL already ending in /metrics is kept."""
    base = base_url.rstrip("/")
    return base if base.endswith("/metrics") else base + "/metrics"


def scrape(url: str, *, timeout: float = 2.0, client: httpx.Client | None = None) -> ServerGauges:
    """GET the metrics of one server and fold them. Raises ScrapeError or MetricsParseError."""
    target = metrics_url(url)
    try:
        if client is not None:
            resp = client.get(target, timeout=timeout)
        else:
            resp = httpx.get(target, timeout=timeout)
    except httpx.HTTPError as exc:
        raise ScrapeError(f"{target}: {type(exc).__name__}: {exc}") from None
    if resp.status_code != 200:
        raise ScrapeError(
            f"{target}: HTTP {resp.status_code}",
            hint="SGLang serves /metrics only with --enable-metrics",
        )
    return server_gauges(parse_text(resp.text))
