"""The diagnostics bundle's writer: the size cap and the redaction of free text (the bundle of a
wedged twin, py-spy included, is checked in tests/cli/runbook_rehearsal_test.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsv4ops.runbooks.diagnostics import Bundle, scrub_text


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
