"""N:N export: a CoordinatedPolicy that keeps prefill and decode of one revision together,
validated against the vendored schema; none for 1:1 (sgl-project/rbg#307)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from dsv4ops.cli import main
from dsv4ops.errors import DsOpsError
from dsv4ops.export import rbg as R
from dsv4ops.export.coordination import coordination_problems
from dsv4ops.export.validate import check_documents
from dsv4ops.jsontypes import JSONObject
from dsv4ops.profiles import get_target, load_profile, render

REPO = Path(__file__).resolve().parents[2]


def _docs(replicas: int, **kw: object) -> list[JSONObject]:
    p = load_profile(REPO / "profiles" / "baseline.yaml")
    opts = R.ExportOptions(replicas=replicas, **kw)  # type: ignore[arg-type]
    return R.documents(p, render(p, get_target("box", REPO / "profiles" / "targets.yaml")), opts)


def _roles(group: JSONObject) -> dict[str, JSONObject]:
    return {r["name"]: r for r in group["spec"]["roles"]}


def test_one_to_one_exports_the_group_alone_with_no_skew_policy() -> None:
    (group,) = _docs(1)
    assert group["kind"] == "RoleBasedGroup"
    assert all("rolloutStrategy" not in r for r in group["spec"]["roles"])
    check_documents([group])


@pytest.mark.parametrize(("n", "skew"), [(2, "50%"), (3, "34%"), (4, "25%"), (8, "13%")])
def test_n_to_n_pairs_roll_one_pair_at_a_time(n: int, skew: str) -> None:
    policy, group = _docs(n, namespace="inference")
    check_documents([policy, group])
    assert (policy["kind"], group["kind"]) == ("CoordinatedPolicy", "RoleBasedGroup")
    # The controller reads the policy named like the group, in its namespace.
    assert policy["metadata"]["name"] == group["metadata"]["name"] == "baseline"
    assert policy["metadata"]["namespace"] == group["metadata"]["namespace"] == "inference"
    (rule,) = policy["spec"]["policies"]
    assert rule == {
        "roles": ["prefill", "decode"],
        "strategy": {"rollingUpdate": {"maxSkew": skew}},
    }
    roles = _roles(group)
    for name in ("prefill", "decode"):
        assert roles[name]["replicas"] == n
        assert roles[name]["rolloutStrategy"] == {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0},
        }
    assert "rolloutStrategy" not in roles["router"] and roles["router"]["replicas"] == 1


def test_the_skew_is_one_pair_never_two() -> None:
    for n in range(2, 65):  # --replicas allows 1 to 64
        share = int(R.pair_share(n).rstrip("%"))
        assert 1 <= n * share / 100 < 2, n  # one replica may lead (no stall), never two


def _refused(docs: list[JSONObject], says: str) -> None:
    with pytest.raises(DsOpsError) as info:
        check_documents(docs)
    assert says in str(info.value), str(info.value)


def test_the_checks_refuse_what_would_stall_or_drift_apart() -> None:
    policy, group = _docs(2)
    # 1:1 with a policy: the rbg#307 stall.
    (one,) = _docs(1)
    _refused([copy.deepcopy(policy), one], "sgl-project/rbg#307")
    # N:N without a policy: the roles could roll apart.
    _refused([group], "need one CoordinatedPolicy, got 0")
    # A policy the controller would not find (another name).
    other = copy.deepcopy(policy)
    other["metadata"]["name"] = "pd-policy"
    _refused([other, group], "named like the group")
    # A role that rolls everything at once.
    wide = copy.deepcopy(group)
    _roles(wide)["decode"]["rolloutStrategy"]["rollingUpdate"]["maxUnavailable"] = 2
    _refused([policy, wide], "role decode rollingUpdate")


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (lambda s: s.update(maxSkew=1), "is not of type 'string'"),  # the schema: percentages
        (lambda s: s.update(maxSkew="150%"), "does not match"),
        (lambda s: s.update(maxSkwe="50%"), "rollingUpdate.maxSkwe: not declared"),
    ],
)
def test_the_strategy_is_held_to_the_vendored_schema(
    edit: Callable[[JSONObject], None], says: str
) -> None:
    policy, group = _docs(2)
    edit(policy["spec"]["policies"][0]["strategy"]["rollingUpdate"])
    _refused([policy, group], says)
    assert coordination_problems(group, [policy])


def test_the_cli_prints_the_policy_then_the_group(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DSV4OPS_PROFILES_DIR", str(REPO / "profiles"))
    assert main(["export", "rbg", "baseline", "--replicas", "2"]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [d["kind"] for d in docs] == ["CoordinatedPolicy", "RoleBasedGroup"]
    check_documents(docs)
