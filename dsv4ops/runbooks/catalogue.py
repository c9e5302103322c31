"""Where the runbooks are: the directory (`runbooks_dir`), its runbooks (`list_runbooks`) and
one of them by name or path (`find_runbook`); parse.py reads what it finds."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from dsv4ops.constants import PROJECT_HINT, project_dir
from dsv4ops.runbooks.model import RunbookError

README = "README.md"  # the directory's index, no runbook


def runbooks_dir() -> Path:
    """Directory holding runbooks: $DSV4OPS_RUNBOOKS_DIR, else PROJECT/runbooks."""
    env = os.environ.get("DSV4OPS_RUNBOOKS_DIR")
    return Path(env) if env else project_dir() / "runbooks"


def list_runbooks(directory: Path | None = None) -> list[Path]:
    """The runbooks in `directory` (default: runbooks_dir()). Raises RunbookError when it is no
    directory: an empty list read as "no runbooks here", a wrong directory is the likelier
    mistake (as profiles/load.py's list_profiles says)."""
    d = directory or runbooks_dir()
    if not d.is_dir():
        what = "is not a directory" if d.exists() else "does not exist"
        raise RunbookError(
            f"runbooks directory {d} {what}", hint=PROJECT_HINT + " (or set DSV4OPS_RUNBOOKS_DIR)"
        )
    return sorted(p for p in d.glob("*.md") if p.name != README)


def find_runbook(ref: str, directory: Path | None = None) -> Path:
    """A runbook by name (runbooks/NAME.md) or path. Raises RunbookError."""
    path = Path(ref)
    if ref.endswith(".md") or os.sep in ref:
        if path.is_file():
            return path
        why = (
            "is a directory"
            if path.is_dir()
            else f"is a broken link (to {os.readlink(path)})"
            if path.is_symlink()
            else "does not exist"
            if not path.exists()
            else "is not a regular file"
        )
        raise RunbookError(f"no runbook file {ref}: it {why}")
    d = directory or runbooks_dir()
    candidate = d / f"{ref}.md"
    if candidate.is_file() and candidate.name != README:
        return candidate
    names = ", ".join(p.stem for p in list_runbooks(d)) or "none"
    raise RunbookError(f"no runbook named {ref!r} in {d}/ (have: {names})")


def run_command(name: str, path: str, target: str) -> str:
    """`dsv4ops runbook run REF --target T`, pasteable: REF is the name when the name finds this
    very file, else its path as it was given (a runbook run from a file outside the directory
    is no name), each word shell-quoted."""
    ref = path or name
    try:
        if name and path and find_runbook(name).resolve() == Path(path).resolve():
            ref = name
    except (RunbookError, OSError):
        pass
    return f"dsv4ops runbook run {shlex.quote(ref)} --target {shlex.quote(target)}"
