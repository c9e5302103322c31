"""The journal of record (`<workdir>/journal.jsonl`): read from an offset, append under the
deploy lock, merge an operator-side journal once. The file rules are `dsv4ops/journal/recordfile.py`
(the operator's store uses the same module), so fsync and torn lines behave the same here.

Every reply carries what the caller's cached copy lacks (`data` after its `offset`, or all of
it with `reset` when the cached prefix is not the target's), so an append also refreshes the
operator's cache in the same round trip. The prefix is proven by the hash of the copy's last
64 KiB and its size (recordfile.window_sha256), so a call reads only what it sends.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

import dsv4ops.journal.recordfile as recordfile

from .common import AgentError, JsonObject, Workdir, read_json


def _since(path: str, req: JsonObject) -> JsonObject:
    """What a copy of `offset` bytes proven by its `prefix_window` (recordfile.window_sha256)
    lacks: only the bytes after it are read, whatever the record's size; a shorter or diverged
    copy gets everything with `reset`."""
    tail, reset, size, window = recordfile.read_since(
        path, req.get("offset"), req.get("prefix_window")
    )
    return {
        "data": tail.decode("utf-8", "surrogateescape"),
        "reset": reset,
        "size": size,
        "window": window,
    }


@contextlib.contextmanager
def _safe_file(path: str) -> Iterator[None]:
    """A journal path that is a symlink or not safely this user's file is a refusal naming it
    (recordfile._open): nothing is read from it or appended to it."""
    try:
        yield
    except recordfile.UnsafeJournalFile as exc:
        raise AgentError(
            "unsafe_journal",
            f"the journal of record {exc.filename} {exc.strerror}; nothing was read or written "
            "(move it aside and restore the real file, e.g. from the operator's cache)",
        ) from None


def op_journal_read(wd: Workdir, req: JsonObject) -> JsonObject:
    path = wd.journal()
    with _safe_file(path):
        return _since(path, req)


def _check_fence(wd: Workdir, lock_op: object) -> None:
    """An operation's records are appended only while it holds the deploy lock: a CLI whose lock
    was broken by another operator (`--recover`) cannot keep writing into the record."""
    if lock_op is None:
        return
    holder = read_json(wd.lock()) or {}
    if holder.get("op_id") != lock_op:
        raise AgentError(
            "lock_lost",
            f"operation {lock_op} no longer holds the deploy lock "
            f"(held by {holder.get('op_id') or 'nobody'}); its record was not appended",
            holder=holder,
        )


def op_journal_append(wd: Workdir, req: JsonObject) -> JsonObject:
    lines = req.get("lines")
    if not isinstance(lines, str) or not lines.endswith("\n"):
        raise AgentError("bad_request", "journal_append needs whole lines")
    for line in lines.splitlines():
        if not isinstance(json.loads(line), dict):
            raise AgentError("bad_request", "journal_append: every line is a JSON object")
    data = lines.encode("utf-8", "surrogateescape")
    path = wd.journal()
    with _safe_file(path), recordfile.exclusive(path):
        _check_fence(wd, req.get("lock_op"))
        if not (req.get("again") is True and _landed(path, req, data)):
            recordfile.append_bytes(path, data)
        return _since(path, req)


def _landed(path: str, req: JsonObject, data: bytes) -> bool:
    """Whether an append sent `again` (its first sending lost its connection, remote/rideout.py)
    already landed: its lines are in what the caller's copy lacks. Records carry their op id and
    sequence number, so the same lines cannot be another append's."""
    tail = recordfile.read_since(path, req.get("offset"), req.get("prefix_window"))[0]
    return data in tail


def op_journal_merge(wd: Workdir, req: JsonObject) -> JsonObject:
    """Append the `records` whose (op id, sequence) the target's file lacks, after the `merge`
    record that journals the merge; nothing at all when every record is already there."""
    records, merge = req.get("records"), req.get("merge")
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise AgentError("bad_request", "journal_merge needs a list of records")
    if not isinstance(merge, dict) or recordfile.record_type(merge) != recordfile.MERGE:
        raise AgentError("bad_request", "journal_merge needs its merge record")
    path = wd.journal()
    with _safe_file(path), recordfile.exclusive(path):
        present = [r for _, r in recordfile.parse(recordfile.read_bytes(path))[0]]
        new = recordfile.missing_records(present, records)
        began = recordfile.began(new)
        if new:
            merge = {**merge, "records": len(new), "ops": began}
            data = b"".join(recordfile.encode(r) for r in [merge, *new])
            recordfile.append_bytes(path, data)
        reply = _since(path, req)
    return {**reply, "merged": len(new), "ops": began}
