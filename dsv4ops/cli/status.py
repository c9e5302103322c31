"""`dsv4ops status`: per component health, versions, load; the deployment, drift, loose ends."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import click

from dsv4ops.cli._output import echo_json, echo_lines, json_option, table, target_option

if TYPE_CHECKING:
    from dsv4ops.usecases.status import (
        ComponentRow,
        DeployedRow,
        EndpointReport,
        KernelRow,
        StatusReport,
        StoppedBy,
    )


@click.command()
@target_option
@json_option
def status(target: str | None, as_json: bool) -> None:
    """Show what runs on a target, whether it serves, what is deployed and any drift."""
    from dsv4ops.cli._context import open_target
    from dsv4ops.usecases.status import is_endpoint, status_report

    if is_endpoint(target):
        _endpoint_status(target, as_json)
        return
    ctx = open_target(target, verb="status", read_only=True)
    try:
        report = status_report(ctx)
    finally:
        ctx.close()
    _exit_with_word(report)
    if as_json:
        echo_json(report)
    else:
        echo_lines(render(report) if report.get("reachable", True) else render_offline(report))
    # HEALTHY 0, NOT HEALTHY 2, UNKNOWN 4 (not observed: only the journal's word), so a script
    # never reads a stopped or unhealthy unit as fine.
    click.get_current_context().exit(report["exit"])


def _open_lines(report: StatusReport) -> list[str]:
    """The open runbook runs and experiments, each with what resumes or recovers it."""
    return [
        f"open: {o['kind']} {o['id']}"
        + (f" of {o['runbook']}" if o["kind"] == "runbook" and o["runbook"] else "")
        + f" {o['status']}"
        + (f": {o['next']}" if o["next"] else "")
        for o in report.get("open", [])
        if o["kind"] in ("runbook", "experiment")
    ]


def _exit_with_word(report: StatusReport | EndpointReport) -> None:
    """Add the one status word and its exit code (dsv4ops/exitcodes.py) to the report."""
    from dsv4ops.usecases.status import with_word

    with_word(report)


def _endpoint_status(target: str | None, as_json: bool) -> None:
    """An endpoint target (a cluster): the router as this machine reaches it, read-only."""
    from dsv4ops.cli._context import open_target
    from dsv4ops.usecases.endpoint import endpoint_status

    ctx = open_target(target, verb="status", http_only=True)
    try:
        report = endpoint_status(ctx)
    finally:
        ctx.close()
    _exit_with_word(report)
    if as_json:
        echo_json(report)
    else:
        echo_lines(render_endpoint(report))
    click.get_current_context().exit(report["exit"])


def render_endpoint(report: EndpointReport) -> list[str]:
    r = report["router"]
    head = "HEALTHY (router readiness 200)" if report["status"] == "HEALTHY" else report["status"]
    ready = (
        r["readiness"]
        if r["readiness"] is not None
        else (f"no answer ({r.get('readiness_error')})")
    )
    lines = [
        f"target {report['target']} (endpoint {report['router_url']}): {head}",
        f"router: health {r['health']}; readiness {ready}",
    ]
    ws = r.get("workers")
    if ws is None:
        lines.append("workers: unknown (the router's /workers gave no list)")
    for w in ws or ():
        state = "ok" if w["healthy"] else "UNHEALTHY"
        lines.append(f"worker (as the router lists it): {w['type']} {w['url']} {state}")
    return [*lines, f"restarts: {report['restarts']}"]


def _unmanaged_lines(report: StatusReport) -> list[str]:
    """Not started by this tool (orchestrate/unmanaged.py): not DOWN, not known either."""
    found = report.get("unmanaged")
    return [f"UNMANAGED: {found['why']}"] if found else []


def _stopped_lines(stopped: StoppedBy | None, target: str) -> list[str]:
    """A unit the journal records stopped: by whom, when, and the command that starts it."""
    from dsv4ops.usecases.status import command

    if not stopped:
        return []
    line = f"stopped: by {stopped['by']} at {stopped['since']} (stop {stopped['op']})"
    last = stopped.get("last_profile")
    if last:
        line += f"; last deployed {last} ({command('deploy', target, last)} starts it again)"
    return [line]


def _deployed_lines(d: DeployedRow | None, k: KernelRow | None) -> list[str]:
    """What is deployed, and its kernel package (`k`: the report's, with drift and evidence)."""
    if not d:
        return ["deployed: nothing recorded"]
    lines = [
        f"deployed: {d['profile']} @ {(d['commit'] or 'uncommitted')[:12]} since {d['since']} "
        f"by {d['by']} ({d['kind']} {d['op']}; {_known_good_words(d)})"
    ]
    if k:
        lines.append(
            f"kernel package: {k['deployed']} (active on target: {k['active_detail']}; "
            f"decode loaded: {k['loaded_detail']})" + (" - DRIFT, see below" if k["drift"] else "")
        )
        if k.get("evidence"):
            lines.append(f"  {k['evidence']}")
    elif d.get("kernel_package"):
        lines.append(f"kernel package: {d['kernel_package']}")
    return lines


def _component_row(c: ComponentRow) -> list[object]:
    """One component's row of the status table."""
    from dsv4ops.usecases.status import process_word

    extra = ""
    if c["name"] == "router":
        extra = _router_details(c)
    elif c["alive"]:
        extra = (
            f"sglang {c.get('version')}; running {_n(c.get('running_requests'))}, queued "
            f"{_n(c.get('queued_requests'))}; buckets {_buckets(c.get('captured_buckets'))}"
        )
        if c.get("kernel_package"):
            extra += f"; kernels {c['kernel_package']}"
    return [
        c["name"],
        process_word(c),
        c["pid"] or "-",
        c["port"] or "-",
        c.get("health", "-"),
        extra,
    ]


def render(report: StatusReport) -> list[str]:
    d = report["deployed"]
    from dsv4ops.usecases.status import health_word

    lines = [f"target {report['target']}: {report.get('status') or health_word(report)}"]
    lines += _stopped_lines(report.get("stopped"), report["target"]) or _deployed_lines(
        d, report.get("kernel_package")
    )
    lines += _pd_timeout_lines(report.get("pd_timeouts"))
    lines += _unmanaged_lines(report)
    rows = [_component_row(c) for c in report["components"]]
    lines.append(table(rows, ["component", "process", "pid", "port", "health", "details"]))
    for item in report["drift"]:
        lines.append(f"drift: {item}")
    for item in report["attention"]:
        lines.append(f"attention: {item}")
    lines += _open_lines(report) + _damage_lines(report)
    record = report.get("record")
    if record and record.get("diverged"):  # the target's record lost history: mutations refuse
        from dsv4ops.cli.journal import record_lines

        lines.append("attention: " + record_lines(record)[1])
    if report["lock"]:
        h = report["lock"]["holder"]
        lines.append(
            f"lock: held by {h.get('user')}@{h.get('host')} pid {h.get('pid')} "
            f"({h.get('op_id')}){' - STALE (holder dead)' if report['lock']['stale'] else ''}"
        )
    return lines


def _pd_timeout_lines(t: Mapping[str, int | str] | None) -> list[str]:
    """The PD timeouts the servers run with: how long a silently lost KV transfer holds its
    request (NIXL sends no failure notice, sglang#36033) and an unbootstrapped room its prefill."""
    if not t:
        return []
    return [
        f"PD timeouts: decode waits {t['decode_waiting_s']} s for a KV transfer "
        f"({t['decode_waiting_s_source']}), prefill {t['prefill_bootstrap_s']} s for a bootstrap "
        f"({t['prefill_bootstrap_s_source']})"
    ]


def _known_good_words(d: DeployedRow) -> str:
    """ "known-good" or "NOT known-good: why", as journal/knowngood.py judged the deployment."""
    why = str(d.get("known_good_why") or "")
    if d.get("known_good"):
        from dsv4ops.usecases.journal import accepted_inconclusive

        below = " (below a pass: INCONCLUSIVE accepted)" if accepted_inconclusive(d) else ""
        return "known-good" + below
    return "NOT " + (why.removeprefix("not ") if why else "known-good")


def render_offline(report: StatusReport) -> list[str]:
    from dsv4ops.cli.journal import record_lines

    d = report["deployed"]
    lines = [f"target {report['target']}: UNKNOWN (not reachable)", *record_lines(report["record"])]
    if d:
        lines.append(
            f"last recorded deployment: {d['profile']} @ {(d['commit'] or 'uncommitted')[:12]} "
            f"since {d['since']} by {d['by']} ({d['kind']} {d['op']}" + f"; {_known_good_words(d)})"
        )
    else:
        lines.append("last recorded deployment: nothing recorded")
    for o in report["in_flight"]:
        lines.append(f"attention: {o['kind']} {o['id']} of {o['profile'] or '-'} never ended")
    return lines + _open_lines(report) + _damage_lines(report)


def _damage_lines(report: StatusReport) -> list[str]:
    """Each damaged recorded setting in the words deploy, rollback and stop refuse with, and
    what status could not show because of it."""
    lines: list[str] = []
    for d in report.get("recorded_damage", []):
        lines += [f"damaged record: {d['message']}", f"  hint: {d['fix']}"]
    return lines + [f"not shown: {item}" for item in report.get("not_shown", [])]


def _router_details(c: ComponentRow) -> str:
    """Readiness and workers; says why there is no readiness rather than printing None."""
    if not c["alive"]:
        return "router not running"
    if "readiness" not in c:
        return "readiness not checked (no deployment recorded, so its port is unknown)"
    readiness = c.get("readiness")
    if readiness is None:
        return f"readiness unreachable ({c.get('readiness_error') or 'no answer'})"
    ws = c.get("workers")
    workers = (
        ", ".join(f"{w['type']} {'ok' if w['healthy'] else 'UNHEALTHY'}" for w in ws)
        if ws
        else "unknown"
    )
    return f"readiness {readiness}; workers {workers}"


def _n(v: float | None) -> str:
    return "?" if v is None else f"{v:g}"


def _buckets(b: Sequence[int] | None) -> str:
    if not b:
        return "-"  # a prefill captures no decode graphs
    return f"{len(b)} ({b[0]}..{b[-1]})"
