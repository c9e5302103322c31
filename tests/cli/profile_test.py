"""`dsv4ops profile ...` through click (CliRunner) and through main() for exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from dsv4ops.cli import cli, main
from testing.profiles import child, make_profiles_dir, targets_yaml


@pytest.fixture
def pdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = make_profiles_dir(tmp_path, fast=child("flags:\n  overlap_schedule: on\n"))
    monkeypatch.setenv("DSV4OPS_PROFILES_DIR", str(directory))
    monkeypatch.chdir(tmp_path)
    return directory


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def test_list_json(pdir: Path) -> None:
    code, out = _run("profile", "list", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert code == 0 and set(rows) == {"base", "fast"}
    assert rows["fast"]["overlap"] == "on" and rows["base"]["buckets"].startswith(
        "step8 (16 sizes, max 96)"
    )


def test_list_table(pdir: Path) -> None:
    code, out = _run("profile", "list")
    assert code == 0 and "base" in out and "fast" in out and "overlap" in out.splitlines()[0]


def test_show_json_has_resolved_values_chain_and_warnings(pdir: Path) -> None:
    code, out = _run("profile", "show", "fast", "--json")
    data = json.loads(out)
    assert (
        code == 0
        and data["decode"]["gpus"] == [4, 5, 6, 7]
        and data["flags"]["overlap_schedule"] is True
    )
    assert [Path(c).name for c in data["chain"]] == ["fast.yaml", "base.yaml"]
    assert [w["code"] for w in data["warnings"]] == ["overlap-schedule-wedge"]


def test_render_json_is_the_contract(pdir: Path) -> None:
    code, out = _run("profile", "render", "base", "--target", "twin-local", "--json")
    data = json.loads(out)
    assert code == 0 and data["profile"] == "base" and len(data["commands_hash"]) == 64
    assert [c["name"] for c in data["components"]] == ["prefill", "decode", "router"]
    assert data["components"][0]["argv"][1:3] == ["-m", "dsv4ops.twin.launch_server"]


def test_render_text_prints_shell_ready_commands(pdir: Path) -> None:
    code, out = _run("profile", "render", str(pdir / "base.yaml"))
    assert code == 0 and "# prefill (box.example:30000)" in out
    assert (
        "SGLANG_OPT_USE_MULTI_STREAM_OVERLAP=0 /opt/venv/bin/python -m sglang.launch_server" in out
    )


def test_validate_all_and_one(pdir: Path) -> None:
    code, out = _run("profile", "validate")
    assert (
        code == 0 and "ok    base" in out and "ok    fast" in out and "overlap scheduler on" in out
    )
    code, out = _run("profile", "validate", "fast", "--json")
    assert code == 0 and json.loads(out)[0]["ok"] is True


def test_validate_reports_every_broken_profile_and_exits_1(
    pdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (pdir / "dupport.yaml").write_text(child("router:\n  port: 30000\n"))
    (pdir / "unsorted.yaml").write_text(child("flags:\n  decode_buckets: [16, 8]\n"))
    assert main(["profile", "validate"]) == 1
    captured = capsys.readouterr()
    assert (
        f"FAIL  dupport  {pdir}/dupport.yaml:4: router.port: port 30000 is already used"
        in captured.out
    )
    assert f"{pdir}/unsorted.yaml:4: flags.decode_buckets[1]" in captured.out
    assert "error: 2 of 4 profiles are invalid" in captured.err


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("decode:\n  max_runing_requests: 8\n", "4: decode.max_runing_requests: unknown key"),
        ("decode:\n  gpus: [3, 4, 5, 6]\n", "4: decode.gpus: GPU(s) [3] are also used by prefill"),
        (
            "router:\n  prometheus_port: 30001\n",
            "4: router.prometheus_port: port 30001 is already used by decode.port",
        ),
        (
            "flags:\n  decode_buckets: [8, 24, 16]\n",
            "4: flags.decode_buckets[2]: buckets must be strictly increasing",
        ),
        (
            "decode:\n  extra_args: ['--cuda-graph-max-bs', '96']\n",
            "4: decode.extra_args[0]: --cuda-graph-max-bs was removed",
        ),
    ],
    ids=["unknown-key", "gpu-overlap", "duplicate-port", "unsorted-buckets", "removed-flag"],
)
def test_validate_broken_profile_names_file_line_key(
    pdir: Path, capsys: pytest.CaptureFixture[str], text: str, where: str
) -> None:
    path = pdir / "broken.yaml"
    path.write_text(child(text))
    assert main(["profile", "validate", str(path)]) == 1
    assert capsys.readouterr().err.startswith(f"error: {path}:{where}")


def test_show_and_diff_at_git_revisions(pdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in {
        "GIT_AUTHOR_NAME": "t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }.items():
        monkeypatch.setenv(key, value)
    root = pdir.parent
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "."], cwd=root, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "v1"], cwd=root, check=True)
    (pdir / "fast.yaml").write_text(
        child("flags:\n  overlap_schedule: on\n  decode_buckets: step4:40-96\n")
    )
    code, out = _run("profile", "show", "fast", "--rev", "HEAD", "--json")
    assert code == 0 and json.loads(out)["flags"]["decode_buckets_spec"] == "step8"
    code, out = _run("profile", "diff", "fast", "fast", "--rev-a", "HEAD", "--json")
    data = json.loads(out)
    assert data["a"] == "fast@HEAD" and [v["key"] for v in data["values"]] == [
        "flags.decode_buckets",
        "flags.decode_buckets_spec",
    ]


@pytest.mark.parametrize(
    ("rev", "why"),
    [
        ("--output={out}", "does not start with '-' (git would read it as an option)"),
        ("-p", "does not start with '-'"),
        ("HEAD:profiles/other.yaml", "has no ':', spaces or control characters"),
        ("HEAD\x1b[2J", "has no ':', spaces or control characters"),
        ("a" * 300, "is 1 to 256 characters"),
    ],
    ids=["option-output", "option-p", "colon", "escape", "long"],
)
def test_a_revision_git_would_read_as_an_option_or_another_file_is_refused(
    rev: str,
    why: str,
    pdir: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--rev went to `git cat-file` and `git show` as it was typed: `--output=FILE` is an option
    of `git show` (it writes FILE), a ':' names another file. Refused before git runs, exit 1,
    the value shown escaped and cut, for show and diff alike."""
    monkeypatch.chdir(pdir.parent)
    subprocess.run(["git", "init", "-q"], cwd=pdir.parent, check=True)
    out = tmp_path / "written"
    rev = rev.format(out=out)
    for args in (("show", "fast", "--rev", rev), ("diff", "base", "fast", "--rev-b", rev)):
        code = main(["profile", *args])
        text = capsys.readouterr().err
        assert code == 1 and f"a git revision {why}" in text, text
        assert "\x1b" not in text and len(text) < 600 and "hint: e.g. HEAD~1" in text, text
    assert not out.exists()


