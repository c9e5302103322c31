"""The agent as a program: one stdlib-only zip carrying the real secrets module, JSON in/out,
self-updating by sha256, runnable isolated on a target without dsv4ops."""

from __future__ import annotations

import ast
import hashlib
import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from dsv4ops import secrets
from dsv4ops.jsontypes import JSONObject
from dsv4ops.remote import LocalExecutor, Supervisor, base
from dsv4ops.remote.agent_zip import (
    AGENT_DIR,
    JSONTYPES_SOURCE,
    RECORDFILE_SOURCE,
    SECRETS_SOURCE,
    agent_sha256,
    agent_zip,
)
from dsv4ops.remote.errors import AgentCallError

# Python under `env -i`, like a login on a box: no PYTHONPATH, no venv, no dsv4ops importable.
_BARE_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"}
_OWN = (
    "dsv4ops.remote.agent",
    "dsv4ops.secrets",
    "dsv4ops.journal.recordfile",
    "dsv4ops.jsontypes",
)
# Names the stdlib itself tries (and fails) to import: `copy` probes for Jython's org.python.core.
_STDLIB_PROBES = {"org", "org.python", "org.python.core"}


def _zip_members() -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(agent_zip())) as zf:
        return {n: zf.read(n) for n in zf.namelist()}


def _imported_names(source: bytes) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module != "__future__":
            names.add(str(node.module))
    return names


def test_every_module_in_the_zip_imports_only_the_stdlib_and_its_own_package() -> None:
    members = _zip_members()
    assert {n for n in members if n.startswith("dsv4ops/remote/agent/")} == {
        f"dsv4ops/remote/agent/{p.name}" for p in AGENT_DIR.glob("*.py")
    }
    for name, source in members.items():
        for mod in _imported_names(source):
            own = mod.startswith(_OWN)
            assert own or mod.split(".")[0] in sys.stdlib_module_names, f"{name} imports {mod}"


def test_the_zip_carries_the_real_secrets_module_and_no_copy() -> None:
    members = _zip_members()
    assert members["dsv4ops/secrets.py"] == SECRETS_SOURCE.read_bytes()
    assert (
        members["dsv4ops/journal/recordfile.py"] == RECORDFILE_SOURCE.read_bytes()
    )  # the store's rules
    assert members["dsv4ops/jsontypes.py"] == JSONTYPES_SOURCE.read_bytes()  # the JSON alias
    assert SECRETS_SOURCE.resolve() == Path(secrets.__file__).resolve()
    for path in AGENT_DIR.glob("*.py"):  # nobody re-declares the rules next to the agent
        assert "SECRET_ENV_MARKERS" not in path.read_text(), path
    assert agent_zip() == agent_zip() and len(agent_sha256()) == 64


def _run_isolated(
    zip_path: Path, request: JSONObject, *, importtime: bool = False
) -> tuple[JSONObject, str]:
    argv = [
        sys.executable,
        "-I",
        "-S",
        *(["-X", "importtime"] if importtime else []),
        str(zip_path),
    ]
    out = subprocess.run(
        argv,
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
        cwd=zip_path.parent,
        env=_BARE_ENV,
    )
    reply: JSONObject = json.loads(out.stdout)
    return reply, out.stderr


