"""Error hierarchy. Every user-facing failure is a DsOpsError; the CLI maps it to exit 1.

    DsOpsError                  user mistake or refused operation: one line + hint, exit 1
    ├── ProfileError            bad profile/target file (carries file, line, key path)
    ├── TargetError             target unreachable, host key mismatch, bad target definition
    │   └── DiskFullError       a disk dsv4ops writes to is full (ENOSPC/EDQUOT): exit 2, act on it
    ├── RemoteCommandError      a command on the target exited non-zero (carries the result)
    ├── LockHeldError           another deploy holds the target's lock (names the holder)
    ├── JournalError            journal unreadable or inconsistent
    │   └── RecordedSettingError  a recorded profile setting that fits no declaration (names
    │                           the operation, the key and the value; never read as a default)
    ├── DeployError             a deploy/rollback/stop step failed (says what, what was done, state now)
    ├── ControllerOwnedError    deploy/rollback/stop/kernels on an endpoint target: the cluster's
    │                           controller owns restarts (nothing changed; prints the kubectl line)
    ├── CanaryError             a canary could not run (not a FAIL verdict: those are results)
    └── KernelPackageError      bad/tampered kernel artifact, incompatible manifest

Anything else that escapes is a bug: exit 3 with a short report. The codes: dsv4ops/exitcodes.py.
"""

from __future__ import annotations

from collections.abc import Mapping

from dsv4ops.exitcodes import FAILED, REFUSED


class Terminated(KeyboardInterrupt):
    """SIGTERM to a command with no handler of its own (canary, watch, a runbook run), raised as
    Ctrl-C's KeyboardInterrupt is, so the command says where it stopped and exits 130 (README's
    table) instead of dying with 143 and nothing journaled. The deploy engine installs its own
    handler while an operation runs (orchestrate/interrupts.py)."""

    signal_name = "SIGTERM"


class DsOpsError(Exception):
    """Base class: a failure we can explain to the user in one line (plus an optional hint)."""

    exit_code = REFUSED

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class ProfileError(DsOpsError):
    """A profile or target file is invalid. `where` is 'file:line: key.path' when known."""

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        key: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.path = path
        self.line = line
        self.key = key
        loc = ""
        if path:
            loc = path if line is None else f"{path}:{line}"
        if key:
            loc = f"{loc}: {key}" if loc else key
        super().__init__(f"{loc}: {message}" if loc else message, hint=hint)
        self.bare_message = message


class TargetError(DsOpsError):
    """The target cannot be reached or is misconfigured."""


class DiskFullError(TargetError):
    """A write failed because a disk is full (ENOSPC) or a quota is reached (EDQUOT). Not a user
    mistake and not dsv4ops's bug: the box needs space before anything can be done, so it is a
    FAILED (exit 2), and the message says what was left behind (nothing, or what runs now)."""

    exit_code = FAILED


def is_disk_full(exc: BaseException) -> bool:
    """True for the OSError a full disk or an exhausted quota gives."""
    import errno

    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


class ConnectionLostError(TargetError):
    """A connection to the target that had worked went away: dropped mid-command, or refused
    when reconnecting. `sent`: whether the command may have reached the target (False: it
    certainly did not run). remote/rideout.py decides what is sent again."""

    def __init__(self, message: str, *, sent: bool, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.sent = sent


class RemoteCommandError(DsOpsError):
    """A command on the target failed; `result` holds command, exit code and both streams."""

    def __init__(self, message: str, *, result: object = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.result = result


class AgentCallError(RemoteCommandError):
    """The target-side agent refused or failed an operation. `kind` is the agent's error kind.
    Here, not in remote/, because the journal of record (journal/target.py) reads its reply."""

    def __init__(
        self, message: str, *, kind: str, reply: Mapping[str, object] | None = None
    ) -> None:
        super().__init__(message, result=reply)
        self.kind = kind
        self.reply = dict(reply or {})
        # Seconds a lost connection took before the attempt that raised this (remote/rideout.py).
        self.waited_before_s = 0.0


class LockHeldError(DsOpsError):
    """The target's deploy lock is held (or was left by a dead process)."""


class JournalError(DsOpsError):
    """The journal cannot be read or written. `written`: the record took the records all the
    same (only this machine's copy of it failed), so they must not be appended again."""

    written = False


class RecordedSettingError(JournalError):
    """A journal operation's recorded profile holds a value that does not fit its declared
    setting (a hand-edited or damaged line): the command that needs the setting refuses, naming
    the operation, the key and the value, and never judges or deploys by a guessed default."""

    def __init__(self, op: str | None, key: str, value: object, expected: str, *, hint: str):
        where = f"journal operation {op}" if op else "the rendered deployment"
        super().__init__(
            f"{where} records {key} = {value!r}, which is not {expected}: dsv4ops will not "
            "guess what that deployment was set to",
            hint=hint,
        )
        self.op = op
        self.key = key
        self.value = value
        self.expected = expected


class DeployError(DsOpsError):
    """A deploy, rollback or stop failed. The message says what failed, what was done, state now."""

    exit_code = FAILED


class PreflightError(DeployError):
    """The target cannot take the deployment (ports, GPUs, kernel package); nothing was changed,
    so this is a refusal (exit 1, docs/deploy.md), not a handled step failure (2)."""

    exit_code = REFUSED


class ControllerOwnedError(DsOpsError):
    """A verb that starts or stops processes, asked of an endpoint target (a cluster): its
    controller owns restarts. Nothing was changed, so this is a refusal (exit 1); the message
    carries the command that does it on the cluster."""


class CanaryError(DsOpsError):
    """A canary could not be run at all (bad endpoint, bad arguments)."""


class KernelPackageError(DsOpsError):
    """A kernel artifact is invalid, tampered with or incompatible with the target."""
