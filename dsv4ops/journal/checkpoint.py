"""The known-good judgement checkpoint kept in the index: knowngood.judge's fold state after the
first `upto` operations, used only while `proof` (their ids and record counts) holds, resumed
only when nothing after it can change a judgement before it; otherwise the whole journal is
judged. judged() always equals knowngood.judge (tests/journal/index_test.py's property).
docs/deploy.md, "The journal: record, index, judge"."""

from __future__ import annotations

import base64
import hashlib
import json
from array import array
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from dsv4ops.journal import knowngood
from dsv4ops.journal.knowngood import Judgement
from dsv4ops.journal.records import Kind, Operation
from dsv4ops.jsontypes import JSONObject

_BLOCK = "experiment "  # a block deploy's reason: "experiment <id>: block <n> (A|B)"
ADVANCE = 256  # operations ended after the checkpoint: take a new one there (never re-judged)


class Judged(Protocol):
    """What the checkpoint reads of an index entry (journal/index.py's Entry)."""

    op: str
    count: int

    @property
    def terminal(self) -> bool: ...

    def essentials(self) -> Operation: ...


class Judgements(Mapping[str, Judgement]):
    """op -> Judgement as the index file keeps them (columns: a Judgement made when read)."""

    def __init__(self, ops: list[str], ranks: str, whys: list[str], ids: array[int]) -> None:
        self._ops, self._ranks, self._whys, self._ids = ops, ranks, whys, ids
        self._index: dict[str, int] | None = None

    @property
    def _at(self) -> dict[str, int]:
        if self._index is None:
            self._index = dict(zip(self._ops, range(len(self._ops)), strict=True))
        return self._index

    def __getitem__(self, op: str) -> Judgement:
        i = self._at[op]
        return Judgement(op, int(self._ranks[i]), self._whys[self._ids[i]])

    def __iter__(self) -> Iterator[str]:
        return iter(self._ops)

    def columns(self) -> tuple[list[str], str, list[str], array[int]]:
        return self._ops, self._ranks, self._whys, self._ids

    def ranked(self, rank: int) -> Iterator[str]:
        """The ops judged `rank`, newest first (found by str.rfind over the ranks column)."""
        at, code = self._ranks.rfind(str(rank)), str(rank)
        while at >= 0:
            yield self._ops[at]
            at = self._ranks.rfind(code, 0, at)

    def __len__(self) -> int:
        return len(self._ops)


class Resumed(MutableMapping[str, Judgement]):
    """A checkpoint's judgements with those of the operations after it (never copied whole)."""

    def __init__(self, base: Mapping[str, Judgement]) -> None:
        self.base, self.new = base, dict[str, Judgement]()

    def __getitem__(self, op: str) -> Judgement:
        hit = self.new.get(op)
        return self.base[op] if hit is None else hit

    def __setitem__(self, op: str, j: Judgement) -> None:
        self.new[op] = j

    def ranked(self, rank: int) -> Iterator[str]:
        """The ops judged `rank`, newest first: those judged after the checkpoint first."""
        yield from (op for op in reversed(self.new) if self.new[op].rank == rank)
        yield from ranked(self.base, rank)

    def __delitem__(self, op: str) -> None:
        raise TypeError("judgements are never removed")

    def __iter__(self) -> Iterator[str]:
        yield from self.base
        yield from (op for op in self.new if op not in self.base)

    def __len__(self) -> int:
        return len(self.base) + sum(op not in self.base for op in self.new)


def ranked(judged: Mapping[str, Judgement], rank: int) -> Iterator[str]:
    """The ops `judged` ranks `rank`, newest first. A judgement's place is the journal's order
    (knowngood.judge_into judges in that order; a checkpoint keeps it; resumed ones follow)."""
    if isinstance(judged, Judgements | Resumed):
        return judged.ranked(rank)
    return (op for op in reversed(list(judged)) if judged[op].rank == rank)


@dataclass(frozen=True)
class Checkpoint:
    upto: int
    proof: str
    out: Mapping[str, Judgement]  # op -> judgement, the deploys/rollbacks among the first `upto`
    good: dict[str, str]  # commands hash -> the op whose judgement is the best known-good
    failed: dict[str, str]  # knowngood.failed_gates of the first `upto`
    experiments: frozenset[str]
    failed_experiments: frozenset[str]  # those with a failed gate
    reasons: frozenset[str]  # the block reasons of their deploys
    hashes: frozenset[str]  # the commands hashes of their deploys and rollbacks


