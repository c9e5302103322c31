"""Composition root for the verbs that act on a target: target name -> executor, supervisor,
journal and clock (a `TargetSession`). What the verbs then do lives in usecases/."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from dsv4ops.cli._live import LiveWaits
from dsv4ops.cli._output import terminal_safe
from dsv4ops.clock import SystemClock
from dsv4ops.journal.store import Journal
from dsv4ops.usecases.session import TargetSession

if TYPE_CHECKING:
    from dsv4ops.profiles.model import Target


def open_target(
    name: str | None, *, verb: str, http_only: bool = False, read_only: bool = False
) -> TargetSession:
    """Connect (lazily, for SSH) to a target from profiles/targets.yaml. Raises DsOpsError.

    An endpoint target (a cluster) is refused for `verb` (ControllerOwnedError, naming the
    kubectl line) unless `http_only`: then the session's supervisor makes its HTTP requests
    from this machine, with its agent in the state directory, and must do nothing else.
    Otherwise its journal is the target's record (journal/target.py) cached in the
    state directory (synced here, so any other caller is refused at once when the target is
    unreachable); `read_only` callers (status, journal) then read the cache instead."""
    from dsv4ops.journal.store import journal_path
    from dsv4ops.journal.target import TargetJournal
    from dsv4ops.profiles import get_target
    from dsv4ops.remote import Supervisor, connect
    from dsv4ops.usecases.endpoint import refuse_on_endpoint

    target = get_target(name)
    if target.endpoint is not None:
        if not http_only:
            refuse_on_endpoint(target, verb)
        return _http_session(target)
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
    supervisor = Supervisor(
        executor,
        target.workdir,
        python=target.python,
        reconnect_s=s.reconnect_s if s is not None else 0.0,
        notify=_notify,
    )
    record = TargetJournal(
        supervisor,
        journal_path(target.name),
        offline_ok=read_only,
        notify=_notify,
    )
    journal = Journal(target.name, backend=record, notify=_notify)
    session = TargetSession(target, supervisor, journal, SystemClock(), waits=live_waits())
    if not read_only:
        # First contact is the record: an unreachable target refuses the command here, before
        # anything else is tried, with the one sentence that says nothing was changed.
        try:
            journal.sync()
        except BaseException:
            session.close()
            raise
    return session


def _http_session(target: Target) -> TargetSession:
    """A session whose supervisor only makes HTTP requests from this machine (endpoint status)."""
    from dsv4ops.constants import state_dir
    from dsv4ops.remote import Supervisor, connect

    workdir = (state_dir() / "endpoints" / target.name).absolute()
    executor = connect("local")
    return TargetSession(
        target,
        Supervisor(executor, str(workdir), python=sys.executable),
        Journal(target.name),
        SystemClock(),
    )


def _expand(path: str | None) -> str | None:
    return os.path.expanduser(path) if path else None


def live_waits() -> LiveWaits:
    """The observer of the command being run: plain lines, never a live one, under --json."""
    ctx = click.get_current_context(silent=True)
    return LiveWaits(plain=bool(ctx is not None and ctx.params.get("as_json")))


def _notify(message: str) -> None:
    """A connection's or the record's note, on stderr; it may quote what the target said."""
    click.echo(terminal_safe(message, keep_newlines=True), err=True)


def progress_printer(as_json: bool) -> Callable[[str], None]:
    """Progress lines go to stdout, or to stderr when stdout carries --json. A line may quote a
    server's answer, a remote command's stderr or a journal record: made terminal-safe here, the
    one printer of every verb's progress (a message's own line breaks stay)."""
    return lambda line: click.echo(terminal_safe(line, keep_newlines=True), err=as_json)
