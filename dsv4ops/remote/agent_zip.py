"""The agent zip the supervisor uploads: `dsv4ops/remote/agent/` plus the real `dsv4ops/secrets.py`,
`dsv4ops/journal/recordfile.py` (the journal's file rules, shared with the operator's store) and
`dsv4ops/jsontypes.py` (the one name of untyped JSON, which those and the agent annotate with).

The zip mirrors the package paths (`dsv4ops/secrets.py`, `dsv4ops/journal/recordfile.py`,
`dsv4ops/jsontypes.py`,
`dsv4ops/remote/agent/*.py`, empty `__init__.py` for `dsv4ops`, `dsv4ops.remote` and `dsv4ops.journal`), so the agent
imports those leaf modules by their real names, here and on the target: there is no copy to keep
in sync. `python3 agent.zip` runs
the package's `__main__.py`, copied to the zip's root.

The bytes are deterministic (sorted names, fixed timestamps, stored, not deflated: zlib
versions compress differently), so every operator machine with the same dsv4ops builds the same
zip and the supervisor's sha256 check does not make two operators re-upload in turns.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

AGENT_DIR = Path(__file__).with_name("agent")
SECRETS_SOURCE = Path(__file__).parents[1] / "secrets.py"
RECORDFILE_SOURCE = Path(__file__).parents[1] / "journal" / "recordfile.py"
JSONTYPES_SOURCE = Path(__file__).parents[1] / "jsontypes.py"
_EPOCH = (1980, 1, 1, 0, 0, 0)
_PACKAGE_STUB = b'"""Only what the dsv4ops agent needs on the target."""\n'


def members() -> dict[str, bytes]:
    """{name in the zip: bytes}: what `agent_zip()` packs."""
    files = {
        "__main__.py": (AGENT_DIR / "__main__.py").read_bytes(),
        "dsv4ops/__init__.py": _PACKAGE_STUB,
        "dsv4ops/remote/__init__.py": _PACKAGE_STUB,
        "dsv4ops/journal/__init__.py": _PACKAGE_STUB,
        "dsv4ops/secrets.py": SECRETS_SOURCE.read_bytes(),
        "dsv4ops/journal/recordfile.py": RECORDFILE_SOURCE.read_bytes(),
        "dsv4ops/jsontypes.py": JSONTYPES_SOURCE.read_bytes(),
    }
    for path in sorted(AGENT_DIR.glob("*.py")):
        files[f"dsv4ops/remote/agent/{path.name}"] = path.read_bytes()
    return files


@cache
def agent_zip() -> bytes:
    """The zip's bytes (built once per process)."""
    import io
    import zipfile  # here, not at the top: importing dsv4ops.remote must stay cheap

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, data in sorted(members().items()):
            info = zipfile.ZipInfo(name, date_time=_EPOCH)
            info.external_attr = 0o644 << 16
            zf.writestr(info, data)
    return buf.getvalue()


def agent_sha256() -> str:
    return hashlib.sha256(agent_zip()).hexdigest()


@contextmanager
def local_agent_zip() -> Iterator[Path]:
    """The zip as a local file for `Executor.put` (removed afterwards). A local disk too full to
    hold it raises DiskFullError (TargetError otherwise), with nothing left behind."""
    import shutil

    try:
        tmp = tempfile.mkdtemp(prefix="dsv4ops-agent-")
    except OSError as exc:
        raise _local_failure(exc) from None
    try:
        path = Path(tmp) / "agent.zip"
        try:
            path.write_bytes(agent_zip())
        except OSError as exc:
            raise _local_failure(exc) from None
        yield path
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _local_failure(exc: OSError) -> Exception:
    from dsv4ops.errors import DiskFullError, TargetError, is_disk_full

    kind = DiskFullError if is_disk_full(exc) else TargetError
    return kind(
        f"cannot write the agent zip to a local temporary directory ({tempfile.gettempdir()}): "
        f"{exc.strerror}; nothing was changed on the target",
        hint="free space there (or point TMPDIR elsewhere), then run the command again",
    )
