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


def test_dash_o_replaces_only_a_file_the_command_wrote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`-o docs/profiles.md` (or a profile) by a slip replaced that file with the tables; now a
    file the command did not write is refused, nothing written, and its own output is renewed."""
    shipped = Path(__file__).resolve().parents[2] / "docs" / "profiles.md"
    docs = tmp_path / "profiles.md"
    docs.write_text(shipped.read_text(encoding="utf-8"), encoding="utf-8")
    before = docs.read_bytes()
    assert main(["profile", "schema", "--markdown", "-o", str(docs)]) == exitcodes.REFUSED
    err = capsys.readouterr().err
    assert err.startswith(f"error: -o {docs}: that file exists and was not written by this "), err
    assert "nothing was written" in err and "another path" in err, err
    assert docs.read_bytes() == before
    # the command's own output, stale or not, is replaced: JSON and tables alike
    for args, name in ((["--targets"], "t.json"), (["--markdown"], "t.md")):
        out = tmp_path / name
        out.write_text("")  # an empty file is nobody's
        assert main(["profile", "schema", *args, "-o", str(out)]) == 0
        out.write_text(out.read_text(encoding="utf-8") + "stale\n")
        assert main(["profile", "schema", *args, "-o", str(out)]) == 0
        capsys.readouterr()
    assert json.loads((tmp_path / "t.json").read_text()) == targets_json_schema()
    # a JSON Schema file is not the tables', nor the tables the JSON's
    assert main(["profile", "schema", "--markdown", "-o", str(tmp_path / "t.json")]) == 1
    assert json.loads((tmp_path / "t.json").read_text()) == targets_json_schema()
