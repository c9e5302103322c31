"""`monitoring render --out DIR`: the rendered files written into DIR, each replaced whole
(a temporary file renamed over it) and only where `monitoring render` wrote it before. A file of
the same name that is someone else's (Prometheus's own prometheus.yml, when --out names
/etc/prometheus instead of a directory of its own) is left alone and the write refused, unless
`force`, which keeps it beside as NAME.bak."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from dsv4ops import _yaml
from dsv4ops.errors import DsOpsError
from dsv4ops.localfiles import FileRefused, read_regular
from dsv4ops.usecases.monitoring import MonitoringFiles

# The first line of each YAML file written: what marks a file as this command's to replace.
HEADER = "# written by `dsv4ops monitoring render`: rendering again replaces this file\n"
DASHBOARD_UID = "dsv4ops-pd"  # the dashboard's own mark (JSON has no comments)
MAX_OWN_BYTES = 4 * 1024 * 1024  # far above what it writes (~10 KB): larger is someone else's


def rendered_texts(files: MonitoringFiles) -> dict[str, str]:
    """Each file's name and text as --out writes them."""
    return {
        "prometheus.yml": HEADER + _yaml.dump(files.prometheus),
        "dsv4ops-alerts.yml": HEADER + _yaml.dump(files.rules),
        "dsv4ops-dashboard.json": json.dumps(files.dashboard, indent=2) + "\n",
    }


def write_rendered(files: MonitoringFiles, out_dir: Path, *, force: bool) -> list[Path]:
    """Write the files into `out_dir` (made if missing). Raises DsOpsError, naming each file
    that is not this command's, before anything is written."""
    texts = rendered_texts(files)
    foreign = [name for name in texts if not _ours_or_absent(out_dir / name)]
    if foreign and not force:
        raise DsOpsError(
            f"--out {out_dir}: {', '.join(foreign)} "
            + ("exists and was" if len(foreign) == 1 else "exist and were")
            + " not written by `dsv4ops monitoring render`; nothing was written",
            hint="give --out a directory of its own (e.g. /etc/prometheus/dsv4ops), or add "
            "--force to replace them (each kept as NAME.bak)",
        )
    written = []
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, text in texts.items():
            path = out_dir / name
            if name in foreign:
                os.replace(path, path.with_name(name + ".bak"))
            _replace(path, text)
            written.append(path)
    except OSError as exc:
        done = f"; written: {', '.join(p.name for p in written)}" if written else ""
        raise DsOpsError(
            f"--out {out_dir}: cannot write: {exc.strerror or exc}{done}",
            hint="each file is replaced whole or not at all: run it again once DIR is writable",
        ) from None
    return written


def _ours_or_absent(path: Path) -> bool:
    if not path.exists() and not path.is_symlink():
        return True
    try:
        # a regular file, bounded: a FIFO of that name would block a plain read
        text = read_regular(path, MAX_OWN_BYTES, path.name).decode("utf-8", errors="replace")
    except (FileRefused, FileNotFoundError):
        return False  # a directory, a device, too big, unreadable: not a file this wrote
    if path.suffix == ".json":
        try:
            return bool(json.loads(text).get("uid") == DASHBOARD_UID)
        except (ValueError, AttributeError):
            return False
    return text.startswith(HEADER)


def _replace(path: Path, text: str) -> None:
    """Write `text` to a temporary file beside `path` and rename it over `path`: a reader
    (Prometheus reloading) sees the old file or the new one, never half of one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide the rules from a prometheus user
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
