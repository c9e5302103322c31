"""Test helpers and doubles for `dsv4ops.monitoring` (one module per package area).

- prometheus_server: A real Prometheus (Debian's `prometheus` binary) on 127.0.0.1 for end-to-end alert tests.

    with prometheus_server(config_text, rules_text) as prom:
        prom.alerts()            # [{"labels": {...}, "state": "pending"|"firing", ...}, ...]
        prom.wait_firing("DSV4DecodeWedged", timeout=30)

Its TSDB lives in a temp dir and goes with it; it listens only on loopback and is killed on exit.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testing.ports import free_ports

# --- prometheus_server (was testing/monitoring.py) ---

BINARY = shutil.which("prometheus")


@dataclass
class Prometheus:
    url: str
    proc: subprocess.Popen[bytes]
    log: Path

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=5) as resp:  # noqa: S310 (loopback)
            return json.loads(resp.read())

    def alerts(self) -> list[dict[str, Any]]:
        return list(self._get("/api/v1/alerts")["data"]["alerts"])

    def firing(self) -> set[str]:
        return {a["labels"]["alertname"] for a in self.alerts() if a["state"] == "firing"}

    def active(self) -> set[str]:
        """Alerts pending or firing."""
        return {a["labels"]["alertname"] for a in self.alerts()}

    def targets_up(self) -> dict[str, float]:
        data = self._get("/api/v1/query?query=up")["data"]["result"]
        return {r["metric"]["job"]: float(r["value"][1]) for r in data}

    def wait_firing(self, name: str, timeout: float) -> float:
        """Seconds until `name` fires; AssertionError with the alerts seen after `timeout`."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if name in self.firing():
                return time.monotonic() - t0
            time.sleep(0.2)
        raise AssertionError(f"{name} did not fire within {timeout}s; alerts: {self.alerts()}")

    def log_tail(self, n: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])


@contextmanager
def prometheus_server(
    config_text: str, rules_text: str, *, rules_file: str = "dsv4ops-alerts.yml"
) -> Iterator[Prometheus]:
    if BINARY is None:
        raise RuntimeError("prometheus is not installed (`make install` installs Debian's package)")
    with tempfile.TemporaryDirectory(prefix="prom-") as tmp:
        d = Path(tmp)
        (d / "prometheus.yml").write_text(config_text)
        (d / rules_file).write_text(rules_text)
        (port,) = free_ports(1)
        log = d / "prometheus.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [
                    BINARY,
                    f"--config.file={d / 'prometheus.yml'}",
                    f"--storage.tsdb.path={d / 'data'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                    "--web.enable-lifecycle",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=d,
            )
        prom = Prometheus(f"http://127.0.0.1:{port}", proc, log)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    with urllib.request.urlopen(prom.url + "/-/ready", timeout=2):  # noqa: S310
                        break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(
                            f"prometheus did not start:\n{prom.log_tail()}"
                        ) from None
                    time.sleep(0.1)
            yield prom
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
