from __future__ import annotations

import shlex

import pytest

from dsv4ops.deployment import Component, Deployment
from dsv4ops.errors import DeployError
from dsv4ops.orchestrate import plan as P
from dsv4ops.orchestrate.pd import OVERRIDE_FLAG, restart_scope
from testing.orchestrate import make_deployment


def test_deploy_plan_is_the_safe_order() -> None:
    steps = P.deploy_plan(make_deployment("baseline"), canary=True)
    titles = [s.title for s in steps]
    order = [
        "stop router",
        "stop decode",
        "stop prefill",
        "start prefill",
        "start decode",
        "start router",
    ]
    idx = [titles.index(t) for t in order]
    assert idx == sorted(idx)
    assert (
        titles.index("start router")
        < next(i for i, t in enumerate(titles) if "probe" in t)
        < titles.index("canary: smoke + the suites the change calls for")
    )
    assert (
        titles[0].startswith("preflight")
        and titles[1].startswith("take")
        and titles[2].startswith("journal")
    )
    waits = {s.component: s.checks for s in steps if s.action == P.WAIT}
    # HTTP /health after warmup; never the bootstrap server (200 before the model loads)
    assert waits["prefill"] == ("http://127.0.0.1:30000/health",)
    assert waits["router"] == ("http://127.0.0.1:8000/readiness",)  # not the liveness /health


def test_the_plan_says_what_worker_readiness_proves() -> None:
    """Issue 10: the printed plan (dry run) says readiness is the HTTP server after warmup, not
    the bootstrap server, whose /health is 200 before the model loads."""
    steps = P.deploy_plan(make_deployment("baseline"), canary=True)
    lines = P.render_plan(steps)
    for name in ("prefill", "decode"):
        i = next(
            i
            for i, line in enumerate(lines)
            if line.endswith(f"wait until {name} is ready (/health 200)")
        )
        assert lines[i + 1].strip().startswith("GET ") and lines[i + 1].endswith("/health -> 200")
        assert "after warmup" in lines[i + 2] and "not the bootstrap server" in lines[i + 2]
    notes = {s["component"]: s["note"] for s in P.plan_json(steps) if s["action"] == P.WAIT}
    decode_note = notes["decode"]
    assert (
        notes["router"] is None
        and isinstance(decode_note, str)
        and "before the model loads" in decode_note
    )


def test_dry_run_shows_exact_commands_quoted_and_secrets_redacted() -> None:
    d = make_deployment("baseline")
    evil = Component(
        "decode",
        ("python", "-m", "x", "--served-model-name", "a; rm -rf / $(id)", "--api-key", "s3cret"),
        {"HF_TOKEN": "hf_x", "MODE": "a b"},
        "127.0.0.1",
        30001,
        (30001,),
    )
    d = Deployment("evil", (d.component("prefill"), evil, d.component("router")))
    lines = "\n".join(P.render_plan(P.deploy_plan(d)))
    cmd = next(line for line in lines.splitlines() if "--served-model-name" in line).strip()[2:]
    argv = shlex.split(cmd)
    assert "a; rm -rf / $(id)" in argv  # one argument, not code
    assert "s3cret" not in lines and "hf_x" not in lines and "HF_TOKEN='***'" in lines
    assert "MODE='a b'" in lines


def test_pair_rule_upgrades_a_lone_worker_with_one_line_why() -> None:
    scope = restart_scope(["decode"])
    assert scope.components == ("prefill", "decode", "router") and not scope.partial
    assert scope.note is not None  # an upgraded restart says why
    assert (
        "bootstrap" in scope.note
        and "restarting the pair instead" in scope.note
        and "\n" not in scope.note
    )
    assert restart_scope(["prefill"]).components == ("prefill", "decode", "router")


def test_override_allows_a_lone_decode_loudly() -> None:
    scope = restart_scope(["decode"], allow_partial_pair=True)
    assert scope.components == ("decode", "router") and scope.partial
    assert scope.note is not None and OVERRIDE_FLAG in scope.note


def test_router_alone_is_allowed_and_full_by_default() -> None:
    assert restart_scope(["router"]).components == ("router",)
    assert restart_scope(None).components == ("prefill", "decode", "router")
    with pytest.raises(DeployError, match="unknown component"):
        restart_scope(["gpu"])


def test_partial_plan_never_stops_the_kept_worker() -> None:
    titles = [s.title for s in P.restart_steps(make_deployment("b"), ("decode", "router"))]
    assert "stop prefill" not in titles and "start prefill" not in titles
    assert titles.index("stop router") < titles.index("stop decode") < titles.index("start decode")


def test_deployment_needs_all_three_components() -> None:
    d = make_deployment("b")
    with pytest.raises(DeployError, match="exactly prefill, decode, router"):
        Deployment("x", (d.component("prefill"), d.component("decode")))
