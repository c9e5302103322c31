"""A journal of record that lost history (journal/target.py): what the copy this
machine kept holds that the record lacks, which copy is newer, and the refusal a mutating
command gets meanwhile. Pure functions of the two copies' bytes."""

from __future__ import annotations

import shlex
from pathlib import Path

from dsv4ops.errors import JournalError
from dsv4ops.journal import recordfile
from dsv4ops.journal.backend import Divergence
from dsv4ops.jsontypes import JSONObject


def merge_command(target: str) -> str:
    """`journal --merge` for `target`, the target shell-quoted (pasted, it names that target)."""
    return shlex.join(["dsv4ops", "journal", "--target", target, "--merge"])


def describe(kept: bytes, record: bytes, copy: Path, target: str) -> Divergence | None:
    """What the kept copy holds that the record (its copy here) lacks; None when it lacks
    nothing: the divergence is over (the record was put back whole, or merged)."""
    mine, theirs = records(kept), records(record)
    missing = recordfile.missing_records(theirs, mine)
    if not missing:
        return None
    return {
        "copy": str(copy),
        "copy_records": len(mine),
        "copy_last_ts": _last_ts(mine) or None,
        "target_records": len(theirs),
        "target_last_ts": _last_ts(theirs) or None,
        "missing_on_target": len(missing),
        "newer": "target" if _last_ts(theirs) > _last_ts(mine) else "cache",
        "merge_command": merge_command(target),
    }


def refusal(d: Divergence) -> JournalError:
    """Why a mutating command is refused while the record lacks records of the kept copy."""
    return JournalError(
        f"the journal of record ({d['target_records']} record(s), last {d['target_last_ts']}) "
        f"lacks {d['missing_on_target']} of the {d['copy_records']} record(s) this machine "
        f"had (last {d['copy_last_ts']}; kept in {d['copy']}); the {d['newer']}'s copy is "
        "the newer; nothing was changed",
        hint=f"run `{d['merge_command']}` to append the missing records to the record, "
        "then retry",
    )


def records(data: bytes) -> list[JSONObject]:
    return [r for _, r in recordfile.parse(data)[0] if isinstance(r, dict)]


def _last_ts(recs: list[JSONObject]) -> str:
    return max((str(r.get("ts") or "") for r in recs), default="")
