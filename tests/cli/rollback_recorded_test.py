"""A journal whose recorded profile section was edited by hand (issue 42 item 2): the recorded
`canary`, `probe`, `model` and `router` sections are read back through their declarations, and a value that does
not fit is named (operation, key, value) with the way back, never replaced by a default. The
journal stays readable; only the command that needs the section refuses, before it changes
anything."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsv4ops.cli import main
from dsv4ops.journal.records import Kind, Status
from dsv4ops.journal.store import Journal
from dsv4ops.routerkind import RouterKind
from dsv4ops.settings import CanaryThresholds, ProbeSettings
from dsv4ops.timings import STOP_GRACE_S
from testing.journal import gate_step
from testing.orchestrate import OrchEnv, make_deployment, with_recorded

CONTENT = {
    "model": {"path": "/models/dsv4", "served_name": "deepseek-v4-flash"},
    "router": {"kind": "sglang-router"},
    "canary": {"stall_s": 1.5, "thinking": False},
    "probe": {"tool_call": "auto"},
}


def _known_good(env: OrchEnv) -> str:
    d = with_recorded(make_deployment("baseline"), content=CONTENT)
    j = Journal(env.target)
    op = j.begin(Kind.DEPLOY, profile=d.profile_record(), components=d.component_records())
    j.transition(op, Status.RUNNING)
    gate_step(j, op)
    j.transition(op, Status.SUCCEEDED, running=op, known_good=True)
    return op


def _edit_begin(record: Path, op: str, section: str, key: str, value: object) -> None:
    """Set profile.content.<section>.<key> in the begin record of `op`, as an editor would."""
    lines = record.read_text().splitlines(keepends=True)
    for i, line in enumerate(lines):
        rec = json.loads(line)
        if rec.get("type") == "begin" and rec.get("op") == op:
            rec["profile"]["content"][section][key] = value
            lines[i] = json.dumps(rec, separators=(",", ":")) + "\n"
    record.write_text("".join(lines))


def _record(env: OrchEnv) -> Path:
    """The journal file the operations above were written to (this machine's: nothing was
    deployed through the agent)."""
    return env.state_dir / "journal" / f"{env.target}.jsonl"


@pytest.mark.parametrize(
    ("section", "key", "value", "shown"),
    [
        ("canary", "stall_s", "fast", "canary.stall_s = 'fast', which is not a number"),
        ("canary", "thinking", "yes", "canary.thinking = 'yes', which is not true or false"),
        ("probe", "tool_call", "forced", "probe.tool_call = 'forced', which is not one of"),
        ("router", "kind", "nginx", "router.kind = 'nginx', which is not one of sglang-router"),
        ("model", "served_name", 7, "model.served_name = 7, which is not a string"),
    ],
)
def test_a_hand_edited_recorded_setting_stops_the_rollback_naming_op_key_and_value(
    env: OrchEnv,
    capsys: pytest.CaptureFixture[str],
    section: str,
    key: str,
    value: object,
    shown: str,
) -> None:
    op = _known_good(env)
    _edit_begin(_record(env), op, section, key, value)
    before = Journal(env.target).operations()

    code = main(["rollback", "--to", op, "--yes", "--target", env.target])
    err = capsys.readouterr().err
    assert code == 1, err
    assert f"journal operation {op} records {shown}" in err, err
    assert "will not guess" in err and "Traceback" not in err
    assert f"mend `profile.content.{section}` of the begin record of {op}" in err
    assert "dsv4ops deploy baseline --target TARGET" in err  # or record it afresh
    assert Journal(env.target).operations() == before and not (env.workdir / "run").exists()
    # the journal itself stays readable: the listing shows the operation
    assert main(["journal", "--json", "--limit", "0", "--target", env.target]) == 0
    assert op in [e["id"] for e in json.loads(capsys.readouterr().out)["entries"]]


def test_a_mended_record_reads_again_and_an_older_one_reads_at_the_defaults(env: OrchEnv) -> None:
    op = _known_good(env)
    record = _record(env)
    _edit_begin(record, op, "canary", "stall_s", "fast")
    _edit_begin(record, op, "canary", "stall_s", 2.5)  # mended by hand
    # a release before 15ec807 redacted thresholds whose names mention tokens: not known, not bad
    _edit_begin(record, op, "canary", "first_token_deadline_s", "***")
    d = Journal(env.target).get(op).deployment()
    assert d.canary == CanaryThresholds(stall_s=2.5)
    assert d.probe == ProbeSettings(tool_call="auto")
    assert (d.model_name, d.router_kind) == ("deepseek-v4-flash", RouterKind.SGLANG_ROUTER)
    d.check_recorded()


def _edit_component(record: Path, op: str, name: str, key: str, value: object) -> None:
    """Set `key` of component `name` in the begin record of `op`, as an editor would."""
    lines = record.read_text().splitlines(keepends=True)
    for i, line in enumerate(lines):
        rec = json.loads(line)
        if rec.get("type") == "begin" and rec.get("op") == op:
            for comp in rec["components"]:
                if comp["name"] == name:
                    comp[key] = value
            lines[i] = json.dumps(rec, separators=(",", ":")) + "\n"
    record.write_text("".join(lines))


DAMAGED_COMPONENT_FIELDS = [
    ("decode", "stop_grace_s", "30s", "'30s', which is not a number of seconds above 0"),
    ("prefill", "stop_grace_s", -5, "-5, which is not a number of seconds above 0"),
    ("router", "stop_grace_s", 10_000, "10000, which is not a number of seconds above 0"),
    ("decode", "port", "8100", "'8100', which is not a port number"),
    ("router", "key_from", "ROUTER_KEY", "'ROUTER_KEY', which is not where the key lives"),
]


@pytest.mark.parametrize("verb", [["stop", "--yes"], ["rollback", "--to", "{op}", "--yes"]])
@pytest.mark.parametrize(("name", "key", "value", "shown"), DAMAGED_COMPONENT_FIELDS)
def test_a_hand_edited_component_field_is_named_and_nothing_is_stopped(
    env: OrchEnv,
    capsys: pytest.CaptureFixture[str],
    verb: list[str],
    name: str,
    key: str,
    value: object,
    shown: str,
) -> None:
    """A recorded component's field that fits no release's record (a stop grace of '30s') is
    refused naming the operation, the component and the key, never stopped by a guessed
    default grace: exit 1, one clear line, the journal unchanged."""
    op = _known_good(env)
    _edit_component(_record(env), op, name, key, value)
    before = Journal(env.target).operations()

    code = main([*(v.format(op=op) for v in verb), "--target", env.target])
    err = capsys.readouterr().err
    assert code == 1, err
    assert f"journal operation {op} records components.{name}.{key} = {shown}" in err, err
    assert "Traceback" not in err and "internal error" not in err
    assert f"mend `{key}` of the {name} in `components` of the begin record of {op}" in err
    assert Journal(env.target).operations() == before


@pytest.mark.parametrize(("name", "key", "value", "shown"), DAMAGED_COMPONENT_FIELDS)
def test_status_names_a_damaged_component_field_as_a_finding_and_shows_the_rest(
    env: OrchEnv,
    capsys: pytest.CaptureFixture[str],
    name: str,
    key: str,
    value: object,
    shown: str,
) -> None:
    """Status is read-only and what an operator runs first: it does not refuse. It names the
    damaged field in the refusal's words (operation, key, value, the way back) as a finding,
    shows what it observes, and exits 2 (a problem found), never HEALTHY. A field it needs (a
    port) also says what it could not show; one it does not need (a grace, a key) hides
    nothing."""
    op = _known_good(env)
    _edit_component(_record(env), op, name, key, value)
    before = Journal(env.target).operations()

    code = main(["status", "--target", env.target])
    out, err = capsys.readouterr()
    assert code == 2, out + err
    lines = out.splitlines()
    assert lines[0] == f"target {env.target}: NOT HEALTHY", out
    assert any(ln.startswith("deployed: baseline @ ") and op in ln for ln in lines), out
    assert [
        ln.split()[0] for ln in lines if ln.split()[:1] in (["prefill"], ["decode"], ["router"])
    ] == [
        "prefill",
        "decode",
        "router",
    ], out  # the table of what is observed
    message = f"journal operation {op} records components.{name}.{key} = {shown}"
    assert f"damaged record: {message}" in out, out
    fix = f"mend `{key}` of the {name} in `components` of the begin record of {op}"
    assert f"  hint: {fix}" in out and "Traceback" not in out + err and "error:" not in err
    needed = key == "port"
    assert ("not shown: " in out) is needed, out
    if needed:
        assert f"(components.{name}.port is damaged)" in out

    assert main(["status", "--json", "--target", env.target]) == 2
    report = json.loads(capsys.readouterr().out)
    assert (report["status"], report["exit"], report["healthy"]) == ("NOT HEALTHY", 2, False)
    (damage,) = report["recorded_damage"]
    assert (damage["op"], damage["key"], damage["value"]) == (op, f"components.{name}.{key}", value)
    assert damage["message"].startswith(message) and damage["fix"].startswith(fix)
    assert report["deployed"]["op"] == op and len(report["components"]) == 3
    assert bool(report["not_shown"]) is needed
    if not needed:
        assert report["pd_timeouts"] is not None  # what it does not need hides nothing
    assert Journal(env.target).operations() == before  # read-only


def test_status_names_damaged_recorded_flags_and_sections_it_does_not_read(
    env: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    """Status judges no buckets and sends no probe: a bucket list of 'abc' or a damaged
    canary threshold hides nothing it shows, and each is named (all of them, not the first)."""
    op = _known_good(env)
    _edit_flags(_record(env), op, "decode_buckets", "abc")
    _edit_begin(_record(env), op, "canary", "stall_s", "fast")

    assert main(["status", "--json", "--target", env.target]) == 2
    report = json.loads(capsys.readouterr().out)
    keys = [(d["key"], d["value"]) for d in report["recorded_damage"]]
    assert keys == [("canary.stall_s", "fast"), ("flags.decode_buckets", "abc")], keys
    assert report["not_shown"] == [] and report["status"] == "NOT HEALTHY"
    assert report["recorded_damage"][1]["fix"].startswith(
        f"mend `profile.flags` of the begin record of {op}"
    )
    assert main(["status", "--target", env.target]) == 2
    out = capsys.readouterr().out
    assert f"damaged record: journal operation {op} records flags.decode_buckets = 'abc'" in out
    # the mutating verbs keep refusing on it
    assert main(["rollback", "--to", op, "--yes", "--target", env.target]) == 1
    assert "canary.stall_s = 'fast'" in capsys.readouterr().err


def test_a_component_recorded_before_its_grace_stops_with_the_default(env: OrchEnv) -> None:
    op = _known_good(env)
    record = _record(env)
    _edit_component(record, op, "decode", "stop_grace_s", 12)
    lines = record.read_text().splitlines(keepends=True)
    for i, line in enumerate(lines):  # a release before the setting recorded none
        rec = json.loads(line)
        if rec.get("type") == "begin" and rec.get("op") == op:
            del rec["components"][0]["stop_grace_s"]
            lines[i] = json.dumps(rec, separators=(",", ":")) + "\n"
    record.write_text("".join(lines))
    d = Journal(env.target).get(op).deployment()
    assert d.component("decode").stop_grace_s == 12.0
    assert d.component("prefill").stop_grace_s == STOP_GRACE_S


def _edit_flags(record: Path, op: str, key: str, value: object) -> None:
    lines = record.read_text().splitlines(keepends=True)
    for i, line in enumerate(lines):
        rec = json.loads(line)
        if rec.get("type") == "begin" and rec.get("op") == op:
            rec["profile"]["flags"][key] = value
            lines[i] = json.dumps(rec, separators=(",", ":")) + "\n"
    record.write_text("".join(lines))


@pytest.mark.parametrize(
    ("key", "value", "shown"),
    [
        ("decode_buckets", "abc", "flags.decode_buckets = 'abc', which is not a list of integers"),
        ("decode_buckets", [8, "x"], "flags.decode_buckets = [8, 'x'], which is not a list of"),
        ("overlap_schedule", "on", "flags.overlap_schedule = 'on', which is not true or false"),
    ],
)
def test_hand_edited_recorded_flags_are_named_by_the_canary_never_a_traceback(
    env: OrchEnv, capsys: pytest.CaptureFixture[str], key: str, value: object, shown: str
) -> None:
    """The recorded flags are read through their declarations too: the canary judging the
    deployed profile by its recorded buckets refuses a bucket list of 'abc' naming it (it
    crashed with a ValueError), before any load is sent."""
    op = _known_good(env)
    _edit_flags(_record(env), op, key, value)
    before = Journal(env.target).operations()

    code = main(["canary", "--suite", "smoke", "--target", env.target])
    err = capsys.readouterr().err
    assert code == 1, err
    assert f"journal operation {op} records {shown}" in err, err
    assert "Traceback" not in err and "internal error" not in err
    assert f"mend `profile.flags` of the begin record of {op}" in err
    assert Journal(env.target).operations() == before


@pytest.mark.parametrize(
    ("verb", "name", "key", "value", "shown"),
    [
        (
            ["canary", "--suite", "smoke"],
            "decode",
            "argv",
            ["--decode-log-interval", "fast"],
            "components.decode.argv --decode-log-interval = 'fast', which is not a positive",
        ),
        (
            ["status"],
            "prefill",
            "env",
            {"SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT": "5m"},
            "components.prefill.env SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT = '5m', which is not",
        ),
    ],
)
def test_a_hand_edited_log_interval_or_pd_timeout_is_named_never_read_as_sglang_s_default(
    env: OrchEnv,
    capsys: pytest.CaptureFixture[str],
    verb: list[str],
    name: str,
    key: str,
    value: object,
    shown: str,
) -> None:
    """The canary's freeze window (the decode's --decode-log-interval) and status's PD
    timeouts come from the recorded command line and env: a value SGLang would not start with
    was read as SGLang's default without a word; now it is named."""
    op = _known_good(env)
    comp = next(c for c in Journal(env.target).get(op).components if c["name"] == name)
    edited = [*comp["argv"], *value] if isinstance(value, list) else {**comp["env"], **value}  # type: ignore[dict-item]
    _edit_component(_record(env), op, name, key, edited)
    before = Journal(env.target).operations()

    code = main([*verb, "--target", env.target])
    out, err = capsys.readouterr()
    if verb == ["status"]:  # read-only: the finding, and what it could not show, then exit 2
        assert code == 2 and "error:" not in err, out + err
        assert f"damaged record: journal operation {op} records {shown}" in out, out
        assert "not shown: the PD timeouts (components.prefill.env" in out, out
        err = out
    else:
        assert code == 1, err
        assert f"journal operation {op} records {shown}" in err, err
    assert "Traceback" not in err and "internal error" not in err
    assert f"mend `{key}` of the {name} in `components` of the begin record of {op}" in err
    assert Journal(env.target).operations() == before