def test_the_uploaded_zip_runs_isolated_on_a_target_without_dsv4ops(tmp_path: Path) -> None:
    """`python -I -S agent.zip` from a temp dir with a bare env: every command family answers,
    and nothing but the stdlib and the zip's own modules is imported (python's own record)."""
    target = tmp_path / "box"
    target.mkdir()
    zip_path = target / "agent.zip"
    zip_path.write_bytes(agent_zip())
    wd = str(target / "wd")
    requests: list[JSONObject] = [
        {"op": "hello"},
        {"op": "write_state", "name": "x", "data": {"HF_TOKEN": "t"}},
        {"op": "read_state", "name": "x"},
        {
            "op": "start",
            "name": "c",
            "argv": ["true", "--api-key", "k-123456"],
            "env": {"HF_TOKEN": "hf-123456", "MODE": "a"},
        },
        {"op": "status", "names": ["c"]},
        {"op": "preflight", "ports": [1], "gpus": [], "paths": [wd]},
        {"op": "http", "url": "http://127.0.0.1:1/", "timeout_s": 1},
        {"op": "lock_info"},
        {"op": "journal_append", "lines": '{"op":"d-1","type":"begin"}\n'},
        {"op": "journal_read", "offset": 0},
        {"op": "journal_merge", "records": [{"op": "d-2"}], "merge": {"type": "merge"}},
        {"op": "kernels_list"},
        {"op": "kernels_probe"},
    ]
    for req in requests:
        reply, trace = _run_isolated(
            zip_path, {**req, "workdir": wd, "agent_sha256": agent_sha256()}, importtime=True
        )
        assert reply["ok"], (req, reply)
        loaded = [line.split("|")[-1].strip() for line in trace.splitlines() if "|" in line]
        stray = [
            m
            for m in loaded[1:]
            if not m.startswith(_OWN)
            and m not in _STDLIB_PROBES
            and m not in ("dsv4ops", "dsv4ops.remote", "dsv4ops.journal")  # the zip's stub packages
            and m.split(".")[0] not in sys.stdlib_module_names
        ]
        assert not stray, (req["op"], stray)
        assert any(m.startswith("dsv4ops.remote.agent") for m in loaded)
    record = json.loads((target / "wd" / "run" / "c.json").read_text())
    assert record["argv"] == secrets.redact_argv(
        ["true", "--api-key", "k-123456"]
    )  # the real rules
    assert record["env"] == {"HF_TOKEN": "***", "MODE": "a"}


def _agent(request: JSONObject, tmp_path: Path) -> JSONObject:
    zip_path = tmp_path / "agent.zip"
    if not zip_path.exists():
        zip_path.write_bytes(agent_zip())
    return _run_isolated(zip_path, request)[0]


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
    for unchecked in ({}, {"agent_sha256": agent_sha256(), "workdir": str(tmp_path / "elsewhere")}):
        reply = _agent({"op": "install_self", "workdir": str(tmp_path), **unchecked}, tmp_path)
        assert reply["kind"] == "bad_request" and (tmp_path / "agent.zip").exists()


def test_unexecutable_argv_is_a_clear_start_error(tmp_path: Path) -> None:
    sup = Supervisor(LocalExecutor(), str(tmp_path), python=sys.executable)
    with pytest.raises(AgentCallError, match="cannot execute '/nonexistent/prog'") as info:
        sup.start(base.ProcessSpec("x", ("/nonexistent/prog", "--flag")))
    assert info.value.kind == "exec_failed"


def _other_version() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:  # a valid agent zip of another dsv4ops version
        for name, data in _zip_members().items():
            zf.writestr(
                name, data + (b"\n# another version\n" if name.endswith("main.py") else b"")
            )
    return buf.getvalue()


