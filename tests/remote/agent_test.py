"""The agent as a program: stdlib only, its own redaction in sync, JSON in/out, self-updating."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from dsv4ops.remote import LocalExecutor, Supervisor, base
from dsv4ops.remote import agent as agent_mod
from dsv4ops.remote.errors import AgentCallError
from dsv4ops.remote.supervisor import AGENT_SOURCE, agent_sha256


def test_agent_imports_only_the_standard_library() -> None:
    tree = ast.parse(AGENT_SOURCE.read_text())
    modules = {
        (n.module if isinstance(n, ast.ImportFrom) else a.name).split(".")[0]
        for n in ast.walk(tree)
        if isinstance(n, ast.Import | ast.ImportFrom)
        for a in (n.names if isinstance(n, ast.Import) else [n])  # type: ignore[attr-defined]
        if not (isinstance(n, ast.ImportFrom) and n.module == "__future__")
    }
    assert modules <= set(sys.stdlib_module_names), modules - set(sys.stdlib_module_names)


def test_agent_redaction_matches_the_shared_definition() -> None:
    """The agent's stdlib copy classifies secrets exactly like dsv4ops/secrets.py."""
    from dsv4ops import secrets

    assert agent_mod.SECRET_ENV_MARKERS == secrets.SECRET_ENV_MARKERS
    assert agent_mod.SECRET_ENV_SUFFIXES == secrets.SECRET_ENV_SUFFIXES
    assert agent_mod.SECRET_ARG_FLAGS == secrets.SECRET_ARG_FLAGS
    assert agent_mod.SECRET_FLAG_SUFFIXES == secrets.SECRET_FLAG_SUFFIXES
    argv = ["x", "--api-key", "k1", "--hf-token=k2", "--admin-api-key", "k3", "--port", "1",
            "--max-prefill-tokens", "8"]
    assert agent_mod._redact_argv(argv) == base.redact_argv(argv)
    env = {"HF_TOKEN": "a", "MY_PASSWORD": "b", "OPENAI_KEY": "c", "DB_PASS": "d", "PATH": "/bin"}
    assert agent_mod._redact_env(env) == base.redact_env(env)


def _agent(request: dict, tmp_path: Path) -> dict:
    out = subprocess.run(
        [sys.executable, "-I", "-S", str(AGENT_SOURCE)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return json.loads(out.stdout)


def test_bad_requests_get_a_json_error_not_a_traceback(tmp_path: Path) -> None:
    assert _agent({"op": "nope", "workdir": str(tmp_path)}, tmp_path)["kind"] == "bad_request"
    assert (
        _agent({"op": "status", "workdir": "relative/dir", "names": []}, tmp_path)["kind"]
        == "bad_request"
    )
    reply = _agent(
        {"op": "start", "workdir": str(tmp_path), "name": "../x", "argv": ["true"]}, tmp_path
    )
    assert reply["kind"] == "bad_request" and "invalid name" in reply["error"]
    reply = _agent({"op": "hello", "workdir": str(tmp_path), "agent_sha256": "0" * 64}, tmp_path)
    assert reply["kind"] == "stale_agent"


def test_unexecutable_argv_is_a_clear_start_error(tmp_path: Path) -> None:
    sup = Supervisor(LocalExecutor(), str(tmp_path), python=sys.executable)
    with pytest.raises(AgentCallError, match="cannot execute '/nonexistent/prog'") as info:
        sup.start(base.ProcessSpec("x", ("/nonexistent/prog", "--flag")))
    assert info.value.kind == "exec_failed"


def test_agent_is_uploaded_once_and_replaced_when_different(tmp_path: Path) -> None:
    sup = Supervisor(LocalExecutor(), str(tmp_path), python=sys.executable)
    installed = Path(sup.agent_path)
    assert not installed.exists()
    assert sup.ensure_agent()["sha256"] == agent_sha256()
    assert installed.read_bytes() == AGENT_SOURCE.read_bytes()
    mtime = installed.stat().st_mtime_ns
    sup.read_state("x")
    assert installed.stat().st_mtime_ns == mtime  # unchanged agent: not uploaded again
    for other in (AGENT_SOURCE.read_text() + "# another version\n", "", "garbage("):
        installed.write_text(other)
        assert sup.read_state("x") is None  # noticed, re-uploaded, call retried
        assert installed.read_bytes() == AGENT_SOURCE.read_bytes()
    assert not list(installed.parent.glob("*.tmp.*"))


def test_missing_python_on_the_target_is_a_target_error(tmp_path: Path) -> None:
    from dsv4ops.errors import TargetError

    sup = Supervisor(LocalExecutor(), str(tmp_path), python="/nonexistent/python3")
    with pytest.raises(TargetError, match="no /nonexistent/python3 on the target"):
        sup.ensure_agent()
