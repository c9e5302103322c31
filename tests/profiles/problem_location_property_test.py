"""Every problem a profile check reports names a file and a line >= 1 in it (issue 40 item 8).

Editors, CI annotations and operators jump to `file:line`; a problem without a line sent them
hunting. A whole-file problem (empty, a list or scalar at the top, not YAML, not UTF-8, too
large, a directory) is at line 1; a missing key at the line of the mapping that lacks it (line 1
when the whole section is missing); a missing or broken base at the `extends:` line or in the
base's own file. Generated broken files, deterministic (derandomized, bounded examples).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsv4ops._yaml import dump, safe_load
from dsv4ops.cli import main
from dsv4ops.errors import ProfileError
from dsv4ops.profiles import load_profile, load_targets
from dsv4ops.profiles.load import check_profile_file
from testing.profiles import BASE_PROFILE, make_profiles_dir

HUGE = b"# padding\n" * 30_000  # over the 256 KiB read limit

WHOLE_FILE = [
    b"",
    b"\n\n   \n",
    b"# only a comment\n",
    b"- a\n- b\n",
    b"just a sentence\n",
    b"42\n",
    b"~\n",
    b"[1, 2]\n",
    b"{schema_version: 1, description: [\n",
    b"\t- tab\n",
    b"\xff\xfe\x00\x01",
    b"schema_version: 1\ndescription: caf\xe9\n",
    b"schema_version: 1\n" + b"z: " + b"[" * 100 + b"]" * 100 + b"\n",
    b"schema_version: 1\nextends: base\n<<: {description: merged}\n",
    b"schema_version: 1\nschema_version: 1\n",
    b"description: no version\n",
    b"schema_version: one\n",
    b"schema_version: 99\n",
    HUGE,
]

# Bases a child can name: missing, not a file, or broken in a way of their own.
BASES = {
    "empty": "",
    "alist": "- a\n",
    "partial": "schema_version: 1\ndescription: nothing else\n",
    "noversion": "description: x\n",
    "badyaml": "schema_version: 1\nmodel: [\n",
}
BASE_REFS = [*BASES, "nope", "dir.yaml", "sub/", "../elsewhere/nope.yaml", "/nonexistent/x.yaml"]

# Keys YAML spells differently from how they load ('~' is None, '0x10' is 16).
ODD_KEYS = [
    "~",
    "null",
    "Null",
    "0x10",
    "0o17",
    "1_000",
    "true",
    "on",
    "2001-01-01",
    ".inf",
    "-.nan",
    "'a.b'",
    '""',
    "1.5e3",
    "!!str 12",
    "? x\n",
    "2001-99-99",
]
SECTIONS = ["model", "prefill", "decode", "router", "flags"]


def _paths(data: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for key, value in data.items():
        yield (*prefix, key)
        if isinstance(value, dict):
            yield from _paths(value, (*prefix, key))


def _without(data: Any, path: tuple[str, ...]) -> Any:
    out = dict(data)
    if len(path) == 1:
        out.pop(path[0], None)
    elif isinstance(out.get(path[0]), dict):
        out[path[0]] = _without(out[path[0]], path[1:])
    return out


BASE_PATHS = list(_paths(safe_load(BASE_PROFILE)))


@st.composite
def missing_keys(draw: st.DrawFn) -> bytes:
    data = safe_load(BASE_PROFILE)
    for path in draw(st.lists(st.sampled_from(BASE_PATHS), min_size=1, max_size=5)):
        data = _without(data, path)
    if draw(st.booleans()):  # a child of a base that lacks everything: nothing is inherited
        data = {"schema_version": 1, "extends": "partial", **data}
    return dump(data).encode()


@st.composite
def bad_bases(draw: st.DrawFn) -> bytes:
    ref = draw(st.sampled_from(BASE_REFS))
    extra = draw(st.sampled_from(["", "description: child\n", "flags:\n  overlap_schedule: on\n"]))
    return f"schema_version: 1\nextends: {ref}\n{extra}".encode()


@st.composite
def odd_keys(draw: st.DrawFn) -> bytes:
    key = draw(st.sampled_from(ODD_KEYS) | st.text(max_size=12).map(json.dumps))
    lines = BASE_PROFILE.splitlines()
    section = draw(st.sampled_from([None, *SECTIONS]))
    at = len(lines) if section is None else lines.index(f"{section}:") + 1
    indent = "" if section is None else "  "
    line = f"{indent}{key}: 1".replace("\n:", f"\n{indent}:")
    return ("\n".join([*lines[:at], line, *lines[at:]]) + "\n").encode()


NON_MAPPINGS = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4),
    max_leaves=6,
).map(lambda v: dump(v).encode())

BAD_PROFILES = st.one_of(
    st.sampled_from(WHOLE_FILE), missing_keys(), bad_bases(), odd_keys(), NON_MAPPINGS
)


@pytest.fixture(scope="module")
def profiles(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("locations")
    directory = make_profiles_dir(root, **BASES)
    (directory / "dir.yaml").mkdir()
    (directory / "sub").mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DSV4OPS_PROFILES_DIR", str(directory))
        mp.chdir(root)
        yield directory


def _assert_located(problem: ProfileError | Any) -> None:
    """A file named, a line >= 1, and the line inside that file when it is one."""
    assert problem.path, problem
    assert isinstance(problem.line, int) and problem.line >= 1, problem
    path = Path(problem.path)
    if path.is_file() and path.stat().st_size <= len(HUGE) // 2:
        lines = path.read_bytes().count(b"\n") + 1
        assert problem.line <= lines, (problem, lines)


@settings(
    max_examples=120,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=BAD_PROFILES)
def test_every_problem_of_a_broken_profile_has_a_file_and_a_line(
    profiles: Path, data: bytes
) -> None:
    path = profiles / "case.yaml"
    path.write_bytes(data)
    check = check_profile_file(path, targets=load_targets().values())
    for problem in check.problems:
        _assert_located(problem)
    try:
        load_profile(path)
    except ProfileError as exc:  # the first problem, as render/deploy/show report it
        _assert_located(exc)


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("", 1, "a profile must be a YAML mapping"),
        ("- a\n", 1, "a profile must be a YAML mapping"),
        ("schema_version: 1\ndescription: x\n", 1, "prefill.gpus: missing required key"),
        (BASE_PROFILE.replace("  path: /models/DeepSeek-V4-Flash\n", ""), 3, "model.path"),
        ("schema_version: 1\nextends: partial\nmodel: {served_name: x}\n", 3, "model.path"),
        (BASE_PROFILE + "~: 1\n", BASE_PROFILE.count("\n") + 1, "None: unknown key"),
        (
            BASE_PROFILE.replace("decode:\n", "decode:\n  0x10: 1\n"),
            BASE_PROFILE.splitlines().index("decode:") + 2,
            "decode.16: unknown key",
        ),
        ("schema_version: 1\nextends: dir.yaml\n", 2, "is not a regular file"),
        ("schema_version: 1\nextends: nope\n", 2, "does not exist"),
    ],
    ids=[
        "empty",
        "list",
        "no-sections",
        "missing-key",
        "missing-key-in-child",
        "null-key",
        "hex-key",
        "base-is-dir",
        "no-base",
    ],
)
def test_validate_json_names_the_file_and_line(
    profiles: Path, capsys: pytest.CaptureFixture[str], text: str, line: int, fragment: str
) -> None:
    path = profiles / "named.yaml"
    path.write_text(text)
    assert main(["profile", "validate", str(path), "--json"]) == 1
    (result,) = json.loads(capsys.readouterr().out)
    assert all(p["path"] and p["line"] >= 1 for p in result["problems"]), result
    assert any(
        p["path"] == str(path) and p["line"] == line and fragment in str(_error(p))
        for p in result["problems"]
    ), result


def _error(problem: dict[str, Any]) -> ProfileError:
    return ProfileError(
        problem["message"], path=problem["path"], line=problem["line"], key=problem["key"]
    )


def test_a_directory_or_a_huge_file_is_a_problem_at_line_1(profiles: Path) -> None:
    (profiles / "huge.yaml").write_bytes(HUGE)
    for name, fragment in (("dir.yaml", "not a regular file"), ("huge.yaml", "at most 262144")):
        (problem,) = check_profile_file(profiles / name).problems
        assert (problem.path, problem.line) == (str(profiles / name), 1)
        assert fragment in problem.message


def test_a_base_missing_at_a_git_revision_is_reported_at_the_extends_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = make_profiles_dir(tmp_path, kid="schema_version: 1\nextends: base\n")
    monkeypatch.setenv("DSV4OPS_PROFILES_DIR", str(directory))
    monkeypatch.chdir(tmp_path)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([*git, "add", "profiles/kid.yaml"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "kid only"], cwd=tmp_path, check=True)
    (problem,) = check_profile_file("kid", git_rev="HEAD").problems
    assert (problem.path, problem.line, problem.key) == (str(directory / "kid.yaml"), 2, "extends")
    assert "not readable at git revision HEAD" in problem.message
