"""`dsv4ops ab` on the twin behind the real router: the dry run, bad input, the seeds' overlap A/B
(a gain with its interval, rejected by the abort-cascade gate) and an interrupt mid-experiment.

One twin environment for the module (testing/ab.py: time scale 0.2, decode metrics every
10 steps); few blocks and short sweeps: these tests check the orchestration and the journal, not
the statistics' power (tests/ab/ does that).
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsv4ops.journal.gates import GateSource, GateVerdict
from dsv4ops.journal.records import Kind, Status
from dsv4ops.journal.store import Journal
from dsv4ops.jsontypes import JSONObject
from dsv4ops.orchestrate.status_report import StatusReport
from testing.ab import ab_twin_env, add_ab_profiles
from testing.orchestrate import OrchEnv, cli, module_env, our_processes

pytestmark = [pytest.mark.slow, pytest.mark.router]
# No test here is serial: the gates' verdicts rest on what the suites find (a wedge, an
# abort-cascade FAIL), not on durations, and an A/B's arms share whatever the machine gives both
# (time-multiplexed blocks); the test run's client self-check bound fits a shared machine
# (DSV4OPS_CANARY_LAG_P99_MAX_MS, tests/conftest.py).

FAST = ("--warmup", "0", "--block-duration", "3", "--max-tokens", "64", "--yes")


@pytest.fixture(scope="module")
def orch_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OrchEnv]:
    for env in module_env(
        tmp_path_factory, extra_twin_env=ab_twin_env(tmp_path_factory.mktemp("ab"))
    ):
        add_ab_profiles(env)
        yield env


@pytest.fixture
def env(orch_env: OrchEnv, monkeypatch: pytest.MonkeyPatch) -> OrchEnv:
    for k, v in orch_env.environ.items():
        monkeypatch.setenv(k, v)
    # A wedged decode is stopped after its grace period: keep that (and every wait) short.
    monkeypatch.setenv("DSV4OPS_READY_TIMEOUT_S", "5")
    return orch_env


def test_dry_run_prints_the_plan_and_changes_nothing(
    env: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(env, capsys, "ab", "baseline", "overlap-on", "--dry-run")
    assert code == 0, err
    # the budget the design sizes for a 5% effect at the default ±2% variation, each of
    # baseline's nine sweep levels judged at alpha / 9: 6 pairs
    assert "schedule: ABBA BAAB ABBA (a budget of 12 blocks" in out
    assert "design: group-sequential, a look after every A/B pair" in out
    assert "expected for a true +5% at ±2% deploy-to-deploy variation:" in out
    assert "gate on B: abort_cascade (flags.overlap_schedule changed (overlap on:" in out
    assert "switch A:" in out and "estimated total:" in out and "nothing is changed" in out
    code, plan, err = cli(
        env,
        capsys,
        "ab",
        "baseline",
        "overlap-on",
        "--dry-run",
        "--json",
        "--effect",
        "10",
        "--variation",
        "1",
    )
    assert code == 0, err
    assert (plan["budget_pairs"], plan["effect_pct"], plan["variation_pct"]) == (2, 10.0, 1.0)
    assert plan["expected_blocks"] < 4 and plan["expected_total_s"] < plan["worst_case_total_s"]
    code, plan, err = cli(
        env,
        capsys,
        "ab",
        "baseline",
        "buckets-step4",
        "--dry-run",
        "--json",
        "--blocks",
        "4",
        "--levels",
        "56,57",
    )
    assert code == 0, err
    assert (plan["schedule"], plan["gates"], plan["levels"]) == ("ABBA", ["sweep"], [56, 57])
    assert plan["estimated_total_s"] > 4 * plan["measured_s_per_block"]
    assert Journal(env.target).operations() == [] and our_processes(env) == []


def test_the_largest_accepted_design_is_planned_not_a_crash(
    env: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every bound at once, at the strictest confidence: the design's boundaries at the most
    looks and the smallest alpha share are computed."""
    code, plan, err = cli(
        env, capsys, "ab", "baseline", "overlap-on", "--dry-run", "--json",
        "--blocks", "128", "--confidence", "0.999", "--block-duration", "10800",
        "--warmup", "3600", "--levels", ",".join(map(str, range(4065, 4097))),
    )  # fmt: skip
    assert code == 0, err
    assert plan["blocks"] == 128 and len(plan["levels"]) == 32, plan


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("baseline", "baseline"), "render the same commands"),
        (("baseline", "overlap-on", "--blocks", "3"), "even and at least 2"),
        (("baseline", "no-such-profile"), "no-such-profile"),
        (("baseline", "overlap-on", "--suite", "soak", "--levels", "8,16"), "the soak exactly one"),
        # no upper bound was an internal error (--blocks 100000: the design's quantile) or
        # an estimate of years (--block-duration 1e12: "3333333333.4 h")
        (("baseline", "overlap-on", "--blocks", "100000"), "'--blocks': 100000 is not in the"),
        (("baseline", "overlap-on", "--block-duration", "1e12"), "'--block-duration': 1"),
        (("baseline", "overlap-on", "--warmup", "1e9"), "'--warmup': 1"),
        (("baseline", "overlap-on", "--levels", "99999999"), "99999999 is not a concurrency"),
        (("baseline", "overlap-on", "--levels", ",".join(map(str, range(1, 34)))), "at most 32"),
        # `--levels "$L"` with L unset ran A's levels
        (("baseline", "overlap-on", "--levels", ""), "'--levels': an empty value names nothing"),
        # a report dir that cannot be written was found when the experiment ended, hours later
        (("baseline", "overlap-on", "--report", "/dev/null/ab"), "/dev/null is not a directory"),
    ],
)
def test_bad_input_is_one_clear_error_and_changes_nothing(
    env: OrchEnv, capsys: pytest.CaptureFixture[str], args: tuple[str, ...], message: str
) -> None:
    code, _out, err = cli(env, capsys, "ab", *args, "--dry-run")
    assert code == 1 and message in err and "Traceback" not in err
    assert Journal(env.target).operations() == []


