"""The one place profiles talk to git (a subprocess seam): read a file at a commit, commit one file."""

from __future__ import annotations

import subprocess
from pathlib import Path

from dsv4ops.errors import DsOpsError, ProfileError
from dsv4ops.profiles.files import MAX_FILE_BYTES

GIT_TIMEOUT_S = 30


class GitError(DsOpsError):
    """git refused or failed; the message carries git's own first line."""


def _git(args: list[str], cwd: Path) -> str:
    try:
        proc = subprocess.run(  # noqa: S603 - fixed argv, no shell
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError:
        raise GitError("git is not installed", hint="install git to version profiles") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0]} timed out after {GIT_TIMEOUT_S}s") from None
    if proc.returncode != 0:
        first = (
            proc.stderr.strip() or proc.stdout.strip() or f"exit {proc.returncode}"
        ).splitlines()[0]
        raise GitError(f"git {args[0]} failed: {first}")
    return proc.stdout


def repo_root(path: Path) -> Path:
    """Top of the git work tree containing `path` (a file or directory). Raises GitError."""
    directory = path if path.is_dir() else path.parent
    directory = directory if directory.exists() else Path.cwd()
    return Path(_git(["rev-parse", "--show-toplevel"], directory).strip())


def show_file(path: Path, rev: str) -> str:
    """Contents of `path` at commit `rev`. Raises ProfileError if the file is not in that commit."""
    try:
        root = repo_root(path.resolve().parent if path.resolve().parent.exists() else Path.cwd())
        rel = path.resolve().relative_to(root)
    except (GitError, ValueError) as exc:
        raise ProfileError(f"cannot read at git revision {rev}: {exc}", path=str(path)) from None
    spec = f"{rev}:{rel.as_posix()}"
    try:
        # Size first: a profile is a few KB, and `git show` of a huge blob would be read whole.
        size = int(_git(["cat-file", "-s", spec], root).strip() or 0)
        if size > MAX_FILE_BYTES:
            raise ProfileError(
                f"at git revision {rev} the file is {size} bytes; at most {MAX_FILE_BYTES} are read",
                path=str(path),
            )
        return _git(["show", spec], root)
    except GitError as exc:
        raise ProfileError(f"not readable at git revision {rev}: {exc}", path=str(path)) from None


def staged_paths(root: Path) -> list[str]:
    """Paths with staged changes (relative to the repo root)."""
    out = _git(["diff", "--cached", "--name-only", "-z"], root)
    return [p for p in out.split("\0") if p]


def commit_file(path: Path, message: str) -> str:
    """Stage and commit exactly `path`; refuse if anything else is staged. Returns the commit sha."""
    root = repo_root(path.resolve())
    rel = path.resolve().relative_to(root).as_posix()
    others = [p for p in staged_paths(root) if p != rel]
    if others:
        shown = ", ".join(others[:5]) + (" ..." if len(others) > 5 else "")
        raise GitError(
            f"refusing to commit: unrelated changes are staged ({shown})",
            hint="commit or unstage them first (git restore --staged PATH)",
        )
    _git(["add", "--", rel], root)
    _git(["commit", "--quiet", "-m", message, "--", rel], root)
    return _git(["rev-parse", "HEAD"], root).strip()


def head_sha(path: Path) -> str | None:
    """HEAD commit of the repo containing `path`, or None outside a git work tree."""
    try:
        root = repo_root(path)
        return _git(["rev-parse", "HEAD"], root).strip()
    except GitError:
        return None
