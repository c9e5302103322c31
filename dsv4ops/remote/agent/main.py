"""The agent's one protocol: read a JSON request, check the zip is the operator's, dispatch.

The request names the sha256 of the zip the operator would upload; an agent whose own zip
differs answers `stale_agent` before doing anything, and the supervisor replaces it. The
`install_self` command is how a fresh upload puts itself in place: it runs from its temporary
name, proves its own sha256 is the one asked for, then renames itself over the old zip.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import importlib
import json
import os
import socket
import sys
from collections.abc import Callable

from .common import AgentError, JsonObject, Workdir

_ZIP = ""  # path of the running zip, set by main()
_SHA256 = ""  # its sha256 as __main__ read it (the bytes whose modules this process runs)
_COMPILED: str | None = None  # the compiled copy the modules come from (see __main__.py)


def own_sha256() -> str:
    if _SHA256:
        return _SHA256
    with open(_ZIP, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _user() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        return str(os.getuid())


def op_hello(wd: Workdir, req: JsonObject) -> JsonObject:
    return {
        "sha256": own_sha256(),
        "python": sys.version.split()[0],
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "user": _user(),
        "compiled": _COMPILED is not None,
    }


def op_install_self(wd: Workdir, req: JsonObject) -> JsonObject:
    """Rename this (already sha-checked) upload to `<workdir>/.dsv4ops/agent.zip`, atomically:
    a concurrent caller runs the old zip or the new one, never a half-written one."""
    if not req.get("agent_sha256"):
        raise AgentError("bad_request", "install_self needs the agent_sha256 it must match")
    final = wd.sub(".dsv4ops", "agent.zip")
    if os.path.dirname(os.path.abspath(_ZIP)) != os.path.dirname(final):
        raise AgentError("bad_request", "install_self runs only from an upload in .dsv4ops/")
    os.replace(_ZIP, final)
    return {"installed": final}


# op -> (module, function). A call imports only its own module: unmarshalling (or, without a
# compiled copy, compiling) the others would be start-up spent on nothing.
OPS = {
    "start": ("processes", "op_start"),
    "stop": ("processes", "op_stop"),
    "status": ("processes", "op_status"),
    "kill": ("processes", "op_kill"),
    "log_tail": ("processes", "op_log_tail"),
    "http": ("httpwait", "op_http"),
    "http_many": ("httpwait", "op_http_many"),
    "wait_http": ("httpwait", "op_wait_http"),
    "preflight": ("preflight", "op_preflight"),
    "lock_acquire": ("lock", "op_lock_acquire"),
    "lock_release": ("lock", "op_lock_release"),
    "lock_info": ("lock", "op_lock_info"),
    "journal_read": ("journal", "op_journal_read"),
    "journal_append": ("journal", "op_journal_append"),
    "journal_merge": ("journal", "op_journal_merge"),
    "read_state": ("state", "op_read_state"),
    "write_state": ("state", "op_write_state"),
    "kernels_install": ("kernels", "op_kernels_install"),
    "kernels_list": ("kernels", "op_kernels_list"),
    "kernels_rollback": ("kernels", "op_kernels_rollback"),
    "kernels_present": ("kernels", "op_kernels_present"),
    "kernels_probe": ("kernels", "op_kernels_probe"),
    "diagnostics": ("diagnostics", "op_diagnostics"),
}


def _lookup(op: object) -> Callable[[Workdir, JsonObject], object]:
    if op == "hello":
        return op_hello
    if op == "install_self":
        return op_install_self
    where = OPS.get(op) if isinstance(op, str) else None
    if where is None:
        raise AgentError("bad_request", f"unknown op {op!r}")
    try:
        module = importlib.import_module(f".{where[0]}", __package__)
    except ImportError as exc:
        # Only when the zip was replaced between our sha check and this import (a concurrent
        # upgrade): nothing ran, so the caller may upload and retry.
        _drop_compiled()
        raise AgentError("stale_agent", f"agent changed while starting: {exc}") from None
    except (EOFError, ValueError, TypeError) as exc:
        if _COMPILED is None:
            raise
        # Unreadable bytecode in the compiled copy (__main__.py): it goes, so the caller's
        # retry (after an upload) writes a new one; nothing ran.
        _drop_compiled()
        raise AgentError("stale_agent", f"damaged compiled copy of the agent: {exc}") from None
    fn: Callable[[Workdir, JsonObject], object] = getattr(module, where[1])
    return fn


def _drop_compiled() -> None:
    if _COMPILED is not None:
        with contextlib.suppress(OSError):
            os.unlink(_COMPILED)


def _answer(raw: str) -> JsonObject:
    """The reply to one request (a JSON object as text); never raises for a bad request. It
    carries the request's `id`, by which the operator tells it from anything else on the
    stream (dsv4ops/remote/wire.py); a request it cannot read gets a reply without one."""
    req = None
    try:
        req = _request(raw)
        want = req.get("agent_sha256")
        if want and want != own_sha256():  # the operator has a different agent: re-upload first
            raise AgentError("stale_agent", "agent on the target is a different version")
        op = _lookup(req.get("op"))
        reply: JsonObject = {"ok": True, "result": op(Workdir(req.get("workdir", "")), req)}
    except AgentError as exc:
        reply = {"ok": False, "kind": exc.kind, "error": str(exc), **exc.extra}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        # A full disk (or quota) is the box's state, not the agent's bug: its own kind, so the
        # operator's side maps it by kind (FAILED, "free space"), never by the error's words.
        full = isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)
        kind = "disk_full" if full else "internal"
        reply = {"ok": False, "kind": kind, "error": f"{type(exc).__name__}: {exc}"}
    return _with_id(reply, req)


def _request(raw: str) -> JsonObject:
    try:
        req = json.loads(raw or "{}")
    except (ValueError, RecursionError) as exc:
        raise AgentError("bad_request", f"a request is one JSON object, not this: {exc}") from None
    if not isinstance(req, dict):
        raise AgentError("bad_request", "a request is one JSON object")
    return req


def _with_id(reply: JsonObject, req: object) -> JsonObject:
    """`reply` carrying the id of `req`, when `req` was a request with one."""
    rid = req.get("id") if isinstance(req, dict) else None
    return reply if rid is None else {**reply, "id": rid}


def _request_id(raw: str) -> object:
    """The id of a request line, or None where it has none (or is not a request)."""
    try:
        return _request(raw).get("id")
    except AgentError:
        return None


def _start(zip_path: str, sha256: str, compiled: str | None) -> None:
    global _ZIP, _SHA256, _COMPILED
    _ZIP, _SHA256, _COMPILED = zip_path, sha256, compiled


def main(zip_path: str, *, sha256: str = "", compiled: str | None = None) -> int:
    """Answer one request from stdin on stdout; always exit 0 with a JSON reply. `sha256`: the
    zip's, as __main__ hashed it; `compiled`: the compiled copy the modules were imported from."""
    _start(zip_path, sha256, compiled)
    sys.stdout.write(json.dumps(_answer(_text(sys.stdin.buffer.read()))))
    sys.stdout.flush()
    return 0


