"""`dsv4ops status`: what runs on a target, whether it serves, what is deployed, and drift.

Per component: process alive, ports, health, SGLang version and captured CUDA-graph buckets from
/server_info, running/queued requests from /metrics; the router's readiness and workers; the
deployed profile and commit from the journal; the kernel package (pinned by the deployment,
active on the target, loaded by the running decode); drift; and any half-finished operation with
what to do about it. Read-only: it never changes the target or the journal.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from dsv4ops.deployment import START_ORDER, Component, Deployment
from dsv4ops.errors import DsOpsError
from dsv4ops.journal.backend import JournalSource
from dsv4ops.journal.commands import command
from dsv4ops.journal.records import Operation, judged_json
from dsv4ops.journal.store import Journal
from dsv4ops.jsontypes import JSONValue
from dsv4ops.orchestrate.attention import attention_notes
from dsv4ops.orchestrate.control import TargetControl
from dsv4ops.orchestrate.drift import (
    KernelReading,
    kernel_package_drift,
    process_drift,
    profile_drift,
    restart_drift,
)
from dsv4ops.orchestrate.health import stopped_by
from dsv4ops.orchestrate.partial import describe_mix, is_mixed
from dsv4ops.orchestrate.status_recorded import (
    damage_json,
    recorded_processes,
    recorded_view,
    started_by,
)
from dsv4ops.orchestrate.status_report import (
    ComponentRow,
    DeployedRow,
    KernelRow,
    RouterRow,
    RouterWorker,
    ServerInfo,
    StatusReport,
)
from dsv4ops.orchestrate.unmanaged import ports_to_check, unmanaged
from dsv4ops.orchestrate.workload import load_of, metrics_request
from dsv4ops.remote.base import ProcessState
from dsv4ops.remote.results import HttpReply, HttpRequest

# Renders the named profile from the working copy for this target (None when impossible).
RenderNow = Callable[[str], Deployment]

# Lines of the decode's log searched for SGLang's "fell back to default MoE configs" line.
KERNEL_LOG_LINES = 2000  # the plugin and config lines are printed at start


@dataclass(frozen=True)
class KernelStatus:
    """What status needs from the kernels pipeline, bound to the target by the CLI (the engine
    does not import `dsv4ops.kernels`; see kernelpkg.py)."""

    # The target's `kernels` state (Supervisor.read_state("kernels")): {"packages": {name:
    # {"current", "previous", "config_dir"}}, "env": {...}}, or None when nothing was deployed.
    state: Callable[[], JSONValue]
    # (server_info JSON, decode log tail, expected "name@version", decode component) ->
    # (used, reason): kernels.loaded_check, as in KernelSupport.loaded.
    loaded: Callable[[str, str, str, Component | None], tuple[bool, str]] | None = None


def gather_status(
    control: TargetControl,
    journal: Journal,
    *,
    target: str,
    render_now: RenderNow | None = None,
    kernels: KernelStatus | None = None,
) -> StatusReport:
    """A JSON-ready status report. Raises only for an unreachable target."""
    current = journal.deployed()
    view = recorded_view(journal)  # never refuses: a damaged field is a finding (issue 42)
    deployed, last = view.deployed, view.last  # nothing running: the profile deployed last
    states = control.status(list(START_ORDER), ports_to_check(last, render_now))
    infos: dict[str, HttpReply] = {}
    replies = _fetch(control, _requests(states, deployed))
    components = [_component(name, states[name], deployed, replies, infos) for name in START_ORDER]
    drift = (
        process_drift(states, deployed, recorded_processes(journal), started_by(journal))
        + restart_drift(states, deployed, target)
        if deployed is not None or not view.running  # running but unreadable: not shown
        else []
    )
    if current is not None and is_mixed(current):
        # A partial restart left a mix: say what runs; the profile comparison would only repeat
        # that the kept parts are not the profile's.
        drift.append(
            f"partial restart: {describe_mix(current)}. This mix is not known-good; "
            f"{command('deploy', target, current.profile_name or 'PROFILE')} restarts the whole unit from it"
        )
    elif deployed is not None and render_now is not None:
        try:
            drift += profile_drift(deployed, render_now(deployed.profile_name))
        except DsOpsError as exc:
            drift += profile_drift(deployed, None, str(exc))
    kernel = _kernel_row(control, states, infos, kernels, deployed, drift, target)
    lock = control.lock_info()
    attention = attention_notes(journal, lock)
    healthy = (
        deployed is not None
        and not drift
        and all(c["alive"] and c["healthy"] for c in components)
        and not attention
        and not view.damage  # never HEALTHY on a record deploy, rollback and stop refuse
    )
    return {
        "target": target,
        "deployed": _deployed(current, journal),
        "components": components,
        "kernel_package": kernel,
        "pd_timeouts": view.pd_timeouts(),
        "drift": drift,
        "lock": {"holder": dict(lock.holder), "stale": lock.stale} if lock else None,
        "attention": attention,
        "unmanaged": unmanaged(view.running, states, last),
        "stopped": stopped_by(journal, last) if current is None else None,
        "healthy": healthy,
        "recorded_damage": [damage_json(e) for e in view.damage],
        "not_shown": view.not_shown(),
    }


def _kernel_row(
    control: TargetControl,
    states: Mapping[str, ProcessState],
    infos: Mapping[str, HttpReply],
    kernels: KernelStatus | None,
    deployed: Deployment | None,
    drift: list[str],
    target: str,
) -> KernelRow | None:
    """The deployment's kernel package: pinned, active, loaded (its drift added to `drift`)."""
    if deployed is None or not deployed.kernel_package:
        return None
    ref = deployed.kernel_package
    active = _active_package(kernels, ref)
    loaded = _decode_package(
        control, states["decode"], infos.get("decode"), kernels, ref, deployed.component("decode")
    )
    kernel_drift = kernel_package_drift(deployed.profile_name, ref, active, loaded, target=target)
    drift += kernel_drift
    return {
        "deployed": ref,
        "active": active.package if active.known else None,
        "active_detail": active.text(),
        "loaded": loaded.package if loaded.known else None,
        "loaded_detail": loaded.text(),
        # "in use: <plugin line> | <config lookup line>" when used (kernels/loaded.py)
        "evidence": loaded.detail if loaded.package else None,
        "drift": bool(kernel_drift),
    }


