"""The `dsv4ops` commands other messages tell an operator to run, written once: each names its
target (`--target T`), shell-quoted, so a command pasted as printed acts on the target the
message is about, never on the default one (DSV4OPS_TARGET or twin-local)."""

from __future__ import annotations

import shlex
from typing import Protocol

from dsv4ops.journal.records import Operation


class _Judged(Protocol):
    """What `recover_commands` reads of a Journal (a Protocol: store.py imports this module
    for the commands its own errors name)."""

    @property
    def target(self) -> str: ...

    def last_known_good(self) -> Operation | None: ...


def command(verb: str, target: str, *args: str) -> str:
    """`dsv4ops VERB ARGS --target T` in backquotes, every word quoted as a POSIX shell reads it
    (a placeholder such as PROFILE stays as written: it needs no quoting)."""
    return "`" + shlex.join(["dsv4ops", *verb.split(), *args, "--target", target]) + "`"


def recover_commands(journal: _Judged) -> str:
    """What resolves an operation that never ended on `journal`'s target: `stop --recover`
    always works; `rollback --recover` only with a known-good deployment to restore (the
    journal's own rule, `Journal.last_known_good`), so it is offered only then."""
    target = journal.target
    stop = command("stop", target, "--recover")
    deploy = command("deploy", target, "PROFILE", "--recover")
    good = journal.last_known_good()
    if good is None:
        return (
            f"{stop} (stops whatever runs) or {deploy} (deploys a profile afresh); nothing "
            "is known-good to roll back to"
        )
    rollback = command("rollback", target, "--recover")
    return (
        f"{rollback} (restores the last known-good, {good.profile_name or '-'} {good.op}), "
        f"{deploy} or {stop}"
    )
