from __future__ import annotations

import re
from pathlib import Path

import pytest

from dsv4ops.errors import RemoteCommandError
from dsv4ops.remote.fake import FakeExecutor, UnscriptedCommand


def test_exact_and_regex_scripts_answer_in_order() -> None:
    fake = FakeExecutor()
    fake.script(["nvidia-smi", "-L"], stdout="GPU 0\n", times=1)
    fake.script(re.compile(r"^nvidia-smi"), exit_code=9, stderr="driver gone")
    assert fake.run(["nvidia-smi", "-L"]).stdout == "GPU 0\n"
    with pytest.raises(RemoteCommandError, match="driver gone"):
        fake.run(["nvidia-smi", "-L"])  # the exact rule is used up; the regex answers
    assert [c.argv for c in fake.calls] == [("nvidia-smi", "-L")] * 2


def test_handler_sees_argv_and_stdin() -> None:
    fake = FakeExecutor().script(
        re.compile(r"agent\.py$"), handler=lambda argv, stdin: (0, stdin or "", "")
    )
    assert fake.run(["python3", "/w/agent.py"], stdin='{"op": "hello"}').stdout == '{"op": "hello"}'


def test_unscripted_commands_blow_up() -> None:
    fake = FakeExecutor().script(["true"])
    with pytest.raises(UnscriptedCommand, match="rm -rf /"):
        fake.run(["rm", "-rf", "/"])


def test_secrets_are_redacted_in_fake_results_too() -> None:
    fake = FakeExecutor().script(re.compile("echo"), stdout="value=tok-abcdef")
    res = fake.run(["echo", "--api-key", "tok-abcdef"], env={"HF_TOKEN": "tok-abcdef"})
    assert "tok-abcdef" not in res.stdout and "tok-abcdef" not in res.argv


def test_files_round_trip(tmp_path: Path) -> None:
    src = tmp_path / "a"
    src.write_text("x")
    fake = FakeExecutor()
    fake.put(src, "/remote/a")
    fake.get("/remote/a", tmp_path / "b")
    assert (tmp_path / "b").read_text() == "x"
    with pytest.raises(UnscriptedCommand):
        fake.get("/remote/missing", tmp_path / "c")
