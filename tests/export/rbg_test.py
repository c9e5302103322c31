"""`dsv4ops export rbg`: every shipped profile as a RoleBasedGroup that validates offline, each
container running exactly the box render's argv (plus the listed pod adaptations)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from dsv4ops import _yaml
from dsv4ops.export import rbg as R
from dsv4ops.export.declared import pruned_fields
from dsv4ops.export.validate import check, pd_problems, schema
from dsv4ops.jsontypes import JSONObject
from dsv4ops.profiles import get_target, list_profiles, load_profile, render
from dsv4ops.routerkind import RouterKind
from dsv4ops.sglang_paths import plugin_env
from testing.profiles import TRITON_MOE_PATH_YAML

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p.stem for p in list_profiles(REPO / "profiles"))
# An SMG export names its image (none is pinned: dsv4ops/routerkind.py); the tests name this one.
SMG_IMAGE = "registry.example/smg:1.13.0"
VENDORED_CRD = REPO.parent / "shared" / "vendor" / "rbg" / "workloads.x-k8s.io_rolebasedgroups.yaml"


def _cli(
    *args: str, cwd: Path = REPO, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dsv4ops", "export", "rbg", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def _opts(name: str) -> list[str]:
    """The options a shipped profile's export needs: an smg profile names its router image."""
    return ["--router-image", SMG_IMAGE] if name == "smg" else []


def _containers(manifest: JSONObject) -> dict[str, JSONObject]:
    return {
        r["name"]: r["standalonePattern"]["template"]["spec"]["containers"][0]
        for r in manifest["spec"]["roles"]
    }


def _strip_pd_targets(argv: list[str]) -> list[str]:
    out, i = [], 0
    while i < len(argv):
        if argv[i] == "--prefill":
            i += 3
        elif argv[i] == "--decode":
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_profile_exports_a_manifest_that_validates(name: str) -> None:
    proc = _cli(name, *_opts(name))
    assert proc.returncode == 0, proc.stderr
    manifest = _yaml.safe_load(proc.stdout)
    assert manifest["apiVersion"] == "workloads.x-k8s.io/v1alpha2"
    assert list(Draft202012Validator(schema()).iter_errors(manifest)) == []
    assert pruned_fields(manifest, schema()) == []
    roles = {r["name"]: r for r in manifest["spec"]["roles"]}
    # the safe start order, as RBG dependencies: prefill, then decode, then the router
    assert "dependencies" not in roles["prefill"]
    assert roles["decode"]["dependencies"] == ["prefill"]
    assert sorted(roles["router"]["dependencies"]) == ["decode", "prefill"]


@pytest.mark.parametrize("name", SHIPPED)
def test_each_container_runs_the_box_render_with_only_the_listed_adaptations(name: str) -> None:
    p = load_profile(name)
    box = render(p, get_target("box"))
    image = SMG_IMAGE if box.router_kind is RouterKind.SMG else None
    manifest = R.build_manifest(p, box, R.ExportOptions(router_image=image))
    check(manifest)
    got = _containers(manifest)
    assert len(R.adaptations()) == 4  # the list the docs and this test hold the export to
    for comp in ("prefill", "decode"):
        want = list(box.component(comp).argv)
        want[0] = "python3"
        if "--base-gpu-id" in want:
            want[want.index("--base-gpu-id") + 1] = "0"
        assert got[comp]["command"] == want, comp
        # plus what loads a pinned kernel package from the pod's copy, as deploy adds on the box
        loads = {}
        if p.kernel_package:
            name, _, version = p.kernel_package.partition("@")
            loads = plugin_env(name, f"{R.KERNELS_MOUNT}/{name}/{version}")
        assert {e["name"]: e["value"] for e in got[comp].get("env", [])} == {
            **loads,
            **dict(box.component(comp).env),
        }
        assert got[comp]["resources"]["limits"]["nvidia.com/gpu"] == int(
            want[want.index("--tp-size") + 1]
        )
        assert got[comp]["readinessProbe"]["httpGet"] == {
            "path": "/health",
            "port": box.component(comp).port,
        }
    router_box = list(box.component("router").argv)
    router_box[0] = "python3"
    assert _strip_pd_targets(got["router"]["command"]) == _strip_pd_targets(router_box)
    cmd = got["router"]["command"]
    boot = got["prefill"]["command"][
        got["prefill"]["command"].index("--disaggregation-bootstrap-port") + 1
    ]
    group = manifest["metadata"]["name"]
    i = cmd.index("--prefill")
    assert cmd[i + 1 : i + 3] == [
        f"http://{group}-prefill-0.s-{group}-prefill:{box.component('prefill').port}",
        boot,
    ]
    assert {p["name"]: p["containerPort"] for p in got["prefill"]["ports"]}["bootstrap"] == int(
        boot
    )


