"""The shape of `dsv4ops status`'s report (issue 42 item 5): what `status --json` prints, what
the runbook engine's `requires: healthy` reads and what the CLI renders, typed once.

TypedDicts, not classes: the report is a JSON document (`status --json`), and each part is
the JSON it prints. Keys a report has only sometimes (a component's readiness only on the
router, the unreachable target's `record`) are NotRequired.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

from dsv4ops.journal.backend import JournalSource
from dsv4ops.journal.records import OperationSummary


class RouterWorker(TypedDict):
    """A worker as the router lists it (its /workers)."""

    url: str | None
    type: str | None
    healthy: bool | None


class RouterRow(TypedDict):
    """The router's liveness, readiness and workers (status's router row, an endpoint's router)."""

    health: int | str  # the /health status, or "no answer (why)"
    readiness: int | None
    readiness_error: NotRequired[str]
    healthy: bool  # /readiness answered 200: /health is liveness only
    workers: NotRequired[list[RouterWorker] | None]  # None: /workers answered no list


class ComponentRow(TypedDict):
    """One component of the unit: its process, then what its HTTP reads said (a live,
    deployed component only: a worker's /health, /server_info and /metrics, the router's
    /health, /readiness and /workers)."""

    name: str
    alive: bool
    pid: int | None  # a live process's only: a dead one's is history
    started_at: str | None
    port: int | None
    ports_open: dict[str, bool]
    exit_code: int | None
    healthy: bool
    health: NotRequired[int | str]
    # /server_info of a worker
    version: NotRequired[str | None]
    captured_buckets: NotRequired[list[int] | None]
    disaggregation_mode: NotRequired[str | None]
    kernel_package: NotRequired[str | None]  # the twin names it; real SGLang does not
    server_info_error: NotRequired[str]
    # /metrics of a worker
    running_requests: NotRequired[float | None]
    queued_requests: NotRequired[float | None]
    metrics_error: NotRequired[str]
    # the router's
    readiness: NotRequired[int | None]
    readiness_error: NotRequired[str]
    workers: NotRequired[list[RouterWorker] | None]


class ServerInfo(TypedDict, total=False):
    """What a worker's /server_info says (its keys of ComponentRow), or why it says nothing."""

    version: str | None
    captured_buckets: list[int] | None
    disaggregation_mode: str | None
    kernel_package: str | None
    server_info_error: str


class KernelRow(TypedDict):
    """The deployment's kernel package: pinned, active on the target, loaded by the decode."""

    deployed: str
    active: str | None
    active_detail: str
    loaded: str | None
    loaded_detail: str
    evidence: str | None  # "in use: <plugin line> | <config lookup line>" when used
    drift: bool


class DeployedRow(TypedDict):
    """What the journal says is deployed: the operation, its profile and how it was judged."""

    op: str
    kind: str
    profile: str | None
    commit: str | None
    commands_hash: str | None
    kernel_package: str | None
    since: str | None
    by: str
    known_good: bool
    known_good_why: str | None
    known_good_gate: str | None  # the enum value of the gate that made it known-good
    partial: list[str] | None  # the components a partial restart restarted


class RecordedDamage(TypedDict):
    """A field of the recorded deployment that does not fit its declaration (docs/deploy.md,
    "Recorded settings"): deploy, rollback and stop refuse with `message` and `fix` (the
    hint) until it is mended; status names it and goes on."""

    op: str | None
    key: str  # e.g. components.decode.stop_grace_s, flags.decode_buckets
    value: object  # as recorded
    expected: str
    message: str
    fix: str


class LockRow(TypedDict):
    """The deploy lock: its holder as the lock file names it, and whether the holder is dead."""

    holder: dict[str, object]
    stale: bool


class UnmanagedRow(TypedDict):
    """Ports that answer although the journal records nothing running (unmanaged.py)."""

    ports: list[int]
    why: str


class StoppedBy(TypedDict):
    """The stop that left nothing running (status's "stopped"): its op, when it ended, who ran
    it, and the profile that ran before it."""

    op: str
    since: str | None
    by: str
    last_profile: str | None


class OpenOperation(TypedDict):
    """An operation not ended, as the journal listing judges it, with what resumes it."""

    id: str
    kind: str
    status: str
    profile: str | None
    when: str | None
    next: str | None
    runbook: str | None


class StatusReport(TypedDict):
    """`dsv4ops status`'s report. A reached target's has the observed parts (components
    through stopped); an unreachable one's says `reachable: False` and only what the journal
    says (`in_flight`). The use case adds the record, warnings and open operations; the
    CLI the one word (`status`) and its exit code."""

    target: str
    deployed: DeployedRow | None
    healthy: bool
    components: NotRequired[list[ComponentRow]]
    kernel_package: NotRequired[KernelRow | None]
    pd_timeouts: NotRequired[dict[str, int | str] | None]
    drift: NotRequired[list[str]]
    lock: NotRequired[LockRow | None]
    attention: NotRequired[list[str]]
    unmanaged: NotRequired[UnmanagedRow | None]
    stopped: NotRequired[StoppedBy | None]
    reachable: NotRequired[bool]
    in_flight: NotRequired[list[OperationSummary]]  # as `journal --json` lists them
    record: NotRequired[JournalSource]  # where the journal was read (the backend's describe())
    journal_warnings: NotRequired[list[str]]
    recorded_damage: NotRequired[list[RecordedDamage]]  # never HEALTHY while not empty
    not_shown: NotRequired[list[str]]  # what the damage kept status from showing, and why
    open: NotRequired[list[OpenOperation]]
    status: NotRequired[str]
    exit: NotRequired[int]


class EndpointReport(TypedDict):
    """`dsv4ops status` of an endpoint target (a cluster): its router, read-only."""

    target: str
    transport: str
    router_url: str
    healthy: bool
    router: RouterRow
    metrics_urls: list[str]
    restarts: str
    status: NotRequired[str]
    exit: NotRequired[int]
