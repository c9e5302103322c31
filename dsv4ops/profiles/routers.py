"""What each router kind accepts (dsv4ops/routerkind.py says which one a profile runs): its flag
table, read from its own parser (profiles/_flag_tables.py for sglang-router 0.3.2,
profiles/_smg_flag_table.py for SMG), and the policies its `--policy`, `--prefill-policy` and
`--decode-policy` take."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from dsv4ops.profiles import _flag_tables, _smg_flag_table
from dsv4ops.routerkind import RouterKind

# A flag table's entry (profiles/_flag_tables.py): (nargs, value kind, choices or None).
FlagTable = dict[str, tuple[int | str, str, tuple[str, ...] | None]]

_TABLES: dict[RouterKind, FlagTable] = {
    RouterKind.SGLANG_ROUTER: _flag_tables.SGLANG_ROUTER_TABLE,
    RouterKind.SMG: _smg_flag_table.SMG_ROUTER_TABLE,
}

# The profile keys that render to a policy flag, and the flag.
POLICY_FLAGS = {
    "policy": "--policy",
    "prefill_policy": "--prefill-policy",
    "decode_policy": "--decode-policy",
}


def router_table(kind: RouterKind) -> FlagTable:
    return _TABLES[kind]


def policies(kind: RouterKind, key: str) -> tuple[str, ...]:
    """The values `router.<key>` takes for this router (its parser's choices)."""
    return router_table(kind)[POLICY_FLAGS[key]][2] or ()


def any_policy(key: str) -> tuple[str, ...]:
    """What any router takes: the schema's choices (the kind's own are a rule, which names the
    router that lacks a value)."""
    seen: dict[str, None] = {}
    for kind in RouterKind:
        seen.update(dict.fromkeys(policies(kind, key)))
    return tuple(seen)


SMG_PYTHON_ENV = "DSV4OPS_SMG_PYTHON"
SMG_PYTHON_RECORD = "dsv4ops-smg-python"  # in the running venv: one line, written by `make install`


def smg_python() -> Path:
    """Python of the SMG venv on this machine: $DSV4OPS_SMG_PYTHON, else the one `make install`
    recorded in the running venv (`<venv>/dsv4ops-smg-python`, one absolute path).

    SMG has its own venv (.venv-smg): its `smg` console script would overwrite the one
    sglang-router 0.3.2 installs (and the reverse), so the two cannot share the project's.
    Declared, like the AOT venv (kernels/aot.py), not guessed from the checkout's layout.
    """
    env = os.environ.get(SMG_PYTHON_ENV)
    if env:
        return Path(env)
    record = Path(sys.prefix) / SMG_PYTHON_RECORD
    try:
        return Path(record.read_text().strip())
    except OSError:
        return record  # missing: whoever runs it names the file it could not find
