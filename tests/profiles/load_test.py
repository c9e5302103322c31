from __future__ import annotations

import dataclasses
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from dsv4ops.errors import ProfileError
from dsv4ops.profiles import load_profile
from dsv4ops.profiles.load import deep_merge
from testing.profiles import BASE_PROFILE, child


def _err(ref: str | Path) -> ProfileError:
    with pytest.raises(ProfileError) as info:
        load_profile(ref)
    return info.value


def test_base_loads_with_defaults_filled(pdir: Path) -> None:
    p = load_profile("base")
    assert p.name == "base" and p.prefill.gpus == [0, 1, 2, 3] and p.decode.tp == 4
    assert p.prefill.transfer_backend == "nixl" and p.decode.page_size == 256
    assert p.router.health_check.timeout_secs == 30
    assert p.canary.corruption_max_rate == 0.0 and p.kernel_package is None
    assert p.flags.overlap_schedule is False and p.warnings == ()


def test_profile_is_frozen(pdir: Path) -> None:
    p = load_profile("base")
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.name = "x"  # type: ignore[misc]


def test_name_and_path_both_work(pdir: Path) -> None:
    assert load_profile(pdir / "base.yaml").name == load_profile("base").name == "base"


def test_missing_profile_is_one_clear_error(pdir: Path) -> None:
    err = _err("nope")
    assert "nope.yaml" in str(err) and "no such profile" in str(err) and err.hint


def test_schema_version_is_checked_first(write: Callable[[str, str], Path]) -> None:
    # Also has an unknown key and a bad type: the version error must win.
    write("future", "schema_version: 2\nbogus: 1\nprefill: {tp: x}\n")
    err = _err("future")
    assert (
        "schema_version 2 is newer" in str(err) and err.hint == "upgrade dsv4ops" and err.line == 1
    )
    write("nover", "model: {path: /m}\n")
    assert "missing schema_version" in str(_err("nover"))


def test_unknown_key_names_file_line_and_key_with_suggestion(
    write: Callable[[str, str], Path],
) -> None:
    path = write("typo", child("decode:\n  max_runing_requests: 64\n"))
    err = _err("typo")
    assert str(err).startswith(f"{path}:4: decode.max_runing_requests: unknown key")
    assert err.hint == "did you mean 'max_running_requests'?"


def test_unknown_top_level_key(write: Callable[[str, str], Path]) -> None:
    write("top", child("flagz: {}\n"))
    err = _err("top")
    assert err.key == "flagz" and err.line == 3 and "valid keys here" in str(err)


def test_wrong_type_says_what_is_valid(write: Callable[[str, str], Path]) -> None:
    path = write("badtype", child("router:\n  policy: fastest\n"))
    err = _err("badtype")
    assert str(err).startswith(
        f"{path}:4: router.policy: expected one of random, round_robin, cache_aware"
    )


def test_onoff_accepts_yaml_booleans_and_strings(write: Callable[[str, str], Path]) -> None:
    write("a", child("flags:\n  overlap_schedule: on\n"))
    write("b", child("flags:\n  overlap_schedule: 'on'\n"))
    write("c", child("flags:\n  overlap_schedule: maybe\n"))
    assert load_profile("a").flags.overlap_schedule and load_profile("b").flags.overlap_schedule
    assert "expected on or off" in str(_err("c"))


def test_missing_required_key(write: Callable[[str, str], Path]) -> None:
    text = BASE_PROFILE.replace("  path: /models/DeepSeek-V4-Flash\n", "")
    write("nomodel", text)
    err = _err("nomodel")
    assert err.key == "model.path" and "missing required key" in str(err)


def test_invalid_yaml_reports_line(write: Callable[[str, str], Path]) -> None:
    write("broken", "schema_version: 1\nmodel: [unclosed\n")
    err = _err("broken")
    assert "invalid YAML" in str(err) and err.line is not None


def test_recursive_alias_is_a_clear_error_not_a_crash(write: Callable[[str, str], Path]) -> None:
    write("loop", "schema_version: 1\nextra: &me\n  again: *me\n")
    err = _err("loop")
    assert "recursive alias" in str(err) and err.line == 3


def test_an_alias_bomb_is_refused_at_the_anchor_that_crosses_the_budget(
    write: Callable[[str, str], Path],
) -> None:
    bomb = "schema_version: 1\na: &a [x, x, x, x, x, x, x, x, x, x]\n"
    for i, prev in zip("bcdefghij", "abcdefghi", strict=True):
        bomb += f"{i}: &{i} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"
    write("bomb", bomb)  # 10^10 leaves once expanded
    err = _err("bomb")
    # e: (line 6) is the first value whose expansion (10^5 leaves) is above 20,000 nodes.
    assert err.line == 6 and "aliases expand this value to more than 20000 nodes" in str(err)


