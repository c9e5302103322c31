"""`dsv4ops profile schema`: the JSON Schema (or the reference tables) on stdout or into a file,
and a clean error for bad usage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from dsv4ops import exitcodes
from dsv4ops.cli import main
from dsv4ops.profiles.json_schema import profile_json_schema, targets_json_schema
from dsv4ops.profiles.reference import markdown, targets_blocks


def test_it_prints_the_profile_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "schema"]) == 0
    printed = json.loads(capsys.readouterr().out)
    Draft202012Validator.check_schema(printed)
    assert printed == profile_json_schema() and "canary" in printed["properties"]


def test_targets_markdown_prints_the_targets_tables(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "schema", "--targets", "--markdown"]) == 0
    assert capsys.readouterr().out == markdown(targets_blocks())


def test_dash_o_writes_what_it_would_print(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "targets.schema.json"
    assert main(["profile", "schema", "--targets", "-o", str(out)]) == 0
    assert capsys.readouterr().out == f"wrote {out}\n"
    assert json.loads(out.read_text(encoding="utf-8")) == targets_json_schema()


def test_an_unwritable_output_is_a_clean_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "missing" / "profile.schema.json"
    assert main(["profile", "schema", "-o", str(out)]) == exitcodes.REFUSED
    err = capsys.readouterr().err
    assert err.startswith(f"error: -o {out}: cannot write: No such file or directory")
    assert "Traceback" not in err and not out.exists()


def test_an_unknown_option_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", "schema", "--yaml"]) == exitcodes.REFUSED
    err = capsys.readouterr().err
    assert "Error: No such option '--yaml'" in err and "Traceback" not in err
