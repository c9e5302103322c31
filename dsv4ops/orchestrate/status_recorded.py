"""What `dsv4ops status` reads of the recorded deployment. Status never refuses because of
it: an operator runs status first in an incident, and it changes nothing. A damaged field of
the record (docs/deploy.md, "Recorded settings") is a finding. Status names it as deploy,
rollback and stop do when they refuse, and shows everything else it observes.

`recorded_view` rebuilds the deployment status observes by. It reads strictly only the fields
status needs: ports, hosts, argv and env, and the profile's name, commit, hash and kernel
package. It does not read the stop grace or the router's key reference at all.
`recorded_damage` lists every field of the operation's record that does not fit, each read on
its own, so one damaged field hides no other. `damage_json` is the finding as `status --json`
carries it. Also what status reads of the operations' records about the processes
(`recorded_processes`, `started_by`), which are no recorded settings.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from dsv4ops.component import UNREAD
from dsv4ops.deployment import Deployment
from dsv4ops.errors import RecordedSettingError
from dsv4ops.journal.records import Kind, Operation
from dsv4ops.journal.store import UNKNOWN, Journal
from dsv4ops.orchestrate.status_report import RecordedDamage
from dsv4ops.recorded import (
    RecordedFields,
    RecordedFlags,
    RecordedModel,
    RecordedProfile,
    RecordedRouter,
    recorded_grace,
)
from dsv4ops.settings import CanaryThresholds, ProbeSettings, Settings

# Each field of a recorded component, read as Component.from_record reads it.
_FIELDS: tuple[Callable[[RecordedFields], object], ...] = (
    RecordedFields.argv,
    RecordedFields.env,
    RecordedFields.key_from,
    lambda r: r.integer("port", 0),
    lambda r: r.integers("ports"),
    lambda r: r.integer("metrics_port", 0),
    lambda r: r.optional_integer("bootstrap_port", None),
    lambda r: r.text("bind_host", ""),
    lambda r: r.text("host", ""),
    lambda r: recorded_grace(r.raw("stop_grace_s"), where=r),
)
_SECTIONS: tuple[tuple[str, type[Settings]], ...] = (
    ("canary", CanaryThresholds),
    ("probe", ProbeSettings),
    ("model", RecordedModel),
    ("router", RecordedRouter),
    ("flags", RecordedFlags),
)


@dataclass(frozen=True)
class RecordedView:
    """The recorded deployment as status reads it. `running`: the journal records one running.
    `deployed`: that one, None when none runs or a field status needs is damaged. `last`:
    `deployed`, else the newest recorded deploy's or rollback's (it names what a stop
    stopped). `damage`: every damaged field of the operation read."""

    running: bool = False
    deployed: Deployment | None = None
    last: Deployment | None = None
    damage: tuple[RecordedSettingError, ...] = ()
    unbuilt: RecordedSettingError | None = None  # why the deployment could not be rebuilt

    def pd_timeouts(self) -> dict[str, int | str] | None:
        """The running deployment's PD timeouts; None when none runs or they are damaged."""
        try:
            return self.deployed.pd_timeouts() if self.deployed is not None else None
        except RecordedSettingError:
            return None

    def not_shown(self) -> list[str]:
        """What status could not show because of the damage, each with the key that kept it."""
        out: list[str] = []
        if self.running and self.unbuilt is not None:
            out.append(
                "each component's health, load and buckets, the drift against the deployed "
                "commands and the kernel package: the recorded deployment cannot be rebuilt "
                f"({self.unbuilt.key} is damaged)"
            )
        if self.deployed is not None:
            try:
                self.deployed.pd_timeouts()
            except RecordedSettingError as exc:
                out.append(f"the PD timeouts ({exc.key} is damaged)")
        return out


def recorded_view(journal: Journal) -> RecordedView:
    """What status observes by. It never raises RecordedSettingError."""
    current = journal.deployed()
    running = current is not None and bool(current.components)
    op = current if running else _newest_recorded(journal)
    if op is None:
        return RecordedView()
    observed: Deployment | None = None
    unbuilt: RecordedSettingError | None = None
    try:
        observed = Deployment.from_record(op.profile, op.components, source_op=op.op, unread=UNREAD)
    except RecordedSettingError as exc:
        unbuilt = exc
    damage = tuple(recorded_damage(op, observed))
    return RecordedView(running, observed if running else None, observed, damage, unbuilt)