def test_agent_is_uploaded_once_and_a_tampered_zip_is_detected_and_replaced(tmp_path: Path) -> None:
    sup = Supervisor(LocalExecutor(), str(tmp_path), python=sys.executable)
    installed = Path(sup.agent_path)
    assert not installed.exists()
    assert sup.ensure_agent()["sha256"] == agent_sha256()
    assert installed.read_bytes() == agent_zip()
    mtime = installed.stat().st_mtime_ns
    sup.read_state("x")
    assert installed.stat().st_mtime_ns == mtime  # unchanged agent: not uploaded again
    good = agent_zip()
    tampered = {
        "another version": _other_version(),
        "bytes appended": good + b"tampered",
        "truncated": good[: len(good) // 2],
        "no __main__": good.replace(b"__main__.py", b"__xain__.py"),
        "empty": b"",
        "garbage": b"garbage(",
    }
    for what, data in tampered.items():
        installed.write_bytes(data)
        assert sup.read_state("x") is None, what  # noticed, re-uploaded, call retried
        assert installed.read_bytes() == good, what
    assert not list(installed.parent.glob("*.tmp.*"))


def test_an_upload_damaged_in_transit_is_never_installed(tmp_path: Path) -> None:
    """The fresh upload proves its own sha256 before it renames itself into place."""

    class Corrupting(LocalExecutor):
        def put(self, local: Path, remote: str) -> None:
            super().put(local, remote)
            with open(remote, "ab") as f:
                f.write(b"bit rot")

    sup = Supervisor(Corrupting(), str(tmp_path), python=sys.executable)
    with pytest.raises(AgentCallError) as info:
        sup.ensure_agent()
    assert info.value.kind == "stale_agent"
    assert not Path(sup.agent_path).exists()
    assert not list(Path(sup.agent_path).parent.glob("*.tmp.*"))


def test_missing_python_on_the_target_is_a_target_error(tmp_path: Path) -> None:
    from dsv4ops.errors import TargetError

    sup = Supervisor(LocalExecutor(), str(tmp_path), python="/nonexistent/python3")
    with pytest.raises(TargetError, match="no /nonexistent/python3 on the target"):
        sup.ensure_agent()


def test_a_port_bound_between_the_table_read_and_the_connect_still_names_its_owner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A component still starting binds its port after preflight read /proc/net/tcp: the connect
    # then sees it, and the owner must still be found (a CI failure: "in use by another process").
    import socket as socket_mod

    from dsv4ops.remote.agent import preflight as agent_preflight
    from dsv4ops.remote.agent.common import Workdir

    server = socket_mod.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    # the name preflight looks up (imported there from procfs) is the one the test replaces
    real = agent_preflight.listeners  # type: ignore[attr-defined]
    reads: list[dict[int, set[str]]] = [{}]  # the first read: before the bind
    monkeypatch.setattr(agent_preflight, "listeners", lambda: reads.pop() if reads else real())
    try:
        reply = agent_preflight.op_preflight(Workdir(str(tmp_path)), {"ports": [port]})
    finally:
        server.close()
    use = reply["ports"][str(port)]
    assert use["in_use"] and [h["pid"] for h in use["holders"]] == [os.getpid()], use


def _copies(zip_path: Path) -> list[str]:
    folder = zip_path.parent / "agent-bytecode"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def _hello(zip_path: Path, sha: str | None = None) -> JSONObject:
    request: JSONObject = {"op": "hello", "workdir": str(zip_path.parent / "wd")}
    reply = _run_isolated(zip_path, {**request, "agent_sha256": sha or agent_sha256()})[0]
    assert reply["ok"], reply
    result = reply["result"]
    assert isinstance(result, dict)
    return result


def test_the_first_call_writes_a_compiled_copy_and_later_calls_import_from_it(
    tmp_path: Path,
) -> None:
    """Python keeps no bytecode for a zip's modules: the copy is what saves each call compiling
    them (benchmarks/agent_call.py). It is named by the zip's sha256 and python's magic."""
    from importlib.util import MAGIC_NUMBER

    zip_path = tmp_path / "agent.zip"
    zip_path.write_bytes(agent_zip())
    assert _hello(zip_path)["compiled"] is True  # written, then imported from
    assert _copies(zip_path) == [f"{agent_sha256()}-{MAGIC_NUMBER.hex()}.zip"]
    with zipfile.ZipFile(zip_path.parent / "agent-bytecode" / _copies(zip_path)[0]) as zf:
        names = set(zf.namelist())
    assert names == {n + "c" for n in _zip_members() if n != "__main__.py"}  # .pyc only
    copy = zip_path.parent / "agent-bytecode" / _copies(zip_path)[0]
    mtime = copy.stat().st_mtime_ns
    reply = _run_isolated(
        zip_path, {"op": "status", "names": ["x"], "workdir": str(tmp_path / "wd")}
    )[0]
    assert reply["ok"], reply
    assert copy.stat().st_mtime_ns == mtime  # read, not written again


def test_another_agent_version_gets_its_own_copy_and_the_old_one_goes(tmp_path: Path) -> None:
    zip_path = tmp_path / "agent.zip"
    zip_path.write_bytes(agent_zip())
    _hello(zip_path)
    old = _copies(zip_path)
    other = _other_version()
    zip_path.write_bytes(other)
    other_sha = hashlib.sha256(other).hexdigest()
    hello = _hello(zip_path, other_sha)
    assert hello["sha256"] == other_sha and hello["compiled"] is True
    assert len(_copies(zip_path)) == 1 and _copies(zip_path) != old
    assert _copies(zip_path)[0].startswith(other_sha)


def test_without_a_copy_the_agent_answers_from_the_zip(tmp_path: Path) -> None:
    """Where the copy cannot be written (here a file stands where its folder would go, as on a
    read-only work directory), every call compiles from the zip, as before the copy."""
    zip_path = tmp_path / "agent.zip"
    zip_path.write_bytes(agent_zip())
    (tmp_path / "agent-bytecode").write_text("not a folder\n")
    assert _hello(zip_path)["compiled"] is False
    reply = _run_isolated(
        zip_path, {"op": "status", "names": ["x"], "workdir": str(tmp_path / "wd")}
    )[0]
    assert reply["ok"], reply


def test_a_damaged_copy_is_dropped_and_written_anew(tmp_path: Path) -> None:
    from importlib.util import MAGIC_NUMBER

    zip_path = tmp_path / "agent.zip"
    zip_path.write_bytes(agent_zip())
    copy = tmp_path / "agent-bytecode" / f"{agent_sha256()}-{MAGIC_NUMBER.hex()}.zip"
    copy.parent.mkdir()
    copy.write_bytes(b"garbage, not a zip")
    assert _hello(zip_path)["compiled"] is False  # this call: from the zip
    assert not copy.exists()
    assert _hello(zip_path)["compiled"] is True  # the next one writes a good copy
    # A copy whose zip is whole but one module's bytecode is not: the op that needs it
    # answers stale_agent (nothing ran; the supervisor re-uploads and retries) and the copy goes.
    with zipfile.ZipFile(copy) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    members["dsv4ops/remote/agent/processes.pyc"] = MAGIC_NUMBER + b"\0" * 12 + b"garbage"
    with zipfile.ZipFile(copy, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    request: JSONObject = {"op": "status", "names": ["x"], "workdir": str(tmp_path / "wd")}
    assert _run_isolated(zip_path, request)[0]["kind"] == "stale_agent"
    assert not copy.exists()
    assert _run_isolated(zip_path, request)[0]["ok"]
    assert copy.exists()


def test_the_supervisor_s_calls_run_from_the_compiled_copy(tmp_path: Path) -> None:
    sup = Supervisor(LocalExecutor(), str(tmp_path), python=sys.executable)
    assert sup.ensure_agent()["sha256"] == agent_sha256()
    assert sup.ensure_agent()["compiled"] is True
    assert len(_copies(Path(sup.agent_path))) == 1


def test_a_stop_without_a_grace_is_refused_and_stops_nothing(tmp_path: Path) -> None:
    """The agent has no grace of its own (dsv4ops/timings.py is the one home): a caller that
    sends none, or no number, gets a clean refusal and the component keeps running."""
    sup = Supervisor(LocalExecutor(), str(tmp_path / "wd"), python=sys.executable)
    sup.start(base.ProcessSpec("c", ("sleep", "60")))
    try:
        for args in ({}, {"grace_s": "10"}, {"grace_s": 0}, {"grace_s": True}):
            with pytest.raises(AgentCallError, match="stop needs grace_s") as info:
                sup.call("stop", name="c", **args)
            assert info.value.kind == "bad_request" and "Traceback" not in str(info.value)
        assert sup.status(["c"])["c"].alive
        with pytest.raises(AgentCallError, match="http needs timeout_s"):
            sup.call("http", url="http://127.0.0.1:1/")
    finally:
        assert sup.stop("c", grace_s=1).was_running
