"""The judges against the REAL server (`make test-real-sglang`, issue 38 item 4): real SGLang
0.5.23 on CPU, PD over mooncake TCP, through the real router 0.3.2, profile `tiny-cpu`.

A healthy unit: every suite gives its verdict on requests the server served (none refused), the
corruption suite on the tool calls of the DSV4-speaking tiny model through 0.5.23's own
deepseek-recipe parsing, and `watch --once` is OK. Then real faults in the real processes:
the decode's scheduler SIGSTOPped (a real wedge: the HTTP front still answers, the batches stop)
is a CRITICAL wedge finding and SIGCONT clears it, and the soak's and the corruption suite's
watchdogs find it within tiny-cpu's freeze_s; the scheduler SIGKILLed fails the canary.
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
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsv4ops.metrics.prom import MetricsParseError, parse_text, server_gauges
from testing.canary import judged_pass, reason_kinds
from testing.orchestrate import (
    REAL_BUILT,
    REAL_ENV_DIR,
    REAL_WHY_SKIPPED,
    RealTarget,
    real_git,
    real_target,
    scheduler_of,
)

pytestmark = [
    pytest.mark.real_sglang,
    pytest.mark.timeout(3600),
    pytest.mark.skipif(not REAL_BUILT, reason=REAL_WHY_SKIPPED),
]

# (suite, extra arguments): the soak shortened to what two loaded cores finish in minutes, yet
# long enough to leave a steady window: with the tool model on loaded cores the first generation
# of its closed loop ended at ~14 s and the drain tail took 17 s, so a 40 s soak was INCONCLUSIVE
# too_short (2026-12-07)
SUITES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("smoke", ()),
    ("corruption", ()),
    ("abort-cascade", ()),
    ("sweep", ()),
    ("soak", ("--duration", "75")),
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


# tiny-cpu's canary.freeze_s (the stated time of the canary's server-wide freeze check) and the
# slack of its polls on two loaded cores: the sampler's 0.5 s, the watchdog's tick, one scrape
FREEZE_S = 10.0
WATCHDOG_SLACK_S = 3.0


def _decode_tokens(port: int) -> float | None:
    """The decode's realtime_tokens_total{mode="decode"} (None while it cannot be read)."""
    with (
        contextlib.suppress(OSError, MetricsParseError),
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r,
    ):
        return server_gauges(parse_text(r.read().decode())).decode_tokens
    return None


def _stop_once_decoding(scheduler: int, port: int, done: threading.Event) -> None:
    """SIGSTOP the scheduler once the decode has decoded tokens since this started (the suite's
    streams mid-batch), then SIGCONT it FREEZE_S + 12 s later. On a quiet machine with
    `--sleep-on-idle` the whole corruption suite ended within 12 s, before a fixed-time stop
    (2026-12-07: it PASSed, never wedged)."""
    start = _decode_tokens(port)
    while not done.wait(0.1):
        now = _decode_tokens(port)
        if start is None:
            start = now
        elif now is not None and now > start:
            os.kill(scheduler, signal.SIGSTOP)
            done.wait(FREEZE_S + 12.0)
            os.kill(scheduler, signal.SIGCONT)
            return


def _canary_wedge(t: RealTarget, capsys: pytest.CaptureFixture[str], *suite: str) -> dict[str, Any]:
    """`canary --suite SUITE...` with the decode's scheduler SIGSTOPped once its streams are
    decoding and SIGCONTed 12 s after the freeze check is due: verdict, reasons, and the
    watchdog's own detection latency."""
    scheduler = scheduler_of(_decode_pid(t, capsys))
    decode = json.loads((t.workdir / "run" / "decode.json").read_text())
    done = threading.Event()
    stopper = threading.Thread(
        target=_stop_once_decoding, args=(scheduler, int(decode["ports"][0]), done), daemon=True
    )
    stopper.start()
    try:
        code, doc = t.run_json(capsys, "canary", "--suite", *suite)
    finally:
        done.set()
        stopper.join(5)
        os.kill(scheduler, signal.SIGCONT)
    hangs = doc.get("metrics", {}).get("hangs", {})
    return {
        "exit": code,
        "verdict": doc["verdict"],
        "reasons": doc["reasons"],
        "findings": doc["findings"],
        "detected_s": hangs.get("max_detection_latency_s"),
        "hangs": hangs.get("hangs_by_kind"),
    }


