"""The diagnostics bundle: one directory with what the target shows before anyone touches it.

Collected through the remote seam only (the agent's `diagnostics` op for process trees, log
tails and `py-spy dump`, scrubbed on the target; target-side HTTP for `/server_info` and
`/metrics`), plus the journal's tail and the deployed profile with its rendered commands.
Everything is redacted again here (dsv4ops/secrets.py's rule, this process's secret values and
`key=value` shapes in text) and the whole bundle stays under a size cap: an item that does not
fit is cut, and MANIFEST.json says what was cut or missing and why.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from dsv4ops.clock import Clock, SystemClock
from dsv4ops.component import UNREAD
from dsv4ops.constants import state_dir
from dsv4ops.deployment import START_ORDER, Deployment
from dsv4ops.errors import DsOpsError, RecordedSettingError
from dsv4ops.journal.records import Operation
from dsv4ops.journal.schema import to_json
from dsv4ops.journal.store import Journal
from dsv4ops.remote import Supervisor
from dsv4ops.secrets import is_secret_key, redact_text, redact_tree

JOURNAL_TAIL = 200  # records
DAMAGED = "the recorded deployment (deploy, rollback and stop refuse it until it is mended)"
LOG_LINES = 400


def scrub_text(text: str) -> str:
    """This process's secret env values, then dsv4ops/secrets.py's text rule: `api_key='abc'`,
    `--admin-api-key abc`, `"admin_api_key": "abc"`, URL passwords (SGLang logs its ServerArgs)."""
    return redact_text(text, (v for k, v in os.environ.items() if is_secret_key(k)))


def scrub_body(text: str) -> str:
    """An HTTP body: a JSON one (server_info: `admin_api_key`, `launch_command` with the argv)
    is redacted as data, key by key and argv by argv, then as text; anything else as text."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return json.dumps(redact_tree(value, text=scrub_text), indent=2, sort_keys=True)


class Bundle:
    """Writes items under one directory within a byte budget."""

    def __init__(self, root: Path, max_bytes: int) -> None:
        self.root = root
        self.left = max_bytes
        self.items: list[dict[str, object]] = []
        root.mkdir(parents=True, exist_ok=True)

    def text(self, name: str, text: str, what: str) -> None:
        data = scrub_text(text).encode()
        cut = len(data) > self.left
        if cut:
            data = data[: max(self.left, 0)]
        (self.root / name).parent.mkdir(parents=True, exist_ok=True)
        (self.root / name).write_bytes(data)
        self.left -= len(data)
        self.items.append({"file": name, "what": what, "bytes": len(data), "cut": cut})

    def json(self, name: str, value: object, what: str) -> None:
        value = redact_tree(value, text=scrub_text)
        self.text(name, json.dumps(value, indent=2, sort_keys=True, default=str), what)

    def missing(self, what: str, why: str) -> None:
        self.items.append({"file": None, "what": what, "missing": why})


def collect(
    supervisor: Supervisor,
    journal: Journal,
    *,
    target: str,
    run_id: str,
    max_bytes: int,
    clock: Clock | None = None,
    names: Sequence[str] = START_ORDER,
) -> Path:
    """Write the bundle; return its directory. Raises DsOpsError only when nothing is reachable."""
    stamp = (clock or SystemClock()).now().strftime("%Y%m%dT%H%M%S")
    b = Bundle(state_dir() / "diagnostics" / target / f"{stamp}-{run_id}", max_bytes)
    current = journal.deployed()
    deployed, unbuilt = _recorded(current, b)
    if current is not None:
        b.json(
            "deployment.json",
            {"op": current.op, "profile": current.profile, "components": current.components},
            "deployed profile and rendered commands",
        )
    else:
        b.missing("deployed profile and rendered commands", "the journal records no deployment")
    _target_side(supervisor, b, names)
    for name in names:
        spec = deployed.component(name) if deployed else None
        if spec is None:
            why = f"the recorded deployment cannot be rebuilt ({unbuilt})" if unbuilt else ""
            b.missing(f"{name} /server_info and /metrics", why or "no deployed component")
            continue
        for path, fname in (("/server_info", "server_info.json"), ("/metrics", "metrics.prom")):
            reply = supervisor.http(spec.url(path), timeout_s=5.0)
            if reply.status is None:
                b.missing(f"{name} {path}", f"no answer: {reply.error}")
            else:
                body = scrub_body(reply.body) if fname.endswith(".json") else reply.body
                b.text(f"{name}/{fname}", body, f"{name} {path} (HTTP {reply.status})")
    records = journal.tail_records(JOURNAL_TAIL)  # read from the end: 10^6-record journals
    b.text(
        "journal-tail.jsonl",
        "".join(json.dumps(to_json(r), sort_keys=True) + "\n" for r in records),
        f"the journal's last {len(records)} records",
    )
    (b.root / "MANIFEST.json").write_text(
        json.dumps(
            {"target": target, "run": run_id, "max_bytes": max_bytes, "items": b.items}, indent=2
        )
    )
    return b.root


def _recorded(current: Operation | None, b: Bundle) -> tuple[Deployment | None, str]:
    """The deployed unit whose /server_info and /metrics the bundle reads, and why not ("" when
    it is read or none is recorded). A damaged recorded field (docs/deploy.md, "Recorded
    settings") never stops the bundle: it is noted in the manifest with its way back, and the
    servers are still read when what the bundle needs of them (hosts and ports) is whole: as
    status, it needs neither the stop grace nor the router's key reference."""
    if current is None or not current.components:
        return None, ""
    named: list[str] = []
    # as deploy reads it (to name the damage), then as status does (to read the servers)
    for unread in (frozenset[str](), UNREAD):
        try:
            return current.deployment(unread=unread), ""
        except RecordedSettingError as exc:
            if exc.key not in named:
                b.missing(DAMAGED, f"damaged record: {exc.message}; hint: {exc.hint}")
                named.append(exc.key)
        except DsOpsError as exc:  # a record of no whole unit (DeployError)
            return None, str(exc)
    return None, f"{named[-1]} is damaged"


def _target_side(supervisor: Supervisor, b: Bundle, names: Sequence[str]) -> None:
    try:
        reply = supervisor.call("diagnostics", timeout=120, names=list(names), log_lines=LOG_LINES)
    except DsOpsError as exc:
        b.missing("logs, process trees, py-spy", f"the agent could not collect them: {exc}")
        return
    for c in reply.get("components") or []:
        name = str(c.get("name"))
        b.text(f"{name}/log-tail.txt", str(c.get("log_tail") or ""), f"{name} log (last lines)")
        b.json(f"{name}/processes.json", c.get("processes") or [], f"{name} process tree")
        dumps = c.get("py_spy") or {}
        if c.get("py_spy_missing"):
            b.missing(f"{name} py-spy dump", str(c["py_spy_missing"]))
        elif not dumps:
            b.missing(f"{name} py-spy dump", "no running Python process in its group")
        for pid, text in sorted(dumps.items()):
            b.text(f"{name}/py-spy-{pid}.txt", str(text), f"{name} py-spy dump of pid {pid}")
