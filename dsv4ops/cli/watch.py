"""`dsv4ops watch`: a read-only monitor of the deployed PD unit (findings, runbooks, metrics).

Exit codes (dsv4ops/exitcodes.py): with `--once`, the worst finding of any round it watched
(watch/loop.py `with_worst_seen`), else the last round's word: 0 ok, 2 critical, 4 warning or
unknown: a component did not answer with no finding yet, no probe came back, or it
could not watch at all (no deployment recorded, target unreachable), so a cron job never reads
"could not look" as OK. Without `--once` it runs until Ctrl-C (exit 0).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from dsv4ops import exitcodes
from dsv4ops.cli._output import echo_lines, json_option, target_option
from dsv4ops.cli._params import FiniteFloatRange
from dsv4ops.errors import DsOpsError

if TYPE_CHECKING:
    from dsv4ops.usecases.session import TargetSession
    from dsv4ops.usecases.watch import FindingsExporter, Round, ServerReading

UNKNOWN_EXIT = exitcodes.UNDECIDED


@click.command()
@target_option
@click.option(
    "--interval",
    "interval_s",
    type=FiniteFloatRange(min=0.1, max=3600.0),
    default=5.0,
    show_default=True,
    help="Seconds between scrapes (model seconds on a scaled twin).",
)
@click.option(
    "--probe-every",
    "probe_every_s",
    type=FiniteFloatRange(min=0.0, max=86400.0),
    default=30.0,
    show_default=True,
    help="Seconds between end-to-end probes through the router; 0: no probes.",
)
@click.option(
    "--once",
    is_flag=True,
    help="Watch for one wedge window and one probe round, print, exit with the worst "
    "finding (0 ok, 2 critical, 4 warning or unknown: nothing answered, no probe back, "
    "could not watch).",
)
@json_option
@click.option(
    "--prometheus-port",
    type=click.IntRange(min=0, max=65535),
    default=None,
    help="Serve the findings as Prometheus metrics on 127.0.0.1:PORT.",
)
def watch(
    target: str | None,
    interval_s: float,
    probe_every_s: float,
    once: bool,
    as_json: bool,
    prometheus_port: int | None,
) -> None:
    """Watch the deployed unit: scrape, probe, report findings with evidence and the runbook
    to follow. Never restarts anything."""
    from dsv4ops.cli._context import open_target
    from dsv4ops.usecases.watch import open_watch

    try:
        ctx = open_target(target, verb="watch", http_only=True, read_only=True)
    except DsOpsError as exc:
        raise _unknown(exc, once) from None
    exporter = None
    watcher = None
    try:
        watcher = open_watch(
            ctx, interval_s=interval_s, probe_every_s=probe_every_s or 30.0, probe=probe_every_s > 0
        )
        _recorded_notes(ctx)
        if prometheus_port is not None:
            exporter = _serve_findings(prometheus_port)
        emit = _emitter(exporter, as_json)
        if once:
            last = watcher.once(emit)
            sys.exit(exitcodes.for_severity(last.word))
        try:
            watcher.run(emit)
        except KeyboardInterrupt:
            click.echo("watch stopped", err=True)
    except DsOpsError as exc:
        raise _unknown(exc, once) from None
    finally:
        if exporter is not None:
            exporter.close()
        if watcher is not None and watcher.stream is not None:
            watcher.stream.close()
        ctx.close()


def _recorded_notes(ctx: TargetSession) -> None:
    """Name each damaged field of the recorded deployment watch does not need, in the words
    deploy, rollback and stop refuse with (docs/deploy.md, "Recorded settings")."""
    from dsv4ops.usecases.watch import recorded_notes

    for exc in recorded_notes(ctx):  # they quote the record: terminal-safe
        echo_lines(
            [
                f"note: damaged record (watch does not need it): {exc.message}",
                f"  hint: {exc.hint}",
            ],
            err=True,
        )


def _serve_findings(prometheus_port: int) -> FindingsExporter:
    """The findings as Prometheus metrics on 127.0.0.1 (its port on stderr); DsOpsError if busy."""
    from dsv4ops.usecases.watch import serve_findings

    exporter, port = serve_findings(prometheus_port)
    click.echo(f"findings on http://127.0.0.1:{port}/metrics", err=True)
    return exporter


def _emitter(exporter: FindingsExporter | None, as_json: bool) -> Callable[[Round], None]:
    """What each round prints (a JSON line or the live view) and exports."""

    def emit(r: Round) -> None:
        if exporter is not None:
            exporter.update(r)
        if as_json:
            click.echo(json.dumps(r.to_json()))
        else:
            echo_lines(render(r))  # readings and errors came from the network

    return emit


def _unknown(exc: DsOpsError, once: bool) -> DsOpsError:
    if once:
        exc.exit_code = UNKNOWN_EXIT
    return exc


def render(r: Round) -> list[str]:
    """The live view of one round: a header, one line per component, probes, findings."""
    lines = [
        f"{r.at} round {r.number}: {r.word.upper()}" + (f" ({r.unproven})" if r.unproven else "")
    ]
    for name, s in r.scrape.servers.items():
        lines.append(f"  {name:<8}" + (_server(s) if s.up else _unseen(s.oversized, s.error)))
    router = r.scrape.router
    ok = sum(1 for v in router.worker_health.values() if v == 1)
    lines.append(
        "  router  "
        + (
            f"up  workers {ok}/{len(router.worker_health)} healthy, "
            f"5xx {router.responses_5xx:g}"
            if router.up
            else _unseen(router.oversized, router.error)
        )
    )
    if r.probes:
        lines.append(
            "  probes   "
            + ", ".join(f"{p.kind} {p.status} ({p.elapsed_s:.2f} s)" for p in r.probes)
        )
    lines += ["  " + f.line() for f in r.findings]
    return lines


def _unseen(oversized: str | None, error: str | None) -> str:
    # a /metrics larger than watch reads answered: the server is there, its numbers unread
    return f"{'UNREAD' if oversized else 'DOWN'} ({error})"


def _server(s: ServerReading) -> str:
    waiting = ", ".join(f"{k} {v:g}" for k, v in s.queues.items() if v) or "empty"
    return (
        f"up  health {s.health or '-'}, running {_n(s.running)}, queued {_n(s.queued)}, "
        f"tokens {_n(s.progress)}, failures {s.failures:g}, PD queues {waiting}"
    )


def _n(v: float | None) -> str:
    return "?" if v is None else f"{v:g}"
