"""A profile chooses its router (issue 43, item 1): `router.kind: sglang-router | smg`. The SMG
command is the same PD command under `python -m smg.launch_router`, parsed here by SMG's own
parser from the pinned wheel (the SMG venv); `profile validate` names the flags and policies one
router takes that the other lacks; the kind is recorded with the deployment and read back from
the journal in one place (`Deployment.router_kind`)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from dsv4ops.deployment import Deployment
from dsv4ops.errors import ProfileError
from dsv4ops.profiles import _smg_flag_table, load_profile, load_targets, render, validate_profile
from dsv4ops.profiles.routers import smg_python
from dsv4ops.routerkind import SMG_VERSION, RouterKind
from testing.profiles import child, smg_parse

REPO = Path(__file__).resolve().parents[2]
SMG = "router:\n  kind: smg\n"


def _router_args(d: Deployment) -> list[str]:
    return list(d.component("router").argv[3:])


def test_an_smg_profile_renders_the_pd_command_smg_parses(
    write: Callable[[str, str], Path],
) -> None:
    write("p", child(SMG + "  prefill_policy: cache_aware\n  decode_policy: least_load\n"))
    d = render(load_profile("p"), load_targets()["box"])
    router = d.component("router")
    assert router.argv[1:3] == ("-m", "smg.launch_router") and d.router_kind is RouterKind.SMG
    parsed = smg_parse(_router_args(d))
    assert "error" not in parsed, parsed
    assert parsed["pd_disaggregation"] is True
    assert parsed["prefill_urls"] == [["http://127.0.0.1:30000", 8998]]
    assert parsed["decode_urls"] == ["http://127.0.0.1:30001"]
    assert (parsed["policy"], parsed["prefill_policy"], parsed["decode_policy"]) == (
        "cache_aware",
        "cache_aware",
        "least_load",
    )
    assert (parsed["host"], parsed["port"]) == ("0.0.0.0", 8000)
    assert (parsed["prometheus_host"], parsed["prometheus_port"]) == ("0.0.0.0", 29000)
    assert parsed["health_check_endpoint"] == "/health"
    assert parsed["health_check_timeout_secs"] == 30
    assert (parsed["health_failure_threshold"], parsed["health_success_threshold"]) == (3, 2)


def test_the_same_profile_differs_only_in_the_router_module(
    write: Callable[[str, str], Path],
) -> None:
    write("p", child(SMG))
    box = load_targets()["box"]
    old, new = render(load_profile("base"), box), render(load_profile("p"), box)
    assert old.router_kind is RouterKind.SGLANG_ROUTER
    assert old.component("router").argv[2] == "sglang_router.launch_router"
    assert _router_args(old) == _router_args(new)
    assert old.component("decode") == new.component("decode")
    assert old.commands_hash != new.commands_hash  # a change of router is a deploy


def test_the_kind_comes_back_from_the_journal_record(write: Callable[[str, str], Path]) -> None:
    write("p", child(SMG))
    d = render(load_profile("p"), load_targets()["twin-local"])
    record = d.to_record()
    back = Deployment.from_record(record["profile"], record["components"])
    assert back.router_kind is RouterKind.SMG
    # recorded before the choice existed: the only router then
    legacy = dict(record["profile"])
    legacy["content"] = {k: v for k, v in dict(legacy["content"]).items() if k != "router"}
    assert Deployment.from_record(legacy, record["components"]).router_kind is (
        RouterKind.SGLANG_ROUTER
    )


@pytest.mark.parametrize(
    ("text", "says"),
    [
        # SMG-only flags and policies on the 0.3.2 profile ...
        (
            "router:\n  extra_args: ['--worker-wedge-secs', '30']\n",
            "--worker-wedge-secs is an option of SMG 1.13.0 that sglang-router 0.3.2 lacks",
        ),
        (
            "router:\n  policy: least_load\n",
            "'least_load' is a policy of SMG 1.13.0 that sglang-router 0.3.2 lacks",
        ),
        # ... and the reverse
        (
            SMG + "  extra_args: ['--mini-lb']\n",
            "--mini-lb is an option of sglang-router 0.3.2 that SMG 1.13.0 lacks",
        ),
        (SMG + "  extra_args: ['--policy', 'random']\n", "--policy is set by the profile"),
        (SMG + "  extra_args: ['--worker-wedgesecs']\n", "did you mean --worker-wedge-secs"),
        ("router:\n  kind: smg-router\n", "router.kind"),
    ],
)
def test_validate_names_what_the_chosen_router_lacks(
    write: Callable[[str, str], Path], text: str, says: str
) -> None:
    path = write("p", child(text))
    problems = validate_profile("p")
    assert len(problems) == 1, problems
    assert says in str(problems[0]) and f"{path}:" in str(problems[0])
    with pytest.raises(ProfileError):
        load_profile("p")


def test_smg_flags_validate_and_parse_behind_smg(write: Callable[[str, str], Path]) -> None:
    extra = "  policy: least_load\n  extra_args: ['--worker-wedge-secs', '30', '--log-json']\n"
    write("p", child(SMG + extra))
    assert validate_profile("p") == []
    parsed = smg_parse(_router_args(render(load_profile("p"), load_targets()["box"])))
    assert (parsed["policy"], parsed["worker_wedge_secs"], parsed["log_json"]) == (
        "least_load",
        30,
        True,
    )


def test_the_shipped_smg_profile_is_the_baseline_behind_smg() -> None:
    box = load_targets(REPO / "profiles" / "targets.yaml")["box"]
    base = render(load_profile(str(REPO / "profiles" / "baseline.yaml")), box)
    smg = render(load_profile(str(REPO / "profiles" / "smg.yaml")), box)
    assert (base.router_kind, smg.router_kind) == (RouterKind.SGLANG_ROUTER, RouterKind.SMG)
    assert [c.argv for c in base.components[:2]] == [c.argv for c in smg.components[:2]]


def test_the_flag_table_is_the_pinned_wheels_parser() -> None:
    """_smg_flag_table.py is what tools/extract_smg_flag_table.py prints from the SMG venv, and
    every pin of SMG names one version (Makefile, routerkind, the installed wheel)."""
    tool = REPO / "tools" / "extract_smg_flag_table.py"
    out = subprocess.run(
        [str(smg_python()), str(tool)], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    table: dict[str, object] = {}
    exec(compile(out, str(tool), "exec"), table)  # the generated module, before ruff formats it
    assert table["SMG_ROUTER_TABLE"] == _smg_flag_table.SMG_ROUTER_TABLE
    makefile = (REPO / "Makefile").read_text()
    pin = re.search(r"^SMG_PIN := (\S+)$", makefile, re.M)
    assert pin is not None
    assert pin.group(1) == SMG_VERSION == _smg_flag_table.SMG_VERSION == table["SMG_VERSION"]


def test_a_forced_probe_call_while_thinking_is_a_warning_behind_smg(
    write: Callable[[str, str], Path],
) -> None:
    thinking = "canary:\n  thinking: true\nprobe:\n  tool_call: required\n"
    write("p", child(SMG + thinking))
    warned = [w.code for w in load_profile("p").warnings]
    assert warned == ["smg-forced-tool-call-thinking"]
    write("q", child(thinking))  # sglang-router passes it to SGLang as is
    assert load_profile("q").warnings == ()
    write("r", child(SMG + thinking.replace("required", "auto")))
    assert load_profile("r").warnings == ()
