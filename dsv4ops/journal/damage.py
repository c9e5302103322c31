"""Lines of a journal that are no readable record of an operation: torn, damaged, orphans,
an id begun twice. docs/deploy.md, "A line that is no record"."""

from __future__ import annotations

import json

from dsv4ops.journal.schema import BeginRecord, Record, RecordError, parse_record

# A damaged line as the index keeps it: [line number, "file:line: why"].
Damaged = list[int | str]


def read_line(raw: bytes, where: str, skipped: list[int], damaged: list[Damaged]) -> Record | None:
    """The line at `where` ("file:line") as a typed record (journal/schema.py); None for a blank, a torn (its line
    number added to `skipped`) or a damaged line (added to `damaged`)."""
    if not raw.strip():
        return None
    n = int(where.rsplit(":", 1)[1])
    try:
        parsed = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        why = unreadable(raw)
        if why is None:
            skipped.append(n)  # a torn write: everything around it is still good
        else:
            damaged.append([n, f"{where}: {why}"])
        return None
    try:
        return parse_record(parsed, where)
    except RecordError as exc:
        damaged.append([n, str(exc)])
        return None


def unreadable(raw: bytes) -> str | None:
    """Why a line that is no JSON is damaged; None when it is a record cut short (a torn write)."""
    text = raw.decode("utf-8", "replace")
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        # Cut short: the JSON ran out (an open string runs to the end of the line).
        if exc.msg.startswith("Unterminated string") or exc.pos >= len(text.rstrip()):
            return None
        return f"not a journal record ({exc.msg} at column {exc.pos + 1}); it is not read"
    bad = raw.decode("utf-8", "backslashreplace").find("\\x")
    return f"not UTF-8 (at column {bad + 1}): the record was altered; it is not read"


def its_own(
    rec: Record,
    where: str,
    begun: bool,
    duplicates: dict[str, list[int]],
    orphans: dict[str, list[int]],
) -> bool:
    """Whether `rec` (at `where`; `begun`: its operation id was begun before) is read as its
    operation's: not a second begin under an id already begun nor a record after one (noted in
    `duplicates`), not a record no readable begin opened (noted in `orphans`)."""
    op, n = rec.op, int(where.rsplit(":", 1)[1])
    if op in duplicates:
        duplicates[op].append(n)
        return False
    if isinstance(rec, BeginRecord):
        if begun:
            duplicates[op] = [n]
        return not begun
    if not begun:
        orphans.setdefault(op, []).append(n)
    return begun


def warnings(
    path: str,
    damaged: list[Damaged],
    orphans: dict[str, list[int]],
    duplicates: dict[str, list[int]],
) -> list[str]:
    """The warning lines of a journal's damage (empty when it has none), with what to do."""
    out = [f"warning: {why}" for _n, why in damaged]
    out += [
        f"warning: {path}:{lines[0]}: {len(lines)} record(s) of operation {op} (line(s) "
        f"{_lines(lines)}) that no readable begin record opened: not read"
        for op, lines in orphans.items()
    ]
    if out:
        n = damaged[0][0] if damaged else next(iter(orphans.values()))[0]
        out.append(
            f"hint: look at it (`sed -n {n}p {path}`) and mend that line of the journal "
            "of record by hand (it is append-only: nothing in dsv4ops rewrites it); deploy, "
            "rollback and stop refuse until then; journal and status read the rest"
        )
    return out + [duplicate_warning(op, lines) for op, lines in duplicates.items()]


def _lines(lines: list[int]) -> str:
    """ "2-12" for a run of lines, else each."""
    if lines == list(range(lines[0], lines[-1] + 1)) and len(lines) > 1:
        return f"{lines[0]}-{lines[-1]}"
    return ", ".join(map(str, lines))


def duplicate_warning(op: str, lines: list[int]) -> str:
    """What `journal` and `status` say of an operation id begun twice."""
    return (
        f"warning: operation id {op} is begun again at line {lines[0]} of the journal: the "
        f"record(s) at line(s) {_lines(lines)} are another operation's under its "
        f"id and are not read as {op}'s (its own records, before them, stand)"
    )