def digest(ops: list[str], counts: array[int]) -> str:
    """The proof of operations `ops` holding `counts` records (int64), in that order."""
    return hashlib.sha256("\n".join(ops).encode() + b"\0" + counts.tobytes()).hexdigest()


def proof(order: Sequence[Judged], upto: int) -> str:
    """digest() of the first `upto` entries (read off the index's columns when it has them)."""
    fast = getattr(order, "digest", None)
    if fast is not None:
        return str(fast(upto))
    head = order[:upto]
    return digest([e.op for e in head], array("q", [e.count for e in head]))


def judged(
    order: Sequence[Judged], ck: Checkpoint | None
) -> tuple[Mapping[str, Judgement], Checkpoint]:
    """(knowngood.judge of the entries' essentials, the checkpoint to keep): resumed from `ck`
    when it proves itself and nothing after it changes a judgement before it."""
    if ck is not None and ck.upto <= len(order) and ck.proof == proof(order, ck.upto):
        tail = order[ck.upto :]
        rest = [e.essentials() for e in tail]
        folded = _fold(ck, rest)
        if folded is not None:
            k = next((i for i, e in enumerate(tail) if not e.terminal), len(tail))
            ahead = _fold(ck, rest[:k]) if k >= ADVANCE else None  # refused by neither
            if ahead is not None:  # a checkpoint after the ended ones: the next read starts there
                return folded[0], _advanced(ck, rest[:k], ahead, proof(order, ck.upto + k))
            return folded[0], ck
    ops = [e.essentials() for e in order]
    out = knowngood.judge(ops)
    upto = next((i for i, e in enumerate(order) if not e.terminal), len(order))
    # Up to the first operation still in flight: its next records would fail the proof.
    return out, take(ops[:upto], proof(order, upto))


def take(ops: Sequence[Operation], digest: str) -> Checkpoint:
    """The checkpoint after `ops` (`digest`: their proof)."""
    experiments = {o.op for o in ops if o.kind is Kind.EXPERIMENT}
    failed = knowngood.failed_gates(ops)
    out: dict[str, Judgement] = {}
    good: dict[str, Judgement] = {}
    knowngood.judge_into(ops, experiments, failed, out, good)
    return Checkpoint(
        len(ops),
        digest,
        out,
        {h: j.op for h, j in good.items()},
        failed,
        frozenset(experiments),
        *_marks(ops),
    )


def _marks(ops: Sequence[Operation]) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """(the experiments with a failed gate, the block reasons and the commands hashes of the
    deploys and rollbacks) among `ops`: what a later operation is checked against."""
    judged_ops = [o for o in ops if o.kind in (Kind.DEPLOY, Kind.ROLLBACK)]
    return (
        frozenset(o.op for o in ops if o.kind is Kind.EXPERIMENT and _gate_failed(o)),
        frozenset(
            o.reason
            for o in judged_ops
            if (o.reason or "").startswith(_BLOCK) and o.reason is not None
        ),
        frozenset(h for h in map(knowngood.commands_hash, judged_ops) if h),
    )


def _advanced(ck: Checkpoint, more: list[Operation], folded: _Folded, digest: str) -> Checkpoint:
    """take() of the checkpoint's operations + `more`, from the fold resumed over `more`."""
    out, good, failed, experiments = folded
    gates, reasons, hashes = _marks(more)
    return Checkpoint(
        ck.upto + len(more),
        digest,
        out,
        {h: j.op for h, j in good.items()},
        failed,
        frozenset(experiments),
        ck.failed_experiments | gates,
        ck.reasons | reasons,
        ck.hashes | hashes,
    )


def _gate_failed(o: Operation) -> bool:
    return any(g.failed for g in o.gates)


def _names(reason: str | None, experiments: frozenset[str] | set[str]) -> bool:
    return any((reason or "").startswith(f"{_BLOCK}{e}: block ") for e in experiments)