def _deployed(op: Operation | None, journal: Journal) -> DeployedRow | None:
    if op is None:
        return None
    p = op.profile or {}
    judged = journal.judged().get(op.op)  # the one rule (journal/knowngood.py)
    return {
        "op": op.op,
        "kind": op.kind.value,
        "profile": p.get("name"),
        "commit": p.get("git_commit"),
        "commands_hash": p.get("commands_hash"),
        "kernel_package": p.get("kernel_package"),
        "since": op.ended,
        "by": op.user,
        **judged_json(judged),
        "partial": (op.scope or {}).get("restarted"),
    }


def _active_package(kernels: KernelStatus | None, ref: str) -> KernelReading:
    """The version of `ref`'s package the target's `kernels` state names current."""
    name = ref.partition("@")[0]
    if kernels is None:
        return KernelReading(None, known=False, detail="the target's kernels state was not read")
    try:
        state = kernels.state()
    except DsOpsError as exc:
        why = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        return KernelReading(
            None, known=False, detail=f"cannot read the target's kernels state: {why}"
        )
    packages = state.get("packages") if isinstance(state, Mapping) else None
    entry = packages.get(name) if isinstance(packages, Mapping) else None
    current = entry.get("current") if isinstance(entry, Mapping) else None
    if not current:
        return KernelReading(None, detail=f"no version of {name} is current on the target")
    return KernelReading(f"{name}@{current}")


def _decode_package(
    control: TargetControl,
    state: ProcessState,
    info: HttpReply | None,
    kernels: KernelStatus | None,
    expected: str,
    decode: Component | None = None,
) -> KernelReading:
    """The package the running decode uses, from the positive evidence in its log only
    (kernels/loaded.py): the plugin's own line, and the config lookup where the decode's MoE
    path reads one. /server_info is no evidence (real SGLang names no package)."""
    if not state.alive:
        return KernelReading(None, known=False, detail="decode is not running")
    if info is None or info.status != 200:
        answer = "no answer" if info is None else info.status or info.error or "no answer"
        return KernelReading(None, known=False, detail=f"decode /server_info: {answer}")
    if kernels is None or kernels.loaded is None:
        return KernelReading(None, known=False, detail="no kernel check wired in")
    try:
        log = control.log_tail("decode", KERNEL_LOG_LINES)
    except DsOpsError as exc:
        why = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        return KernelReading(None, known=False, detail=f"cannot read the decode log: {why}")
    used, reason = kernels.loaded(info.body, log, expected, decode)
    if used:
        return KernelReading(expected, detail=reason)
    if len(log.splitlines()) >= KERNEL_LOG_LINES:
        # The evidence is printed at start; a tail that does not reach the log's start (the log
        # is rotated per start) cannot say it is absent.
        return KernelReading(
            None,
            known=False,
            detail=f"the decode's start-up lines are no longer "
            f"in its last {KERNEL_LOG_LINES} log lines ({reason[:160]})",
        )
    return KernelReading(None, detail=reason)


# Each component's reads: (path, timeout_s). A worker's /metrics gets the drain's shorter bound.
_WORKER_READS = (("/health", 5.0), ("/server_info", 5.0), ("/metrics", 3.0))
_ROUTER_READS = (("/health", 5.0), ("/readiness", 5.0), ("/workers", 5.0))


