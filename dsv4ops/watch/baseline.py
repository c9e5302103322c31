"""The throughput baseline: what the deployed unit's last canary measured, from the journal.

The deploy's canary gate records, among its GateResult's reasons (journal/gates.py),
`smoke: baseline T tok/s at concurrency C` (`usecases/gate.py`); watch compares the decode's
throughput with T when it runs at about the same load. Only a passed gate of the deployed
commands counts (same commands hash), read off the operation's GateResults, never off a step's
name (an older version's canary step is one after the journal's migrator, its detail a reason).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from dsv4ops.journal.lazy import Operations
from dsv4ops.journal.records import Operation
from dsv4ops.watch.settings import Baseline

_BASELINE = re.compile(r"baseline (\d+(?:\.\d+)?) tok/s at concurrency (\d+)")


def baseline_from_operations(
    ops: Sequence[Operation], deployed: Operation | None
) -> Baseline | None:
    """The newest canary baseline recorded for the deployed commands; None when there is none."""
    if deployed is None:
        return None
    wanted = (deployed.profile or {}).get("commands_hash")
    newest: Iterable[Operation] = reversed(ops)
    if isinstance(ops, Operations) and wanted is not None:
        # Through the journal's index: deploys of other commands are skipped unread (issue 21).
        newest = ops.newest_first(profile={"commands_hash": wanted})
    if wanted is None:
        # A record from before the commands hash: which other operations ran the same commands
        # cannot be told, so only its own gate is evidence (never another profile's baseline).
        newest = (deployed,)
    for op in newest:
        if wanted is not None and (op.profile or {}).get("commands_hash") != wanted:
            continue
        for g in reversed(op.gates):
            found = (_BASELINE.search(r) for r in g.reasons if g.op == op.op and g.passed)
            m = next((m for m in found if m and int(m.group(2)) > 0), None)
            if m:
                return Baseline(
                    float(m.group(1)), int(m.group(2)), source=f"{op.kind.value} {op.op} canary"
                )
    return None
