"""Where the observed batch-size distribution and the step law come from.

0.5.23 has no batch-size histogram: the distribution is built from samples of the decode's
`sglang:num_running_reqs` (a live target, sampled over a window), a canary/A-B report's levels
(the server's median running batch per level, each level weighted by its duration), or a JSON
file (`{"size": weight, ...}` or a list of samples).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from dsv4ops.buckets.plan import StepLaw
from dsv4ops.errors import DsOpsError


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise DsOpsError(f"{path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise DsOpsError(f"{path}:{exc.lineno}: not JSON: {exc.msg}") from None


def from_file(path: Path) -> dict[int, float]:
    data = _read_json(path)
    try:
        if isinstance(data, list):
            return dict(Counter(int(x) for x in data))
        if isinstance(data, dict):
            return {int(k): float(v) for k, v in data.items()}
    except (TypeError, ValueError):
        pass
    raise DsOpsError(f"{path}: expected a list of running batch sizes or {{\"size\": weight}}")


def from_report(path: Path) -> tuple[dict[int, float], StepLaw | None]:
    """The sweep levels of a report.json (a canary or A/B report) and its fitted law, if any."""
    data = _read_json(path)
    suites = data.get("suites", {}) if isinstance(data, dict) else {}
    sweep = suites.get("sweep") if isinstance(suites, dict) else None
    metrics = (sweep or {}).get("metrics", {}) if isinstance(sweep, dict) else {}
    levels = metrics.get("levels") or (data.get("levels") if isinstance(data, dict) else None)
    if not levels:
        raise DsOpsError(f"{path}: no sweep levels in this report",
                         hint="give --from a report of `dsv4ops canary --suite sweep --report DIR`")
    dist: dict[int, float] = {}
    for lv in levels:
        bs = lv.get("bs") or lv.get("concurrency")
        if bs:
            dist[round(float(bs))] = dist.get(round(float(bs)), 0.0) + float(lv.get("duration_s", 1.0) or 1.0)
    fit = metrics.get("fit", {})
    law = None
    for key in ("metrics", "padded_bs", "bs"):
        f = fit.get(key) if isinstance(fit, dict) else None
        if isinstance(f, dict) and "a_ms" in f and "b_ms" in f:
            law = StepLaw(float(f["a_ms"]), float(f["b_ms"]))
            break
    return dist, law


def parse_law(text: str) -> StepLaw:
    try:
        a, b = (float(x) for x in text.split(","))
    except ValueError:
        raise DsOpsError(f"--law {text!r}: expected A_MS,B_MS (e.g. 18,1.05)") from None
    if not (0 <= a < 10_000 and 0 < b < 1_000):
        raise DsOpsError(f"--law {text!r}: a from 0 to 10000 ms, b above 0 and below 1000 ms")
    return StepLaw(a, b)
