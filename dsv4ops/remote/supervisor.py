"""Supervisor: typed operator-side methods over the target-side agent (`remote/agent/`).

Every process-level action (detached start, group stop, status, readiness wait, preflight, the
deploy lock, state files, kernel packages) runs *on the target* inside one `python3 agent.zip`
call with a JSON request on stdin. Going through stdin keeps secret env values off every
command line; running the waits on the target keeps readiness detection fast over SSH (one
round trip, not one per poll). A call that loses its SSH connection is sent again once the
target answers, when that cannot do a thing twice (remote/rideout.py).
"""

from __future__ import annotations

import posixpath
import uuid
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from dsv4ops.clock import Clock, SystemClock
from dsv4ops.constants import SSH_RECONNECT_S
from dsv4ops.errors import TargetError
from dsv4ops.jsontypes import JSONObject, JSONValue
from dsv4ops.remote import rideout, wire
from dsv4ops.remote.agent_session import AgentSession
from dsv4ops.remote.agent_zip import agent_sha256, local_agent_zip
from dsv4ops.remote.base import Executor, ProcessSpec, ProcessState
from dsv4ops.remote.errors import (
    AgentCallError,
    StopError,
    lock_error,
)
from dsv4ops.remote.local import LocalExecutor
from dsv4ops.remote.procident import dead_here
from dsv4ops.remote.replies import (
    http_items,
    http_reply,
    not_ready_error,
    preflight_report,
    process_state,
    started_state,
    stop_report,
    wait_result,
)
from dsv4ops.remote.results import (
    HttpReply,
    HttpRequest,
    LockInfo,
    PreflightReport,
    StopReport,
    WaitResult,
)
from dsv4ops.timings import CALL_MARGIN_S, TARGET_HTTP_S

_CALL_TIMEOUT_S = 60.0
T = TypeVar("T")


