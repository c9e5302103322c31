"""`dsv4ops watch`: a read-only monitor of the deployed PD unit between deploys.

Pure detection (`detect`, `readings`, `probe`) and the loop behind the clock seam (`loop`);
the use case (`usecases/watch.py`) binds it to a target session.
"""

from __future__ import annotations

from dsv4ops.watch.endpoints import WatchEndpoints, watch_endpoints
from dsv4ops.watch.findings import KINDS, Finding, Severity, worst
from dsv4ops.watch.loop import Round, Watcher
from dsv4ops.watch.settings import Baseline, WatchSettings

__all__ = [
    "KINDS",
    "Baseline",
    "Finding",
    "Round",
    "Severity",
    "WatchEndpoints",
    "WatchSettings",
    "Watcher",
    "watch_endpoints",
    "worst",
]
