"""The one place profiles talk to git (a subprocess seam): read a file at a commit, commit one file."""

from __future__ import annotations

import subprocess
from pathlib import Path

from dsv4ops.errors import DsOpsError, ProfileError
from dsv4ops.exitcodes import FAILED
from dsv4ops.profiles.files import MAX_FILE_BYTES
from dsv4ops.secrets import redact_text

GIT_TIMEOUT_S = 30
# What git (and a hook it ran) printed, as an error shows it: the last lines, where a hook
# says why it refused, bounded so a chatty hook cannot flood the terminal.
MAX_OUTPUT_LINES = 20
MAX_OUTPUT_CHARS = 2000


class GitError(DsOpsError):
    """git refused or failed; the message carries git's own first line, `output` all it printed
    (bounded, secrets hidden)."""

    def __init__(
        self, message: str, *, hint: str | None = None, output: str = "", command: str = ""
    ) -> None:
        super().__init__(message, hint=hint)
        self.output = output
        self.command = command  # the git subcommand that failed ('commit'), '' if none ran


class CommitFailed(GitError):
    """`git add`/`git commit` of one file failed (a pre-commit hook said no). The index entry of
    that file was put back as it was before the add when `index_restored`."""

    def __init__(self, exc: GitError, *, rel: str, index_restored: bool) -> None:
        super().__init__(exc.message, hint=exc.hint, output=exc.output, command=exc.command)
        self.rel = rel
        self.index_restored = index_restored


class ChangeLeftBehind(GitError):
    """A failed commit whose change could not be undone: the message says what is left and the
    commands that undo it. Something was changed, so this is not a refusal."""

    exit_code = FAILED


def _bounded_output(text: str) -> str:
    lines = [line.rstrip() for line in text.strip().splitlines()][-MAX_OUTPUT_LINES:]
    shown = "\n".join(lines)
    return redact_text(
        shown if len(shown) <= MAX_OUTPUT_CHARS else "..." + shown[-MAX_OUTPUT_CHARS:]
    )


def _git(args: list[str], cwd: Path, stdin: str | None = None) -> str:
    try:
        proc = subprocess.run(  # noqa: S603 - fixed argv, no shell
            ["git", *args],
            cwd=cwd,
            input=stdin,
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
        said = proc.stderr.strip() or proc.stdout.strip() or f"exit {proc.returncode}"
        first = redact_text(said.splitlines()[0])
        # stdout too: git sends a hook's output to stderr, `git commit` its status to stdout.
        output = _bounded_output(proc.stderr + "\n" + proc.stdout)
        raise GitError(f"git {args[0]} failed: {first}", output=output, command=args[0])
    return proc.stdout


def repo_root(path: Path) -> Path:
    """Top of the git work tree containing `path` (a file or directory). Raises GitError."""
    directory = path if path.is_dir() else path.parent
    directory = directory if directory.exists() else Path.cwd()
    return Path(_git(["rev-parse", "--show-toplevel"], directory).strip())


MAX_REVISION_CHARS = 256  # a sha is 40 or 64; `main@{2}` or `HEAD~3` far fewer


def _revision_problem(rev: str) -> str | None:
    """Why `rev` is no git revision this reads (`--rev`, a journal's commit), or None. A
    leading "-" git would take as an option; a ":" would name another file than the profile."""
    if not rev or len(rev) > MAX_REVISION_CHARS:
        return f"a git revision is 1 to {MAX_REVISION_CHARS} characters"
    if rev.startswith("-"):
        return "a git revision does not start with '-' (git would read it as an option)"
    if ":" in rev or any(c.isspace() or not c.isprintable() for c in rev):
        return "a git revision has no ':', spaces or control characters"
    return None


def show_file(path: Path, rev: str) -> str:
    """Contents of `path` at commit `rev`. Raises ProfileError if the file is not in that commit."""
    problem = _revision_problem(rev)
    if problem is not None:
        shown = repr(rev[:40] + ("..." if len(rev) > 40 else ""))
        raise ProfileError(
            f"{shown}: {problem}", path=str(path), hint="e.g. HEAD~1, main or a commit's sha"
        )
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
                line=1,  # the whole file is the problem
            )
        return _git(["show", spec], root)
    except GitError as exc:
        raise ProfileError(f"not readable at git revision {rev}: {exc}", path=str(path)) from None


def staged_paths(root: Path) -> list[str]:
    """Paths with staged changes (relative to the repo root)."""
    out = _git(["diff", "--cached", "--name-only", "-z"], root)
    return [p for p in out.split("\0") if p]


def refuse_unrelated_staged(root: Path, rel: str) -> None:
    """Raise GitError when anything but `rel` is staged: a commit of `rel` would take it along.
    Called before anything is written (the profile setter) and again at the commit."""
    others = [p for p in staged_paths(root) if p != rel]
    if others:
        shown = ", ".join(others[:5]) + (" ..." if len(others) > 5 else "")
        raise GitError(
            f"refusing to commit: unrelated changes are staged ({shown})",
            hint="commit or unstage them first (git restore --staged PATH), or pass --no-commit",
        )


def commit_file(path: Path, message: str) -> str:
    """Stage and commit exactly `path`; refuse if anything else is staged. Returns the commit sha."""
    root = repo_root(path.resolve())
    rel = path.resolve().relative_to(root).as_posix()
    refuse_unrelated_staged(root, rel)
    entry = _index_entry(root, rel)
    try:
        _git(["add", "--", rel], root)
        _git(["commit", "--quiet", "-m", message, "--", rel], root)
    except GitError as exc:
        raise CommitFailed(
            exc, rel=rel, index_restored=_restore_index_entry(root, rel, entry)
        ) from None
    return _git(["rev-parse", "HEAD"], root).strip()


def _index_entry(root: Path, rel: str) -> str | None:
    """The index line of `rel` ('mode sha stage\tpath', as update-index reads it back), or None
    when it is not in the index."""
    out = _git(["ls-files", "--stage", "-z", "--", rel], root)
    return out.rstrip("\0") or None


def _restore_index_entry(root: Path, rel: str, entry: str | None) -> bool:
    """Put the index entry of `rel` back as it was (plumbing: no checks that could refuse)."""
    try:
        if entry is None:
            _git(["update-index", "--force-remove", "--", rel], root)
        else:
            _git(["update-index", "-z", "--index-info"], root, stdin=entry + "\0")
    except GitError:
        return False
    return _index_entry(root, rel) == entry


def head_sha(path: Path) -> str | None:
    """HEAD commit of the repo containing `path`, or None outside a git work tree."""
    try:
        root = repo_root(path)
        return _git(["rev-parse", "HEAD"], root).strip()
    except GitError:
        return None
