"""The bucket planner: exact against brute force, and better than the shipped ladders on the
traffic the seeds describe (C60-C90)."""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Literal

import pytest

from dsv4ops.buckets.plan import (
    StepLaw,
    evaluate,
    expected_padded,
    graph_budget,
    graph_memory_estimate,
    normalise,
    padded,
    plan,
)
from dsv4ops.buckets.sources import MAX_INPUT_BYTES
from dsv4ops.profiles.buckets import resolve_buckets
from dsv4ops.usecases.buckets import LiveSample

REPO = Path(__file__).resolve().parents[2]
SEEDS = StepLaw(18.0, 1.05)


def _brute(dist: dict[int, float], k: int, max_bs: int) -> float:
    """The least expected padded batch over EVERY list of at most k sizes from 1..max_bs that
    ends at max_bs (not only observed sizes: that the DP may restrict itself is part of the claim)."""
    best = float("inf")
    inner = range(1, max_bs)
    for r in range(k):
        for combo in itertools.combinations(inner, r):
            best = min(best, expected_padded(dist, [*combo, max_bs]))
    return best


@pytest.mark.parametrize("seed", range(25))
def test_the_plan_is_optimal_against_brute_force_on_small_cases(seed: int) -> None:
    rng = random.Random(seed)
    max_bs = rng.randint(4, 11)
    sizes = rng.sample(range(1, max_bs + 3), rng.randint(1, min(6, max_bs)))  # some above max_bs
    dist = normalise({n: rng.random() + 0.01 for n in sizes})
    k = rng.randint(1, 4)
    got = plan(dist, max_buckets=k, max_bs=max_bs)
    assert got[-1] == max_bs and len(got) <= k and got == sorted(set(got))
    assert expected_padded(dist, got) == pytest.approx(_brute(dist, k, max_bs), abs=1e-12)


def test_a_tie_takes_the_fewest_graphs() -> None:
    dist = normalise({8: 1.0})
    assert plan(dist, max_buckets=5, max_bs=8) == [8]


def test_padding_and_eager_follow_sglang() -> None:
    assert padded(57, [32, 40, 48, 56, 64]) == 64
    assert padded(65, [32, 64]) == 65  # above the last bucket: eager at its own size
    e = evaluate("x", normalise({57: 1.0}), [56, 64], SEEDS)
    assert e.waste_by_bucket == {56: 0.0, 64: 7.0} and e.eager_share == 0.0
    assert e.tok_s == pytest.approx(57 / (18 + 1.05 * 64) * 1000)


def test_on_c60_to_c90_traffic_it_beats_step8_and_step4_with_fewer_graphs() -> None:
    rng = random.Random(7)
    dist = normalise({n: 1.0 + rng.random() for n in range(60, 91)})
    step8 = resolve_buckets("step8", tp_size=4, max_running_requests=96)
    step4 = resolve_buckets("step4:40-96", tp_size=4, max_running_requests=96)
    tok = {name: evaluate(name, dist, b, SEEDS) for name, b in (("step8", step8), ("step4", step4))}
    for k in (len(step8), len(step4) - 1):
        planned = evaluate("planned", dist, plan(dist, max_buckets=k, max_bs=96), SEEDS)
        assert planned.graphs < len(step4)
        assert planned.tok_s > tok["step8"].tok_s
        assert planned.tok_s >= tok["step4"].tok_s
    # the seeds' 56 -> 57 cliff: a plan for traffic at 57 puts a bucket exactly there
    assert 57 in plan(normalise({56: 1, 57: 1, 58: 1}), max_buckets=4, max_bs=96)


def test_the_memory_budget_limits_the_graphs() -> None:
    assert graph_budget(16, graph_mb=100.0, memory_mb=550.0) == 5
    assert graph_budget(16, graph_mb=None, memory_mb=550.0) == 16
    assert graph_budget(3, graph_mb=10.0, memory_mb=1e6) == 3


def test_an_observed_graph_memory_is_used_instead_of_the_estimate() -> None:
    seen = graph_memory_estimate(180.0, 0.32, 16)
    assert seen.source == "observed" and seen.mb_per_graph == pytest.approx(0.32 * 1024 / 16)
    assert "observed" in seen.sentence and "--graph-mb 180 not used" in seen.sentence
    no_count = graph_memory_estimate(180.0, 0.32, None)
    assert no_count.source == "option" and no_count.mb_per_graph == 180.0
    assert "not how many graphs" in no_count.sentence
    assert graph_memory_estimate(None, None, None).source == "none"
    assert graph_memory_estimate(None, 0.0, 16).mb_per_graph is None  # 0 GB: nothing captured