class Supervisor:
    """Drives the agent zip in `<workdir>/.dsv4ops/agent.zip` on the executor's target."""

    def __init__(
        self,
        executor: Executor,
        workdir: str,
        python: str = "python3",
        *,
        reconnect_s: float = SSH_RECONNECT_S,
        clock: Clock | None = None,
        notify: Callable[[str], None] | None = None,
    ) -> None:
        """`reconnect_s`: how long calls ride out a lost connection (remote/rideout.py);
        `notify` hears when one is lost and when it is back."""
        if not workdir.startswith("/"):
            raise TargetError(f"{executor.host}: work directory must be absolute, got {workdir!r}")
        self.executor = executor
        self.workdir = workdir.rstrip("/") or "/"
        self.python = python
        self.agent_path = f"{self.workdir}/.dsv4ops/agent.zip"
        self._sha256 = agent_sha256()
        self._clock = clock or SystemClock()
        self._outage = rideout.Outage(executor.host, reconnect_s, self._clock, notify)
        # A local target's calls go to one long-lived agent (remote/agent_session.py); only a
        # plain LocalExecutor's: a wrapper that changes what `run` does keeps its one-shot calls.
        self._session: AgentSession | None = None
        if type(executor) is LocalExecutor:
            argv = [self.python, "-I", "-S", self.agent_path]
            self._session = AgentSession(argv, sha256=self._sha256)
            weakref.finalize(self, self._session.close)

    def close(self) -> None:
        """End the local agent session, if one runs (the executor stays open)."""
        if self._session is not None:
            self._session.close()

    # ------------------------------------------------------------------ agent plumbing

    def ensure_agent(self) -> JSONObject:
        """Upload the agent when missing or different (by sha256); returns its hello (host, python)."""
        return self._call("hello")

    def _upload_agent(self) -> None:
        # Copied under a temporary name, then run from there: the new zip checks its own sha256
        # against ours on the target before renaming itself into place (atomic), so a
        # concurrent caller never runs a half-written or damaged agent.
        upload = f"{self.agent_path}.tmp.{uuid.uuid4().hex[:12]}"
        self.executor.run(["mkdir", "-p", posixpath.dirname(upload)], timeout=_CALL_TIMEOUT_S)
        with local_agent_zip() as local:
            self.executor.put(local, upload)
        try:
            self._run_agent(upload, "install_self", _CALL_TIMEOUT_S, {}, final=True)
        except BaseException:
            self.executor.run(["rm", "-f", upload], timeout=_CALL_TIMEOUT_S, check=False)
            raise

    def _run_agent(
        self, path: str, op: str, timeout: float, args: Mapping[str, object], *, final: bool
    ) -> JSONObject | None:
        """One call of the agent zip at `path`. None (unless `final`): missing, stale or broken."""
        rid = wire.new_id()
        request = wire.request(op, rid, workdir=self.workdir, sha256=self._sha256, args=args)
        from_session = self._session is not None and path == self.agent_path
        res = self._session.call(request, timeout, rid) if self._session and from_session else None
        if res is None:
            from_session = False
            # -I -S: the agent is stdlib-only, so skip site-packages (4x faster start-up) and
            # PYTHON* env.
            res = self.executor.run(
                [self.python, "-I", "-S", path], stdin=request, timeout=timeout, check=False
            )
        if res.exit_code == 127 and not res.timed_out:
            raise TargetError(
                f"{self.executor.host}: no {self.python} on the target",
                hint="set the target's python",
            )
        reply = wire.outcome(
            res,
            op=op,
            request_id=rid,
            host=self.executor.host,
            from_session=from_session,
            final=final,
        )
        if not isinstance(reply, wire.Refusal):
            return reply
        if reply.kind == "stale_agent" and not final:
            if self._session is not None:
                self._session.close()  # it runs the stale zip's modules
            return None
        raise AgentCallError(
            f"{self.executor.host}: {op}: {reply.error}", kind=reply.kind, reply=reply.reply
        )

    def call(self, op: str, timeout: float = _CALL_TIMEOUT_S, **args: object) -> JSONObject:
        """One agent command by name: the typed methods below use it, and so do the kernel
        package commands (`dsv4ops/kernels/deploy.py`). Raises AgentCallError (agent's kind)."""
        return self._call_riding_out(op, timeout, args)[0]

    _call = call

    def _call_riding_out(
        self, op: str, timeout: float, args: Mapping[str, object]
    ) -> tuple[JSONObject, float]:
        return rideout.call(op, args, timeout, self._call_once, self._outage, self._clock)

    def _call_once(self, op: str, timeout: float, args: Mapping[str, object]) -> JSONObject:
        # The agent checks its own hash against ours before doing anything, so a missing, stale
        # or damaged agent costs one upload and one retry, and a current one nothing extra.
        result = self._run_agent(self.agent_path, op, timeout, args, final=False)
        if result is None:
            self._upload_agent()
            result = self._run_agent(self.agent_path, op, timeout, args, final=True)
        assert result is not None
        return result

    # ------------------------------------------------------------------ processes

    def start(self, spec: ProcessSpec) -> ProcessState:
        """Start a component detached (own session/group) with its log and run record."""
        rec = self._call(
            "start",
            name=spec.name,
            argv=list(spec.argv),
            env=dict(spec.env),
            ports=list(spec.ports),
        )
        return self._typed("start", lambda: started_state(spec.name, rec))

    def stop(self, name: str, ports: Sequence[int] | None = None, *, grace_s: float) -> StopReport:
        """SIGTERM the server process only, give its own graceful shutdown up to `grace_s`, then
        SIGKILL what is left of its group; raises StopError if anything survives or a port stays
        open. (SGLang's schedulers have no SIGTERM handler: a group SIGTERM would kill them at
        once and bypass the TokenizerManager's drain and ShutdownReq.)"""
        args: dict[str, object] = {"name": name, "grace_s": grace_s}
        if ports is not None:
            args["ports"] = list(ports)
        r = self._call("stop", timeout=grace_s + CALL_MARGIN_S, **args)
        report = self._typed("stop", lambda: stop_report(name, self.executor.host, r))
        if isinstance(report, StopError):
            raise report
        return report

    def status(
        self, names: Iterable[str], ports: Mapping[str, Sequence[int]] | None = None
    ) -> dict[str, ProcessState]:
        """State of each named component (ports checked: the recorded ones unless given)."""
        names = list(names)
        raw = self._call(
            "status", names=names, ports={k: list(v) for k, v in (ports or {}).items()}
        )
        return self._typed("status", lambda: {n: process_state(n, raw[n]) for n in names})

    def kill(self, name: str, signal: str = "KILL", group: bool = False) -> bool:
        """Send a signal to a component (fault tests); True when a live process was signalled."""
        return bool(self._call("kill", name=name, signal=signal, group=group)["killed"])

    def log_tail(self, name: str, lines: int = 50) -> str:
        return str(self._call("log_tail", name=name, lines=lines)["text"])

    # ------------------------------------------------------------------ HTTP from the target side

    def wait_http(
        self,
        url: str,
        *,
        timeout_s: float,
        expect: int | Sequence[int] | None = 200,
        proc_name: str | None = None,
    ) -> float:
        """Poll `url` every ~50 ms until `expect` (None: any HTTP answer); returns seconds waited.

        Raises ComponentNotReadyError on timeout, or at once when `proc_name`'s process dies.
        """
        return self.wait_http_result(
            url, timeout_s=timeout_s, expect=expect, proc_name=proc_name
        ).elapsed_s

    def wait_http_result(
        self,
        url: str,
        *,
        timeout_s: float,
        expect: int | Sequence[int] | None = 200,
        proc_name: str | None = None,
    ) -> WaitResult:
        """`wait_http` with the details (attempts, detection time on the target's clock)."""
        exp = (
            list(expect) if isinstance(expect, Sequence) and not isinstance(expect, str) else expect
        )
        args: dict[str, object] = {
            "url": url,
            "timeout_s": timeout_s,
            "expect": exp,
            "name": proc_name,
        }
        try:
            r, before = self._call_riding_out("wait_http", timeout_s + CALL_MARGIN_S, args)
        except AgentCallError as exc:
            if exc.kind not in ("timeout", "died"):
                raise
            raise not_ready_error(
                exc,
                url=url,
                name=proc_name,
                host=self.executor.host,
                waited_before_s=exc.waited_before_s,
            ) from None
        return self._typed("wait_http", lambda: wait_result(r, before))

    def http(
        self,
        url: str,
        *,
        method: str = "GET",
        body: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = TARGET_HTTP_S,
    ) -> HttpReply:
        """One request made from the target; a connection failure is a reply with status None."""
        r = self._call(
            "http",
            timeout=timeout_s + CALL_MARGIN_S,
            url=url,
            method=method,
            body=body,
            headers=dict(headers or {}),
            timeout_s=timeout_s,
        )
        return self._typed("http", lambda: http_reply(r))

    def http_many(
        self, requests: Sequence[str | HttpRequest], *, timeout_s: float = TARGET_HTTP_S
    ) -> list[HttpReply]:
        """Several requests made from the target in one agent round trip; replies in order.

        Each item is a URL (GET) or a mapping with `url` and optionally `method`, `body`,
        `headers`, `timeout_s` (default: `timeout_s`). They run concurrently on the target, so
        the call takes about as long as the slowest one. As with `http`, a request that gets no
        HTTP answer is a reply with status None.
        """
        items = http_items(requests)
        if not items:
            return []
        longest = max(float(i.get("timeout_s", timeout_s)) for i in items)
        r = self._call(
            "http_many", timeout=longest + CALL_MARGIN_S, requests=items, timeout_s=timeout_s
        )
        return self._typed("http_many", lambda: [http_reply(x) for x in r["replies"]])

    # ------------------------------------------------------------------ preflight, lock, state

    def preflight(
        self, ports: Iterable[int], gpus: Iterable[int], paths: Iterable[str] = ()
    ) -> PreflightReport:
        """Work dir writable, who holds each port, which GPUs are busy, which paths exist."""
        r = self._call("preflight", ports=list(ports), gpus=list(gpus), paths=list(paths))
        return self._typed("preflight", lambda: preflight_report(r))

    def lock_acquire(self, holder: Mapping[str, object], force: bool = False) -> LockInfo | None:
        """Take the deploy lock; returns the broken lock's info when `force` broke one.

        Raises DeployLockError naming the holder at once when it is held (with `stale` set when
        its holder is dead); a stale lock is never broken without `force`.
        """
        try:
            r = self._call("lock_acquire", holder=dict(holder), force=force)
        except AgentCallError as exc:
            if exc.kind != "lock_held":
                raise
            held = exc.reply.get("holder")
            info = LockInfo(
                dict(held) if isinstance(held, Mapping) else {}, bool(exc.reply.get("stale"))
            )
            info = self._with_local_staleness(info)
            raise lock_error(self.executor.host, info.holder, info.stale) from None
        return LockInfo(r["broke"], True) if r.get("broke") else None

    def lock_release(self, op_id: str) -> bool:
        """Release the lock held by `op_id`; False when no lock was there. Raises if another holds it."""
        try:
            return bool(self._call("lock_release", op_id=op_id)["released"])
        except AgentCallError as exc:
            if exc.kind != "lock_held":
                raise
            holder = exc.reply.get("holder")
            raise lock_error(
                self.executor.host, holder if isinstance(holder, Mapping) else {}, False
            ) from None

    def lock_info(self) -> LockInfo | None:
        r = self._call("lock_info")
        if not r or r.get("value", "") is None:
            return None
        info = self._typed("lock_info", lambda: LockInfo(dict(r["holder"]), bool(r["stale"])))
        return self._with_local_staleness(info)

    def read_state(self, name: str) -> JSONValue:
        """Content of `<workdir>/state/<name>.json`, or None when absent."""
        return self._call("read_state", name=name)["data"]

    def write_state(self, name: str, data: object) -> None:
        """Write `<workdir>/state/<name>.json` atomically (temp file, fsync, rename)."""
        self._call("write_state", name=name, data=data)

    def _typed(self, op: str, convert: Callable[[], T]) -> T:
        return wire.typed(self.executor.host, op, convert)

    # A holder on *this* machine (the operator's) whose pid is gone is dead, even when the
    # target is remote and cannot see our process table.
    def _with_local_staleness(self, info: LockInfo) -> LockInfo:
        dead = not info.stale and dead_here(dict(info.holder))
        return LockInfo(info.holder, True) if dead else info
