from __future__ import annotations

import pytest

from dsv4ops.metrics.scrape import ScrapeError, metrics_url, scrape
from testing.canary_fixtures import fake_server
from testing.ports import free_port


def test_scrape_a_real_server() -> None:
    with fake_server() as url:
        g = scrape(url)
    assert g.running == 0.0 and g.queued == 0.0 and g.engine_types == ("decode",)


def test_unreachable_and_wrong_path() -> None:
    with pytest.raises(ScrapeError, match="ConnectError"):
        scrape(f"http://127.0.0.1:{free_port()}", timeout=1.0)
    with fake_server() as url, pytest.raises(ScrapeError, match="HTTP 404"):
        scrape(url + "/nope/metrics")


def test_metrics_url() -> None:
    assert metrics_url("http://h:1/") == "http://h:1/metrics"
    assert metrics_url("http://h:1/metrics") == "http://h:1/metrics"
