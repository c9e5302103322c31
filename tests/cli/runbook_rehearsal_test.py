"""Every shipped runbook rehearsed through the real CLI against one twin target behind the real
router, with its incident forced (`dsv4ops twin hazard`, or the twin's own `auto` hazard), each
ending with the deployment healthy (overlap-ab: the unsafe candidate rejected, the baseline
running; drain-and-stop: everything stopped). Then resume: after Ctrl-C at a prompt, after a
killed run, and a refused resume once the target changed.

One module-scoped target (fast twin settings, short canaries): the tests run in file order and
each starts from what the previous one left, as an on-call engineer's shift would.
"""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsv4ops.cli import main
from dsv4ops.journal.records import Kind, Status
from dsv4ops.journal.store import Journal
from dsv4ops.runbooks.runlog import fold_run, run_state
from testing.cli import read_until, wait_blocked
from testing.orchestrate import OrchEnv, commit_all, module_env, set_gate_duration
from testing.profiles import TRITON_MOE_PATH_YAML

# serial: only the bucket-tuning rehearsal, whose sweep measures step times (and so the bucket
# plan) and runs while no other worker runs a test (testing/workers.py). The others judge
# verdicts whose evidence is not a duration (a wedge, failed requests, a corrupted call, a gate's
# FAIL) and share the machine; the test run's client self-check bound fits a shared machine
# (DSV4OPS_CANARY_LAG_P99_MAX_MS, tests/conftest.py). The resume tests come first: the
# module's baseline deploy is set up beside the other worker's tests, and the last of them leaves
# the baseline serving for the rehearsals.
serial = pytest.mark.serial

RUNBOOKS = Path(__file__).resolve().parents[2] / "runbooks"
TOKEN = "hf_rehearsalSecret0042"  # in every component's environment (a secret-looking key)
API_KEY = "sk-logged-api-key-9931"  # what SGLang prints in its ServerArgs line
SMALL_CANARY = "canary:\n  smoke_requests: 4\n  stress_concurrency: 4\n"
# Each flag-aware suite of a runbook's gated deploy runs this long (the box's profiles: 20 s): set
# in the baseline every profile here extends, as a staging profile would (docs/canary.md).
GATE_S = 3
PROFILES = {
    "ms-small": "schema_version: 1\nextends: multi-stream-on\n" + SMALL_CANARY,
    "sweep-small": "schema_version: 1\nextends: baseline\ncanary:\n  sweep_concurrency: [8, 24, 40]\n",
    # the package pinned on the one MoE path that reads its configs (docs/kernels.md)
    "kernels-pinned": "schema_version: 1\nextends: baseline\n"
    "kernel_package: dsv4-decode-kernels@0.1.0\n" + TRITON_MOE_PATH_YAML + SMALL_CANARY,
}
# A test-local runbook for resume: a prompt to stop at, then a step that is not safe to repeat.
RESUMABLE = """\
# Resumable

**When.** a test.

1. Look: at the target.
   ```dsv4ops
   dsv4ops status --target {target}
   ```
2. Decide: go on?
   ```step
   kind: confirm
   question: Go on with the change?
   ```
3. Change: validate (stands in for a change: not safe to repeat).
   ```dsv4ops
   dsv4ops profile validate baseline --target {target}
   ```
   ```step
   repeat: unsafe
   ```
4. Verify: healthy.
   ```step
   kind: wait
   until: status healthy
   timeout: 60
   ```
"""