_Folded = tuple["Resumed", dict[str, Judgement], dict[str, str], set[str]]


def _fold(ck: Checkpoint, rest: list[Operation]) -> _Folded | None:
    """judge_into's state after the checkpoint's operations + `rest` (the judgements, the best
    known-good per commands hash, the failed gates, the experiments); None when `rest` could
    change a judgement the checkpoint holds (then the whole journal is judged)."""
    new_experiments = {o.op for o in rest if o.kind is Kind.EXPERIMENT}
    if any(_names(r, new_experiments) for r in ck.reasons):
        return None  # an experiment that makes an earlier deploy one of its arms
    if any(o.kind is Kind.DEPLOY and _names(o.reason, ck.failed_experiments) for o in rest):
        return None  # a block of an earlier failed experiment: its gate is placed before
    failed = dict(ck.failed)
    for h, why in knowngood.failed_gates(rest).items():
        if h not in failed:
            if h in ck.hashes:
                return None  # commands judged before now failed a gate
            failed[h] = why
    out = Resumed(ck.out)
    good = {h: out[op] for h, op in ck.good.items()}
    experiments = set(ck.experiments) | new_experiments
    knowngood.judge_into(rest, experiments, failed, out, good)
    return out, good, failed, experiments


# -- in the index file ---------------------------------------------------------------------------


def _columns(out: Mapping[str, Judgement]) -> tuple[list[str], str, list[str], array[int]]:
    """(ops, ranks, the table of reasons, each one's reason) of `out`, in its order: the
    columns as read, with those judged since appended (no Judgement made for the others)."""
    if isinstance(out, Judgements):
        return out.columns()
    base: Mapping[str, Judgement] = {}
    if isinstance(out, Resumed) and isinstance(out.base, Judgements):
        base, out = out.base, out.new
    ops, ranks, whys, ids = base.columns() if isinstance(base, Judgements) else ([], "", [], None)
    ops, whys, ids = list(ops), list(whys), array("I", ids or [])
    at = {w: i for i, w in enumerate(whys)}
    for j in out.values():
        if j.why not in at:
            at[j.why] = len(whys)
            whys.append(j.why)
        ids.append(at[j.why])
    return ops + list(out), ranks + "".join(str(j.rank) for j in out.values()), whys, ids


def encode(ck: Checkpoint) -> bytes:
    """One JSON line; the judgements as columns (ids, ranks, indexes into a table of reasons)."""
    ops, ranks, table, ids = _columns(ck.out)
    return json.dumps(
        {
            "upto": ck.upto,
            "proof": ck.proof,
            "ops": "\n".join(ops),
            "ranks": ranks,
            "whys": table,
            "why": base64.b64encode(ids.tobytes()).decode(),
            "good": ck.good,
            "failed": ck.failed,
            "experiments": sorted(ck.experiments),
            "failed_experiments": sorted(ck.failed_experiments),
            "reasons": sorted(ck.reasons),
            "hashes": sorted(ck.hashes),
        },
        separators=(",", ":"),
    ).encode()


def decode(raw: bytes) -> Checkpoint | None:
    """The checkpoint `raw` holds; None for anything this code did not write."""
    try:
        d: JSONObject = json.loads(raw)
        ops = d["ops"].split("\n") if d["ops"] else []
        ranks, whys = d["ranks"], d["whys"]
        ids = array("I")
        ids.frombytes(base64.b64decode(d["why"], validate=True))
        if not (
            len(ops) == len(ranks) == len(ids)
            and set(ranks) <= {"0", "1", "2"}
            and all(isinstance(w, str) for w in whys)
            and (not ids or max(ids) < len(whys))
        ):
            return None
        out = Judgements(ops, ranks, whys, ids)
        good = {str(h): str(op) for h, op in d["good"].items()}
        if not all(op in out and out[op].known_good for op in good.values()):
            return None
        return Checkpoint(
            int(d["upto"]),
            str(d["proof"]),
            out,
            good,
            {str(h): str(w) for h, w in d["failed"].items()},
            *(
                frozenset(str(x) for x in d[k])
                for k in ("experiments", "failed_experiments", "reasons", "hashes")
            ),
        )
    except (ValueError, TypeError, KeyError, AttributeError, IndexError):
        return None
