"""`dsv4ops journal`: deployments, rollbacks and stops: when, who, profile, commit, outcome, why.

It reads the target's journal of record (through its agent); when the target cannot be reached
it shows the local cache and says how old it is."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from dsv4ops.cli._output import echo_json, json_option, table, target_option


@click.command()
@target_option
@json_option
@click.option("--limit", type=int, default=20, show_default=True, help="Newest N entries.")
@click.option(
    "--merge",
    "merge",
    is_flag=True,
    help="Append the records this machine kept when the target's record lost history "
    "(shorter or diverged) back into the record; mutating commands refuse until then.",
)
def journal(target: str | None, as_json: bool, limit: int, merge: bool) -> None:
    """List the target's journal, newest last."""
    from dsv4ops.cli._context import open_target

    if merge:
        _merge(target)
        return
    ctx = open_target(target, verb="journal", read_only=True)
    try:
        j = ctx.journal
        # Through the journal's index (journal/index.py): only the listed operations are read.
        ops, judged, merges = j.listing(limit)  # one read; judged over the whole journal
        source = j.source()
        lock = _lock(ctx, source)
    finally:
        ctx.close()
    if as_json:
        echo_json(
            {
                "target": j.target,
                "path": str(j.path),
                "record": source,
                "skipped_lines": j.skipped_lines,
                "merges": merges,
                "entries": [entry(o, judged, lock) for o in ops],
            }
        )
        return
    click.echo(record_line(source))
    if not ops:
        click.echo("journal: empty")
    else:
        click.echo(table([_row(entry(o, judged, lock)) for o in ops], _HEADERS))
    for m in merges:
        click.echo(merge_line(m))
    if j.skipped_lines:
        click.echo(f"note: skipped torn line(s) {j.skipped_lines} (an interrupted write)", err=True)


_HEADERS = ["when", "kind", "id", "who", "profile", "commit", "outcome", "known-good", "reason"]


_UNSEEN = object()  # the deploy lock was not read (the target unreachable): liveness unknown


def _lock(ctx: Any, source: dict[str, Any]) -> Any:
    """The target's deploy lock (None: free), or _UNSEEN when it cannot be read."""
    from dsv4ops.errors import DsOpsError

    if source.get("source") == "cache":
        return _UNSEEN
    try:
        return ctx.supervisor.lock_info()
    except DsOpsError:
        return _UNSEEN


def entry(o: Any, judged: Mapping[str, Any], lock: Any = _UNSEEN) -> dict[str, Any]:
    """One operation's summary with its true state and what to run next: a runbook run is
    RUNNING only while its process lives (runbooks/runlog.run_state); an operation that never
    ended is RUNNING only while the deploy lock names it (or the experiment it runs within)
    and its holder lives; its process gone, it is ABANDONED, with the recover command."""
    from dsv4ops.journal.records import Kind

    s: dict[str, Any] = o.summary(judged.get(o.op))
    s["next"] = None
    if o.kind is Kind.RUNBOOK:
        s["status"], s["next"] = _run_state(o)
        return s
    if o.status.terminal:
        return s
    recover = "`dsv4ops rollback --recover`" + (
        " (puts the box back on A; `ab` has no " "--recover of its own)"
        if o.kind is Kind.EXPERIMENT
        else ""
    )
    if lock is _UNSEEN:
        s["next"] = f"if its process is gone: {recover}"
        return s
    holder = lock.holder.get("op_id") if lock is not None and not lock.stale else None
    inside = holder is not None and (o.reason or "").startswith(f"experiment {holder}:")
    if holder != o.op and not inside:
        s["status"] = "ABANDONED"
        s["next"] = f"its process is gone (no live deploy lock names it): {recover}"
    return s


def _run_state(o: Any) -> tuple[str, str | None]:
    from dsv4ops.runbooks.runlog import run_state

    return run_state(o)


def _row(s: dict[str, Any]) -> list[Any]:
    why = (
        (s["message"] or s["reason"] or "").splitlines()[0] if (s["message"] or s["reason"]) else ""
    )
    if s["in_flight"]:
        why = f"IN FLIGHT: {s['in_flight']}"
    if s.get("next"):
        why = f"{why}; next: {s['next']}" if why else f"next: {s['next']}"
    return [
        s["when"],
        s["kind"],
        s["id"],
        s["who"],
        s["profile"] or s["package"] or "-",
        (s["commit"] or "-")[:10],
        s["status"],
        _known_good_cell(s),
        why if s.get("next") else why[:90],  # the command to run next is never cut
    ]


def _known_good_cell(s: dict[str, Any]) -> str:
    """For a deploy or rollback: "yes"/"yes (INCONCLUSIVE accepted)" or "no: why" (the rule
    of journal/knowngood.py); "-" for what never deploys (stop, kernels, experiment, runbook)."""
    why: str | None = s.get("known_good_why")
    if not why:
        return "-"
    if s["known_good"]:
        return "yes (INCONCLUSIVE accepted)" if "below a pass" in why else "yes"
    return "no: " + why.removeprefix("not known-good: ")[:70]


def _merge(target: str | None) -> None:
    from dsv4ops.cli._context import open_target
    from dsv4ops.orchestrate.targetjournal import TargetJournal

    ctx = open_target(target, verb="journal --merge", read_only=True)
    try:
        backend = ctx.journal.backend
        if not isinstance(backend, TargetJournal):
            click.echo(f"journal: {ctx.journal.path} is a local file; nothing to merge")
            return
        done = backend.merge_diverged()  # a TargetError when the target cannot be reached
    finally:
        ctx.close()
    if not done["merged"] and "copy" not in done:
        click.echo("journal: nothing to merge (the record holds every record this machine had)")
        return
    click.echo(
        f"journal: merged {done['merged']} record(s) of {len(done['ops'])} operation(s) into "
        f"the journal of record; the copy is kept as {done['copy']}"
    )


def record_line(source: dict[str, Any]) -> str:
    """Where the history shown comes from; from the cache, how old it is and why."""
    line = _record_line(source)
    d = source.get("diverged")
    if d:
        line += (
            f"\nHISTORY DIVERGED: the target's record ({d['target_records']} records, last "
            f"{d['target_last_ts']}) lacks {d['missing_on_target']} record(s) of this machine's "
            f"copy ({d['copy_records']} records, last {d['copy_last_ts']}), kept in {d['copy']}; "
            f"the {d['newer']}'s copy is newer. Mutating commands refuse until "
            f"`{d['merge_command']}`"
        )
    return line


def _record_line(source: dict[str, Any]) -> str:
    if source.get("source") == "cache":
        age = source.get("age_s")
        when = (
            f"synced {source.get('synced_at')} ({age:.0f} s ago)"
            if age is not None
            else "never synced"
        )
        return (
            f"TARGET UNREACHABLE ({source.get('error')}): showing the local cache "
            f"{source.get('cache')}, {when}; it may be stale"
        )
    if source.get("source") == "target":
        return f"journal of record: {source.get('record')} (cache {source.get('cache')})"
    return f"journal: {source.get('path')}"


def merge_line(m: dict[str, Any]) -> str:
    ops = m.get("ops") or []
    return (
        f"merged {m.get('records')} record(s) of {len(ops)} operation(s) from {m.get('source')} "
        f"by {m.get('user')} at {m.get('ts')} ({m.get('op')})"
    )
