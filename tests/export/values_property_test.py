"""`export rbg` option values by Kubernetes' own rules (dsv4ops/export/values.py, issue 21 F7):
the issue's four values through the real CLI (exit 1, nothing printed), and a property over
arbitrary values: each is refused with a DsOpsError naming its option, or lands in a manifest
that validates and round-trips through YAML unchanged, with no whitespace or shell character in
command[0]. Deterministic (derandomized), a bounded number of examples, bounded deadline."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsv4ops import _yaml
from dsv4ops.deployment import Deployment
from dsv4ops.errors import DsOpsError
from dsv4ops.export import rbg as R
from dsv4ops.export.validate import check_documents
from dsv4ops.profiles import get_target, load_profile, render
from dsv4ops.profiles.model import Profile
from testing.profiles import TRITON_MOE_PATH_YAML

REPO = Path(__file__).resolve().parents[2]
SETTINGS = settings(
    max_examples=60,
    derandomize=True,
    deadline=timedelta(seconds=2),
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--namespace", "x: y"], "--namespace"),
        (["--image", "lmsysorg/sglang:v0.5.23\nkind: Pod"], "--image"),
        (["--python", "python3; rm -rf /"], "--python"),
        (["--kernel-image", "a b"], "--kernel-image"),
        (["--router-image", "UPPER/Case"], "--router-image"),
        (["--namespace", "a" * 64], "--namespace"),
    ],
)
def test_the_reported_values_are_refused_by_the_real_cli(
    args: list[str], option: str, pdir: Path, write: Callable[[str, str], Path]
) -> None:  # noqa: ANN001
    write(
        "withkernels",
        "schema_version: 1\nextends: base\nkernel_package: dsv4-decode-kernels@0.2.0\n"
        + TRITON_MOE_PATH_YAML,
    )
    proc = subprocess.run(
        [sys.executable, "-m", "dsv4ops", "export", "rbg", "withkernels", *args],
        cwd=pdir.parent,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "DSV4OPS_PROFILES_DIR": str(pdir)},
    )
    assert proc.returncode == 1, (proc.stdout[-500:], proc.stderr[-500:])
    assert proc.stdout == "" and option in proc.stderr and "Traceback" not in proc.stderr


@pytest.fixture(scope="module")
def baseline() -> tuple[Profile, Deployment]:
    p = load_profile(str(REPO / "profiles" / "baseline.yaml"))
    return p, render(p, get_target("box"))


TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        [
            "ns",
            "team-a",
            "-a",
            "a-",
            "A",
            "a.b",
            "x: y",
            "a\n",
            "α",
            "a" * 63,
            "a" * 64,
            "lmsysorg/sglang:v0.5.23",
            "registry:5000/a/b@sha256:" + "a" * 64,
            "localhost/x:tag",
            "python3",
            "/usr/bin/python3",
            "python3 -c x",
            "$(id)",
            "`id`",
            "a;b",
            "a|b",
            "a b",
            "\x1b[2J",
            "--python",
        ]
    ),
)
_SHELL = re.compile(r"[\s;|&$`<>(){}\[\]*?!'\"\\#~]")


@SETTINGS
@given(namespace=TEXT, image=TEXT, python=TEXT)
def test_any_option_value_is_refused_or_exports_a_valid_manifest(
    baseline: tuple[Profile, Deployment], namespace: str, image: str, python: str
) -> None:
    p, box = baseline
    opts = R.ExportOptions(image=image, namespace=namespace, python=python)
    try:
        docs = R.documents(p, box, opts)
    except DsOpsError as exc:
        assert str(exc).startswith(("--namespace", "--image", "--python")), str(exc)
        return
    check_documents(docs)  # the vendored v1alpha2 schema, offline
    manifest = docs[-1]
    assert _yaml.safe_load(_yaml.dump(manifest)) == manifest  # the value survives as written
    assert manifest["metadata"]["namespace"] == namespace and len(namespace) <= 63
    assert not any(c.isspace() or not c.isprintable() for c in namespace + image)
    for role in manifest["spec"]["roles"]:
        c = role["standalonePattern"]["template"]["spec"]["containers"][0]
        assert c["command"][0] == python and not _SHELL.search(python)