def _gate_kill(t: RealTarget, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """Deploy tiny-cpu-rr (tiny-cpu, round-robin router: a revision of its own) and SIGKILL
    the new decode's scheduler the moment its deploy journals the canary gate's start."""
    (t.profiles / "tiny-cpu-rr.yaml").write_text(
        "schema_version: 1\nextends: tiny-cpu\ndescription: tiny-cpu, round-robin router\n"
        "router:\n  policy: round_robin\n"
    )
    real_git(t.profiles.parent, "add", "-A")
    real_git(t.profiles.parent, "commit", "-q", "-m", "tiny-cpu-rr")
    journal = t.workdir / "journal.jsonl"
    start = journal.stat().st_size
    killed: list[int] = []
    done = threading.Event()

    def kill_at_gate() -> None:
        while not done.wait(0.2):
            with open(journal, "rb") as f:
                f.seek(start)
                steps = [json.loads(line) for line in f.read().splitlines() if line.strip()]
            if any(
                r.get("type") == "step"
                and str(r.get("name", "")).startswith("canary")
                and r.get("phase") == "start"
                for r in steps
            ):
                rec = json.loads((t.workdir / "run" / "decode.json").read_text())
                killed.append(scheduler_of(int(rec["pid"])))
                os.kill(killed[0], signal.SIGKILL)
                return

    watcher = threading.Thread(target=kill_at_gate, daemon=True)
    watcher.start()
    try:
        code, out = t.run(capsys, "deploy", "tiny-cpu-rr", "--yes")
    finally:
        done.set()
        watcher.join(5)
    return {"exit": code, "killed": bool(killed), "out": out[-4000:]}


def _decode_alone(t: RealTarget, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """The decode (its scheduler killed) stopped and started again alone, by hand, with its
    recorded command, against the prefill that kept running: then a smoke through the router.
    Recorded, not asserted: what 0.5.23 does is the finding (docs/twin.md)."""
    rec = json.loads((t.workdir / "run" / "decode.json").read_text())
    with contextlib.suppress(ProcessLookupError):
        os.killpg(int(rec["pgid"]), signal.SIGKILL)
    env = {**os.environ, **rec["env"]}
    with open(t.workdir / "logs" / "decode-alone.log", "wb") as log:
        proc = subprocess.Popen(
            rec["argv"],
            cwd=t.workdir,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        up_s = _wait_healthy(int(rec["ports"][0]), proc, 300.0)
        if up_s is None:
            return {"decode_up_s": None}
        got = _verdict(t, capsys, "--suite", "smoke")
        # issue 44 item 5: once the router routes to the new decode again (its circuit closed
        # after its health checks), does KV transfer from the long-running prefill work?
        router = json.loads((t.workdir / "run" / "router.json").read_text())
        readmitted_s = _wait_routed(int(router["ports"][0]), proc, 240.0)
        after = _verdict(t, capsys, "--suite", "smoke") if readmitted_s is not None else None
        return {
            "decode_up_s": up_s,
            **got,
            "router_readmitted_s": readmitted_s,
            "smoke_after_readmission": after,
        }
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)


def _wait_healthy(port: int, proc: subprocess.Popen[bytes], budget_s: float) -> float | None:
    """Seconds until http://127.0.0.1:PORT/health answers 200; None if it never did."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < budget_s and proc.poll() is None:
        url = f"http://127.0.0.1:{port}/health"
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as r:
            if r.status == 200:
                return round(time.monotonic() - t0, 1)
        time.sleep(1.0)
    return None


def _wait_routed(port: int, proc: subprocess.Popen[bytes], budget_s: float) -> float | None:
    """Seconds until the router answers a 2-token /generate with 200 (not its 503 "No available
    decode workers"); None if it never did within the budget."""
    t0 = time.monotonic()
    body = json.dumps({"text": "a b", "sampling_params": {"max_new_tokens": 2}}).encode()
    while time.monotonic() - t0 < budget_s and proc.poll() is None:
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/generate",
            data=body,
            headers={"Content-Type": "application/json"},
        )
        with contextlib.suppress(OSError), urllib.request.urlopen(req, timeout=30) as r:
            if r.status == 200:
                return round(time.monotonic() - t0, 1)
        time.sleep(2.0)
    return None


def _warnings_only(out: str, codes: set[str]) -> bool:
    """`watch` text output whose findings are all WARNINGs of these codes (and at least one)."""
    found = re.findall(r"^\s+(WARNING|CRITICAL|INFO) (\w+)", out, flags=re.MULTILINE)
    return bool(found) and all(level == "WARNING" and code in codes for level, code in found)


def _decode_pid(t: RealTarget, capsys: pytest.CaptureFixture[str]) -> int:
    _, report = t.run_json(capsys, "status")
    return int(next(c["pid"] for c in report["components"] if c["name"] == "decode"))


def _verdict(t: RealTarget, capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code, doc = t.run_json(capsys, "canary", *args)
    metrics = doc.get("metrics", {})
    return {
        "exit": code,
        "verdict": doc["verdict"],
        "reasons": doc["reasons"],
        "findings": doc["findings"],  # each reason's kind, as the judge decided it
        "cascade": metrics.get("cascade"),  # the abort cascade's own counts
        "tool_calls": metrics.get("tool_calls"),  # checked, and the bad ones with why
        # the sweep's measured levels and its law (or why none): docs/canary.md's real sweeps
        "levels": [(p["concurrency"], p["bs"], p["step_ms"]) for p in metrics.get("levels", [])],
        "fit": metrics.get("fit"),
        "fit_rejected": metrics.get("fit_rejected"),
    }


def test_the_judges_on_a_healthy_unit_and_on_real_faults(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table: dict[str, Any] = {}
    twin: dict[str, Any] = {}
    with real_target(tmp_path, "sglang-cpu-judges", "ops-judges") as t:
        try:
            _twin_side(t, capsys, twin)
            _judges(t, capsys, table)
        finally:
            t.keep_log("judges.txt")
            (REAL_ENV_DIR / "last-run" / "judges.json").write_text(json.dumps(table, indent=1))
            (REAL_ENV_DIR / "last-run" / "judges-twin.json").write_text(json.dumps(twin, indent=1))
            _side_by_side(twin, table, REAL_ENV_DIR / "last-run" / "judges-side-by-side.md")


def _twin_side(t: RealTarget, capsys: pytest.CaptureFixture[str], side: dict[str, Any]) -> None:
    """The same profile and suites on the twin (item 5: verdicts side by side, not surfaces)."""
    twin = RealTarget(f"{t.name}-twin", t.profiles, t.workdir, t.log)
    code, out = twin.run(capsys, "deploy", "tiny-cpu", "--yes", "--accept-inconclusive-canary")
    assert code == 0, out
    try:
        for suite, extra in SUITES:
            side[suite] = got = _verdict(twin, capsys, "--suite", suite, *extra)
            assert judged_pass(got), got
        code, out = twin.run(capsys, "watch", "--once")
        side["watch healthy"] = {"exit": code, "out": out[-2000:]}
    finally:
        twin.run(capsys, "stop", "--yes")


def _side_by_side(twin: dict[str, Any], real: dict[str, Any], path: Path) -> None:
    """One table: each judge's verdict and first reasons on the twin and on the real server."""

    def cell(got: dict[str, Any] | None) -> str:
        if not got:
            return "not run"
        if "found_s" in got:  # the stream wedge: seconds to the finding and to OK after SIGCONT
            return f"wedge found {got['found_s']} s after SIGSTOP, OK {got['cleared_s']} s after SIGCONT"
        head = got.get("verdict") or f"exit {got.get('exit')}"
        why = [f["reason"] for f in got.get("findings", []) if f["level"] != "note"][:2]
        return "; ".join([str(head), *why]).replace("|", "/").replace("\n", " ")

    rows = ["| judge (tiny-cpu) | twin | real SGLang 0.5.23 + router 0.3.2 |", "|---|---|---|"]
    for key in dict.fromkeys([*twin, *real]):
        rows.append(f"| {key} | {cell(twin.get(key))} | {cell(real.get(key))} |")
    path.write_text("\n".join(rows) + "\n")


def _judges(t: RealTarget, capsys: pytest.CaptureFixture[str], table: dict[str, Any]) -> None:
    code, out = t.run(capsys, "deploy", "tiny-cpu", "--yes", "--accept-inconclusive-canary")
    assert code == 0, out
    for suite, extra in SUITES:
        got = table[suite] = _verdict(t, capsys, "--suite", suite, *extra)
        if suite == "abort-cascade":  # the cascade cut streams that really were decoding
            assert got["cascade"]["decoding_at_cascade"] > 0, got
            # never a verdict on requests the server refused (issue 38: every cascade stream
            # was refused for the context length and the report said "only 0 of 32 decoding")
            assert got["cascade"]["refused"] == 0, got
        if suite == "sweep":  # every level measured, batch 1 included (issue 38: never was)
            assert [c for c, _, _ in got["levels"]] == [1, 4, 8, 16], got
        if suite in ("smoke", "corruption", "soak"):  # the model's calls were judged
            assert got["tool_calls"]["checked"] > 0 and "skipped" not in reason_kinds(got), got
        assert "refused" not in reason_kinds(got), got
        assert judged_pass(got), got
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
    # the wedge cleared: nothing CRITICAL. The probes in flight when the scheduler stopped lose
    # their KV transfer, and the decode may count that only after SIGCONT: a true WARNING
    # pd_transfer_degraded then, and nothing else (seen 2026-12-07: its counter 1 -> 2 in the
    # second round after SIGCONT, with the generation and the tool-call probes both stopped)
    assert code == 0 or (code == 4 and _warnings_only(out, {"pd_transfer_degraded"})), out

    # a wedge while watch's probe stream is mid-generation: found from the stream's silence
    table["watch stream wedge"] = seen = _stream_wedge(t, capsys)
    assert seen["found_s"] is not None and seen["found_s"] <= STREAM_WEDGE_S, seen
    assert seen["cleared_s"] is not None, seen

    # the canary's own watchdog: the scheduler SIGSTOPped mid-soak, SIGCONTed after
    table["soak SIGSTOP"] = got = _canary_wedge(t, capsys, "soak", "--duration", "50")
    assert got["verdict"] in ("FAIL", "INCONCLUSIVE") and "hang" in reason_kinds(got), got
    assert got["detected_s"] is not None and got["detected_s"] <= FREEZE_S + WATCHDOG_SLACK_S, got
    # the same in the corruption suite, every stream a tool call: deepseek-recipe streams a call
    # while it is decoded, so no tool-call silence allowance (15 s) delays the finding
    table["corruption SIGSTOP"] = got = _canary_wedge(t, capsys, "corruption")
    assert got["verdict"] in ("FAIL", "INCONCLUSIVE") and "hang" in reason_kinds(got), got
    assert got["detected_s"] is not None and got["detected_s"] <= FREEZE_S + WATCHDOG_SLACK_S, got

    # the deploy gate: a new revision's decode scheduler SIGKILLed while its gate runs
    table["deploy gate SIGKILL"] = got = _gate_kill(t, capsys)
    assert got["exit"] == 2 and got["killed"], got
    assert "Rolled back automatically" in got["out"] and "Running now: tiny-cpu" in got["out"], got
    code, out = t.run(capsys, "status")
    assert code == 0, out

    # the scheduler killed: the canary fails (the decode serves no more generations)
    os.kill(scheduler_of(_decode_pid(t, capsys)), signal.SIGKILL)
    got = table["smoke SIGKILL"] = _verdict(t, capsys, "--suite", "smoke")
    assert got["verdict"] == "FAIL" and got["exit"] == 2, got

    # what dsv4ops never does, recorded: the decode restarted alone against the running prefill
    table["decode-only restart"] = alone = _decode_alone(t, capsys)
    # and once the router routes to it again: recorded (the finding), its own row of the table
    table["decode-only restart, router re-admitted"] = alone.get("smoke_after_readmission")