@pytest.fixture(scope="module")
def rb_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OrchEnv]:
    extra = {
        "DSV4_TWIN_DEGRADE_FAIL_FRACTION": "1.0",  # a degraded pair loses every transfer
        # The forced corruption shows within 4 sessions: each request that joins the batch draws
        # once, and the draws' order follows the batches' timing (the seeded RNG is shared with
        # other draws), so it is a chance: at 0.5 over the suite's >= 12 requests no corruption
        # at all was ~2e-4 a run; at 0.9, 1e-12.
        "DSV4_TWIN_CORRUPT_PROB": "0.9",
        "HF_TOKEN": TOKEN,
    }
    for env in module_env(tmp_path_factory, extra):
        for name, text in PROFILES.items():
            (env.profiles_dir / f"{name}.yaml").write_text(text)
        set_gate_duration(env, GATE_S)
        commit_all(env, "rehearsal profiles")
        with pytest.MonkeyPatch.context() as mp:  # the shift starts with the baseline running
            for k, v in env.environ.items():
                mp.setenv(k, v)
            # gated: the known-good the rehearsals' rollbacks return to (issue 20)
            assert (
                main(
                    [
                        "deploy",
                        "baseline",
                        "--target",
                        env.target,
                        "--yes",
                        "--canary-duration",
                        "2",
                        "--accept-inconclusive-canary",
                    ]
                )
                == 0
            )
        yield env


@pytest.fixture
def env(rb_env: OrchEnv, _clean_environ: None, monkeypatch: pytest.MonkeyPatch) -> OrchEnv:
    for k, v in rb_env.environ.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("DSV4OPS_RUNBOOKS_DIR", str(RUNBOOKS))
    return rb_env


def runbook(env: OrchEnv, capfd: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["runbook", "run", *args, "--target", env.target])
    out, err = capfd.readouterr()
    return code, out + err