def test_aliases_within_the_budget_still_load(write: Callable[[str, str], Path]) -> None:
    write("anchors", child("decode:\n  env: &e {A: '1'}\nprefill:\n  env: *e\n"))
    p = load_profile("anchors")
    assert p.prefill.env_dict["A"] == p.decode.env_dict["A"] == "1"


def test_duplicate_key_is_an_error(write: Callable[[str, str], Path]) -> None:
    write("dup", child("flags:\n  overlap_schedule: on\nflags:\n  overlap_schedule: off\n"))
    assert "duplicate key" in str(_err("dup"))


def test_extends_deep_merges_and_replaces_lists(write: Callable[[str, str], Path]) -> None:
    write(
        "mid",
        child(
            "decode:\n  extra_args: ['--watchdog-timeout', '600', '--skip-server-warmup']\n  env: {A: '1'}\n"
        ),
    )
    write(
        "leaf",
        child(
            "decode:\n  extra_args: ['--watchdog-timeout', '900']\n  env: {B: '2'}\n", extends="mid"
        ),
    )
    p = load_profile("leaf")
    assert p.decode.extra_args == ["--watchdog-timeout", "900"]  # replaced, not concatenated
    # mappings merge (base.yaml's own included)
    assert p.decode.env_dict == {"A": "1", "B": "2", "SGLANG_DISAGGREGATION_WAITING_TIMEOUT": "300"}
    assert p.decode.gpus == [4, 5, 6, 7] and p.model.served_name == "dsv4"  # inherited
    assert [Path(c).name for c in p.chain] == ["leaf.yaml", "mid.yaml", "base.yaml"]


def test_deep_merge_is_deterministic_and_pure() -> None:
    base = {"a": {"x": [1, 2], "y": 1}, "b": 1}
    over = {"a": {"x": [3]}, "c": 2}
    assert deep_merge(base, over) == {"a": {"x": [3], "y": 1}, "b": 1, "c": 2}
    assert base == {"a": {"x": [1, 2], "y": 1}, "b": 1}


def test_error_in_inherited_value_names_the_file_that_set_it(
    write: Callable[[str, str], Path], pdir: Path
) -> None:
    write("mid", child("decode:\n  port: 30000\n"))  # clashes with prefill.port
    leaf = write("leaf", child("description: leaf\n", extends="mid"))
    err = _err("leaf")
    assert err.path == str(pdir / "mid.yaml") and err.line == 4 and err.key == "decode.port"
    assert f"inherited by {leaf}" in str(err)


def test_extends_cycle_and_missing_parent(write: Callable[[str, str], Path]) -> None:
    write("x", child("", extends="y"))
    write("y", child("", extends="x"))
    assert "cycle" in str(_err("x"))
    write("orphan", child("", extends="ghost"))
    err = _err("orphan")
    assert err.key == "extends" and err.line == 2 and "ghost" in str(err)


def test_extends_by_relative_path(tmp_path: Path, pdir: Path) -> None:
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "p.yaml").write_text(child("description: via path\n", extends="../profiles/base.yaml"))
    assert load_profile(other / "p.yaml").description == "via path"
    (other / "q.yaml").write_text(child("description: sibling file\n", extends="p.yaml"))
    # A bare file name in extends is relative to the extending file, not to the cwd (pdir's parent).
    assert Path.cwd() != other
    assert load_profile(other / "q.yaml").description == "sibling file"


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def test_load_at_git_revision_reads_the_whole_chain_at_that_commit(
    write: Callable[[str, str], Path], pdir: Path
) -> None:
    root = pdir.parent
    _git(root, "init", "-q")
    _git(
        root,
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "init",
    )
    write("leaf", child("description: v1\n"))
    _git(root, "add", ".")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "v1")
    rev = _git(root, "rev-parse", "HEAD")
    write("leaf", child("description: v2\nflags:\n  overlap_schedule: on\n"))
    (pdir / "base.yaml").write_text(
        BASE_PROFILE.replace("max_running_requests: 96", "max_running_requests: 64")
    )
    old = load_profile("leaf", git_rev=rev)
    assert old.description == "v1" and not old.flags.overlap_schedule
    assert old.decode.max_running_requests == 96 and old.git_rev == rev
    assert load_profile("leaf").description == "v2"
    with pytest.raises(ProfileError, match="not readable at git revision"):
        load_profile("base", git_rev="0" * 40)
