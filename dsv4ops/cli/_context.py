"""Composition root for the verbs that act on a target: target name -> executor, supervisor,
journal and clock (a `TargetSession`). What the verbs then do lives in orchestrate/usecases/."""

from __future__ import annotations

import os
from collections.abc import Callable

import click

from dsv4ops.clock import SystemClock
from dsv4ops.journal.store import Journal
from dsv4ops.orchestrate.usecases.session import TargetSession


def open_target(name: str | None, *, read_only: bool = False) -> TargetSession:
    """Connect (lazily, for SSH) to a target from profiles/targets.yaml. Raises DsOpsError.

    Its journal is the target's record (orchestrate/targetjournal.py) cached in the state
    directory (synced here, so any other caller is refused at once when the target is
    unreachable); `read_only` callers (status, journal) then read the cache instead."""
    from dsv4ops.journal.store import journal_path
    from dsv4ops.orchestrate.targetjournal import TargetJournal
    from dsv4ops.profiles import get_target
    from dsv4ops.remote import Supervisor, connect

    target = get_target(name)
    s = target.ssh
    if target.transport == "ssh" and s is not None:  # profiles require `ssh:` for transport ssh
        executor = connect(
            "ssh",
            host=s.host,
            port=s.port,
            user=s.user,
            key=_expand(s.key),
            known_hosts=_expand(s.known_hosts),
            trust_on_first_use=s.trust_on_first_use,
            python=target.python,
        )
    else:
        executor = connect("local")
    supervisor = Supervisor(executor, target.workdir, python=target.python)
    record = TargetJournal(supervisor, journal_path(target.name), offline_ok=read_only)
    journal = Journal(target.name, backend=record)
    session = TargetSession(target, supervisor, journal, SystemClock())
    if not read_only:
        # First contact is the record: an unreachable target refuses the command here, before
        # anything else is tried, with the one sentence that says nothing was changed.
        try:
            journal.records()
        except BaseException:
            session.close()
            raise
    return session


def _expand(path: str | None) -> str | None:
    return os.path.expanduser(path) if path else None


def progress_printer(as_json: bool) -> Callable[[str], None]:
    """Progress lines go to stdout, or to stderr when stdout carries --json."""
    return lambda line: click.echo(line, err=as_json)