def test_n_to_n_replicas_point_the_router_at_every_pair() -> None:
    p = load_profile("baseline")
    manifest = R.build_manifest(p, render(p, get_target("box")), R.ExportOptions(replicas=3))
    check(manifest)
    cmd = _containers(manifest)["router"]["command"]
    assert cmd.count("--prefill") == 3 and cmd.count("--decode") == 3
    assert {r["name"]: r["replicas"] for r in manifest["spec"]["roles"]} == {
        "prefill": 3,
        "decode": 3,
        "router": 1,
    }


def test_secrets_become_secret_refs_and_never_enter_the_manifest(
    pdir: Path, write: Callable[[str, str], Path]
) -> None:  # noqa: ANN001
    write(
        "withsecret",
        "schema_version: 1\nextends: base\nprefill:\n  env:\n    HF_TOKEN: hf_supersecret\n"
        "router:\n  api_key: {env: ROUTER_KEY}\n",
    )
    proc = _cli("withsecret", cwd=pdir.parent, env={"DSV4OPS_PROFILES_DIR": str(pdir)})
    assert proc.returncode == 0, proc.stderr
    assert "hf_supersecret" not in proc.stdout + proc.stderr
    assert "sk-verysecret" not in proc.stdout + proc.stderr
    manifest = _yaml.safe_load(proc.stdout)
    c = _containers(manifest)
    env = {e["name"]: e for e in c["prefill"]["env"]}
    assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"] == {
        "name": "withsecret-env",
        "key": "HF_TOKEN",
    }
    cmd = c["router"]["command"]
    assert cmd[cmd.index("--api-key") + 1] == "$(DSV4_ARG_API_KEY)"
    assert {e["name"] for e in c["router"]["env"]} == {"DSV4_ARG_API_KEY"}


def test_a_kernel_package_lands_in_a_volume_sglang_is_pointed_at(
    pdir: Path, write: Callable[[str, str], Path]
) -> None:  # noqa: ANN001
    write(
        "withkernels",
        "schema_version: 1\nextends: base\nkernel_package: dsv4-decode-kernels@0.2.0\n"
        + TRITON_MOE_PATH_YAML,
    )
    os.environ["DSV4OPS_PROFILES_DIR"] = str(pdir)
    try:
        p = load_profile("withkernels")
        box = render(p, get_target("box"))
    finally:
        del os.environ["DSV4OPS_PROFILES_DIR"]
    manifest = R.build_manifest(p, box, R.ExportOptions(kernel_image="registry/k:0.2.0"))
    check(manifest)
    spec = manifest["spec"]["roles"][1]["standalonePattern"]["template"]["spec"]
    assert spec["initContainers"][0]["image"] == "registry/k:0.2.0"
    mount = spec["containers"][0]["volumeMounts"][0]["mountPath"]
    assert mount == "/opt/dsv4ops/kernels/dsv4-decode-kernels/0.2.0"
    env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
    assert env["SGLANG_MOE_CONFIG_DIR"] == mount and env["PYTHONPATH"] == f"{mount}/site"
    assert env["SGLANG_PLUGINS"] == "dsv4_decode_kernels" and env["SGLANG_DSV4_FP4_DEQUANT"] == "1"


