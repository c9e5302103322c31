"""`transport: endpoint` targets in targets.yaml: what loads, and each mistake named by file:line."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsv4ops.errors import ProfileError
from dsv4ops.profiles import load_targets, render
from dsv4ops.profiles.target_rules import check_against_target

HEAD = "schema_version: 1\ntargets:\n  cluster:\n    transport: endpoint\n"


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "targets.yaml"
    path.write_text(HEAD + body)
    return path


def _err(tmp_path: Path, body: str) -> tuple[ProfileError, Path]:
    path = _write(tmp_path, body)
    with pytest.raises(ProfileError) as info:
        load_targets(path)
    return info.value, path


def test_an_endpoint_target_loads_its_urls_and_runs_nothing(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "    router_url: http://router.inference:8000/\n"
        "    metrics:\n"
        "      prefill: [http://p-0.s-p:30000, http://p-1.s-p:30000]\n"
        "      decode: [https://d-0.s-d:30001]\n"
        "      router: http://router.inference:29000\n"
        "    profile: baseline\n    namespace: inference\n    replicas: 2\n"
        "    description: the RBG cluster\n",
    )
    t = load_targets(path)["cluster"]
    assert t.transport == "endpoint" and t.ssh is None and t.gpus == ()
    e = t.endpoint
    assert e is not None
    assert e.router_url == "http://router.inference:8000"  # the trailing '/' is dropped
    assert e.prefill == ("http://p-0.s-p:30000", "http://p-1.s-p:30000")
    assert e.decode == ("https://d-0.s-d:30001",)
    assert e.router_metrics == "http://router.inference:29000"
    assert (e.profile, e.namespace, e.replicas) == ("baseline", "inference", 2)
    assert t.description == "the RBG cluster"


def test_rendering_or_checking_a_profile_for_an_endpoint_target_is_refused(
    tmp_path: Path, pdir: Path
) -> None:
    from dsv4ops.profiles import load_profile

    t = load_targets(_write(tmp_path, "    router_url: http://r:8000\n"))["cluster"]
    with pytest.raises(ProfileError, match="is an endpoint .* nothing renders for it"):
        render(load_profile("base"), t)
    # `profile validate --target cluster`: one problem saying why, not "GPU(s) not on target".
    with pytest.raises(ProfileError, match="its GPUs and ports are the cluster's"):
        check_against_target(load_profile("base"), t)


def test_a_missing_router_url_names_the_target(tmp_path: Path) -> None:
    err, path = _err(tmp_path, "    description: no url\n")
    assert str(err).startswith(f"{path}:3: targets.cluster.router_url: missing required key")


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("router:8000", "expected http://host[:port]"),
        ("ftp://router:8000", "expected http://host[:port]"),
        ("http://router:99999", "not a URL"),
        ("http://router:8000/v1", "without a path"),
        ("http://ops:s3cret@router:8000", "with credentials"),
        ("http://router :8000", "invisible or space character"),
    ],
)
def test_a_bad_router_url_names_file_line_and_key(tmp_path: Path, url: str, says: str) -> None:
    err, path = _err(tmp_path, f"    description: x\n    router_url: '{url}'\n")
    assert str(err).startswith(f"{path}:6: targets.cluster.router_url: "), str(err)
    assert says in str(err)
    assert "s3cret" not in str(err)  # a password in a URL is never echoed


def test_a_bad_metrics_url_names_its_list(tmp_path: Path) -> None:
    err, path = _err(
        tmp_path,
        "    router_url: http://r:8000\n    metrics:\n"
        "      decode:\n        - http://d:30001/metrics\n",
    )
    assert f"{path}:" in str(err) and "targets.cluster.metrics.decode[0]" in str(err)
    assert "without a path" in str(err) and err.hint == "/metrics, /readiness ... are appended"


@pytest.mark.parametrize("key", ["ssh", "gpus", "workdir", "port_offset"])
def test_process_settings_on_an_endpoint_target_are_refused_by_name(
    tmp_path: Path, key: str
) -> None:
    value = {
        "ssh": "\n      host: box\n      key: ~/.ssh/id_ed25519",
        "gpus": "[0, 1]",
        "workdir": "/opt/x",
        "port_offset": "1000",
    }[key]
    err, path = _err(tmp_path, f"    router_url: http://r:8000\n    {key}: {value}\n")
    assert str(err).startswith(
        f"{path}:6: targets.cluster.{key}: an endpoint target is " "reached over HTTP only"
    ), str(err)
    assert "controller runs the pods" in str(err)


def test_an_unknown_key_on_an_endpoint_target_suggests_the_right_one(tmp_path: Path) -> None:
    err, path = _err(tmp_path, "    router_url: http://r:8000\n    router_ulr: http://x:1\n")
    assert str(err).startswith(f"{path}:6: targets.cluster.router_ulr: unknown key")
    assert err.hint == "did you mean 'router_url'?"
