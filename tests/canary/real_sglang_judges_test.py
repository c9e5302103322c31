"""The judges against the REAL server (`make test-real-sglang`, issue 38 item 4): real SGLang
0.5.23 on CPU, PD over mooncake TCP, through the real router 0.3.2, profile `tiny-cpu`.

A healthy unit: every suite that can judge the tiny model gives its verdict on requests the
server served (none refused), and `watch --once` is OK. Then real faults in the real processes:
the decode's scheduler SIGSTOPped (a real wedge: the HTTP front still answers, the batches stop)
is a CRITICAL wedge finding and SIGCONT clears it; the scheduler SIGKILLed fails the canary.
Each verdict and reason is kept in `last-run/judges.json` beside the env (docs/twin.md's table
of verdicts, twin vs real, is read from it). Skipped unless REAL_SGLANG names a built env.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testing.orchestrate import (
    REAL_BUILT,
    REAL_ENV_DIR,
    REAL_WHY_SKIPPED,
    RealTarget,
    real_target,
    scheduler_of,
)

pytestmark = [
    pytest.mark.real_sglang,
    pytest.mark.timeout(3600),
    pytest.mark.skipif(not REAL_BUILT, reason=REAL_WHY_SKIPPED),
]

# (suite, extra arguments): the soak shortened to what two loaded cores finish in minutes
SUITES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("smoke", ()),
    ("abort-cascade", ()),
    ("sweep", ()),
    ("soak", ("--duration", "40")),
)


# docs/monitoring.md states 3 s from the stream's last token on the box's signals (1.5 s of silence,
# a 0.25 s poll, 0.5 s between the two confirming scrapes, the scrapes); here the real servers
# share two cores with the client, and the SIGSTOP lands up to a token interval after the last
# token (ITL p99 ~0.3-0.5 s on this machine)
STREAM_WEDGE_S = 5.0


def _rounds(proc: subprocess.Popen[str], until: float) -> Iterator[tuple[float, dict[str, Any]]]:
    """(seconds since the epoch it was read, round) of `watch --json`, until `until`."""
    assert proc.stdout is not None
    while time.time() < until:
        ready, _, _ = select.select([proc.stdout], [], [], 0.2)
        if ready:
            line = proc.stdout.readline()
            if not line:
                return
            if line.startswith("{"):
                yield time.time(), json.loads(line)


def _stream_wedge(t: RealTarget, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """`watch` running (its probe stream under way on the decode), the decode's scheduler
    SIGSTOPped: seconds until a round reports decode_wedged; then SIGCONT, seconds until a
    round is OK again."""
    scheduler = scheduler_of(_decode_pid(t, capsys))
    cmd = [sys.executable, "-m", "dsv4ops", "watch", "--json", "--target", t.name]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen: dict[str, Any] = {"found_s": None, "cleared_s": None, "rounds": []}
    try:
        for _, r in _rounds(proc, time.time() + 120):
            if r["components"]["decode"].get("running"):
                break  # the stream is decoding
        stopped_at = time.time()
        os.kill(scheduler, signal.SIGSTOP)
        try:
            for at, r in _rounds(proc, stopped_at + 60):
                seen["rounds"].append({"s": round(at - stopped_at, 2), "worst": r["worst"]})
                if any(f["code"] == "decode_wedged" for f in r["findings"]):
                    seen["found_s"] = round(at - stopped_at, 2)
                    seen["finding"] = next(f for f in r["findings"] if f["code"] == "decode_wedged")
                    break
        finally:
            continued_at = time.time()
            os.kill(scheduler, signal.SIGCONT)
        for at, r in _rounds(proc, continued_at + 60):
            if r["worst"] == "ok":
                seen["cleared_s"] = round(at - continued_at, 2)
                break
    finally:
        proc.send_signal(signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=20)
        if proc.poll() is None:
            proc.kill()
    return seen


def _decode_pid(t: RealTarget, capsys: pytest.CaptureFixture[str]) -> int:
    _, report = t.run_json(capsys, "status")
    return int(next(c["pid"] for c in report["components"] if c["name"] == "decode"))


def _verdict(t: RealTarget, capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code, doc = t.run_json(capsys, "canary", *args)
    return {"exit": code, "verdict": doc["verdict"], "reasons": doc["reasons"]}


# INCONCLUSIVE reasons a healthy unit may get on this machine, each a measurement the judge
# could not trust (never a refusal, never a failure): the client's own event-loop lag (the real
# servers share two cores with it: canary/selfcheck.py), and a sweep whose step times on a CPU
# decode did not grow with the batch or scattered around it (runs 2 and 4 of 4: slope -14.7
# ms/request; R² 0.37).
MEASUREMENT_DOUBTS = ("event-loop lag", "no step law from this sweep", "step law fits poorly")


def _judged_pass(got: dict[str, Any]) -> bool:
    """PASS; or INCONCLUSIVE for a measurement doubt only (MEASUREMENT_DOUBTS)."""
    if got["verdict"] == "PASS":
        return True
    unsure = [r for r in got["reasons"] if r.startswith("INCONCLUSIVE")]
    return got["verdict"] == "INCONCLUSIVE" and all(
        any(doubt in r for doubt in MEASUREMENT_DOUBTS) for r in unsure
    )


def test_the_judges_on_a_healthy_unit_and_on_real_faults(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table: dict[str, Any] = {}
    with real_target(tmp_path, "sglang-cpu-judges", "ops-judges") as t:
        try:
            _judges(t, capsys, table)
        finally:
            t.keep_log("judges.txt")
            (REAL_ENV_DIR / "last-run" / "judges.json").write_text(json.dumps(table, indent=1))


def _judges(t: RealTarget, capsys: pytest.CaptureFixture[str], table: dict[str, Any]) -> None:
    code, out = t.run(capsys, "deploy", "tiny-cpu", "--yes", "--accept-inconclusive-canary")
    assert code == 0, out
    for suite, extra in SUITES:
        got = table[suite] = _verdict(t, capsys, "--suite", suite, *extra)
        if suite == "abort-cascade":  # the cascade cut streams that really were decoding
            cut = [re.search(r"\((\d+) mid-decode\)", r) for r in got["reasons"]]
            assert any(m and int(m.group(1)) > 0 for m in cut), got
        # never a verdict on requests the server refused (issue 38: every cascade stream was
        # refused for the context length and the report said "only 0 of 32 decoding")
        assert not any("refused" in r for r in got["reasons"]), got
        assert _judged_pass(got), got
    code, out = t.run(capsys, "watch", "--once")
    table["watch healthy"] = {"exit": code, "out": out[-2000:]}
    assert code == 0, out

    # a real wedge: the scheduler stops, the HTTP front (metrics, health) still answers
    scheduler = scheduler_of(_decode_pid(t, capsys))
    os.kill(scheduler, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        code, out = t.run(capsys, "watch", "--once")
        table["watch SIGSTOP"] = {"exit": code, "s": time.monotonic() - t0, "out": out[-3000:]}
    finally:
        os.kill(scheduler, signal.SIGCONT)
    assert code == 2 and ("decode_wedged" in out or "probe_stalled" in out), out
    code, out = t.run(capsys, "watch", "--once")
    table["watch SIGCONT"] = {"exit": code, "out": out[-2000:]}
    assert code == 0, out

    # a wedge while watch's probe stream is mid-generation: found from the stream's silence
    table["watch stream wedge"] = seen = _stream_wedge(t, capsys)
    assert seen["found_s"] is not None and seen["found_s"] <= STREAM_WEDGE_S, seen
    assert seen["cleared_s"] is not None, seen

    # the scheduler killed: the canary fails (the decode serves no more generations)
    os.kill(scheduler_of(_decode_pid(t, capsys)), signal.SIGKILL)
    got = table["smoke SIGKILL"] = _verdict(t, capsys, "--suite", "smoke")
    assert got["verdict"] == "FAIL" and got["exit"] == 2, got
