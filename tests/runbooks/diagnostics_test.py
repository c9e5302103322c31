"""The diagnostics bundle's writer: the size cap and the redaction of free text (the bundle of a
wedged twin, py-spy included, is checked in tests/cli/runbook_rehearsal_test.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsv4ops.runbooks.diagnostics import Bundle, scrub_body, scrub_text


def test_the_size_cap_cuts_and_says_so(tmp_path: Path) -> None:
    b = Bundle(tmp_path / "b", max_bytes=100)
    b.text("a.txt", "x" * 60, "first")
    b.text("b.txt", "y" * 60, "second")
    b.text("c.txt", "z", "third")
    assert (tmp_path / "b/a.txt").read_text() == "x" * 60
    assert (tmp_path / "b/b.txt").read_text() == "y" * 40
    assert (tmp_path / "b/c.txt").read_text() == ""
    assert [(i["bytes"], i["cut"]) for i in b.items] == [(60, False), (40, True), (0, True)]


def test_free_text_and_json_are_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPS_API_TOKEN", "tok-from-this-shell")
    text = (
        "ServerArgs(api_key='sk-abc123', tp_size=4) --api-key sk-def456 HF_TOKEN=hf_x9y8z7 "
        "password: hunter22 uses tok-from-this-shell sglang:realtime_tokens_total 5"
    )
    out = scrub_text(text)
    for secret in ("sk-abc123", "sk-def456", "hf_x9y8z7", "hunter22", "tok-from-this-shell"):
        assert secret not in out
    assert "api_key='***'" in out and "sglang:realtime_tokens_total 5" in out
    b = Bundle(tmp_path / "b", max_bytes=10_000)
    b.json("d.json", {"env": {"HF_TOKEN": "hf_x9y8z7"}, "argv": ["--api-key", "k"]}, "d")
    assert json.loads((tmp_path / "b/d.json").read_text())["env"]["HF_TOKEN"] == "***"


def test_server_info_is_redacted_as_data(tmp_path: Path) -> None:
    """issue 21, F3: SGLang's /server_info carries the ServerArgs (admin_api_key, the keys list)
    and the twin's its launch command: every secret-carrying field and argv is hidden."""
    body = json.dumps(
        {
            "admin_api_key": "sekr1t-admin",
            "api_key": None,
            "control_plane_api_keys": ["cp-key-one", "cp-key-two"],
            "ssl_keyfile_password": "pw-keyfile",
            "launch_command": "python -m sglang.launch_server --admin-api-key sekr1t-admin "
            "--api-key=sekr1t-api --port 31000",
            "postgres_db_url": "postgres://ops:pg-pass-1@db/x",
            "tp_size": 4,
        }
    )
    out = scrub_body(body)
    for secret in ("sekr1t", "cp-key", "pw-keyfile", "pg-pass-1"):
        assert secret not in out, out
    data = json.loads(out)
    assert data["api_key"] is None and data["tp_size"] == 4
    assert data["launch_command"].endswith("--api-key=*** --port 31000")
    assert scrub_body("not json --admin-api-key sekr1t") == "not json --admin-api-key sekr1t"
    assert "sekr1t" not in scrub_text("not json --admin-api-key sekr1t")