def _newest_recorded(journal: Journal) -> Operation | None:
    """The newest deploy or rollback that recorded a deployment, however it ended."""
    ops = journal.operations().newest_first(kinds=(Kind.DEPLOY, Kind.ROLLBACK))
    return next((op for op in ops if op.components), None)


def recorded_damage(op: Operation, observed: Deployment | None) -> list[RecordedSettingError]:
    """Every field of `op`'s record that does not fit, once each, in the record's order.
    `observed`: its deployment as status reads it (None: it cannot be rebuilt), whose
    recorded log interval and PD timeouts are read too."""
    found: dict[str, RecordedSettingError] = {}

    def read(get: Callable[[], object]) -> None:
        try:
            get()
        except RecordedSettingError as exc:
            found.setdefault(exc.key, exc)

    for data in op.components:
        try:
            fields = RecordedFields.of(data, op.op)
        except RecordedSettingError as exc:
            found.setdefault(exc.key, exc)
            continue
        for field in _FIELDS:
            read(lambda: field(fields))  # noqa: B023 - called at once
    read(lambda: Deployment.from_record(op.profile, op.components, source_op=op.op))
    _sections(op, read)
    if observed is not None:
        read(lambda: observed.decode_log_interval)
        read(observed.pd_timeouts)
    return list(found.values())


def _sections(op: Operation, read: Callable[[Callable[[], object]], None]) -> None:
    """The recorded profile's sections and flags, when they are mappings (a section that is
    not is named by Deployment.from_record)."""
    p = op.profile if isinstance(op.profile, Mapping) else {}
    content, flags = p.get("content"), p.get("flags")
    if content is not None and not isinstance(content, Mapping):
        return
    if flags is not None and not isinstance(flags, Mapping):
        return
    recorded = RecordedProfile(content, flags)
    named = p.get("path") or p.get("name")
    profile = named if isinstance(named, str) else "PROFILE"
    for name, cls in _SECTIONS:
        read(lambda: recorded.read(name, cls, op=op.op, profile=profile))  # noqa: B023


_PID = re.compile(r"\bpid (\d+)\b")


def started_by(journal: Journal) -> dict[str, tuple[int | None, str]]:
    """Components that operations after the last word on what runs started (an interrupted
    deploy, or one that ended not knowing what it left): name -> (pid, who and how it ended)."""
    ops = journal.operations()
    word = next(
        (
            i
            for i in range(len(ops) - 1, -1, -1)
            if ops[i].status.terminal and ops[i].running is not None
        ),
        -1,
    )
    out: dict[str, tuple[int | None, str]] = {}
    for i in range(max(word, 0), len(ops)):  # only the operations after the last word are read
        op = ops[i]
        if i == word and op.running != UNKNOWN:
            continue
        how = (
            f"which was interrupted {op.position}"
            if not op.status.terminal
            else f"which ended {op.status.value} not knowing what it left running"
        )
        for step in op.steps:
            m = _PID.search(step.detail or "") if step.phase == "done" else None
            if m and step.name.startswith("start "):
                who = f"{op.kind.value} {op.op} of {op.profile_name or '-'}, {how}"
                out[step.name.removeprefix("start ")] = (int(m.group(1)), who)
    return out


def recorded_processes(journal: Journal) -> Mapping[str, Mapping[str, object]]:
    for op in reversed(journal.operations()):
        if op.status.terminal and op.running is not None:
            return dict(op.processes)
    return {}


def damage_json(exc: RecordedSettingError) -> RecordedDamage:
    """A damaged field as `status --json` carries it: the refusal's words, as data."""
    value = exc.value
    if not isinstance(value, str | int | float | bool | list | dict | type(None)):
        value = repr(value)
    return {
        "op": exc.op,
        "key": exc.key,
        "value": value,
        "expected": exc.expected,
        "message": exc.message,
        "fix": exc.hint or "",
    }
