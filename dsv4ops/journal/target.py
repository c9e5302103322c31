"""The journal of record on the target, through its agent, with this machine's copy as its
cache. docs/deploy.md, "The journal" ("The cache", "The merge", "A record that lost history",
"The target unreachable")."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol, TypeVar

from dsv4ops.clock import Clock, SystemClock, age_s, utc_now_iso
from dsv4ops.errors import AgentCallError, DiskFullError, JournalError, TargetError
from dsv4ops.journal import divergence, opids, recordfile
from dsv4ops.journal.backend import Divergence, JournalSource, MergeDone
from dsv4ops.journal.commands import command
from dsv4ops.journal.schema import MergeRecord, to_json
from dsv4ops.jsontypes import JSONObject, JSONValue
from dsv4ops.whoami import local_host, operator_identity

R = TypeVar("R")


def offline_hint(target: str) -> str:
    return (
        "the journal of record lives on the target: mutating commands need it; "
        f"{command('status', target)} and {command('journal', target)} answer from the local "
        "cache meanwhile"
    )


class _Host(Protocol):
    @property
    def host(self) -> str: ...


class AgentCaller(Protocol):
    """What this needs of the Supervisor (remote/supervisor.py, a layer this package may not
    import): one agent call by name, and where it goes (the executor's host, the workdir)."""

    @property
    def executor(self) -> _Host: ...

    @property
    def workdir(self) -> str: ...

    def call(self, op: str, timeout: float = ..., **args: JSONValue) -> JSONObject: ...


class TargetJournal:
    """A JournalBackend (journal/store.py) for the target's record; see the module docstring."""

    def __init__(
        self,
        agent: AgentCaller,
        cache: Path,
        *,
        offline_ok: bool = False,
        clock: Clock | None = None,
        notify: Callable[[str], None] | None = None,
    ) -> None:
        self.agent = agent
        self.path = self.home = cache  # home: the cache's own place (path may move: _to_spare)
        self.target = cache.name.removesuffix(".jsonl")  # journal_path names it after its target
        self._notify = notify or (lambda _line: None)
        self._cache_error: str | None = None  # why the cache cannot be written
        self.marker = cache.with_name(cache.name.removesuffix(".jsonl") + ".sync.json")
        self.offline_ok = offline_ok
        self._clock = clock or SystemClock()
        self._current_under: str | None = None  # lock op whose own call synced the cache last
        self._synced = False  # this process has synced (and merged) at least once
        self._offline_error: str | None = None
        self.diverged = cache.with_name(cache.name + ".diverged")

    # -- the JournalBackend protocol ---------------------------------------------------------

    def refresh(self, *, lock_op: str | None = None) -> None:
        if lock_op is None or lock_op != self._current_under:
            try:
                self._sync()
            except TargetError as exc:
                if not self.offline_ok:
                    raise self._refusal(exc) from None
                self._offline_error = str(exc)
        if not self.offline_ok:
            self._refuse_if_diverged()

    def append(self, data: bytes, *, lock_op: str | None) -> None:
        try:
            if not self._synced:
                self._sync()  # merges a dirty cache first, so nothing local is lost
            self._refuse_if_diverged()
            size, window = self._cache_proof()
            reply = self.agent.call(
                "journal_append",
                lines=data.decode("utf-8", "surrogateescape"),
                lock_op=lock_op,
                offset=size,
                prefix_window=window,
            )
        except AgentCallError as exc:
            if exc.kind == "lock_lost":
                raise JournalError(
                    f"{self.agent.executor.host}: {exc.reply.get('error')}",
                    hint="another operator took over this target; see "
                    + command("status", self.target),
                ) from None
            raise JournalError(f"cannot append to the journal of record: {exc}") from None
        except TargetError as exc:
            raise self._refusal(exc) from None
        try:
            self._apply(size, reply, lock_op)
        except JournalError as exc:
            exc.written = True  # on the record: never appended again
            raise

    def keep(self, data: bytes) -> Path:
        """Keep records the record could not take in the cache: the next sync merges them."""
        recordfile.append_bytes(str(self.home), data)
        return self.home

    def describe(self) -> JournalSource:
        marker = self._marker() or {}
        synced_at = marker.get("synced_at")
        out: JournalSource = {
            "source": "cache" if self._offline_error else "target",
            "record": f"{self.agent.executor.host}:{self.agent.workdir}/journal.jsonl",
            "cache": str(self.path),
            "synced_at": synced_at,
            "age_s": self._age_s(synced_at),
        }
        if self._offline_error:
            out["error"] = self._offline_error
        if self._cache_error:
            out["cache_error"] = self._cache_error
        diverged = self._divergence()
        if diverged is not None:
            out["diverged"] = diverged
        return out

    # -- a record that lost history ------------------------------------------------------------

    def _divergence(self) -> Divergence | None:
        """What the kept copy holds that the record lacks, and which is newer (None: no copy)."""
        try:
            kept = recordfile.read_bytes(str(self.diverged))
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise JournalError(f"cannot read {self.diverged}: {exc.strerror}") from exc
        if not kept:
            return None
        d = divergence.describe(kept, self._cache_bytes(), self.diverged, self.path.stem)
        if d is None:
            self._healed()
        return d

    def _healed(self) -> None:
        """The record holds every record of the kept copy again (put back whole, or merged by
        hand): the divergence is over by itself; the copy is kept aside, never deleted."""
        done = self.diverged.with_name(f"{self.diverged.name}.healed-{self._stamp()}")
        with contextlib.suppress(FileNotFoundError):  # another command healed it meanwhile
            os.replace(self.diverged, done)
            self._notify(
                f"note: the journal of record holds every record of the copy kept in "
                f"{self.diverged} again: the divergence is over (the copy is kept as {done})"
            )

    def _refuse_if_diverged(self) -> None:
        d = self._divergence()
        if d is not None:
            raise divergence.refusal(d)

    def merge_diverged(self) -> MergeDone:
        """Append the kept copy's records the target lacks (after a merge record), keep the copy
        as `.merged`; return {"merged": n, "ops": [...]} (n = 0: nothing to merge). It syncs
        first: as the first command after the record lost history it finds what was lost."""
        self._sync()
        d = self._divergence()
        if d is None:
            return {"merged": 0, "ops": []}
        reply = self._merge(
            recordfile.read_bytes(str(self.diverged)), first=False, source=self.diverged
        )
        self._apply(0, reply, None)
        done = self.diverged.with_name(f"{self.diverged.name}.merged-{self._stamp()}")
        os.replace(self.diverged, done)
        return {
            "merged": int(reply.get("merged") or 0),
            "ops": list(reply.get("ops") or []),
            "copy": str(done),
        }

    def _keep_diverged(self, cached: bytes, fresh: bytes) -> None:
        """The record no longer holds what the cache had: keep the cache whole before it follows."""
        if not recordfile.missing_records(divergence.records(fresh), divergence.records(cached)):
            return  # the record holds every cached record (a rewritten torn line): nothing lost
        kept = recordfile.read_bytes(str(self.diverged))  # an earlier divergence not merged yet
        extra = recordfile.missing_records(divergence.records(kept), divergence.records(cached))
        if kept and not extra:
            return  # the kept copy already holds all of it
        data = cached if not kept else kept + b"".join(recordfile.encode(r) for r in extra)
        _write_atomic(self.diverged, data)

    # -- syncing -------------------------------------------------------------------------------

    def _sync(self) -> None:
        size, window = self._cache_proof()
        marker = self._marker()
        if size and not _marker_proves(marker, size, window, self.path):
            reply = self._merge(self._cache_bytes(), first=marker is None)
            size = 0  # the merge reply holds the whole record
        else:
            reply = self._call_read(size, window)
        self._apply(size, reply, None)
        self._synced = True
        self._offline_error = None

    def _call_read(self, size: int, window: str) -> JSONObject:
        try:
            return self.agent.call("journal_read", offset=size, prefix_window=window)
        except AgentCallError as exc:
            raise JournalError(f"cannot read the journal of record: {exc}") from None

    def _merge(self, cached: bytes, *, first: bool, source: Path | None = None) -> JSONObject:
        """Merge the cache's records the target lacks (nothing is appended if it lacks none)."""
        parsed, _torn = recordfile.parse(cached)
        records = [r for _, r in parsed if isinstance(r, dict) and isinstance(r.get("op"), str)]
        if first:
            backup = self.path.with_name(self.path.name + ".pre-merge")
            if not backup.exists():
                backup.write_bytes(cached)  # the operator's own copy, as it was before the merge
        merge = MergeRecord(
            opids.draw("m", self._stamp()),
            utc_now_iso(self._clock),
            operator_identity(),
            source=f"{local_host()}:{(source or self.path).resolve()}",
        )
        try:
            return self.agent.call(
                "journal_merge", records=records, merge=to_json(merge), offset=0, prefix_window=None
            )
        except AgentCallError as exc:
            raise JournalError(
                f"cannot merge {self.path} into the journal of record: {exc}"
            ) from None

    def _apply(self, cached: int, reply: Mapping[str, object], trusted_for: str | None) -> None:
        """Bring the cache (its first `cached` bytes the copy the call proved) to the target's
        record as the reply describes it: the new tail is appended, a reset replaces it whole
        (keeping what it would lose); note the sync. `trusted_for`: the lock op whose accepted
        append this is (its reads may use the cache)."""
        tail = str(reply.get("data") or "").encode("utf-8", "surrogateescape")
        try:
            self._write_marker(*self._write_cache(cached, reply, tail))
        except JournalError as exc:
            if not self._to_spare(cached, reply, tail, exc):
                return  # a reader goes on with the cache as last synced (warned)
        self._current_under = trusted_for

    def _write_cache(
        self, cached: int, reply: Mapping[str, object], tail: bytes
    ) -> tuple[int, str]:
        try:
            with recordfile.exclusive(str(self.path)):  # two commands syncing one cache
                if reply.get("reset"):
                    if cached:
                        self._keep_diverged(self._cache_bytes(), tail)
                    _write_atomic(self.path, tail)
                elif tail and recordfile.proof(str(self.path))[0] == cached:
                    recordfile.append_bytes(str(self.path), tail, mend=False)
                return self._cache_proof()
        except OSError as exc:
            raise JournalError(
                f"cannot write the journal cache {self.path}: {exc.strerror}"
            ) from exc

    def _write_marker(self, size: int, window: str) -> None:
        marker = {
            "synced_at": utc_now_iso(self._clock),
            "size": size,
            "window": window,
            "record": f"{self.agent.executor.host}:{self.agent.workdir}/journal.jsonl",
        }
        _write_atomic(self.marker, (json.dumps(marker, sort_keys=True) + "\n").encode())

    def _to_spare(
        self, cached: int, reply: Mapping[str, object], tail: bytes, exc: JournalError
    ) -> bool:
        """The cache cannot be written (a full disk): go on from a private temporary copy (the
        record is whole). False: none could be written; a reader uses the cache as last synced."""
        if self._cache_error is not None:
            raise exc  # the temporary copy failed too
        self._cache_error = str(exc)
        head = b"" if reply.get("reset") else self._cache_bytes()[:cached]
        try:
            spare = Path(tempfile.mkdtemp(prefix="dsv4ops-journal-")) / "journal" / self.path.name
            weakref.finalize(self, shutil.rmtree, str(spare.parents[1]), True)
            recordfile.write_atomic(str(spare), head + tail)
        except OSError as err:
            if not self.offline_ok:
                raise JournalError(
                    f"{exc}, nor a temporary copy of it: {err.strerror}",
                    hint="free space on this machine's disk, then run the command again",
                ) from None
            self._notify(f"warning: {exc}; showing the journal as last synced")
            return False
        self._notify(
            f"warning: {exc}; this command uses a temporary copy ({spare}); the journal of record "
            "on the target holds every record, and the cache catches up once there is space"
        )
        self.path, self.marker = spare, spare.with_name(self.marker.name)
        self._write_marker(*self._cache_proof())
        return True

    # -- local files -----------------------------------------------------------------------------

    def _cache_proof(self) -> tuple[int, str]:
        return self._read_cache(recordfile.proof)

    def _cache_bytes(self) -> bytes:
        return self._read_cache(recordfile.read_bytes)

    def _read_cache(self, read: Callable[[str], R]) -> R:
        try:
            return read(str(self.path))
        except OSError as exc:
            raise JournalError(
                f"cannot read the journal cache {self.path}: {exc.strerror}"
            ) from exc

    def _marker(self) -> JSONObject | None:
        try:
            data = json.loads(self.marker.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return {}  # unreadable: the cache is treated as unsynced local records (merged)
        return data if isinstance(data, dict) else {}

    def _stamp(self) -> str:
        return self._clock.now().strftime("%Y%m%dT%H%M%S")

    def _age_s(self, synced_at: object) -> float | None:
        return age_s(synced_at, self._clock) if isinstance(synced_at, str) else None

    def _refusal(self, exc: TargetError) -> TargetError:
        if isinstance(exc, DiskFullError):
            return exc  # its message says what was left behind and how to make space
        return TargetError(
            f"{exc}; the journal of record on the target cannot be reached: nothing was changed",
            hint=offline_hint(self.target),
        )


def _marker_proves(
    marker: Mapping[str, object] | None, size: int, window: str, cache: Path
) -> bool:
    """The marker says the cache is exactly what the last sync left (no local records since): by
    its size and window (an older marker by its whole-file hash, read once)."""
    if marker is None:
        return False
    if "window" in marker:
        return marker.get("size") == size and marker.get("window") == window
    old = marker.get("sha256")
    return isinstance(old, str) and old == recordfile.sha256(recordfile.read_bytes(str(cache)))


def _write_atomic(path: Path, data: bytes) -> None:
    """Temp file (0600 whatever the umask), then rename, in a directory reached without following
    a symlink (recordfile.write_atomic): the cache passes recordfile's own checks read back."""
    try:
        recordfile.write_atomic(str(path), data)
    except OSError as exc:
        raise JournalError(f"cannot write the journal cache {path}: {exc.strerror}") from exc
