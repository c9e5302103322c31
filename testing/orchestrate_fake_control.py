"""A scripted stand-in for the Supervisor (unit tests of the engine's decisions), the small
deployment and the Operator over it that those tests share.

It returns the Supervisor's own result types (dsv4ops/remote/results.py), so it satisfies the
`TargetControl` protocol as the real one does (`_satisfies_the_protocol` below, checked by mypy
in tests/architecture/mypy_test.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dsv4ops.clock import FakeClock
from dsv4ops.deployment import Component, Deployment
from dsv4ops.errors import DeployError
from dsv4ops.orchestrate.control import TargetControl
from dsv4ops.orchestrate.ops import Operator
from dsv4ops.remote.base import ProcessSpec, ProcessState
from dsv4ops.remote.errors import DeployLockError
from dsv4ops.remote.results import HttpReply, LockInfo, PortUse, PreflightReport, StopReport

STREAM_OK = (
    'data: {"choices":[{"index":0,"delta":{"content":"Hello"}}]}\n\n'
    'data: {"choices":[{"index":0,"delta":{"content":" there."},"finish_reason":"stop"}]}\n\n'
    "data: [DONE]\n\n"
)
TOOL_OK = json.dumps(
    {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                        }
                    ],
                }
            }
        ]
    }
)
METRICS_IDLE = (
    '# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{tp_rank="0"} 0\n'
    '# TYPE sglang:num_queue_reqs gauge\nsglang:num_queue_reqs{tp_rank="0"} 0\n'
)


def Reply(status: int | None, body: str = "", error: str | None = None) -> HttpReply:  # noqa: N802
    return HttpReply(status, body, error, 0.01)


@dataclass
class FakeControl:
    workdir: str = "/work"
    calls: list[str] = field(default_factory=list)
    running: dict[str, int] = field(default_factory=dict)
    fail_url: str | None = None  # readiness waits on URLs containing this fail (a timeout)
    fail_probe: bool = False
    lock: dict[str, Any] | None = None
    lock_stale: bool = False
    busy_ports: dict[int, bool] = field(default_factory=dict)
    busy_metric_reads: int = 0  # this many /metrics reads report 2 running requests
    router_drain_polls: int = 0  # after SIGTERM the router stays alive for this many status reads
    unreadable_metrics: bool = False  # /metrics answers 404 (running/queued unknown)
    _terminating: dict[str, int] = field(default_factory=dict)
    _next_pid: int = 1000

    def actions(self) -> list[str]:
        """Calls without the /metrics reads of the drain."""
        return [c for c in self.calls if c != "metrics"]

    def start(self, spec: ProcessSpec) -> ProcessState:
        self.calls.append(f"start {spec.name}")
        self._next_pid += 1
        self.running[spec.name] = self._next_pid
        return ProcessState(
            spec.name, self._next_pid, True, started_at="t", argv=spec.argv, env=spec.env
        )

    def stop(
        self, name: str, ports: Sequence[int] | None = None, grace_s: float = 10.0
    ) -> StopReport:
        self.calls.append(f"stop {name}")
        self._terminating.pop(name, None)
        pid = self.running.pop(name, None)
        was = pid is not None
        return StopReport(name, pid, was, ("SIGTERM",) if was else (), 0.01)

    def kill(self, name: str, signal: str = "KILL", group: bool = False) -> bool:
        self.calls.append(f"kill {signal} {name}")
        if name not in self.running:
            return False
        self._terminating[name] = self.router_drain_polls
        return True

    def status(
        self, names: Iterable[str], ports: Mapping[str, Sequence[int]] | None = None
    ) -> dict[str, ProcessState]:
        for n, left in list(self._terminating.items()):
            if left <= 0:
                self.running.pop(n, None)
                del self._terminating[n]
            else:
                self._terminating[n] = left - 1
        return {
            n: ProcessState(n, self.running.get(n), n in self.running, started_at="t")
            for n in names
        }

    def log_tail(self, name: str, lines: int = 50) -> str:
        return f"{name} log"

    def wait_http(
        self,
        url: str,
        *,
        timeout_s: float,
        expect: int | Sequence[int] | None = 200,
        proc_name: str | None = None,
    ) -> float:
        self.calls.append(f"wait {proc_name} {url.split('/', 3)[-1]}")
        if self.fail_url and self.fail_url in url:
            raise DeployError(f"{proc_name} not ready: timeout\n--- last log lines ---\nboom")
        return 0.05

    def http(
        self,
        url: str,
        *,
        method: str = "GET",
        body: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = 10.0,
    ) -> HttpReply:
        if url.endswith("/metrics"):
            self.calls.append("metrics")
            if self.unreadable_metrics:
                return Reply(404, "not found")
            if self.busy_metric_reads > 0:
                self.busy_metric_reads -= 1
                return Reply(200, METRICS_IDLE.replace("} 0\n", "} 2\n", 1))
            return Reply(200, METRICS_IDLE)
        if url.endswith("/v1/chat/completions"):
            self.calls.append("probe")
            if self.fail_probe:
                return Reply(504, '{"error": "transfer lost"}')
            return Reply(200, STREAM_OK if json.loads(body or "{}").get("stream") else TOOL_OK)
        return Reply(200, "{}")

    def preflight(
        self, ports: Iterable[int], gpus: Iterable[int], paths: Iterable[str] = ()
    ) -> PreflightReport:
        return PreflightReport(
            host="fake",
            workdir=self.workdir,
            writable=True,
            writable_error=None,
            ports={p: PortUse(self.busy_ports.get(p, False), ((4242, None),)) for p in ports},
            gpus_available=False,
            gpu_note="no nvidia-smi",
            gpus_busy={},
            gpus_missing=(),
            paths={p: True for p in paths},
        )

    def lock_acquire(self, holder: Mapping[str, Any], force: bool = False) -> LockInfo | None:
        if self.lock is not None and not force:
            raise DeployLockError(
                f"deploy lock is held by pid {self.lock.get('pid')}",
                holder=self.lock,
                stale=self.lock_stale,
                hint=None,
            )
        self.calls.append("lock" + (" (forced)" if force else ""))
        self.lock = dict(holder)
        return None

    def lock_release(self, op_id: str) -> bool:
        if self.lock and self.lock.get("op_id") == op_id:
            self.lock = None
            self.calls.append("unlock")
            return True
        return False

    def lock_info(self) -> LockInfo | None:
        return LockInfo(self.lock, self.lock_stale) if self.lock else None


def _satisfies_the_protocol(fake: FakeControl) -> TargetControl:
    return fake  # mypy: FakeControl is a TargetControl


def make_deployment(name: str, offset: int = 0) -> Deployment:
    """A three-component deployment (prefill, decode, router); `offset` shifts the worker ports."""
    py = "/usr/bin/python3"
    return Deployment(
        profile_name=name,
        git_commit="c0ffee" + name,
        components=(
            Component(
                "prefill",
                (
                    py,
                    "-m",
                    "sglang.launch_server",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(30000 + offset),
                    "--disaggregation-bootstrap-port",
                    "8998",
                ),
                {},
                "127.0.0.1",
                30000 + offset,
                (30000 + offset, 8998),
            ),
            Component(
                "decode",
                (py, "-m", "sglang.launch_server", "--port", str(30001 + offset)),
                {"X": name},
                "127.0.0.1",
                30001 + offset,
                (30001 + offset,),
            ),
            Component(
                "router",
                (py, "-m", "sglang_router.launch_router", "--port", "8000"),
                {},
                "127.0.0.1",
                8000,
                (8000, 29000),
            ),
        ),
    )


def operator(control: TargetControl, journal: Any, lines: list[str] | None = None) -> Operator:
    """The engine over `control` with a fake clock; progress lines go to `lines` when given."""
    return Operator(
        control,
        journal,
        host="fake",
        clock=FakeClock(),
        progress=(lines.append if lines is not None else None),
    )


# -- FakeControl variants of single test modules -------------------------------------------------

KERNELS_PKG = "dsv4-decode-kernels"
KERNELS_REF = f"{KERNELS_PKG}@0.2.0"


@dataclass
class SglangControl(FakeControl):
    """FakeControl whose decode answers /server_info like the twin (`twin_kernel_package`) or,
    with `twin=False`, like real SGLang (no such key), and whose decode log is `decode_log`, by
    default the evidence a decode that loaded `reported` prints (kernels/loaded.py): the
    plugin's line and SGLang finding the package's MoE config."""

    twin: bool = True
    reported: str | None = KERNELS_REF
    decode_log: str | None = None
    log_reads: int = 0

    def evidence(self) -> str:
        if not self.reported:
            return "decode log"
        name, _, version = self.reported.partition("@")
        return (f"[dsv4ops-kernel-plugin] loaded {name} {version} pid=7 hooks=none\n"
                f"Using MoE kernel config from /work/kernels/{name}/{version}/configs/triton_3_8_0/"
                "E=256,N=512,device_name=X,dtype=fp8_w8a8,block_shape=[128, 128].json.\n")

    def http(self, url, *, method="GET", body=None, headers=None, timeout_s=10.0):
        if url.endswith("/server_info"):
            info: dict[str, Any] = {"version": "0.5.23", "internal_states": [{}]}
            if self.twin:
                name, _, version = (self.reported or "").partition("@")
                info["twin_kernel_package"] = (
                    {"name": name, "version": version} if self.reported else None
                )
            return Reply(200, json.dumps(info))
        return super().http(url, method=method, body=body, headers=headers, timeout_s=timeout_s)

    def log_tail(self, name, lines=50):
        self.log_reads += 1
        if name != "decode":
            return super().log_tail(name, lines)
        return self.evidence() if self.decode_log is None else self.decode_log


class SignallingControl(FakeControl):
    """Sends a real signal to this process when a given call happens (the n-th time)."""

    def __init__(self) -> None:
        super().__init__()
        self.plan: list[tuple[str, int]] = []  # (call prefix, signal), consumed in order

    def _maybe(self, call: str) -> None:
        if self.plan and call.startswith(self.plan[0][0]):
            _, sig = self.plan.pop(0)
            os.kill(os.getpid(), sig)

    def wait_http(self, url, **kw):
        self._maybe(f"wait {kw.get('proc_name')}")
        return super().wait_http(url, **kw)

    def http(self, url, **kw):
        if url.endswith("/metrics"):
            self._maybe("metrics")
        return super().http(url, **kw)

    def start(self, spec):
        result = super().start(spec)
        self._maybe(f"start {spec.name}")  # arrives while the start step is in flight
        return result


@dataclass
class RecordingControl(FakeControl):
    """FakeControl that keeps the JSON body of every HTTP request it is sent (in `sent`)."""

    sent: list[dict[str, Any]] = field(default_factory=list)

    def http(self, url, *, method="GET", body=None, headers=None, timeout_s=10.0):
        if body:
            self.sent.append(json.loads(body))
        return super().http(url, method=method, body=body, headers=headers, timeout_s=timeout_s)