def serve(zip_path: str, *, sha256: str, compiled: str | None = None) -> int:
    """`agent.zip --serve`: a session (dsv4ops/remote/agent_session.py) answering one request
    per line, each as `main` answers its one, until stdin closes.

    The first line out says the session is ready, so its caller knows that a session that dies
    before it ran nothing. Before each request the zip on disk is hashed again: replaced or
    damaged since the session started, the session answers `session_stale` without running the
    request and exits, and the caller makes that call the one-process way (stale, upload,
    retry) as always. Between requests it reaps the monitors `start` forked that have exited:
    a one-shot agent's exit hands them to init; this process outlives them."""
    _start(zip_path, sha256, compiled)
    out = sys.stdout
    try:
        out.write(json.dumps({"ready": True, "sha256": sha256, "pid": os.getpid()}) + "\n")
        out.flush()
        for raw in sys.stdin.buffer:
            line = _text(raw)
            if _zip_sha256(zip_path) != sha256:
                stale = "the agent zip changed on disk since this session started"
                reply = {"ok": False, "kind": "session_stale", "error": stale}
                out.write(json.dumps(_with_id(reply, {"id": _request_id(line)})) + "\n")
                out.flush()
                return 0
            out.write(json.dumps(_answer(line)) + "\n")
            out.flush()
            _reap_children()
    except BrokenPipeError:  # the caller went away: nothing to answer
        pass
    return 0


def _text(raw: bytes) -> str:
    """A request's bytes as text: bytes that are not UTF-8 make a request the JSON parser
    refuses (bad_request), never a crash of the agent."""
    return raw.decode("utf-8", "surrogateescape")


def _zip_sha256(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def _reap_children() -> None:
    """Exited children (only `start`'s monitors outlive a request), without waiting."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] != 0:
            pass
