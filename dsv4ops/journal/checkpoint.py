"""The known-good judgement checkpoint kept in the journal's index (issue 21: a cold read of a
10^6-record journal judges only what was appended since, not every deploy again).

A Checkpoint is knowngood.judge's fold state after the first `upto` operations in the journal's
order (placed): their judgements, the best known-good per commands hash, the gates they FAILED,
their experiments, and what a later operation would have to match to change any of it (the
experiment names their deploys' reasons give, their commands hashes, their experiments with a
failed gate). It is used only when `proof` (a hash of those operations' ids and record counts, in
that order) still holds: a record appended to one of them, a merge that placed another among them,
a rebuilt index all fail it. Resuming is exact or refused: judged() resumes the fold
(knowngood.judge_into) over the operations after `upto` only when none of them can change a
judgement before it (a failed gate on commands judged before, an experiment one of their deploys
named, a block of an experiment that failed before); otherwise it judges the whole journal, as
knowngood.judge does, and takes a new checkpoint. So judged() always equals knowngood.judge of the
same operations (tests/journal/checkpoint_test.py's property).
"""

from __future__ import annotations

import base64
import hashlib
import json
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from dsv4ops.journal import knowngood
from dsv4ops.journal.knowngood import Judgement
from dsv4ops.journal.records import Kind, Operation

_BLOCK = "experiment "  # a block deploy's reason: "experiment <id>: block <n> (A|B)"


class Judged(Protocol):
    """What the checkpoint reads of an index entry (journal/index.py's Entry)."""

    op: str
    count: int

    @property
    def terminal(self) -> bool: ...

    def essentials(self) -> Operation: ...


@dataclass(frozen=True)
class Checkpoint:
    upto: int
    proof: str
    out: dict[str, Judgement]  # op -> judgement, for the deploys/rollbacks among the first `upto`
    good: dict[str, str]  # commands hash -> the op whose judgement is the best known-good
    failed: dict[str, str]  # knowngood.failed_gates of the first `upto`
    experiments: frozenset[str]
    failed_experiments: frozenset[str]  # those with a failed gate
    reasons: frozenset[str]  # the block reasons of their deploys
    hashes: frozenset[str]  # the commands hashes of their deploys and rollbacks


def proof(order: Sequence[Judged], upto: int) -> str:
    return hashlib.sha256("\n".join(f"{e.op}:{e.count}" for e in order[:upto]).encode()).hexdigest()


def judged(
    order: Sequence[Judged], ck: Checkpoint | None
) -> tuple[dict[str, Judgement], Checkpoint]:
    """(knowngood.judge of the entries' essentials, the checkpoint to keep): resumed from `ck`
    when it proves itself and nothing after it changes a judgement before it."""
    if ck is not None and ck.upto <= len(order) and ck.proof == proof(order, ck.upto):
        out = _resume(ck, [e.essentials() for e in order[ck.upto :]])
        if out is not None:
            return out, ck
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
    judged_ops = [o for o in ops if o.kind in (Kind.DEPLOY, Kind.ROLLBACK)]
    return Checkpoint(
        len(ops),
        digest,
        out,
        {h: j.op for h, j in good.items()},
        failed,
        frozenset(experiments),
        frozenset(o.op for o in ops if o.kind is Kind.EXPERIMENT and _gate_failed(o)),
        frozenset(
            o.reason
            for o in judged_ops
            if (o.reason or "").startswith(_BLOCK) and o.reason is not None
        ),
        frozenset(h for h in map(knowngood.commands_hash, judged_ops) if h),
    )


def _gate_failed(o: Operation) -> bool:
    return any(s.name.startswith("gate ") and s.phase == "failed" for s in o.steps)


def _names(reason: str | None, experiments: frozenset[str] | set[str]) -> bool:
    return any((reason or "").startswith(f"{_BLOCK}{e}: block ") for e in experiments)


def _resume(ck: Checkpoint, rest: list[Operation]) -> dict[str, Judgement] | None:
    """judge() of the checkpoint's operations + `rest`; None when `rest` could change a
    judgement the checkpoint holds (then the whole journal is judged)."""
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
    out = dict(ck.out)
    good = {h: out[op] for h, op in ck.good.items()}
    knowngood.judge_into(rest, set(ck.experiments) | new_experiments, failed, out, good)
    return out


# -- in the index file ---------------------------------------------------------------------------


def encode(ck: Checkpoint) -> bytes:
    """One JSON line; the judgements as columns (ids, ranks, indexes into a table of reasons)."""
    whys: dict[str, int] = {}
    ids = array("I", [whys.setdefault(j.why, len(whys)) for j in ck.out.values()])
    return json.dumps(
        {
            "upto": ck.upto,
            "proof": ck.proof,
            "ops": "\n".join(ck.out),
            "ranks": "".join(str(j.rank) for j in ck.out.values()),
            "whys": list(whys),
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
        d: dict[str, Any] = json.loads(raw)
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
        out = {
            op: Judgement(op, int(r), whys[w]) for op, r, w in zip(ops, ranks, ids, strict=False)
        }
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
