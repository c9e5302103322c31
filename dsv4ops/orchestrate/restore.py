"""Which deployment a rollback restores, rebuilt from what the journal recorded.

A rollback redeploys the profile content recorded for a known-good deployment: the profile file
read from git at the recorded commit (never the working copy) and rendered for the target. The
result must render to the recorded commands hash; when it cannot (deployed from an uncommitted
working copy, or git unavailable), the exact recorded commands are used, unless they hold
redacted secrets, which only git can restore.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import replace

from dsv4ops import exitcodes
from dsv4ops.deployment import Deployment
from dsv4ops.errors import DeployError, DsOpsError, RecordedSettingError
from dsv4ops.journal.commands import command
from dsv4ops.journal.knowngood import arm_of, commands_hash
from dsv4ops.journal.records import Kind, Operation, Status
from dsv4ops.journal.store import Journal


class RollbackTargetError(DeployError):
    """`rollback --to` names nothing it can restore: a user mistake, refused before anything
    changed, so exit 1 like the other refusals (docs/deploy.md), not 2 (a handled failure)."""

    exit_code = exitcodes.REFUSED


# (profile path, git commit) -> the Deployment that file renders to at that commit for the target
RenderAtCommit = Callable[[str, str], Deployment]


def rebuild(op: Operation, render_at_commit: RenderAtCommit | None) -> tuple[Deployment, str]:
    """(deployment, how it was rebuilt) for a recorded operation. Raises DeployError."""
    recorded = op.deployment()
    note = ""
    path, commit = recorded.profile_path, recorded.git_commit
    if path and commit and render_at_commit is not None:
        try:
            fresh = render_at_commit(path, commit)
        except DsOpsError as exc:
            note = f"profile not readable at git {commit[:12]}: {exc}"
        else:
            if fresh.commands_hash == recorded.commands_hash:
                how = f"profile {path} read from git at {commit[:12]}"
                return replace(fresh, source_op=op.op, git_commit=commit), how
            note = (
                f"profile {path} at git {commit[:12]} renders different commands than were deployed"
            )
    elif not commit:
        note = "it was deployed from an uncommitted working copy"
    if any(c.has_redacted_values for c in recorded.components):
        raise DeployError(
            f"cannot rebuild deployment {op.op} ({recorded.profile_name}): {note or 'no git commit recorded'}, "
            "and its recorded commands hold redacted secrets"
        )
    return recorded, f"the exact commands recorded in journal {op.op}" + (
        f" ({note})" if note else ""
    )


# How many known-good deployments the automatic rollback tries, newest first, before it stops
# everything: each try is a full stop/start/probe, and one that fails its probe is skipped.
MAX_FALLBACKS = 3


def known_good_ops(journal: Journal) -> Sequence[Operation]:
    """Known-good deployments in the order they are offered: the journal's one rule
    (dsv4ops.journal.knowngood: passes newest first, then accepted INCONCLUSIVEs). Commands that
    failed a gate anywhere are not among them: only `rollback --to` can name those."""
    return journal.known_good()


def rollback_target(journal: Journal, to: str | None) -> Operation:
    """The operation a rollback restores: `to` (journal id/prefix or git revision prefix), else
    the newest known-good deployment that differs from what runs now. Raises DeployError."""
    good = known_good_ops(journal)
    if to:
        by_id = journal.operations().prefixed(to)  # through the index: only the matches read
        if by_id:
            op = next((o for o in by_id if o.op == to), None)
            if op is None and len(by_id) > 1:
                raise RollbackTargetError(
                    f"{to!r} matches {len(by_id)} journal entries "
                    f"({', '.join(o.op for o in by_id[:5])}); give more of the id"
                )
            op = op or by_id[0]
            if op.kind is Kind.STOP or not op.components:
                raise RollbackTargetError(
                    f"journal entry {op.op} is {_a(op.kind.value)}; it deployed nothing to return to. "
                    + _choices(good)
                )
            return op
        # A revision names the newest known-good deployment at it, else (named, so the
        # operator's choice) the newest proven whole unit recorded at it.
        ops = journal.operations()  # through the index: only SUCCEEDED deploys and rollbacks
        done = ops.newest_first(kinds=(Kind.DEPLOY, Kind.ROLLBACK), status=Status.SUCCEEDED)
        whole = (o for o in done if o.proven)
        by_rev = next(
            (
                o
                for o in itertools.chain(good, whole)
                if str((o.profile or {}).get("git_commit") or "").startswith(to)
            ),
            None,
        )
        if by_rev is not None:
            return by_rev
        raise RollbackTargetError(
            f"no deployment in the journal matches {to!r} (a journal id or a git commit). "
            + _choices(good),
            hint=f"list them with {command('journal', journal.target)}",
        )
    arm_a = unfinished_experiment_arm_a(journal, good)
    if arm_a is not None:
        return arm_a
    # After an interrupted or connection-lost operation nothing is known to run: any good one goes.
    current = None if journal.deployed_is_unknown() is not None else journal.deployed()
    current_hash = (current.profile or {}).get("commands_hash") if current else None
    for op in good:
        if current is None or (
            op.op != current.op and (op.profile or {}).get("commands_hash") != current_hash
        ):
            return op
    # Refused before anything changed: exit 1 (dsv4ops/exitcodes.py), like a bad --to.
    raise RollbackTargetError(
        "no earlier known-good deployment to roll back to"
        + (f" (only {current.profile_name}, which is what runs now)" if current else ""),
        hint=f"{command('journal', journal.target)} shows why each deployment is or is not "
        f"known-good; name one with {command('rollback', journal.target, '--to', 'ID')}"
        # with nothing to restore, an interrupted operation is resolved by stopping
        + (
            f", or end what an interrupted operation left with "
            f"{command('stop', journal.target, '--recover')}"
            if journal.in_flight()
            else ""
        ),
    )


def unfinished_experiment_arm_a(journal: Journal, good: Sequence[Operation]) -> Operation | None:
    """The known-good deployment of A's commands (else of A's profile) when the newest A/B
    experiment never ended (its CLI died mid-run; the next command's --recover marks it
    ABANDONED) and nothing outside it has deployed since: an A/B that does not finish leaves the
    box on A, as `dsv4ops ab` does itself when it is interrupted. An experiment's blocks are
    never known-good themselves. None otherwise (the usual newest-known-good rule)."""
    ops = journal.operations()
    # kinds from the index: no operation read until the experiment
    at = next(ops.positions(kinds={Kind.EXPERIMENT}, newest_first=True), None)
    if at is None:
        return None
    exp = ops[at]
    if exp.status not in (Status.PENDING, Status.RUNNING, Status.ABANDONED):
        return None
    mine = f"experiment {exp.op}:"
    if any(
        o.kind in (Kind.DEPLOY, Kind.ROLLBACK, Kind.STOP) and not (o.reason or "").startswith(mine)
        for o in ops[at + 1 :]
    ):
        return None  # someone deployed, rolled back or stopped since: that is what counts now
    a = (exp.profile or {}).get("a")
    a_hashes = {commands_hash(o) for o in ops if arm_of(o, exp.op) == "A"} - {None}
    return next((o for o in good if commands_hash(o) in a_hashes), None) or next(
        (o for o in good if o.profile_name == a), None
    )


def _choices(good: Sequence[Operation], limit: int = 8) -> str:
    """What `--to` accepts, newest first: journal ids with their profile and git commit."""
    if not good:
        return "There is no known-good deployment in the journal."
    items = [
        f"{o.op} ({o.profile_name or '-'} @ {str((o.profile or {}).get('git_commit') or 'uncommitted')[:12]})"
        for o in good[:limit]
    ]
    more = f" and {len(good) - limit} older" if len(good) > limit else ""
    return "Known-good deployments (ID or REV): " + ", ".join(items) + more + "."


def fallbacks_for(
    journal: Journal,
    render_at_commit: RenderAtCommit | None,
    *,
    exclude_op: str | None = None,
    progress: Callable[[str], None] | None = None,
    limit: int = MAX_FALLBACKS,
) -> list[tuple[Operation, Deployment]]:
    """The known-good deployments the automatic rollback tries, in order (newest first, one per
    distinct set of commands, at most `limit`): when the first fails its probe, the next."""
    out: list[tuple[Operation, Deployment]] = []
    seen: set[str] = set()
    for op in known_good_ops(journal):
        if op.op == exclude_op:
            continue
        try:
            dep, _how = rebuild(op, render_at_commit)
            dep.check_recorded()  # its probe reads them: a hand-edited value is named, skipped
        except (DeployError, RecordedSettingError) as exc:
            if progress:
                progress(f"note: cannot use {op.op} as the automatic rollback target: {exc}")
            continue
        if dep.commands_hash in seen:
            continue  # the same commands again would fail the same way
        seen.add(dep.commands_hash)
        out.append((op, dep))
        if len(out) >= limit:
            break
    return out


def fallback_for(
    journal: Journal,
    render_at_commit: RenderAtCommit | None,
    *,
    exclude_op: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[Operation, Deployment] | None:
    """The newest known-good deployment to restore automatically (None: none)."""
    found = fallbacks_for(
        journal, render_at_commit, exclude_op=exclude_op, progress=progress, limit=1
    )
    return found[0] if found else None


def _a(word: str) -> str:
    """The word with its indefinite article ("an experiment", "a stop")."""
    return f"{'an' if word[:1] in 'aeiou' else 'a'} {word}"