def test_a_broken_profile_is_refused_with_file_and_line(
    pdir: Path, write: Callable[[str, str], Path]
) -> None:  # noqa: ANN001
    path = write("broken", "schema_version: 1\nextends: base\ndecode:\n  tp_sizee: 4\n")
    proc = _cli("broken", cwd=pdir.parent, env={"DSV4OPS_PROFILES_DIR": str(pdir)})
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"{path}:4" in proc.stderr and "tp_sizee" in proc.stderr, proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--gpus-per-node", "2"], "--gpus-per-node"),
        (["--replicas", "0"], "--replicas"),
        (["--name", "Not_DNS"], "--name"),
        # baseline has no kernel package: the image would go nowhere (it was ignored)
        (["--kernel-image", "registry/k:0.2.0"], "--kernel-image: the profile has no kernel"),
    ],
)
def test_an_impossible_option_is_refused_naming_it(args: list[str], named: str) -> None:
    proc = _cli("baseline", *args)
    assert proc.returncode == 1 and named in proc.stderr and proc.stdout == "", proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_checks_catch_what_the_cluster_would_reject_or_drop() -> None:
    p = load_profile("baseline")
    good = R.build_manifest(p, render(p, get_target("box")), R.ExportOptions())
    bad = copy.deepcopy(good)
    bad["spec"]["roles"][0]["replicas"] = "one"
    assert list(Draft202012Validator(schema()).iter_errors(bad))
    typo = copy.deepcopy(good)
    typo["spec"]["roles"][0]["dependsOn"] = ["x"]
    assert pruned_fields(typo, schema()) == ["spec.roles.0.dependsOn"]
    skew = copy.deepcopy(good)
    c = skew["spec"]["roles"][1]["standalonePattern"]["template"]["spec"]["containers"][0][
        "command"
    ]
    c[c.index("--page-size") + 1] = "64"
    assert any("--page-size" in x for x in pd_problems(skew))
    with pytest.raises(Exception, match="page-size"):
        check(skew)


@pytest.mark.skipif(
    not VENDORED_CRD.is_file(), reason="the shared CRD copy is not beside this checkout"
)
def test_the_vendored_schemas_are_the_crds_unchanged() -> None:
    import yaml  # the CRD is 2.8 MB: above the profile loader's bounds, read it plainly

    # libyaml's parser with the same safe constructors (8 s -> under 1 s); the pure-Python one
    # only where PyYAML was built without libyaml
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    crd = yaml.load(VENDORED_CRD.read_text(), Loader=loader)
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1alpha2")
    want = json.dumps(version["schema"]["openAPIV3Schema"], separators=(",", ":"), sort_keys=True)
    got = (REPO / "dsv4ops" / "export" / "vendor" / "rbg_v1alpha2.schema.json").read_text()
    assert got == want
    # and the coordination strategy the N:N CoordinatedPolicy is checked against (v1alpha1's)
    v1 = next(v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1")
    spec = v1["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    strategy = spec["coordination"]["items"]["properties"]["strategy"]
    path = REPO / "dsv4ops" / "export" / "vendor" / "rbg_v1alpha1_coordination_strategy.schema.json"
    assert path.read_text() == json.dumps(strategy, separators=(",", ":"), sort_keys=True)
    assert (REPO / "dsv4ops" / "export" / "vendor" / "LICENSE").read_text() == (
        VENDORED_CRD.parent / "LICENSE"
    ).read_text()


def test_the_router_container_runs_the_profiles_router_from_its_image() -> None:
    """sglang-router 0.3.2 from its pinned image; SMG's command (`python3 -m smg.launch_router`,
    its own flags) from the image the operator names; none named: refused, nothing printed."""
    base = _containers(_yaml.safe_load(_cli("baseline").stdout))["router"]
    assert base["image"] == "lmsysorg/sglang-router:v0.3.2"
    assert base["command"][:3] == ["python3", "-m", "sglang_router.launch_router"]

    smg = _containers(_yaml.safe_load(_cli("smg", "--router-image", SMG_IMAGE).stdout))
    assert smg["router"]["image"] == SMG_IMAGE
    assert smg["router"]["command"][:4] == [
        "python3",
        "-m",
        "smg.launch_router",
        "--pd-disaggregation",
    ]
    assert smg["prefill"]["image"] == R.DEFAULT_IMAGE  # the servers are the baseline's

    refused = _cli("smg")
    assert refused.returncode == 1 and refused.stdout == ""
    assert "--router-image is required for a router.kind: smg profile" in refused.stderr
    assert "nothing was exported" in refused.stderr and "Traceback" not in refused.stderr