def test_ctrl_c_in_a_blocks_deploy_rolls_back_to_a_and_ends_the_experiment_partial(
    env: OrchEnv,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """Ctrl-C after block 1's deploy stopped A's unit: its automatic rollback restores the last
    known-good (an experiment's blocks never are; an earlier A/B's gated winner is), or with
    none stops everything; the experiment then leaves the box on A (by a deploy unless the
    rollback already did), ends FAILED naming the block done, the report is partial."""
    from dsv4ops.cli import _context

    good_before = Journal(env.target).known_good()

    printer = _context.progress_printer
    seen: list[str] = []
    fired: list[str] = []
    attention: list[str] = []

    def ctrl_c_mid_deploy_of_b(as_json: bool):  # type: ignore[no-untyped-def]
        echo = printer(as_json)

        def progress(line: str) -> None:
            echo(line)
            seen.append(line)
            if line.startswith("deploy ab-step4"):  # B's deploy is journaled: ask status
                attention.extend(_status(env)["attention"])
            if (
                line.startswith("  ok     stop prefill")
                and not fired
                and any(x.startswith("deploy ab-step4") for x in seen)
            ):
                fired.append(line)  # once: a second Ctrl-C would stop the rollback itself
                signal.raise_signal(signal.SIGINT)

        return progress

    monkeypatch.setattr(_context, "progress_printer", ctrl_c_mid_deploy_of_b)
    code, _out, err = cli(
        env,
        capsys,
        "ab",
        "ab-base",
        "ab-step4",
        "--blocks",
        "4",
        "--levels",
        "56,57",
        *FAST,
        "--report",
        str(tmp_path),
    )
    assert code == 130, err
    assert "block 1 (B)'s deploy was interrupted" in err and "the box runs A (ab-base" in err
    journal = Journal(env.target)
    exp = [o for o in journal.operations() if o.kind is Kind.EXPERIMENT][-1]
    b_deploy = [o for o in journal.operations() if o.profile_name == "ab-step4"][-1]
    # While B's deploy ran, status called both in progress, the deploy within the experiment.
    assert attention == [
        f"experiment {exp.op} of ab-base vs ab-step4 is in progress (during 'block 1 B ab-step4')",
        f"deploy {b_deploy.op} of ab-step4 is in progress (before its first step, within "
        f"experiment {exp.op})",
    ]
    assert exp.op in (b_deploy.reason or "")
    if good_before:  # e.g. the gated winner of this module's first A/B
        assert b_deploy.status is Status.ROLLED_BACK, b_deploy.message
    else:
        assert b_deploy.status is Status.FAILED
        assert "No known-good deployment to roll back to" in (b_deploy.message or "")
    assert exp.status is Status.FAILED and "after 1 of 4 blocks" in (exp.message or "")
    assert [(s.name, s.phase) for s in exp.steps if s.name.startswith("block ")] == [
        ("block 0 A ab-base", "start"),
        ("block 0 A ab-base", "done"),
        ("block 1 B ab-step4", "start"),
        ("block 1 B ab-step4", "failed"),
    ]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["partial"] and "interrupted" in report["interrupted"]
    assert [(b["arm"], b["complete"]) for b in report["blocks"]] == [("A", True)]
    assert report["decision"]["winner"] == "A"
    assert report["decision"]["decided_by"] == "stopped_early"
    # A runs again, put back by the experiment's own deploy of A, nothing in flight.
    deployed = journal.deployed()
    assert deployed is not None and deployed.profile_name == "ab-base" and deployed.proven
    if not good_before:
        assert deployed.reason == f"experiment {exp.op}: leave the box on A"
        # putting A back after a stop is a restore, no gate: not known-good
        assert not journal.judged()[deployed.op].known_good
    assert journal.in_flight() == [] and len(our_processes(env)) == 3


def test_ctrl_c_while_a_block_is_measured_keeps_a_and_records_the_block_as_partial(
    env: OrchEnv,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """Ctrl-C during block 0's sweep (A): the box already runs A's proven deployment, so nothing is
    redeployed; the block is in the report as incomplete and the experiment ends FAILED."""
    from dsv4ops.usecases import ab as AB

    real = vars(AB)["canary_runner"]  # the name ab.py imported (it does not re-export it)

    def ctrl_c_in_the_first_sweep(progress):  # type: ignore[no-untyped-def]
        run = real(progress)

        def wrapped(suite, dep, th, duration, concurrency):  # type: ignore[no-untyped-def]
            signal.raise_signal(signal.SIGINT)
            return run(suite, dep, th, duration, concurrency)

        return wrapped

    monkeypatch.setattr(AB, "canary_runner", ctrl_c_in_the_first_sweep)
    before = len(Journal(env.target).operations())
    code, _out, err = cli(
        env,
        capsys,
        "ab",
        "ab-base",
        "ab-step4",
        "--blocks",
        "4",
        "--levels",
        "56,57",
        *FAST,
        "--report",
        str(tmp_path),
    )
    assert code == 130 and "interrupted by SIGINT; the box runs A (ab-base" in err, err
    journal = Journal(env.target)
    exp, block0 = journal.operations()[before:]  # the experiment and block 0's deploy, no other
    assert exp.kind is Kind.EXPERIMENT and exp.status is Status.FAILED
    assert "interrupted by SIGINT after 1 of 4 blocks (done: none)" in (exp.message or "")
    assert ("block 0 A ab-base", "failed") in [(s.name, s.phase) for s in exp.steps]
    report = json.loads((tmp_path / "report.json").read_text())
    assert [(b["arm"], b["complete"], b["deploy_op"]) for b in report["blocks"]] == [
        ("A", False, block0.op)
    ]
    deployed = journal.deployed()
    assert deployed is not None and deployed.op == block0.op and len(our_processes(env)) == 3


def _status(env: OrchEnv) -> StatusReport:
    from dsv4ops.cli._context import open_target
    from dsv4ops.orchestrate.status import gather_status

    session = open_target(env.target, verb="status", read_only=True)
    try:
        return gather_status(session.supervisor, session.journal, target=env.target)
    finally:
        session.close()


def _assert_the_gate_kept_a(env: OrchEnv, out: JSONObject, tmp_path: Path, before: int) -> None:
    """The overlap A/B (`dsv4ops ab ab-base ab-overlap`, journal entries from `before` on): a
    gain with its interval, rejected by the abort-cascade gate, the box left on A."""
    assert out["winner"] == "A" and out["ok"] and out["box"].startswith("A (ab-base")
    assert out["schedule"] == "ABBA" and len(out["blocks"]) == 2  # stopped at the first look
    (gate,) = out["gates"]
    assert gate["suite"] == "abort_cascade" and not gate["passed"] and "wedge" in gate["reason"]
    assert out["decided_by"] == "b_failed_gate"  # for scripts: a name, not a sentence
    assert "B failed the abort_cascade gate" in out["reasons"][0]
    # B's throughput is reported with its interval, one pair's worth (the twin's truth at 60 is
    # +6.2%; one pair on a loaded machine proves no size: tests/ab and the step-4 A/B do that).
    tput = {
        v["concurrency"]: v for v in out["analysis"]["verdicts"] if v["metric"] == "output_tok_s"
    }
    assert tput[60]["pairs"] == 1 and tput[60]["ci_low"] <= tput[60]["ratio"] <= tput[60]["ci_high"]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["decision"]["winner"] == "A" and len(report["blocks"]) == 2
    # The journal: one experiment (never known-good) holding its blocks' deploys, each naming it.
    ops = Journal(env.target).operations()[before:]
    (exp,) = [o for o in ops if o.kind is Kind.EXPERIMENT]
    assert (
        exp.status is Status.SUCCEEDED
        and exp.op not in Journal(env.target).judged()
        and exp.running is None
    )
    deploys = [o for o in ops if o.kind is Kind.DEPLOY]
    # two blocks, then the deploy that leaves the box on A (B ran the gate's wedge)
    assert [d.profile_name for d in deploys] == ["ab-base", "ab-overlap", "ab-base"]
    assert all(d.reason and exp.op in d.reason for d in deploys)
    assert [b["deploy_op"] for b in out["blocks"]] == [d.op for d in deploys[:2]]
    block_steps = [s for s in exp.steps if s.name.startswith("block ") and s.phase == "done"]
    assert [(s.detail or "").split(";")[0] for s in block_steps] == [
        f"deploy {d.op}" for d in deploys[:2]
    ]
    assert any(s.name == "gate abort-cascade on B" and s.phase == "failed" for s in exp.steps)
    (wedged,) = exp.gates  # as data (journal/gates.py): B's gate, on B's block deploy
    assert (wedged.suite, wedged.verdict, wedged.source) == (
        "abort_cascade",
        GateVerdict.FAIL,
        GateSource.AB_GATE,
    ) and wedged.op == deploys[1].op
    (look,) = [s for s in exp.steps if s.name.startswith("look ")]
    assert look.name == "look 1 of 2" and (look.detail or "").startswith(
        "decided, stopping: B failed the abort_cascade gate"
    )
    assert "leave the box on A" in [s.name for s in exp.steps]
    deployed = Journal(env.target).deployed()
    assert deployed is not None and deployed.op == deploys[-1].op
    # The winner's final deploy ran its own flag-aware gate, so it is known-good (issue 20);
    # the blocks are not.
    assert any(s.name.startswith("canary") for s in deploys[-1].steps), deploys[-1].steps
    judged = Journal(env.target).judged()
    assert judged[deploys[-1].op].known_good, judged[deploys[-1].op].why
    assert not any(judged[d.op].known_good for d in deploys[:2])
    assert len(our_processes(env)) == 3 and Journal(env.target).in_flight() == []


@pytest.fixture(scope="module")
def scenario() -> dict[str, str]:
    """What issue 20's scenario (the last three tests, in file order) carries from one step to
    the next: the gated baseline's operation id."""
    return {}


def _gated_baseline(scenario: dict[str, str]) -> str:
    assert "baseline_op" in scenario, "runs after test_a_gated_baseline_is_known_good_and_..."
    return scenario["baseline_op"]


def test_a_gated_baseline_is_known_good_and_overlap_on_failing_its_gate_is_rolled_back(
    env: OrchEnv, capsys: pytest.CaptureFixture[str], scenario: dict[str, str]
) -> None:
    """Issue 20's scenario on the twin behind the real router, one stack, in three tests:
    baseline gated -> overlap-on's gate fails (rolled back); then the seeds' overlap A/B (a gain
    with its interval, rejected by the abort-cascade gate, the box left on A by a gated deploy;
    rollback then offers baseline, never B); then multi-stream-on and overlap-on with
    --no-canary, after which rollback offers A's gated deploy, never B nor either flag profile."""
    gated = ("--yes", "--json", "--canary-duration", "2")
    code, base, err = cli(env, capsys, "deploy", "baseline", *gated, "--accept-inconclusive-canary")
    assert code == 0 and base["status"] == "SUCCEEDED", err
    scenario["baseline_op"] = base["op_id"]
    code, out, err = cli(env, capsys, "deploy", "overlap-on", *gated)
    assert code == 2 and out["status"] == "ROLLED_BACK" and out["exit"] == 2, err
    assert "Running now: baseline" in out["message"], out["message"]


def test_the_overlap_ab_is_rejected_by_bs_gate_and_rollback_never_offers_b(
    env: OrchEnv, capsys: pytest.CaptureFixture[str], tmp_path: Path, scenario: dict[str, str]
) -> None:
    base_op = _gated_baseline(scenario)
    # The overlap A/B, its own assertions in one helper (one experiment serves both: an A/B
    # costs ~50 s on the loaded machine).
    before = len(Journal(env.target).operations())
    code, ab_out, err = cli(
        env,
        capsys,
        "ab",
        "ab-base",
        "ab-overlap",
        "--variation",
        "1",
        "--levels",
        "56,60",
        *FAST,
        "--accept-inconclusive-canary",  # the winner's short final gate may not judge
        "--json",
        "--report",
        str(tmp_path),
    )
    assert code == 0 and ab_out["exit"] == 0, err
    assert [g["passed"] for g in ab_out["gates"]] == [False] and ab_out["winner"] == "A"
    _assert_the_gate_kept_a(env, ab_out, tmp_path, before)
    journal = Journal(env.target)
    judged = journal.judged()
    b_deploys = [o for o in journal.operations() if o.profile_name == "ab-overlap"]
    assert b_deploys and not any(judged[o.op].known_good for o in b_deploys)
    code, plan, err = cli(env, capsys, "rollback", "--dry-run", "--json")
    assert code == 0 and plan["profile"] == "baseline" and plan["op"] == base_op, (plan, err)
    assert all(o.op != plan["op"] for o in b_deploys)
    offered = [o.profile_name for o in journal.known_good()]
    assert "ab-overlap" not in offered and "overlap-on" not in offered, offered
    # the deploy that left the box on A ran its own gate (a PASS, or an INCONCLUSIVE accepted):
    # known-good, though rollback does not offer what runs now
    winner = [o for o in journal.operations() if o.profile_name == "ab-base"][-1]
    assert judged[winner.op].known_good, judged[winner.op].why
    scenario["winner_op"] = winner.op


def test_no_canary_deploys_are_never_known_good_and_rollback_offers_the_last_gated_one(
    env: OrchEnv, capsys: pytest.CaptureFixture[str], scenario: dict[str, str]
) -> None:
    base_op = _gated_baseline(scenario)
    assert "winner_op" in scenario, "runs after test_the_overlap_ab_is_rejected_by_bs_gate_..."
    # multi-stream-on first: the box is left on overlap-on, from which the next test's gated
    # deploy of ab-step4 runs the abort cascade (32 streams, ~2 s) where multi-stream-on would
    # call for the corruption suite (80 agentic sessions, ~15 s of the machine's cores)
    for profile in ("multi-stream-on", "overlap-on"):
        code, out, err = cli(env, capsys, "deploy", profile, "--yes", "--json", "--no-canary")
        assert code == 0 and out["status"] == "SUCCEEDED", err

    code, plan, err = cli(env, capsys, "rollback", "--dry-run", "--json")
    assert code == 0, err
    # a gated deploy (the baseline, or the A/B's gated winner: which one is the rank of their
    # verdicts, PASS above an accepted INCONCLUSIVE), never one of the blind deploys made since
    assert plan["known_good"] is True, plan
    assert plan["op"] in (base_op, scenario["winner_op"]), (plan, scenario)
    code, listing, err = cli(env, capsys, "journal", "--json", "--limit", "0")
    why = {
        e["id"]: (e["profile"], e["known_good"], e["known_good_why"])
        for e in listing["entries"]
        if e["kind"] == "deploy"
    }
    assert why[base_op][1] is True
    blind = [
        w for w in why.values() if w[0] in ("overlap-on", "multi-stream-on") and "no canary" in w[2]
    ]
    assert len(blind) == 2 and not any(w[1] for w in blind), why
    code, st, _ = cli(env, capsys, "status", "--json")
    assert st["deployed"]["profile"] == "overlap-on" and not st["deployed"]["known_good"]
    offered = [o.profile_name for o in Journal(env.target).known_good()]
    assert not {"ab-overlap", "overlap-on", "multi-stream-on"} & set(offered), offered


def test_b_whose_decode_dies_in_a_measured_block_fails_its_gate_and_is_never_offered_again(
    env: OrchEnv,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 39 items 1 and 6: B (buckets-step4) was deployed through its own gate earlier
    (known-good); in `ab ab-base ab-step4` B's decode is SIGKILLed as its measured block starts.
    The box ends on A, the experiment journals B's measured sweep as a failed gate, and
    `rollback` never offers B's commands again."""
    from dsv4ops.canary import Verdict
    from dsv4ops.journal.knowngood import commands_hash
    from dsv4ops.usecases import ab as AB
    from dsv4ops.usecases.ab_blocks import canary_runner as real_runner
    from testing.journal import failed_gates

    gated = ("--yes", "--json", "--canary-duration", "2", "--accept-inconclusive-canary")
    code, b_good, err = cli(env, capsys, "deploy", "ab-step4", *gated)
    assert code == 0 and b_good["status"] == "SUCCEEDED", err
    judged = Journal(env.target).judged()
    assert judged[b_good["op_id"]].known_good, judged[b_good["op_id"]].why

    measured: list[tuple[str, Verdict]] = []

    def decode_dies_in_bs_block(progress: Any) -> Any:
        real = real_runner(progress)

        def run(suite: str, dep: Any, *rest: Any) -> Any:
            if dep.profile_name == "ab-step4" and "ab-step4" not in dict(measured):  # B's first
                rec = json.loads((env.workdir / "run" / "decode.json").read_text())
                os.killpg(rec["pgid"], signal.SIGKILL)
            result = real(suite, dep, *rest)
            measured.append((dep.profile_name, result.verdict))
            return result

        return run

    monkeypatch.setattr(AB, "canary_runner", decode_dies_in_bs_block)
    # the winner's short final gate may not judge: --accept-inconclusive-canary
    ab_args = ["ab-base", "ab-step4", "--blocks", "4", "--levels", "56,60", *FAST]
    ab_args.append("--accept-inconclusive-canary")
    code, out, err = cli(env, capsys, "ab", *ab_args, "--json", "--report", str(tmp_path))
    assert ("ab-step4", Verdict.FAIL) in measured, (measured, err)
    assert code == 0 and out["winner"] == "A" and out["decided_by"] == "b_failed_gate", err
    assert out["box"].startswith("A (ab-base"), err
    journal = Journal(env.target)
    exp = journal.get(out["experiment"])
    assert exp is not None
    failed = [s for s in exp.steps if s.name == "gate sweep on B (measured)"]
    assert [s.phase for s in failed] == ["start", "failed"], exp.steps
    b_hash = commands_hash(journal.get(b_good["op_id"]))
    assert b_hash in failed_gates(journal.operations())
    # ... as data (journal/gates.py): B's measured sweep, FAIL, on B's commands and block deploy
    (gate,) = [g for g in exp.gates if g.source is GateSource.AB_BLOCK]
    assert gate.verdict is GateVerdict.FAIL and gate.failed and gate.commands_hash == b_hash
    assert gate.suite == "sweep" and gate.op in {b["deploy_op"] for b in out["blocks"]}
    offered = [o.profile_name for o in journal.known_good()]
    assert "ab-step4" not in offered, offered
    code, plan, err = cli(env, capsys, "rollback", "--dry-run", "--json")
    assert code in (0, 1) and plan.get("profile") != "ab-step4", (plan, err)
    code, listing, err = cli(env, capsys, "journal", "--json", "--limit", "0")
    (entry,) = [e for e in listing["entries"] if e["id"] == b_good["op_id"]]
    assert entry["known_good"] is False, entry
    (shown,) = [e for e in listing["entries"] if e["id"] == out["experiment"]]
    assert {"suite": "sweep", "verdict": "FAIL", "commands_hash": b_hash}.items() <= next(
        g for g in shown["gates"] if g["source"] == "ab-block"
    ).items(), shown["gates"]
    code, table, err = cli(env, capsys, "journal", "--limit", "0")  # what an operator reads
    assert code == 0 and table.count(f"sweep FAIL {b_hash[:8]}") == 1, table
