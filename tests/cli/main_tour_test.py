"""README's tour, run verbatim from a directory that is not the project root (issue 23).

The ```bash block under "## A tour" is parsed from README.md and each line run with bash, as a
user pastes it, from `PROJECT/ops/` (so every command finds its project by walking up). Only the
target is substituted (`twin-local` becomes a test twin on free ports, one shared stack for the
whole tour), plus the one path outside the test's directory, and the project's baseline sweeps
five levels, not nine (`_short_sweep`); the lines that need the box (over SSH), or a GPU, or
minutes of compiling are skipped, each with its reason, and a README line this test does not
know fails it (the tour and the test cannot drift apart)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import cast

import pytest

from testing.orchestrate import OrchEnv, commit_all, kill_all, make_env, our_processes

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SKIPPED = {
    "dsv4ops runbook run decode-wedge --target twin-local --rehearse": "asks its confirm steps of a person at a terminal (it refuses without one); rehearsed "
    "end to end, with --yes, by tests/cli/runbook_rehearsal_test.py",
    "dsv4ops watch --target box": "the box over SSH (watch on the twin: tests/cli/watch_test.py)",
    "dsv4ops kernels build": "two minutes of Triton compile checks on 2 cores (tests/cli/kernels_build_test.py)",
    "dsv4ops kernels deploy dist/…tar.gz --target box": "the box over SSH, and the artifact of the skipped build (tests/cli/kernels_test.py)",
}


def tour_lines() -> list[str]:
    text = (REPO / "README.md").read_text()
    block = re.search(r"^## A tour\n.*?^```bash\n(.*?)^```", text, re.S | re.M)
    assert block, "README.md has no ```bash block under ## A tour"
    lines = []
    for raw in block.group(1).splitlines():
        # the line as pasted, less its trailing comment (two spaces or more, then `#`)
        line = re.sub(r"\s{2,}#.*$", "", raw).strip()
        if line:
            assert shlex.split(line, comments=True) == shlex.split(line), line
            lines.append(line)
    return lines


# The tour's twin keeps SGLang 0.5.23's own KV timeouts (300 model s: 15 s of wall time at scale
# 0.05), not the 20 s the e2e tests' twins use to see a lost transfer in ~1 s (the tour loses
# none), and a 5 s health timeout in wall time. At 1 s of wall time, a second without CPU on a
# loaded 2-core CI machine (this test runs beside two other workers) times out KV transfers, or
# a /health whose prefill finished nothing in it, as if the server had hung for 20 model
# seconds; the router counts failed requests against its workers' circuits (10 open one for 60 s:
# "No available prefill workers (all circuits open or unhealthy)" for the rest of the sweep).
TOUR_TWIN_ENV = {
    "DSV4_TWIN_BOOTSTRAP_TIMEOUT_S": "300",
    "DSV4_TWIN_WAITING_TIMEOUT_S": "300",
    "DSV4_TWIN_HEALTH_TIMEOUT_S": "100",
}


def _project(root: Path) -> tuple[Path, str, dict[str, str]]:
    """A project: the shipped profiles, targets (box, twin-local) and runbooks, plus a twin test
    target; a git checkout, as `profile set` commits into it."""
    env = make_env(root, extra_twin_env=TOUR_TWIN_ENV)
    project = env.profiles_dir.parent
    twin_block = (env.profiles_dir / "targets.yaml").read_text().split("targets:\n", 1)[1]
    shipped = (REPO / "profiles" / "targets.yaml").read_text()
    (env.profiles_dir / "targets.yaml").write_text(shipped.rstrip("\n") + "\n\n" + twin_block)
    shutil.copytree(REPO / "runbooks", project / "runbooks")
    _short_sweep(env.profiles_dir / "baseline.yaml")
    commit_all(env, "the shipped targets and runbooks, a five-level sweep")
    return project, env.target, {"workdir": str(env.workdir)}


# The tour's sweep climbs the baseline's levels, 6 s each: the shipped nine end with four levels
# of 72-96 streams (client, router and twin on the test machine's cores). The assertions read
# the law, the clock and the plan below the lowest level (32), so this project's baseline keeps
# the staircase up to the 56/57 sawtooth and 64 (five levels, as a staging profile might): the
# same commands, 24 s less of the heaviest load.
SHIPPED_SWEEP = "  sweep_concurrency: [32, 48, 56, 57, 64, 72, 80, 88, 96]\n"
TOUR_SWEEP = "  sweep_concurrency: [32, 48, 56, 57, 64]\n"


def _short_sweep(baseline: Path) -> None:
    text = baseline.read_text()
    assert text.count(SHIPPED_SWEEP) == 1, "the shipped baseline's sweep levels changed"
    baseline.write_text(text.replace(SHIPPED_SWEEP, TOUR_SWEEP))


def test_the_readme_tour_runs_verbatim_from_a_subdirectory(tmp_path: Path) -> None:
    project, target, _ = _project(tmp_path)
    ops = project / "ops"
    ops.mkdir()
    substitute = {
        "twin-local": target,
        # the test writes only under its own directory
        "/etc/prometheus/dsv4ops": str(tmp_path / "prometheus"),
    }
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    environ = {k: v for k, v in os.environ.items() if not k.startswith("DSV4OPS_")}
    environ |= {"PATH": path, "DSV4OPS_PROGRESS_EVERY_S": "30"}
    lines = tour_lines()
    assert set(SKIPPED) <= set(lines), "a skipped line is no longer in the tour"
    outputs: dict[str, str] = {}
    try:
        for line in lines:
            if line in SKIPPED:
                continue
            command = line
            for old, new in substitute.items():
                command = command.replace(old, new)
            proc = subprocess.run(
                ["bash", "-c", command],
                cwd=ops,
                env=environ,
                input="y\n",
                capture_output=True,
                text=True,
                timeout=400,
            )
            assert proc.returncode == 0 or _could_not_judge(
                line, proc
            ), f"{command}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
            assert "Traceback" not in proc.stderr, command
            outputs[line] = proc.stdout
    finally:
        subprocess.run(
            [sys.executable, "-m", "dsv4ops", "stop", "--target", target, "--yes", "--recover"],
            cwd=ops,
            env=environ,
            capture_output=True,
            timeout=120,
        )
        kill_all(_env(tmp_path / "work"))
    assert our_processes(_env(tmp_path / "work")) == []
    _check_what_the_tour_promises(ops, project, outputs)


def _could_not_judge(line: str, proc: subprocess.CompletedProcess[str]) -> bool:
    """A canary that says it cannot judge because this (shared, 2-core) machine is too busy to
    time its streams, or the law its starved twin reported fits poorly: INCONCLUSIVE, exit 4, as
    documented. Its report is still written (the bucket plan reads it)."""
    busy = re.search(
        r"machine \d+% busy|client-bound|not trustworthy|step law fits poorly",
        proc.stdout + proc.stderr,
    )
    return line.startswith("dsv4ops canary ") and proc.returncode == 4 and busy is not None


class _Env:  # what kill_all / our_processes read of an OrchEnv
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir


def _env(workdir: Path) -> OrchEnv:
    # kill_all / our_processes read only `.workdir`; the tour has no OrchEnv (it makes its own
    # project), so this stand-in is passed as one.
    return cast(OrchEnv, _Env(workdir))


def _check_what_the_tour_promises(ops: Path, project: Path, outputs: dict[str, str]) -> None:
    # The report the canary wrote, read back by the bucket planner: relative to where the user
    # is, and its plan keeps the small buckets the sweep's levels (~32 and up) say nothing about.
    report = json.loads((ops / "reports" / "today" / "report.json").read_text())
    sweep = next(s for s in report["canary"]["suites"] if s["suite"] == "sweep")["metrics"]
    # one clock (issue 23): the levels and the fits in model time, the twin's scale stated, so
    # no level runs faster than the law's ceiling as it did when the client's wall tok/s
    # (x1/scale) stood beside the server's model-time law
    assert sweep["clock"]["name"] == "model" and sweep["clock"]["time_scale"] == 0.05
    assert {f["clock"] for f in sweep["fit"].values()} == {"model time, twin time scale 0.05"}
    # the client's law from the same levels (the server's own law at scale 0.05 on a loaded
    # 2-core machine is too noisy to bound anything). The bug this guards against mixed clocks,
    # a factor of 1/scale = 20; a loaded machine bends the fit itself (a level at 2.5x the
    # ceiling was seen with another e2e file beside it), so the bound is 5x, not 1.2x: still
    # four times below the bug, and never tripped by load.
    law = sweep["fit"]["padded_bs"]
    assert max(p["output_tok_s"] for p in sweep["levels"]) < 5 * law["ceiling_tok_s"]
    plan = next(out for line, out in outputs.items() if line.startswith("dsv4ops buckets plan"))
    assert "from canary sweep levels" in plan
    planned_line = re.search(r"^planned: (.*)$", plan, re.M)
    assert planned_line is not None, plan
    planned = [int(b) for b in planned_line.group(1).split()]
    # below the lowest batch the sweep observed (its c32 level runs 31 or 32 at a time, as the
    # machine allows), the plan keeps baseline's step-8 ladder
    kept = re.search(r"below the sweep's lowest level (\d+) .*: ([\d ]+)$", plan, re.M)
    assert kept is not None, plan
    lowest = int(kept.group(1))
    assert 24 < lowest <= 32, plan
    assert [b for b in planned if b < lowest] == [1, 2, 4, 8, 12, 16, 24], plan
    assert "apiVersion" in (ops / "rbg.yaml").read_text()
    # state is the project's, wherever the commands ran
    assert (project / ".dsv4ops" / "journal").is_dir() and not (ops / ".dsv4ops").exists()
    journal = next(out for line, out in outputs.items() if line.startswith("dsv4ops journal"))
    assert "deploy" in journal and "stop" in journal