def test_the_cli_prints_the_comparison_and_the_revision_command(tmp_path: Path) -> None:
    samples = tmp_path / "running.json"
    samples.write_text(json.dumps([60 + (i * 7) % 31 for i in range(400)] + [0] * 20))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dsv4ops",
            "buckets",
            "plan",
            "--distribution",
            str(samples),
            "--max-buckets",
            "12",
            "--json",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    ladders = {lad["name"]: lad for lad in out["ladders"]}
    assert set(ladders) == {"planned", "step8", "step4:40-96", "sglang-default"}
    planned = ladders["planned"]["buckets"]
    assert planned[-1] == 96 and len(planned) <= 12
    assert out["command"] == (
        f"dsv4ops profile set baseline buckets={','.join(map(str, planned))}"
        " --as baseline-planned"
    )
    bad = subprocess.run(
        [sys.executable, "-m", "dsv4ops", "buckets", "plan"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 1 and "exactly one of" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.slow
def test_sampling_a_live_decode_sees_its_running_batch_and_graph_memory() -> None:
    """A real decode twin with 12 requests running: the sampled distribution is all at 12, its
    sglang:graph_memory_usage_gb becomes the plan's per-graph memory, and the CLI says so."""
    import asyncio

    import aiohttp

    from dsv4ops.usecases.buckets import sample_decode
    from testing.twin import _background, twin_server, wait_running

    async def load_then_sample(url: str) -> tuple[LiveSample, subprocess.CompletedProcess[str]]:
        async with aiohttp.ClientSession() as session:
            tasks = [asyncio.create_task(_background(session, url, i, False)) for i in range(12)]
            try:
                await wait_running(session, url, 12)
                live = await asyncio.to_thread(
                    sample_decode, url + "/metrics", window_s=1.5, interval_s=0.1
                )
                cli = await asyncio.to_thread(
                    subprocess.run,
                    [
                        sys.executable,
                        "-m",
                        "dsv4ops",
                        "buckets",
                        "plan",
                        "--metrics-url",
                        url + "/metrics",
                        "--window",
                        "1",
                        "--graph-mb",
                        "500",
                        "--memory-mb",
                        "100",
                        "--json",
                    ],
                    cwd=REPO,
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
                return live, cli
            finally:
                async with session.post(f"{url}/abort_request", json={"abort_all": True}):
                    pass
                await asyncio.gather(*tasks, return_exceptions=True)

    env = {"DSV4_TWIN_TIME_SCALE": "0.1", "DSV4_TWIN_HAZARDS": "off"}
    with twin_server(
        [
            "--disaggregation-mode",
            "decode",
            "--enable-metrics",
            "--decode-log-interval",
            "4",
            "--cuda-graph-bs-decode",
            "4",
            "8",
            "12",
            "16",
            "32",
        ],
        env=env,
    ) as proc:
        live, cli = asyncio.run(load_then_sample(proc.url))
    assert live.counts and set(live.counts) == {12}, live.counts
    # the twin's 0.02 GB per captured decode graph (docs/twin.md), as the box reports its own
    assert live.graph_memory_gb == pytest.approx(0.1) and live.captured_graphs == 5
    assert cli.returncode == 0, cli.stderr
    out = json.loads(cli.stdout)
    assert out["graph_memory"]["source"] == "observed"
    assert out["graph_memory"]["mb_per_graph"] == pytest.approx(0.1 * 1024 / 5)
    assert (
        out["graph_budget"] == 4
    )  # 100 MB at 20.48 MB per graph (the observed, not the 500 guessed)


def test_an_ab_report_gives_its_levels_and_the_kept_arms_law(tmp_path: Path) -> None:
    """`buckets plan --from` an A/B report as `dsv4ops ab` writes it (issue 23): its levels, the
    law of the arm it kept; the sweep's small buckets are kept from the profile."""
    from dsv4ops.ab.analysis import analyse
    from dsv4ops.ab.decision import decide
    from dsv4ops.ab.report import write_report
    from dsv4ops.ab.schedule import counterbalanced
    from testing.ab import ArmModel, TwinBlocks

    step8 = resolve_buckets("step8", tp_size=4, max_running_requests=96)
    step4 = resolve_buckets("step4:40-96", tp_size=4, max_running_requests=96)
    schedule = counterbalanced(4)
    arms: dict[Literal["A", "B"], ArmModel] = {
        "A": ArmModel("step8", tuple(step8)),
        "B": ArmModel("step4", tuple(step4)),
    }
    blocks = TwinBlocks(arms, concurrencies=(48, 56, 57, 60), steps=50, seed=1).run(schedule)
    an = analyse(blocks, planned=len(schedule))
    decision = decide(an, [])
    write_report(
        tmp_path,
        a="step8",
        b="step4",
        schedule=schedule,
        blocks=blocks,
        analysis=an,
        gates=[],
        decision=decision,
        buckets={"A": step8, "B": step4},
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dsv4ops",
            "buckets",
            "plan",
            "--from",
            str(tmp_path / "report.json"),
            "--json",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert set(out["distribution"]) == {"48", "56", "57", "60"}
    assert f"the law of arm {decision.winner} (kept)" in out["source"]
    assert out["kept_below"] == [b for b in step8 if b < 48]
    planned = next(lad for lad in out["ladders"] if lad["name"] == "planned")["buckets"]
    assert planned[: len(out["kept_below"])] == out["kept_below"] and planned[-1] == 96
    # issue 40: the directory `--report DIR` wrote is taken as well (its report.json)
    from dsv4ops.cli import main as cli_main

    assert cli_main(["buckets", "plan", "--from", str(tmp_path), "--json"]) == 0
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli_main(["buckets", "plan", "--from", str(empty)]) == 1


def test_the_plan_records_the_decode_context_length_the_sweep_ran_at(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sglang#40442: the DSV4 decode graph width follows --context-length, so a law measured at
    one context is said to be measured there, and a profile at another is named."""
    from dsv4ops.usecases.buckets_plan import plan_buckets

    def report(context: int) -> Path:
        levels = [{"concurrency": c, "bs": float(c), "duration_s": 5.0} for c in (48, 56, 64)]
        sweep = {
            "suite": "sweep",
            "metrics": {
                "levels": levels,
                "fit": {"bs": {"a_ms": 18.0, "b_ms": 1.05}},
                "decode_context": {"context_length": context, "explicit": True},
            },
        }
        path = tmp_path / f"{context}.json"
        path.write_text(json.dumps({"canary": {"suites": [sweep]}}))
        return path

    monkeypatch.chdir(REPO)  # the shipped baseline: --context-length 1048576
    kw: dict[str, object] = {"distribution": None, "metrics_url": None, "window_s": 1.0}
    kw |= {"law": None, "max_buckets": 12, "max_bs": 96, "graph_mb": None, "memory_mb": None}
    same = plan_buckets(report=report(1048576), profile="baseline", **kw)  # type: ignore[arg-type]
    assert same.to_json()["decode_context_length"] == {
        "measured": 1048576,
        "profile": 1048576,
        "note": None,
    }
    other = plan_buckets(report=report(131072), profile="baseline", **kw)  # type: ignore[arg-type]
    note = other.to_json()["decode_context_length"]["note"]
    assert note is not None
    assert "context length 131072, baseline sets 1048576" in note and "sglang#40442" in note


def test_the_plan_says_which_law_it_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A report without a step law (its only fit falls with the batch) gives its levels but no
    law: the plan says it assumed the seeds' law; a fitted law and --law are said as such."""
    from dsv4ops.usecases.buckets_plan import plan_buckets

    def report(where: Path, fit: dict[str, dict[str, float]]) -> Path:
        levels = [{"concurrency": c, "bs": float(c), "duration_s": 5.0} for c in (48, 56, 64)]
        sweep = {"suite": "sweep", "metrics": {"levels": levels, "fit": fit}}
        path = where / f"report-{len(list(where.iterdir()))}.json"
        path.write_text(json.dumps({"canary": {"suites": [sweep]}}))
        return path

    path = report(tmp_path, {"bs": {"a_ms": 30.0, "b_ms": -2.0}})
    monkeypatch.chdir(REPO)
    kw: dict[str, object] = {"distribution": None, "metrics_url": None, "window_s": 1.0}
    kw |= {"law": None, "max_buckets": 12, "max_bs": 96, "graph_mb": None, "memory_mb": None}
    plan = plan_buckets(report=path, profile="baseline", **kw)  # type: ignore[arg-type]
    out = plan.to_json()
    assert out["source"] is not None and "no fitted law" in out["source"], out["source"]
    # planned on the seeds' law, and said to be: nobody measured it
    assert out["law"]["a_ms"] >= 0 and out["law_source"] == "assumed", out
    fitted = report(tmp_path, {"bs": {"a_ms": 40.0, "b_ms": 12.0}})
    out = plan_buckets(report=fitted, profile="baseline", **kw).to_json()  # type: ignore[arg-type]
    assert out["law"] == {"a_ms": 40.0, "b_ms": 12.0} and out["law_source"] == "fitted"
    kw["law"] = "30,2"
    out = plan_buckets(report=fitted, profile="baseline", **kw).to_json()  # type: ignore[arg-type]
    assert out["law"] == {"a_ms": 30.0, "b_ms": 2.0} and out["law_source"] == "given"


def test_the_plan_says_how_the_memory_budget_bore_on_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--memory-mb was honoured by the plan alone: a budget below one graph planned one graph
    without a word, the shipped ladders over it were compared as if allowed, and without a
    graph size the budget was dropped silently. Each is said (text and --json); a graph size
    that overflowed the table ("inf" MB) is refused."""
    from dsv4ops.cli import main

    dist = tmp_path / "dist.json"
    dist.write_text(json.dumps([8, 16, 24, 40, 56, 57, 60, 80]))

    def plan(*extra: str) -> tuple[str, dict[str, object]]:
        argv = ["buckets", "plan", "--distribution", str(dist), *extra]
        assert main(argv) == 0
        text = capsys.readouterr().out
        assert main([*argv, "--json"]) == 0
        return text, json.loads(capsys.readouterr().out)

    text, out = plan("--graph-mb", "5", "--memory-mb", "100")
    assert "note: over the 100 MB budget: step4:40-96" in text, text
    assert out["memory_budget_mb"] == 100.0 and out["over_budget"] == ["step4:40-96"]
    text, out = plan("--graph-mb", "5", "--memory-mb", "1")
    assert "note: --memory-mb 1 holds no graph of 5 MB; the plan keeps only 96" in text, text
    assert out["over_budget"] == ["planned", "step8", "step4:40-96", "sglang-default"]
    text, out = plan("--memory-mb", "1")
    assert "note: --memory-mb 1 not used: the memory of one graph is unknown" in text, text
    text, out = plan("--graph-mb", "5")
    assert "note:" not in text and out["memory_budget_mb"] is None and out["over_budget"] == []
    assert main(["buckets", "plan", "--distribution", str(dist), "--graph-mb", "1e308"]) == 1
    assert "'--graph-mb': 1e+308 is not in the range" in capsys.readouterr().err


def _big_sparse(path: Path, size: int) -> Path:
    with open(path, "wb") as f:
        f.truncate(size)  # sparse: no disk, no time
    return path


def test_an_input_that_is_a_device_or_too_big_is_refused_at_once_and_a_pipe_is_read(
    tmp_path: Path,
) -> None:
    """/dev/zero (the read never ended, memory grew) or a huge file given by mistake: each is
    refused, named, before it is read; a pipe (a shell's `<(command)`) is read to its end."""
    huge = _big_sparse(tmp_path / "huge.json", MAX_INPUT_BYTES + 1)
    piped = subprocess.run(
        [
            "bash",
            "-c",
            f"exec {sys.executable} -m dsv4ops buckets plan --json --distribution <(echo '[40, 57]')",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert piped.returncode == 0, piped.stderr
    assert json.loads(piped.stdout)["distribution"] == {"40": 0.5, "57": 0.5}, piped.stdout
    for option, path, why in (
        ("--distribution", "/dev/zero", "not a regular file"),
        (
            "--from",
            str(huge),
            f"is {MAX_INPUT_BYTES + 1} bytes; at most {MAX_INPUT_BYTES} are read",
        ),
    ):
        run = subprocess.run(
            [sys.executable, "-m", "dsv4ops", "buckets", "plan", option, path],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,  # the old code never ended on the first two
        )
        assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
        assert run.stderr.startswith(f"error: {path}: ") and why in run.stderr, run.stderr


def test_sampling_that_never_sees_the_gauge_says_what_the_scrape_got(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A URL nothing listens on was blamed on the decode's --enable-metrics."""
    import functools
    import http.server
    import threading

    from dsv4ops.cli import main as cli_main
    from testing.ports import free_port

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    served = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        for url, got, hint in (
            (
                f"http://127.0.0.1:{free_port()}/metrics",
                "the scrape failed: connection refused",
                "reaches the port",
            ),
            (f"{served}/metrics", "(HTTP 404)", "the decode's own /metrics URL"),
            (f"{served}/page", "(the page has no such gauge)", "needs --enable-metrics"),
        ):
            if url.endswith("/page"):
                (tmp_path / "page").mkdir()
                (tmp_path / "page" / "metrics").write_text("# nothing of SGLang's\nup 1\n")
            # an hour's window: a wrong URL is said after the first few scrapes, not the window
            assert cli_main(["buckets", "plan", "--metrics-url", url, "--window", "3600"]) == 1
            err = capsys.readouterr().err
            assert "no scrape held sglang:num_running_reqs" in err and got in err, err
            assert "3 tried, then sampling stopped before the window's end" in err, err
            assert hint in err, err
    finally:
        server.shutdown()
        server.server_close()
