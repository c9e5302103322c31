"""Collecting every problem of a profile file (`validate_profile`, `profile validate`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from dsv4ops.cli import main
from dsv4ops.errors import ProfileError
from dsv4ops.profiles import Problem, load_profile, load_targets, validate_profile
from dsv4ops.profiles.load import check_profile_file
from testing.profiles import child

REPO = Path(__file__).resolve().parents[2]

# Three independent mistakes: an unknown key, a wrong type, a rule violation (port clash).
THREE_MISTAKES = child(
    "flagz: {}\n"  # 3
    "decode:\n"  # 4
    "  tp: four\n"  # 5
    "router:\n"  # 6
    "  port: 30000\n"  # 7: prefill.port is 30000 too
)


def _where(problems: list[Problem]) -> list[tuple[str, int | None, str | None]]:
    return [(Path(p.path or "").name, p.line, p.key) for p in problems]


def test_several_independent_mistakes_are_all_reported(write: Callable[[str, str], Path]) -> None:
    path = write("three", THREE_MISTAKES)
    problems = validate_profile("three")
    assert _where(problems) == [
        ("three.yaml", 3, "flagz"),
        ("three.yaml", 5, "decode.tp"),
        ("three.yaml", 7, "router.port"),
    ]
    flagz, tp, port = problems
    assert flagz.hint == "did you mean 'flags'?" and "unknown key" in flagz.message
    assert tp.message == "expected an integer >= 1, got 'four'"
    assert "port 30000 is already used by prefill.port" in port.message
    assert str(tp) == f"{path}:5: decode.tp: expected an integer >= 1, got 'four'"


def test_a_list_s_error_says_its_bounds_and_length_without_an_example_that_breaks_them(
    write: Callable[[str, str], Path],
) -> None:
    # It said "a list of integers, e.g. [0, 1, 2, 3], each from 1 to 4096": an example the
    # bounds refuse, and not the 64-item limit.
    write("levels", child("canary:\n  sweep_concurrency: [8, 0]\n"))
    (problem,) = validate_profile("levels")
    assert problem.key == "canary.sweep_concurrency[1]", problem.key
    assert problem.message.startswith(
        "expected a list of integers, each from 1 to 4096, at most 64, got"
    ), problem.message


def test_a_key_with_a_bracket_is_reported_not_a_crash(write: Callable[[str, str], Path]) -> None:
    # Key paths write list items as [N]; a key that holds '[' itself crashed the collecting
    # check with a ValueError (an internal error) instead of naming the unknown key.
    write("bracket", child('"flags[0": {}\ndecode:\n  env: {"A[B": "1"}\n'))
    problems = validate_profile("bracket")
    assert _where(problems) == [
        ("bracket.yaml", 3, "flags[0"),
        ("bracket.yaml", 5, "decode.env.A[B"),
    ]
    assert "unknown key" in problems[0].message
    assert problems[1].message == "'A[B' is not a valid environment variable name"


def test_a_bad_environment_variable_name_is_located_at_its_own_line(
    write: Callable[[str, str], Path],
) -> None:
    # It named the mapping and its line (decode.env, line 4), not the key among many.
    write(
        "envkeys",
        child('decode:\n  env:\n    GOOD: "1"\n    "BAD KEY": "2"\n    A-B: "3"\n'),
    )
    problems = validate_profile("envkeys")
    assert _where(problems) == [
        ("envkeys.yaml", 6, "decode.env.BAD KEY"),
        ("envkeys.yaml", 7, "decode.env.A-B"),
    ], _where(problems)
    assert problems[0].message == "'BAD KEY' is not a valid environment variable name"


def test_load_profile_still_raises_the_first_problem(write: Callable[[str, str], Path]) -> None:
    path = write("three", THREE_MISTAKES)
    with pytest.raises(ProfileError) as info:
        load_profile("three")
    assert str(info.value).startswith(f"{path}:3: flagz: unknown key")


def test_every_rule_violation_is_reported_not_just_the_first(
    write: Callable[[str, str], Path],
) -> None:
    write(
        "rules",
        child(
            "prefill:\n"  # 3
            "  tp: 2\n"  # 4: 4 GPUs
            "decode:\n"  # 5
            "  port: 30000\n"  # 6: clashes with prefill.port
            "  extra_args: ['--cuda-graph-max-bs', '96']\n"  # 7: removed flag
            "flags:\n"  # 8
            "  decode_buckets: [8, 24, 16]\n"  # 9: not increasing
            "kernel_package: nope\n"  # 10
        ),
    )
    assert _where(validate_profile("rules")) == [
        ("rules.yaml", 4, "prefill.tp"),
        ("rules.yaml", 6, "decode.port"),
        ("rules.yaml", 7, "decode.extra_args[0]"),
        ("rules.yaml", 9, "flags.decode_buckets[2]"),
        ("rules.yaml", 10, "kernel_package"),
    ]


def test_yaml_syntax_error_is_the_only_problem(write: Callable[[str, str], Path]) -> None:
    # After a syntax error nothing can be trusted: the unknown key and bad type are not listed.
    path = write("broken", "schema_version: 1\nextends: base\nmodel: [unclosed\nbogus: 1\n")
    (problem,) = validate_profile("broken")
    assert problem.path == str(path) and problem.line in (3, 4)
    assert problem.message.startswith("invalid YAML")


def test_bad_schema_version_is_the_only_problem(write: Callable[[str, str], Path]) -> None:
    write("future", "schema_version: 2\nbogus: 1\nprefill: {tp: x}\n")
    (problem,) = validate_profile("future")
    assert problem.key == "schema_version" and "newer" in problem.message


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("decode:\n  gpus: x\n", "decode.gpus"),  # GPU rules, disjointness, target GPUs
        ("prefill:\n  tp: two\n", "prefill.tp"),  # tp == len(gpus)
        ("decode:\n  tp: four\n", "decode.tp"),  # bucket spec step8 resolves against decode tp
        ("router:\n  port: '8000'\n", "router.port"),  # distinct ports, target port range
        ("decode:\n  extra_args: --foo\n", "decode.extra_args"),  # flag checks
        ("flags:\n  decode_buckets: [a, b]\n", "flags.decode_buckets"),  # bucket order
        ("decode: 5\n", "decode"),  # a whole section unusable
    ],
    ids=["gpus", "tp", "tp-buckets", "port", "extra-args", "buckets", "section"],
)
def test_type_error_skips_the_rules_that_need_the_value(
    write: Callable[[str, str], Path], text: str, key: str
) -> None:
    path = write("typed", child(text))
    check = check_profile_file("typed", targets=load_targets().values())
    assert [(p.path, p.line, p.key) for p in check.problems] == [
        (str(path), 4 if "\n  " in text else 3, key)
    ]
    assert check.profile is None


def test_a_type_error_does_not_hide_independent_rule_violations(
    write: Callable[[str, str], Path],
) -> None:
    # decode.tp is unusable, but decode.gpus can still be checked against prefill's.
    write("mixed", child("decode:\n  tp: four\n  gpus: [3, 4, 5, 6]\n"))
    assert _where(validate_profile("mixed")) == [
        ("mixed.yaml", 4, "decode.tp"),
        ("mixed.yaml", 5, "decode.gpus"),
    ]


def test_errors_in_the_parent_name_the_parent_file_and_line(
    write: Callable[[str, str], Path], pdir: Path
) -> None:
    parent = write(
        "parent",
        child(
            "prefill:\n"  # 3
            "  portt: 1\n"  # 4: unknown key
            "router:\n"  # 5
            "  policy: fastest\n"  # 6: wrong value, inherited by the child
        ),
    )
    kid = write("kid", child("decode:\n  max_runing_requests: 8\n", extends="parent"))
    problems = validate_profile("kid")
    assert [(p.path, p.line, p.key) for p in problems] == [
        (str(kid), 4, "decode.max_runing_requests"),
        (str(parent), 4, "prefill.portt"),
        (str(parent), 6, "router.policy"),
    ]
    assert problems[2].message.endswith(f"(inherited by {kid})")


def test_a_broken_extends_ends_the_check_but_keeps_what_came_before(
    write: Callable[[str, str], Path],
) -> None:
    path = write("orphan", child("flagz: 1\n", extends="ghost"))
    assert [(p.path, p.line, p.key) for p in validate_profile("orphan")] == [
        (str(path), 2, "extends"),
        (str(path), 3, "flagz"),
    ]


def test_target_problems_are_collected_too(write: Callable[[str, str], Path], pdir: Path) -> None:
    (pdir / "targets.yaml").write_text(
        (pdir / "targets.yaml").read_text().replace("[0, 1, 2, 3, 4, 5, 6, 7]", "[0, 1, 2, 3]")
    )
    write("far", child("flags:\n  overlap_schedule: maybe\n"))
    check = check_profile_file("far", targets=[load_targets()["box"]])
    assert [p.key for p in check.problems] == ["decode.gpus", "flags.overlap_schedule"]
    assert "[4, 5, 6, 7] are not on target 'box'" in check.problems[0].message


def test_a_valid_profile_has_no_problems(pdir: Path) -> None:
    assert validate_profile("base") == []
    check = check_profile_file("base", targets=load_targets().values())
    assert check.ok and check.profile is not None and check.profile.name == "base"


def test_shipped_profiles_have_no_problems() -> None:
    from dsv4ops.profiles import list_profiles

    for path in list_profiles(REPO / "profiles"):
        assert validate_profile(path) == [], path


# --- the CLI -------------------------------------------------------------------------------


def test_cli_one_profile_lists_every_problem_and_exits_1(
    write: Callable[[str, str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path = write("three", THREE_MISTAKES)
    assert main(["profile", "validate", "three"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"error: {path}:3: flagz: unknown key; valid keys here: schema_version, extends, "
        "description, model, prefill, decode, router, flags, kernel_package, canary, probe",
        "hint: did you mean 'flags'?",
        f"error: {path}:5: decode.tp: expected an integer >= 1, got 'four'",
        f"error: {path}:7: router.port: port 30000 is already used by prefill.port; every port "
        "must be distinct",
        "error: 3 problems in 1 profile",
    ]


def test_cli_all_profiles_lists_problems_per_profile_with_a_summary(
    write: Callable[[str, str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    three = write("three", THREE_MISTAKES)
    broken = write("broken", "schema_version: 1\nmodel: [unclosed\n")
    assert main(["profile", "validate"]) == 1
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0] == "ok    base"
    assert lines[1].startswith(f"FAIL  broken  {broken}:") and "invalid YAML" in lines[1]
    assert [line.split("  ")[2].split(": ")[0:2] for line in lines if "FAIL  three" in line] == [
        [f"{three}:3", "flagz"],
        [f"{three}:5", "decode.tp"],
        [f"{three}:7", "router.port"],
    ]
    assert "      hint: did you mean 'flags'?" in lines
    assert lines[-1] == "4 problems in 2 profiles"
    assert captured.err == "error: 2 of 3 profiles are invalid\n"


def test_cli_json_lists_every_problem(
    write: Callable[[str, str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path = write("three", THREE_MISTAKES)
    assert main(["profile", "validate", "three", "base", "--json"]) == 1
    three, base = json.loads(capsys.readouterr().out)
    assert three["ok"] is False and base["ok"] is True and base["problems"] == []
    assert [(p["path"], p["line"], p["key"]) for p in three["problems"]] == [
        (str(path), 3, "flagz"),
        (str(path), 5, "decode.tp"),
        (str(path), 7, "router.port"),
    ]
    assert three["problems"][0]["hint"] == "did you mean 'flags'?"
    assert three["error"] == f"{path}:3: flagz: " + three["problems"][0]["message"]


def test_cli_subprocess_exit_1_and_no_traceback(
    write: Callable[[str, str], Path], pdir: Path
) -> None:
    write("three", THREE_MISTAKES)
    write("kid", child("decode:\n  gpus: x\n", extends="three"))
    env = {**os.environ, "DSV4OPS_PROFILES_DIR": str(pdir)}
    outputs, stdouts = {}, {}
    for args in (["kid"], [], ["kid", "--json"]):
        proc = subprocess.run(
            [sys.executable, "-m", "dsv4ops", "profile", "validate", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
            timeout=60,
        )
        assert proc.returncode == 1, (args, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr + proc.stdout and "internal error" not in proc.stderr
        outputs[" ".join(args)] = proc.stdout + proc.stderr
        stdouts[" ".join(args)] = proc.stdout
    # The parent's mistakes name the parent's file and line, in every form of the output.
    for out in (outputs["kid"], outputs[""]):
        assert f"{pdir}/three.yaml:3: flagz: unknown key" in out
    (kid,) = json.loads(stdouts["kid --json"])
    assert {"path": f"{pdir}/three.yaml", "line": 3, "key": "flagz"}.items() <= kid["problems"][
        1
    ].items()
    assert f"error: {pdir}/kid.yaml:4: decode.gpus: expected a list of integers" in outputs["kid"]
    assert outputs["kid"].endswith("error: 4 problems in 1 profile\n")


def test_probe_tool_call_is_a_declared_setting_refused_with_its_file_and_line(write) -> None:  # type: ignore[no-untyped-def]
    """probe.tool_call: required (the default, DSV4), auto or off; anything else is an error at
    its line, and the value reaches the profile (and so the journal's record of the deploy)."""
    path = write("sometimes", child("probe:\n  tool_call: sometimes\n"))
    check = check_profile_file("sometimes", targets=load_targets().values())
    assert [(p.path, p.line, p.key) for p in check.problems] == [(str(path), 4, "probe.tool_call")]
    assert "one of required, auto, off" in check.problems[0].message
    write("auto", child("probe:\n  tool_call: auto\ncanary:\n  tool_calls: false\n"))
    profile = load_profile("auto")
    assert profile.probe.tool_call == "auto" and profile.canary.tool_calls is False
    assert profile.to_dict()["probe"] == {"tool_call": "auto"}
    shipped = Path(__file__).resolve().parents[2] / "profiles"
    assert load_profile(str(shipped / "baseline.yaml")).probe.tool_call == "required"
    assert load_profile(str(shipped / "tiny-cpu.yaml")).probe.tool_call == "auto"
