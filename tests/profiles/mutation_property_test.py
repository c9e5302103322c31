"""Property: a mutation of any shipped profile is validated and rendered in bounded time and
memory, never crashes (exit 3), and every error names its file and line (issues 11, 40).

Mutations: a value anywhere replaced by something nasty (NaN, 10^30, control characters, 16 KB
strings, nested lists, secrets), a key removed, or a line of hostile YAML inserted (aliases,
anchors, tags, impossible dates, 5,000-digit integers, deep nesting, an alias bomb).

Cost: a bounded number of examples, in-process (each takes milliseconds), plus a few through the
real CLI process under a memory ceiling. Whole file: well under a minute on 2 loaded cores.
"""

from __future__ import annotations

import contextlib
import io
import resource
import shutil
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsv4ops._yaml import dump, safe_load
from dsv4ops.cli import main
from dsv4ops.errors import ProfileError
from dsv4ops.profiles import load_profile, load_targets, render
from dsv4ops.profiles.load import check_profile_file
from testing.cli import run_cli

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p.name for p in (REPO / "profiles").glob("*.yaml") if p.stem != "targets")

NASTY_STRINGS = st.sampled_from(
    [
        "",
        " ",
        "\n",
        "\u200b",
        "a\x00b",
        "\x1b[2J",
        "x" * 20_000,
        "--api-key",
        "-h",
        "junk",
        "sglang-default:999999999",
        "step1:1-8000",
        "step8:1-1000000000",
        "step0",
        "health",
        "/health",
        "deepseek v4",
        "../../../../etc/passwd",
        "a" * 5000,
        "on",
        "1e30",
        ".nan",
    ]
)
NASTY_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([10**30, 0, -1, 65536, 2**63]),
    NASTY_STRINGS,
    st.text(alphabet=st.characters(codec="utf-8"), max_size=30),
)
NASTY_VALUES = st.recursive(
    NASTY_SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=6),
        st.dictionaries(st.sampled_from(["HF_TOKEN", "A", "--x", "gpus", "1"]), inner, max_size=4),
    ),
    max_leaves=12,
)


def _bomb() -> str:
    text = "bomb: [&a [x, x, x, x, x, x, x, x, x]"
    for name, prev in zip("bcdefgh", "abcdefg", strict=True):
        text += f", &{name} [" + ", ".join([f"*{prev}"] * 9) + "]"
    return text + "]"


HOSTILE_LINES = st.sampled_from(
    [
        _bomb(),
        "x: &a [1, 2]",
        "y: *a",
        "<<: *a",
        "<<: {description: merged}",
        "? [a, b]\n: 1",
        "z: !!python/object/apply:os.system [ls]",
        "z: !!binary AAAA",
        "z: 2001-99-99",
        "z: " + "9" * 5000,
        "extends: " + "a" * 5000,
        'extends: "base\\0"',
        "extends: /dev/zero",
        "extends: .",
        "z: " + "[" * 100 + "]" * 100,
        "\t- tab",
        "  - stray",
        "schema_version: 99",
        "description: &d caf\u00e9",
        "prefill: {env: {HF_TOKEN: [hf_SEKRET]}}",
    ]
)


def _paths(data: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from _paths(value, (*prefix, i))


def _replace(data: Any, path: tuple[Any, ...], value: Any, delete: bool) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(data, dict):
        out = dict(data)
        if delete and not rest:
            out.pop(head, None)
        else:
            out[head] = _replace(data[head], rest, value, delete)
        return out
    out_list = list(data)
    out_list[head] = _replace(data[head], rest, value, delete)
    return out_list


@st.composite
def mutants(draw: st.DrawFn) -> str:
    name = draw(st.sampled_from(SHIPPED))
    text = (REPO / "profiles" / name).read_text()
    if draw(st.booleans()):
        data = safe_load(text)
        path = draw(st.sampled_from(list(_paths(data))[1:]))
        delete = draw(st.integers(0, 4)) == 0
        return dump(_replace(data, path, draw(NASTY_VALUES), delete))
    lines = text.splitlines()
    at = draw(st.integers(0, len(lines)))
    return "\n".join([*lines[:at], draw(HOSTILE_LINES), *lines[at:]]) + "\n"


@pytest.fixture(scope="module")
def shipped_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A copy of profiles/ (so `extends: baseline` resolves) with DSV4OPS_PROFILES_DIR on it."""
    root = tmp_path_factory.mktemp("mutants")
    directory = root / "profiles"
    shutil.copytree(REPO / "profiles", directory)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DSV4OPS_PROFILES_DIR", str(directory))
        mp.chdir(root)  # a crash report would land here, not in the repository
        yield directory


def _check_in_process(path: Path) -> None:
    targets = list(load_targets().values())
    check = check_profile_file(path, targets=targets)
    for problem in check.problems:
        # Every problem has a line (issue 40): a missing key at its mapping's, the whole file at 1.
        assert problem.path and problem.line is not None and problem.line >= 1, problem
        assert "SEKRET" not in str(problem) and len(str(problem)) < len(str(problem.path)) + 600
    try:
        profile = load_profile(path)
        for target in targets:
            render(profile, target)
    except ProfileError as exc:
        assert check.problems, f"load_profile refused what validate accepted: {exc}"
    else:
        assert not check.problems, "validate refused what load_profile accepted"
    for command in ("validate", "render"):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["profile", command, str(path)])
        assert code in (0, 1), (command, err.getvalue()[-2000:])
        assert "SEKRET" not in out.getvalue() + err.getvalue()


@settings(
    max_examples=150,
    deadline=timedelta(seconds=3),
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(text=mutants())
def test_mutated_profiles_end_quickly_without_crashing(shipped_dir: Path, text: str) -> None:
    path = shipped_dir / "mutant.yaml"
    path.write_text(text)
    _check_in_process(path)


def test_memory_stays_bounded_over_many_mutants(shipped_dir: Path) -> None:
    """Peak RSS of this process does not grow by more than 200 MB over the examples (an
    unbounded alias expansion reaches gigabytes)."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    inner = settings(max_examples=40, deadline=None, database=None)(
        given(text=mutants())(lambda text: _write_and_check(shipped_dir, text))
    )
    inner()
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 200, grown_mb


def _write_and_check(directory: Path, text: str) -> None:
    path = directory / "mutant.yaml"
    path.write_text(text)
    _check_in_process(path)


@settings(max_examples=4, deadline=None, database=None)
@given(text=mutants())
def test_mutated_profiles_through_the_real_cli(shipped_dir: Path, text: str) -> None:
    path = shipped_dir / "mutant.yaml"
    path.write_text(text)
    for command in ("validate", "render"):
        run = run_cli("profile", command, str(path), profiles_dir=shipped_dir)
        assert run.code in (0, 1), run.text[-2000:]
        assert "Traceback" not in run.text and "internal error" not in run.text, run.text[-2000:]
        if run.code == 1:
            assert f"{path}" in run.err, run.err[-2000:]