def status(env: OrchEnv, capfd: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code = main(["status", "--json", "--target", env.target])
    st: dict[str, Any] = json.loads(capfd.readouterr().out)
    assert code == st["exit"] == (0 if st["healthy"] else 2), st  # NOT HEALTHY exits 2
    return st


def journal_json(env: OrchEnv, capfd: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(["journal", "--json", "--limit", "0", "--target", env.target])
    return code, json.loads(capfd.readouterr().out)


def assert_healthy(env: OrchEnv, capfd: pytest.CaptureFixture[str], profile: str) -> None:
    st = status(env, capfd)
    assert st["healthy"], st
    assert st["deployed"]["profile"] == profile
    assert st["attention"] == [] and st["drift"] == [], st


def last_run(env: OrchEnv) -> Any:
    runs = [o for o in Journal(env.target).operations() if o.kind is Kind.RUNBOOK]
    return runs[-1]


def children_of(env: OrchEnv, run_id: str) -> list[Any]:
    return [o for o in Journal(env.target).operations() if o.runbook_run == run_id]


PROMPT = "Go on with the change? [y/N]:"  # RESUMABLE's step 2, as click.confirm writes it


def _start_resumable(env: OrchEnv, book: Path) -> tuple[subprocess.Popen[Any], int, str, str]:
    """The resumable runbook in a real process whose stdin is a terminal, stopped at step 2's
    prompt. Returns (process, the pty's controlling fd, run id, its output so far)."""
    before = run_ids(env)
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "dsv4ops", "runbook", "run", str(book), "--target", env.target],
        env=dict(os.environ),
        stdin=follower,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    os.close(follower)
    run_id = _wait_for_step(env, "step 2", "start", proc, before)
    # the prompt is on its output and the process sleeps in the read of its answer: a Ctrl-C
    # now is one at the prompt, so no timer guesses when the question was written
    head = read_until(proc, PROMPT)
    wait_blocked(proc.pid)
    return proc, leader, run_id, head


def _rest_after_ctrl_c(proc: subprocess.Popen[Any]) -> str:
    """The run's output to its end. Two full runs saw no end within 60 s: the signal had landed
    between the prompt's write and the read of its answer (`wait_blocked` now waits for that
    read). Should it recur, the failure says whether the runbook itself had exited (a process
    still holding its output pipe would block the read) and what dsv4ops processes were left."""
    try:
        return str(proc.communicate(timeout=60)[0])
    except subprocess.TimeoutExpired as exc:
        left = subprocess.run(
            ["ps", "-eo", "pid,ppid,stat,etime,args"], capture_output=True, text=True, check=False
        ).stdout
        exited = proc.poll()
        proc.kill()
        so_far = exc.output.decode() if isinstance(exc.output, bytes) else exc.output
        raise AssertionError(
            f"no end 60 s after Ctrl-C at the prompt (runbook exit code: {exited}); output so "
            f"far: {so_far!r}; dsv4ops processes: "
            + "; ".join(line for line in left.splitlines() if "dsv4ops" in line)
        ) from None


def _interrupted_at_the_prompt(
    env: OrchEnv, tmp_path: Path, sig: signal.Signals
) -> tuple[Path, str]:
    """RESUMABLE run to its prompt, then `sig` to the runbook process: it ends as Ctrl-C ends
    it (exit 130, what ran said, the resume command, the run INTERRUPTED). The book and run."""
    book = tmp_path / "resumable.md"
    book.write_text(RESUMABLE)
    proc, leader, run_id, head = _start_resumable(env, book)
    proc.send_signal(sig)
    out = head + _rest_after_ctrl_c(proc)
    os.close(leader)
    assert proc.returncode == 130, out
    assert "interrupted.\nBefore it:\n  step 1: `dsv4ops status" in out, out
    assert f"resume with: dsv4ops runbook run {book} --target {env.target} --resume {run_id}" in out
    rec = fold_run(Journal(env.target).get(run_id))
    assert rec.status is Status.INTERRUPTED and rec.done[2]["outcome"] == "interrupted"
    return book, run_id


def test_ctrl_c_at_a_prompt_then_resume(
    env: OrchEnv, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    book, run_id = _interrupted_at_the_prompt(env, tmp_path, signal.SIGINT)
    # Not interactive now: the confirmation step is refused without --yes, and nothing ran.
    code, text = runbook(env, capfd, str(book), "--resume", run_id)
    assert code == 1 and "not interactive" in text, text
    code, text = runbook(env, capfd, str(book), "--resume", run_id, "--yes")
    assert code == 0, text
    assert "preconditions CHANGED" not in text  # load may have moved: reported, not refusing
    assert "== step 1" not in text and "== step 2" in text  # step 1 is not run again
    rec = fold_run(Journal(env.target).get(run_id))
    assert rec.status is Status.SUCCEEDED and rec.done[2]["confirmation"]["how"] == "--yes"


def test_sigterm_ends_a_run_as_ctrl_c_does(
    env: OrchEnv, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`kill PID` (a supervisor's stop, a CI job's timeout) of a runbook run ended it with 143,
    no word and no end in the journal; README's table says 130. It is ended as Ctrl-C ends it:
    the step closed, what ran said, the resume command printed, the run INTERRUPTED."""
    _interrupted_at_the_prompt(env, tmp_path, signal.SIGTERM)


def test_a_killed_run_resumes_and_a_changed_target_refuses(
    env: OrchEnv, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    book = tmp_path / "resumable.md"
    book.write_text(RESUMABLE)
    proc, leader, run_id, _ = _start_resumable(env, book)
    proc.kill()
    proc.communicate(timeout=30)
    os.close(leader)
    rec = fold_run(Journal(env.target).get(run_id))
    assert rec.in_flight == 2 and rec.status is Status.RUNNING  # journaled where it died ...
    # ... and read as what it is: its process is gone, so not RUNNING (journal, status).
    state, note = run_state(Journal(env.target).get(run_id))
    assert state == "INTERRUPTED" and f"--resume {run_id}" in (note or ""), note
    code, listing = journal_json(env, capfd)
    entry = next(e for e in listing["entries"] if e["id"] == run_id)
    assert entry["status"] == "INTERRUPTED" and f"--resume {run_id}" in entry["next"]
    st = status(env, capfd)
    assert any(o["id"] == run_id and o["status"] == "INTERRUPTED" for o in st["open"]), st["open"]
    # A second killed run, then the target changes under both: drain-and-stop stops it all.
    proc, leader, second, _ = _start_resumable(env, book)
    proc.kill()
    proc.communicate(timeout=30)
    os.close(leader)
    code, text = runbook(env, capfd, str(book), "--resume", run_id, "--yes")
    assert code == 0, text  # nothing changed since the first one died: it completes
    code, out = runbook(env, capfd, "drain-and-stop", "--yes")
    assert code == 0, out
    st = status(env, capfd)
    assert not any(c["alive"] for c in st["components"]), st
    assert [o.kind for o in children_of(env, last_run(env).op)] == [Kind.STOP]
    code, text = runbook(env, capfd, str(book), "--resume", second, "--yes")
    assert code == 1, text
    assert "preconditions CHANGED since the run stopped" in text
    assert "decode alive: True -> False" in text and "deployed op:" in text
    assert run_state(Journal(env.target).get(second))[0] == "INTERRUPTED"  # still resumable


LONG_STEP = """\
# Long step

**When.** a test.

1. Look: at the target.
   ```dsv4ops
   dsv4ops status --target {target}
   ```
2. Load: a soak through the router (long enough to be interrupted in the middle).
   ```dsv4ops
   dsv4ops canary --target {target} --suite soak --duration 60 --concurrency 2
   ```
3. Verify: healthy.
   ```step
   kind: wait
   until: status healthy
   timeout: 60
   ```
"""


def test_ctrl_c_inside_a_step_whose_command_runs_interrupts_both_and_resumes(
    env: OrchEnv, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """issue 21: Ctrl-C while a step's child command (a canary through the real router) runs:
    the child gets it too and is waited for, the step is journaled `interrupted`, the run exits
    130 with the resume command and resumes at that step; the runbook edited meanwhile, the
    resume is refused naming the changed step (issue 21, F5, through the real CLI)."""
    if not status(env, capfd)["healthy"]:  # an earlier test of the module may have stopped it
        assert main(["deploy", "baseline", "--target", env.target, "--yes", "--no-canary"]) == 0
        capfd.readouterr()
    book = tmp_path / "long.md"
    book.write_text(LONG_STEP)
    before = run_ids(env)
    proc = subprocess.Popen(
        [sys.executable, "-m", "dsv4ops", "runbook", "run", str(book), "--target", env.target],
        env=dict(os.environ),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    run_id = _wait_for_step(env, "step 2", "start", proc, before)
    time.sleep(3.0)  # the canary is sending load now (a bounded wait: the soak lasts 60 s)
    os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C: the whole foreground group
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out
    assert f"--resume {run_id}" in out and "interrupted." in out, out
    rec = fold_run(Journal(env.target).get(run_id))
    assert rec.status is Status.INTERRUPTED and rec.done[2]["outcome"] == "interrupted", rec.done
    assert rec.resume_at == 2
    book.write_text(LONG_STEP.replace("--duration 60", "--duration 2"))  # an edit: refused
    code, text = runbook(env, capfd, str(book), "--resume", run_id, "--yes")
    assert code == 1 and "step 2 changed" in text, text
    book.write_text(LONG_STEP)
    assert_healthy(env, capfd, "baseline")  # the interrupted canary left the unit serving


def test_decode_wedge_rehearsed_with_diagnostics_of_the_wedged_twin(
    env: OrchEnv, capfd: pytest.CaptureFixture[str]
) -> None:
    before = run_ids(env)
    # Through a real process, so the test can put SGLang's ServerArgs line (with secrets) into
    # the wedged decode's log once the rehearsal has started it, before step 3 collects it.
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dsv4ops",
            "runbook",
            "run",
            "decode-wedge",
            "--rehearse",
            "--yes",
            "--target",
            env.target,
        ],
        env=dict(os.environ),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    _wait_for_step(env, "rehearse", "done", proc, before)
    with open(env.workdir / "logs" / "decode.log", "a") as log:
        log.write(f"server_args=ServerArgs(api_key='{API_KEY}', hf_token={TOKEN})\n")
    out, _ = proc.communicate(timeout=240)
    assert proc.returncode == 0, out
    run = fold_run(last_run(env))
    assert run.status is Status.SUCCEEDED and set(run.done) == set(range(1, 9))
    assert "held after" in run.done[1]["detail"]  # /health 503: it really was wedged
    kinds = [(o.kind, o.profile_name) for o in children_of(env, run.op)]
    # the rehearsal's forced wedge is journaled too, as a step of the run (issue 20)
    assert kinds == [(Kind.DEPLOY, "overlap-on"), (Kind.HAZARD, None), (Kind.ROLLBACK, "baseline")]
    assert_healthy(env, capfd, "baseline")
    bundle = Path(run.done[3]["bundle"])
    _assert_wedged_bundle(bundle)


def _assert_wedged_bundle(bundle: Path) -> None:
    files = {str(p.relative_to(bundle)) for p in bundle.rglob("*") if p.is_file()}
    for part in ("prefill", "decode", "router"):
        assert {
            f"{part}/log-tail.txt",
            f"{part}/processes.json",
            f"{part}/server_info.json",
            f"{part}/metrics.prom",
        } <= files, files
    for part in ("prefill", "decode"):  # the SGLang processes (the router is Rust)
        dumps = [f for f in files if f.startswith(f"{part}/py-spy-")]
        assert dumps, files
        text = (bundle / dumps[0]).read_text()
        assert "Thread" in text and "launch_server" in text, text[:500]
    assert {"journal-tail.jsonl", "deployment.json", "MANIFEST.json"} <= files
    deployment = json.loads((bundle / "deployment.json").read_text())
    assert deployment["profile"]["name"] == "overlap-on"
    assert {c["name"] for c in deployment["components"]} == {"prefill", "decode", "router"}
    metrics = (bundle / "decode/metrics.prom").read_text()
    assert "sglang:num_running_reqs" in metrics
    log = (bundle / "decode/log-tail.txt").read_text()
    assert "server_args=ServerArgs(api_key='***', hf_token=***)" in log
    for f in files:
        text = (bundle / f).read_text(errors="replace")
        assert TOKEN not in text and API_KEY not in text, f
    manifest = json.loads((bundle / "MANIFEST.json").read_text())
    assert sum(i.get("bytes", 0) for i in manifest["items"]) <= manifest["max_bytes"]


def run_ids(env: OrchEnv) -> set[str]:
    return {o.op for o in Journal(env.target).operations() if o.kind is Kind.RUNBOOK}


def _wait_for_step(
    env: OrchEnv,
    name: str,
    phase: str,
    proc: subprocess.Popen[Any],
    before: set[str],
    within_s: float = 120.0,
) -> str:
    """Poll the journal until a run that is not in `before` has `name` at `phase`; its id."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[0]
        for op in Journal(env.target).operations():
            new = op.kind is Kind.RUNBOOK and op.op not in before
            if new and any(s.name == name and s.phase == phase for s in op.steps):
                return op.op
        time.sleep(0.05)
    raise AssertionError(f"no {name} {phase} within {within_s} s")


def test_bootstrap_degradation_rehearsed(env: OrchEnv, capfd: pytest.CaptureFixture[str]) -> None:
    code, out = runbook(
        env, capfd, "bootstrap-degradation", "--rehearse", "--yes", "--var", "profile=baseline"
    )
    assert code == 0, out
    run = fold_run(last_run(env))
    assert run.done[1]["outcome"] == "ok"  # health green...
    assert run.done[2]["outcome"] == "ok"  # ...and the smoke canary failed end to end (exit 2)
    assert "canary smoke: FAIL" in out and out.count("canary smoke: PASS") == 1
    assert [o.kind for o in children_of(env, run.op)] == [Kind.HAZARD, Kind.DEPLOY]
    assert_healthy(env, capfd, "baseline")


def test_pd_safe_restart_rehearsed(env: OrchEnv, capfd: pytest.CaptureFixture[str]) -> None:
    code, out = runbook(
        env, capfd, "pd-safe-restart", "--rehearse", "--yes", "--var", "profile=baseline"
    )
    assert code == 0, out
    run = fold_run(last_run(env))
    confirmation = run.done[3]["confirmation"]
    assert confirmation["how"] == "--yes" and confirmation["by"] and confirmation["at"]
    assert_healthy(env, capfd, "baseline")


def test_overlap_ab_rejects_the_unsafe_candidate(
    env: OrchEnv, capfd: pytest.CaptureFixture[str]
) -> None:
    code, out = runbook(
        env,
        capfd,
        "overlap-ab",
        "--yes",
        "--var",
        "baseline=baseline",
        "--var",
        "candidate=overlap-on",
        "--var",
        "concurrency=8",
        "--var",
        "duration=1",
    )
    assert code == 0, out
    run = fold_run(last_run(env))
    assert run.done[4]["outcome"] == "failed" and run.done[4]["next"] == 6  # the wedge
    assert 5 not in run.done  # never asked to keep it
    children = [(o.kind, o.profile_name) for o in children_of(env, run.op)]
    assert children == [(Kind.DEPLOY, "overlap-on"), (Kind.ROLLBACK, "baseline")]
    assert_healthy(env, capfd, "baseline")


def test_flag_change_rehearsed(env: OrchEnv, capfd: pytest.CaptureFixture[str]) -> None:
    code, out = runbook(
        env,
        capfd,
        "flag-change",
        "--yes",
        "--var",
        "profile=overlap-on",
        "--var",
        "change=overlap=off",
        "--var",
        "new=overlap-on-off",
    )
    assert code == 0, out
    assert_healthy(env, capfd, "overlap-on-off")


def test_tool_call_corruption_rehearsed(env: OrchEnv, capfd: pytest.CaptureFixture[str]) -> None:
    code, out = runbook(
        env, capfd, "tool-call-corruption", "--rehearse", "--yes", "--var", "profile=ms-small"
    )
    assert code == 0, out
    assert "--suite corruption  # expect exit 2" in out
    # the fix's gated deploy ran its corruption suite for the profile's gate, not a fixed 20 s
    assert f"canary suite corruption ({GATE_S} s)" in out, out
    assert_healthy(env, capfd, "ms-small-msoff")


def test_kernel_rollout_rehearsed(
    env: OrchEnv, capfd: pytest.CaptureFixture[str], built: Any
) -> None:
    code, out = runbook(
        env,
        capfd,
        "kernel-rollout",
        "--yes",
        "--var",
        f"artifact={built.v1.path}",
        "--var",
        "profile=kernels-pinned",
    )
    assert code == 0, out
    st = status(env, capfd)
    assert st["healthy"] and st["deployed"]["profile"] == "kernels-pinned", st
    assert st["kernel_package"]["loaded"] == "dsv4-decode-kernels@0.1.0", st["kernel_package"]
    run = fold_run(last_run(env))
    assert run.done[4]["next"] is None and 5 not in run.done  # ended at the verify step


@serial
def test_bucket_tuning_rehearsed(
    env: OrchEnv, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    dist = tmp_path / "sizes.json"
    dist.write_text(json.dumps([8] * 5 + [12] * 3 + [16] * 4))
    code, out = runbook(
        env,
        capfd,
        "bucket-tuning",
        "--yes",
        "--var",
        "profile=sweep-small",
        "--var",
        "concurrency=8",
        "--var",
        "duration=1",
        "--var",
        f"report={tmp_path / 'report'}",
        "--var",
        f"distribution={dist}",
        "--var",
        "buckets=step4:40-96",
        "--var",
        "new=sweep-small-b",
    )
    assert code == 0, out
    st = status(env, capfd)
    assert st["healthy"] and st["deployed"]["profile"] == "sweep-small-b", st
    decode = next(c for c in st["components"] if c["name"] == "decode")
    assert 44 in decode["captured_buckets"], decode  # step 4 from 40 on
