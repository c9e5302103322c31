"""`dsv4ops journal`: deployments, rollbacks and stops: when, who, profile, commit, outcome, why.

It reads the target's journal of record (through its agent); when the target cannot be reached
it shows the local cache and says how old it is."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from dsv4ops.cli._output import NAMED, echo_json, echo_lines, json_option, table, target_option
from dsv4ops.jsontypes import JSONObject

if TYPE_CHECKING:
    from dsv4ops.usecases.journal import JournalEntry, JournalSource, OperationView


@click.command()
@target_option
@json_option
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=20,
    show_default=True,
    help="Newest N entries (0: every entry).",
)
@click.option(
    "--merge",
    "merge",
    is_flag=True,
    help="Append the records this machine kept when the target's record lost history "
    "(shorter or diverged) back into the record; mutating commands refuse until then.",
)
@click.option(
    "--id",
    "op_id",
    type=NAMED,
    default=None,
    metavar="ID",
    help="One operation (id or unique prefix): its outcome and every step it recorded.",
)
def journal(target: str | None, as_json: bool, limit: int, merge: bool, op_id: str | None) -> None:
    """List the target's journal, newest last (--id: one operation, step by step)."""
    from dsv4ops.cli._context import open_target
    from dsv4ops.usecases.journal import journal_listing

    if merge and op_id is not None:
        raise click.UsageError("--merge and --id do different things: give one")
    if merge:
        _merge(target)
        return
    if op_id is not None:
        _operation(target, op_id, as_json)
        return
    ctx = open_target(target, verb="journal", read_only=True)
    try:
        listing = journal_listing(ctx, limit)
    finally:
        ctx.close()
    if as_json:
        echo_json(
            {
                "target": listing.target,
                "path": listing.path,
                "record": listing.source,
                "skipped_lines": listing.skipped_lines,
                "warnings": listing.warnings,
                "merges": listing.merges,
                "entries": listing.entries,
            }
        )
        click.get_current_context().exit(listing.exit)
    # Every field came from the record (a user, a reason, a path, the target's error): the
    # lines are made terminal-safe as they are printed (a table's cells already are).
    lines = record_lines(listing.source)
    lines.append(
        table([_row(s) for s in listing.entries], _HEADERS) if listing.entries else "journal: empty"
    )
    echo_lines(lines + [merge_line(m) for m in listing.merges])
    if listing.skipped_lines:
        click.echo(
            f"note: skipped torn line(s) {listing.skipped_lines} (an interrupted write)", err=True
        )
    # UNDECIDED (4) while the record lacks history this machine kept: never 0 with it missing.
    click.get_current_context().exit(listing.exit)


_HEADERS = [
    "when", "kind", "id", "who", "profile", "commit", "outcome", "known-good", "gates", "reason",
]  # fmt: skip


def _row(s: JournalEntry) -> list[object]:
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
        _gates_cell(s),
        why if s.get("next") else why[:90],  # the command to run next is never cut
    ]


def _gates_cell(s: JournalEntry) -> str:
    """Each gate that judged it (journal/gates.py): suite, verdict, the commands hash judged
    (short); "-" for none."""
    from dsv4ops.usecases.journal import gate_labels

    return "; ".join(gate_labels(s)) or "-"


def _known_good_cell(s: JournalEntry) -> str:
    """For a deploy or rollback: "yes"/"yes (INCONCLUSIVE accepted)" or "no: why" (the rule
    of journal/knowngood.py); "-" for what never deploys (stop, kernels, experiment, runbook)."""
    why: str | None = s.get("known_good_why")
    if not why:
        return "-"
    if s["known_good"]:
        from dsv4ops.usecases.journal import accepted_inconclusive

        return "yes (INCONCLUSIVE accepted)" if accepted_inconclusive(s) else "yes"
    return "no: " + why.removeprefix("not known-good: ")[:70]


def _operation(target: str | None, op_id: str, as_json: bool) -> None:
    """`journal --id ID`: the operation's outcome, then its steps (each record's own words,
    printed terminal-safe)."""
    from dsv4ops.cli._context import open_target
    from dsv4ops.usecases.journal import journal_operation

    ctx = open_target(target, verb="journal", read_only=True)
    try:
        view = journal_operation(ctx, op_id)
    finally:
        ctx.close()
    if as_json:
        echo_json({"target": view.target, "record": view.source, **view.entry, "steps": view.steps})
    else:
        echo_lines([*record_lines(view.source), *_operation_lines(view)])
    click.get_current_context().exit(view.exit)


