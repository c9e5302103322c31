"""`dsv4ops status`: per component health, versions, load; the deployment, drift, loose ends."""

from __future__ import annotations

from typing import Any

import click

from dsv4ops.cli._output import echo_json, json_option, table, target_option


@click.command()
@target_option
@json_option
def status(target: str | None, as_json: bool) -> None:
    """Show what runs on a target, whether it serves, what is deployed and any drift."""
    from dsv4ops.cli._context import open_target
    from dsv4ops.orchestrate.status import KernelStatus, gather_status
    from dsv4ops.orchestrate.usecases.compose import kernel_support
    from dsv4ops.orchestrate.usecases.render import render_now

    ctx = open_target(target)
    try:
        kernels = KernelStatus(
            state=lambda: ctx.supervisor.read_state("kernels"),
            loaded=kernel_support(ctx).loaded,
        )
        report = gather_status(
            ctx.supervisor,
            ctx.journal,
            target=ctx.target.name,
            render_now=render_now(ctx.target),
            kernels=kernels,
        )
    finally:
        ctx.close()
    if as_json:
        echo_json(report)
        return
    for line in render(report):
        click.echo(line)


def render(report: dict[str, Any]) -> list[str]:
    d = report["deployed"]
    lines = [f"target {report['target']}: " + ("HEALTHY" if report["healthy"] else "NOT HEALTHY")]
    if d:
        lines.append(
            f"deployed: {d['profile']} @ {(d['commit'] or 'uncommitted')[:12]} since {d['since']} "
            f"by {d['by']} ({d['kind']} {d['op']}; "
            + (
                "known-good)"
                if d.get("known_good")
                else f"NOT known-good: partial restart of {', '.join(d['partial'])})"
                if d.get("partial")
                else "NOT known-good)"
            )
        )
        k = report.get("kernel_package")
        if k:
            lines.append(
                f"kernel package: {k['deployed']} (active on target: {k['active_detail']}; "
                f"decode loaded: {k['loaded_detail']})"
                + (" - DRIFT, see below" if k["drift"] else "")
            )
            if k.get("evidence"):
                lines.append(f"  {k['evidence']}")
        elif d.get("kernel_package"):
            lines.append(f"kernel package: {d['kernel_package']}")
    else:
        lines.append("deployed: nothing recorded")
    rows = []
    for c in report["components"]:
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
        rows.append(
            [
                c["name"],
                "up" if c["alive"] else "DOWN",
                c["pid"] or "-",
                c["port"] or "-",
                c.get("health", "-"),
                extra,
            ]
        )
    lines.append(table(rows, ["component", "process", "pid", "port", "health", "details"]))
    for item in report["drift"]:
        lines.append(f"drift: {item}")
    for item in report["attention"]:
        lines.append(f"attention: {item}")
    if report["lock"]:
        h = report["lock"]["holder"]
        lines.append(
            f"lock: held by {h.get('user')}@{h.get('host')} pid {h.get('pid')} "
            f"({h.get('op_id')}){' - STALE (holder dead)' if report['lock']['stale'] else ''}"
        )
    return lines


def _router_details(c: dict[str, Any]) -> str:
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


def _n(v: Any) -> str:
    return "?" if v is None else f"{v:g}"


def _buckets(b: Any) -> str:
    if not b:
        return "-"  # a prefill captures no decode graphs
    return f"{len(b)} ({b[0]}..{b[-1]})"