def test_validate_single_broken_profile_is_one_error_line(
    pdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (pdir / "gpu.yaml").write_text(child("decode:\n  gpus: [3, 4, 5, 6]\n"))
    assert main(["profile", "validate", "gpu"]) == 1
    assert capsys.readouterr().err.startswith(f"error: {pdir}/gpu.yaml:4: decode.gpus: GPU(s) [3]")


def test_unknown_target_is_a_user_error(pdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "render", "base", "--target", "moon"]) == 1
    assert "unknown target 'moon'; known targets: box, twin-local" in capsys.readouterr().err


def test_diff_shows_values_and_argv(pdir: Path) -> None:
    code, out = _run("profile", "diff", "base", "fast")
    assert (
        code == 0
        and "flags.overlap_schedule: False -> True" in out
        and "---disable-overlap-schedule" in out
    )
    code, out = _run("profile", "diff", "base", "fast", "--json")
    data = json.loads(out)
    assert data["commands"][0]["removed"] == ["--disable-overlap-schedule"]
    assert data["commands_hash"]["a"] != data["commands_hash"]["b"]
    assert "(no differences)" in _run("profile", "diff", "base", "base")[1]


def test_set_through_the_cli_commits(pdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"):
        monkeypatch.setenv(key, "t")
    for key in ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(key, "t@t")
    root = pdir.parent
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    code, out = _run("profile", "set", "base", "buckets=step4:40-96", "--as", "fine")
    assert code == 0 and "wrote" in out and "committed" in out
    log = subprocess.run(
        ["git", "log", "-1", "--format=%s"], cwd=root, capture_output=True, text=True, check=True
    ).stdout
    assert log.strip() == "profile fine: buckets=step4:40-96"
    assert main(["profile", "set", "base", "overlap=sometimes", "--as", "x"]) == 1


def test_a_toggle_given_twice_with_two_values_is_refused(
    pdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`overlap=on overlap=off` kept the last and said "nothing changes: base already has
    overlap=on, overlap=off" (base has it off). Two values of one key are refused, nothing
    written; the same value twice (any spelling) is one change."""
    for toggles, why in (
        (["overlap=on", "overlap=off"], "overlap is given twice, as 'on' and 'off'"),
        (["buckets=8,16", "buckets=step8"], "buckets is given twice, as '[8, 16]' and 'step8'"),
    ):
        assert main(["profile", "set", "base", *toggles, "--as", "x", "--no-commit"]) == 1
        err = capsys.readouterr().err
        assert why in err and "nothing changes" not in err, err
        assert not (pdir / "x.yaml").exists()
    assert (
        main(["profile", "set", "base", "overlap=on", "overlap=ON", "--as", "x", "--no-commit"])
        == 0
    )
    assert "overlap_schedule: on" in (pdir / "x.yaml").read_text()


def test_set_help_lists_every_toggle_its_declaration_declares_and_none_by_hand() -> None:
    """`profile set --help` lists each on/off flag (a FlagsSection field with a Switch) and
    the buckets, from the declarations: a new Switch field is in the help, unwritten."""
    from dsv4ops.cli.profile import set_cmd
    from dsv4ops.profiles.profile_spec import SWITCHES, FlagsSection

    code, out = _run("profile", "set", "--help")
    assert code == 0
    listed = " ".join(out.split("Toggles:", 1)[1].split())  # click wraps the descriptions
    assert SWITCHES
    for flag, switch in SWITCHES:
        description = FlagsSection.model_fields[flag].description or ""
        assert f"{switch.toggle}=on|off flags.{flag}: {description}" in listed
    assert "buckets=SPEC flags.decode_buckets:" in listed
    written = set_cmd.help or ""  # the docstring names no flag: the list is derived
    assert not [s.toggle for _, s in SWITCHES if f"{s.toggle}=" in written]


@pytest.mark.parametrize(
    ("toggle", "shown"),
    [
        ("buckets=[8 16]", "bad buckets value '[8 16]'"),  # it read as [816]
        ("buckets=8,,16", "bad buckets value '8,,16': an empty item between commas"),
        ("buckets=8,abc", "bad buckets value '8,abc'"),
        ("buckets=abc", "bad buckets value 'abc': unknown bucket spec 'abc'"),
        ("decode_buckets=8,16", "bad toggle 'decode_buckets=8,16'; expected one of"),
    ],
)
def test_set_a_bad_bucket_list_is_one_clear_line_and_nothing_is_written_or_committed(
    pdir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    toggle: str,
    shown: str,
) -> None:
    for key in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"):
        monkeypatch.setenv(key, "t")
    for key in ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(key, "t@t")
    root = pdir.parent
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "."], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", "init"], cwd=root, check=True)
    before = {p.name: p.read_bytes() for p in pdir.iterdir() if p.is_file()}
    capsys.readouterr()

    for where in (["--as", "tuned"], ["--in-place"]):
        code = main(["profile", "set", "base", toggle, *where, "-m", "try"])
        err = capsys.readouterr().err
        assert code == 1, err
        assert err.startswith(f"error: {shown}"), err
        assert "Traceback" not in err and "internal error" not in err
    assert {p.name: p.read_bytes() for p in pdir.iterdir() if p.is_file()} == before
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True, check=True
    )
    log = subprocess.run(
        ["git", "log", "--format=%s"], cwd=root, capture_output=True, text=True, check=True
    )
    assert status.stdout == "" and log.stdout.strip() == "init"


def test_set_dry_run_and_json_write_nothing_and_say_what(
    pdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`profile set` takes the mutating commands' flags: --dry-run prints the diff and writes
    and commits nothing; --json prints the result object; --yes is accepted (it asks nothing)."""
    for key in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"):
        monkeypatch.setenv(key, "t")
    for key in ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(key, "t@t")
    root = pdir.parent
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    code, out = _run(
        "profile",
        "set",
        "base",
        "overlap=on",
        "--as",
        "trial",
        "--dry-run",
        "--yes",
        "--target",
        "twin-local",
    )
    assert code == 0, out
    assert "would write" in out and "+extends: base" in out and "nothing was written" in out
    assert not (pdir / "trial.yaml").exists()
    assert (
        main(
            [
                "profile",
                "set",
                "base",
                "overlap=on",
                "--as",
                "trial",
                "--dry-run",
                "--json",
                "-m",
                "why",
            ]
        )
        == 0
    )
    assert not (pdir / "trial.yaml").exists()
    code, out = _run(
        "profile",
        "set",
        "base",
        "overlap=on",
        "--as",
        "trial",
        "--json",
        "-y",
        "--reason",
        "A/B won",
    )
    doc = json.loads(out)
    assert code == 0 and doc["dry_run"] is False and doc["commit"] and doc["changes"], doc
    assert doc["message"].split("\n\n")[1] == "A/B won" and (pdir / "trial.yaml").exists()


def test_render_and_show_never_print_secrets(tmp_path: Path) -> None:
    """`profile render` (text and --json) and `profile show` hide env tokens and --*api-key values."""
    import json as _json

    from click.testing import CliRunner

    from dsv4ops.cli import cli as _cli
    from dsv4ops.profiles import load_profile

    text = Path(load_profile("baseline").path).read_text()
    text = text.replace(
        'extra_args: [--context-length, "1048576"]',
        'extra_args: [--context-length, "1048576", --admin-api-key, SEKRET1]',
        1,
    ).replace(
        'SGLANG_DISAGGREGATION_WAITING_TIMEOUT: "300"\n',
        'SGLANG_DISAGGREGATION_WAITING_TIMEOUT: "300"\n    HF_TOKEN: SEKRET2\n',
        1,
    )
    assert "SEKRET1" in text and "SEKRET2" in text
    path = tmp_path / "secret.yaml"
    path.write_text(text)
    outputs = {}
    for argv in (
        ["profile", "render", str(path)],
        ["profile", "render", str(path), "--json"],
        ["profile", "show", str(path)],
        ["profile", "show", str(path), "--json"],
    ):
        result = CliRunner().invoke(_cli, argv)
        assert result.exit_code == 0, result.output
        assert "SEKRET" not in result.output, argv
        assert "***" in result.output, argv
        outputs[" ".join(argv[1:2] + argv[3:])] = result.output
    decode = next(
        c for c in _json.loads(outputs["render --json"])["components"] if c["name"] == "decode"
    )
    assert decode["argv"][decode["argv"].index("--admin-api-key") + 1] == "***"


def test_missing_profiles_directory_is_a_user_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wrong DSV4OPS_PROFILES_DIR says so (exit 1) instead of listing nothing."""
    from dsv4ops.cli import main as _main

    monkeypatch.setenv("DSV4OPS_PROFILES_DIR", str(tmp_path / "nope"))
    assert _main(["profile", "list"]) == 1


def test_set_records_the_operators_reason_before_the_hazard_text(
    pdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`profile set -m WHY`: the commit body is the operator's words, then what the flag does."""
    import os
    import sys

    root = pdir.parent
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dsv4ops",
            "profile",
            "set",
            "base",
            "overlap=on",
            "--as",
            "tryit",
            "-m",
            "A/B won by 6% at c64\nticket OPS-12",
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    body = subprocess.run(
        ["git", "log", "-1", "--format=%b"], cwd=root, capture_output=True, text=True, check=True
    ).stdout
    lines = body.strip().splitlines()
    assert lines[:2] == ["A/B won by 6% at c64", "ticket OPS-12"]
    assert any("overlap" in line and "wedge" in line.lower() for line in lines[2:]), body
    empty = subprocess.run(
        [
            sys.executable,
            "-m",
            "dsv4ops",
            "profile",
            "set",
            "base",
            "overlap=on",
            "--as",
            "other",
            "--reason",
            "  ",
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert empty.returncode == 1 and "--reason is empty" in empty.stderr
    assert not (pdir / "other.yaml").exists()


def _refused_printably(
    env: dict[str, str], *args: str
) -> tuple[subprocess.CompletedProcess[str], str]:
    """`dsv4ops profile ARGS` as a subprocess that must exit 1 with no traceback and nothing
    unprintable on either stream; the process and both streams together."""
    proc = subprocess.run(
        [sys.executable, "-m", "dsv4ops", "profile", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    both = proc.stdout + proc.stderr
    assert proc.returncode == 1, both
    assert "Traceback" not in both and all(c.isprintable() for c in both.replace("\n", "")), both
    return proc, both


def test_a_control_character_in_a_targets_key_is_one_printable_error_line(pdir: Path) -> None:
    """The real command (a subprocess): exit 1, file:line and the mapping named, the key shown
    escaped; no traceback, no raw control character on either stream, in text or JSON."""
    text = targets_yaml().replace('twin_env: {DSV4_TWIN_SEED: "7"}', 'twin_env: {"A\\x01B": "7"}')
    (pdir / "targets.yaml").write_text(text)
    line = text.splitlines().index('    twin_env: {"A\\x01B": "7"}') + 1
    env = {**os.environ, "DSV4OPS_PROFILES_DIR": str(pdir)}
    for args in (
        ["render", "base", "--target", "twin-local"],
        ["validate"],
        ["validate", "--json"],
    ):
        proc, both = _refused_printably(env, *args)
        assert "[key]" not in both, both
        shown = json.loads(proc.stdout)["error"] if "--json" in args else proc.stderr
        assert (
            f"{pdir}/targets.yaml:{line}: targets.twin-local.twin_env: key 'A\\x01B': contains "
            "the control character U+0001 at position 1"
        ) in shown, shown


def test_a_control_character_in_a_profile_key_never_reaches_the_terminal(pdir: Path) -> None:
    """`profile validate` prints each problem as one printable line, on stderr for one profile
    with several problems and in the FAIL table for several profiles: a key holding a BEL or an
    ESC is shown escaped (it was printed raw: the terminal rang or took a sequence)."""
    (pdir / "bad.yaml").write_text(child('"x\\x07y": 1\n"z\\x1b[2J": 2\n'))
    env = {**os.environ, "DSV4OPS_PROFILES_DIR": str(pdir)}
    for args in (["validate", "bad"], ["validate"]):
        _, both = _refused_printably(env, *args)
        assert "x\\x07y" in both and "z\\x1b[2J" in both, both