def _operation_lines(view: OperationView) -> list[str]:
    e = view.entry
    what = e["profile"] or e["package"] or "-"
    commit = f" @ {e['commit'][:12]}" if e["commit"] else ""
    lines = [
        f"{e['kind']} {e['id']} of {what}{commit} by {e['who']}: {e['status']}",
        f"  started {e['when']}" + (f", ended {e['ended']}" if e["ended"] else ", not ended"),
    ]
    if e["reason"]:
        lines.append(f"  reason: {e['reason']}")
    for i, line in enumerate((e["message"] or "").splitlines()):
        lines.append(("  message: " if i == 0 else "           ") + line)
    if e.get("known_good_why"):
        lines.append(f"  known-good: {_known_good_cell(e)}")
    gates = _gates_cell(e)
    if gates != "-":
        lines.append(f"  gates: {gates}")
    if e.get("in_flight"):
        lines.append(f"  IN FLIGHT: {e['in_flight']}")
    if e.get("next"):
        lines.append(f"  next: {e['next']}")
    rows = _step_rows(view)
    lines.append(
        table(rows, ["when", "step", "outcome", "seconds", "detail"]) if rows else "no steps"
    )
    return lines


def _step_rows(view: OperationView) -> list[list[object]]:
    """One row a step: its start folded with its end (done, failed), or "IN FLIGHT" when it
    never ended (its process died in it); --json keeps every record as written."""
    rows: list[list[object]] = []
    open_at: dict[str, int] = {}  # step name -> its row while started and not ended
    for s in view.steps:
        detail = (s["detail"] or "").splitlines()[0][:160] if s["detail"] else ""
        seconds = "-" if s["duration_s"] is None else f"{s['duration_s']:.2f}"
        if s["phase"] == "start":
            open_at[s["name"]] = len(rows)
            rows.append([s["ts"], s["name"], "IN FLIGHT", "-", detail])
            continue
        i = open_at.pop(s["name"], None)
        if i is None:
            rows.append([s["ts"], s["name"], s["phase"], seconds, detail])
        else:
            rows[i][2:] = [s["phase"], seconds, detail or rows[i][4]]
    return rows


def _merge(target: str | None) -> None:
    from dsv4ops.cli._context import open_target
    from dsv4ops.usecases.journal import merge_kept_records

    ctx = open_target(target, verb="journal --merge", read_only=True)
    try:
        done = merge_kept_records(ctx)  # a TargetError when the target cannot be reached
        if done is None:
            echo_lines([f"journal: {ctx.journal.path} is a local file; nothing to merge"])
            return
    finally:
        ctx.close()
    if not done["merged"] and "copy" not in done:
        click.echo("journal: nothing to merge (the record holds every record this machine had)")
        return
    echo_lines(
        [
            f"journal: merged {done['merged']} record(s) of {len(done['ops'])} operation(s) "
            f"into the journal of record; the copy is kept as {done['copy']}"
        ]
    )


def record_lines(source: JournalSource) -> list[str]:
    """Where the history shown comes from; from the cache, how old it is and why; a second
    line when the record diverged. Lines as the record has them: printed through echo_lines."""
    lines = [_record_line(source)]
    d = source.get("diverged")
    if d:
        lines.append(
            f"HISTORY DIVERGED: the target's record ({d['target_records']} records, last "
            f"{d['target_last_ts']}) lacks {d['missing_on_target']} record(s) of this machine's "
            f"copy ({d['copy_records']} records, last {d['copy_last_ts']}), kept in {d['copy']}; "
            f"the {d['newer']}'s copy is newer. Mutating commands refuse until "
            f"`{d['merge_command']}`"
        )
    return lines


def _record_line(source: JournalSource) -> str:
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


def merge_line(m: JSONObject) -> str:
    ops = m.get("ops") or []
    return (
        f"merged {m.get('records')} record(s) of {len(ops)} operation(s) from {m.get('source')} "
        f"by {m.get('user')} at {m.get('ts')} ({m.get('op')})"
    )