def _requests(states: Mapping[str, ProcessState], deployed: Deployment | None) -> list[HttpRequest]:
    """Every read of every live, deployed component: made at once, in one agent round trip."""
    out: list[HttpRequest] = []
    for name in START_ORDER:
        spec = deployed.component(name) if deployed else None
        if spec is None or not states[name].alive:
            continue
        reads = _ROUTER_READS if name == "router" else _WORKER_READS
        out += [
            metrics_request(spec.url(path), t)
            if path == "/metrics"
            else {"url": spec.url(path), "timeout_s": t}
            for path, t in reads
        ]
    return out


def _fetch(control: TargetControl, requests: list[HttpRequest]) -> dict[str, HttpReply]:
    """{url: reply}: the requests run concurrently on the target (Supervisor.http_many)."""
    replies = control.http_many(requests, timeout_s=5.0) if requests else []
    return {str(r["url"]): reply for r, reply in zip(requests, replies, strict=True)}


def _component(
    name: str,
    state: ProcessState,
    deployed: Deployment | None,
    replies: Mapping[str, HttpReply],
    infos: dict[str, HttpReply] | None = None,
) -> ComponentRow:
    spec = deployed.component(name) if deployed else None
    row: ComponentRow = {
        "name": name,
        "alive": bool(state.alive),
        # a pid only for a live process: a dead one's is history (and may be reused)
        "pid": state.pid if state.alive else None,
        "started_at": state.started_at,
        "port": spec.port if spec else None,
        "ports_open": {str(k): v for k, v in (state.ports_open or {}).items()},
        "exit_code": state.exit_code,
        "healthy": False,
    }
    if not state.alive or spec is None:
        return row
    if name == "router":
        return {**row, **_router_row(spec.url(), replies)}
    health = replies[spec.url("/health")]
    row["health"] = health.status if health.status is not None else f"no answer ({health.error})"
    row["healthy"] = health.status == 200
    info = replies[spec.url("/server_info")]
    if infos is not None:
        infos[name] = info
    if info.status == 200:
        row = {**row, **_server_info(info.body)}
    load = load_of(replies[spec.url("/metrics")])
    row["running_requests"] = load.running
    row["queued_requests"] = load.queued
    if load.error:
        row["metrics_error"] = load.error
    return row


def _server_info(body: str) -> ServerInfo:
    try:
        data = json.loads(body)
    except json.JSONDecodeError:
        return {"server_info_error": "not JSON"}
    states = data.get("internal_states") or [{}]
    first = states[0] if isinstance(states, list) and states else {}
    # The twin names the kernel package it loaded; real SGLang does not (its log says when it
    # fell back to default configs, which the deploy checks).
    pkg = data.get("twin_kernel_package")
    return {
        "version": data.get("version"),
        "captured_buckets": first.get("decode_cuda_graph_bs") if isinstance(first, dict) else None,
        "disaggregation_mode": data.get("disaggregation_mode"),
        "kernel_package": f"{pkg['name']}@{pkg['version']}"
        if isinstance(pkg, dict) and pkg.get("name")
        else None,
    }


def router_info(control: TargetControl, base_url: str) -> RouterRow:
    """The router at `base_url`: liveness, readiness and its workers as it lists them."""
    return _router_row(
        base_url, _fetch(control, [{"url": base_url + p, "timeout_s": t} for p, t in _ROUTER_READS])
    )


def _router_row(base_url: str, replies: Mapping[str, HttpReply]) -> RouterRow:
    live = replies[f"{base_url}/health"]
    ready = replies[f"{base_url}/readiness"]
    out: RouterRow = {
        "health": live.status if live.status is not None else f"no answer ({live.error})",
        "readiness": ready.status,
        "healthy": ready.status == 200,  # /health is liveness only; readiness is what counts
    }
    if ready.status is None:
        out["readiness_error"] = ready.error or "no answer"
    workers = replies[f"{base_url}/workers"]
    if workers.status == 200:
        try:
            data = json.loads(workers.body)
            out["workers"] = [
                RouterWorker(
                    url=w.get("url"), type=w.get("worker_type"), healthy=w.get("is_healthy")
                )
                for w in data.get("workers", [])
            ]
        except (json.JSONDecodeError, AttributeError):
            out["workers"] = None
    return out


def journal_status(journal: Journal, *, target: str, record: JournalSource) -> StatusReport:
    """What the journal alone says when the target cannot be reached: the deployment it last
    recorded and the operations it shows unfinished. Nothing about the processes is observed,
    so nothing is called healthy."""
    return {
        "target": target,
        "reachable": False,
        "record": record,
        "deployed": _deployed(journal.deployed(), journal),
        "in_flight": [o.summary() for o in journal.in_flight()],
        "healthy": False,
        "recorded_damage": [damage_json(e) for e in recorded_view(journal).damage],
    }
