"""`profile set` end to end: toggles → new or edited file → checked → one git commit of that file."""

from __future__ import annotations

import difflib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from dsv4ops.errors import DsOpsError, ProfileError
from dsv4ops.jsontypes import JSONObject
from dsv4ops.plaintext import reason_problem
from dsv4ops.profiles import git as gitio
from dsv4ops.profiles.json_schema import modeline, modeline_of
from dsv4ops.profiles.load import load_profile, profile_path
from dsv4ops.profiles.model import Profile, Target
from dsv4ops.profiles.render import render
from dsv4ops.profiles.toggles import (
    check_new_name,
    edit_in_place,
    effective_changes,
    new_profile_text,
    parse_toggles,
    write_atomically,
)


@dataclass(frozen=True)
class SetResult:
    path: str
    message: str  # the commit message (also printed with --no-commit)
    commit: str | None  # sha, None with commit=False or a dry run
    changes: tuple[str, ...]
    diff: str = ""  # the file's unified diff (a new profile: all of it added)
    dry_run: bool = False  # nothing was written
    warnings: tuple[str, ...] = ()  # the result's warnings that the profile it changed lacked

    def to_json(self) -> JSONObject:
        return {
            "path": self.path,
            "dry_run": self.dry_run,
            "commit": self.commit,
            "changes": list(self.changes),
            "message": self.message,
            "diff": self.diff,
            "warnings": list(self.warnings),
        }


def set_flags(
    ref: str,
    items: list[str],
    *,
    as_name: str | None,
    in_place: bool,
    commit: bool = True,
    command: str = "dsv4ops profile set",
    reason: str | None = None,
    dry_run: bool = False,
    target: Target | None = None,
) -> SetResult:
    """Apply toggles to profile `ref`, writing NEW (extends ref) or editing ref in place.

    With `dry_run` everything is checked (and the diff returned) but nothing is written or
    committed; with `target` the result must also render for it.
    Raises DsOpsError: bad toggle, nothing would change, target file exists, unrelated staged work,
    git failure; ProfileError if the result does not validate (nothing is written then).
    """
    if bool(as_name) == in_place:
        raise DsOpsError(
            "say where the change goes: --as NEW (a new profile extending this one) or --in-place",
        )
    toggles = parse_toggles(items)
    why = _reason(reason)
    source = load_profile(ref)
    src_path = profile_path(ref)
    if as_name:
        check_new_name(as_name)
        dest = src_path.with_name(f"{as_name}.yaml")
        if dest.exists():
            raise DsOpsError(
                f"{dest} already exists", hint="pick another --as name, or use --in-place on it"
            )
        # The new file sits beside its base: the base's schema line (a relative path) holds.
        line = modeline_of(src_path.read_text(encoding="utf-8")) or modeline()
        text = new_profile_text(source, src_path.stem, toggles, command, line)
    else:
        dest = src_path
        text = edit_in_place(src_path.read_text(encoding="utf-8"), toggles)
    root = _preflight_git(dest) if commit else None
    before = dest.read_text(encoding="utf-8") if not as_name else ""
    original = _Original.of(dest)

    changes: list[str] = []
    warnings: list[str] = []

    def check(tmp: Path) -> None:
        # Runs on the temp file: a ProfileError or "nothing changes" leaves the original untouched.
        try:
            candidate = load_profile(tmp)
        except ProfileError as exc:
            raise ProfileError(
                f"the change would make an invalid profile: {exc.bare_message}",
                path=str(dest),
                key=exc.key,
            ) from None
        changes.extend(effective_changes(source, toggles, candidate))
        warnings.extend(_new_warnings(source, candidate, tmp, dest))
        if not changes:
            raise DsOpsError(f"nothing changes: {source.name} already has {', '.join(items)}")
        if target is not None:
            render(candidate, target)  # a ProfileError/DsOpsError here: nothing is written

    write_atomically(dest, text, check, replace=not dry_run)
    message = _message(dest, source.name if as_name else None, changes, why, command)
    sha = _commit(dest, message, original) if root is not None and not dry_run else None
    diff = "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            text.splitlines(keepends=True),
            "/dev/null" if as_name else str(dest),
            str(dest),
        )
    )
    return SetResult(str(dest), message, sha, tuple(changes), diff, dry_run, tuple(warnings))


def _new_warnings(source: Profile, candidate: Profile, tmp: Path, dest: Path) -> list[str]:
    """The result's warnings that the profile it changed lacked (the change's own), each named
    after the file written, not the temp copy it was checked as."""
    had = {(w.code, w.message) for w in source.warnings}
    return [
        str(w).replace(str(tmp), str(dest))
        for w in candidate.warnings
        if (w.code, w.message) not in had
    ]


@dataclass(frozen=True)
class _Original:
    """The file as it was before `profile set` (None: there was none), to put back exactly."""

    data: bytes | None
    mode: int = 0

    @classmethod
    def of(cls, path: Path) -> _Original:
        if not path.exists():
            return cls(None)
        return cls(path.read_bytes(), path.stat().st_mode)

    def restore(self, path: Path) -> None:
        """Raises OSError if the file cannot be put back."""
        if self.data is None:
            path.unlink(missing_ok=True)
            return
        tmp = path.with_name(f".{path.stem}.restore-{os.getpid()}{path.suffix}")
        try:
            tmp.write_bytes(self.data)
            os.chmod(tmp, stat.S_IMODE(self.mode))
            os.replace(tmp, path)  # whole or not at all: never a half-written profile
        finally:
            tmp.unlink(missing_ok=True)


def _commit(dest: Path, message: str, original: _Original) -> str:
    """Commit `dest`; if git refuses (a pre-commit hook), put the file back as it was, so the
    failure leaves nothing half done, and say what git said."""
    try:
        return gitio.commit_file(dest, message)
    except gitio.CommitFailed as exc:
        try:
            original.restore(dest)
            file_back = True
        except OSError:
            file_back = False
        raise _commit_error(dest, exc, file_back=file_back, new=original.data is None) from None


def _commit_error(
    dest: Path, exc: gitio.CommitFailed, *, file_back: bool, new: bool
) -> gitio.GitError:
    what = f"git {exc.command} failed" if exc.command else "git failed"
    said = (
        "git said:\n" + "\n".join(f"  {line}" for line in exc.output.splitlines())
        if exc.output
        else exc.message
    )
    if file_back and exc.index_restored:
        now = (
            f"{dest} is not written and the git index is as it was"
            if new
            else f"{dest} and the git index are as they were"
        )
        return gitio.GitError(
            f"{what}, so nothing was changed: {now} before this command; nothing was "
            f"committed.\n{said}",
            hint="fix what git (or its pre-commit hook) reports, then run the same command "
            "again; or add --no-commit to write the file without committing it",
        )
    return _left_behind(dest, exc, what, said, file_back=file_back, new=new)


def _left_behind(
    dest: Path, exc: gitio.CommitFailed, what: str, said: str, *, file_back: bool, new: bool
) -> gitio.ChangeLeftBehind:
    """The commit failed and undoing it failed too: say what is left and how to undo it."""
    left, undo = [], []
    if not file_back:
        left.append(f"{dest} holds the new profile")
    if not exc.index_restored:
        left.append(f"the git index has {exc.rel} staged")
        undo.append(f"git restore --staged -- {exc.rel}")
    if not file_back:
        undo.append(f"rm -- {exc.rel}" if new else f"git checkout -- {exc.rel}")
    return gitio.ChangeLeftBehind(
        f"{what} and nothing was committed, but the change could not be undone: "
        f"{' and '.join(left)}.\n{said}",
        hint=f"undo it from the repository's top directory: {' && '.join(undo)}",
    )


def _message(
    dest: Path, extends: str | None, changes: list[str], why: str | None, command: str
) -> str:
    """The commit message: subject, the operator's why, each change, where it came from."""
    subject = f"profile {dest.stem}: " + "; ".join(c.split(": ", 1)[0] for c in changes)
    origin = f"extends {extends}" if extends else "edited in place"
    return (
        f"{subject}\n\n"
        + (f"{why}\n\n" if why else "")
        + "\n".join(f"- {c}" for c in changes)
        + f"\n\n({origin}; written by {command})\n"
    )


MAX_REASON_CHARS = 2000


def _reason(reason: str | None) -> str | None:
    """The operator's why, first in the commit body (the flags' own hazard lines follow)."""
    if reason is None:
        return None
    # checked as typed: splitlines would turn U+2028 and other separators into line breaks
    problem = reason_problem(reason)
    if problem is not None:
        raise DsOpsError(f"--reason {problem}")
    text = "\n".join(line.rstrip() for line in reason.strip().splitlines())
    if not text:
        raise DsOpsError("--reason is empty", hint='say why, e.g. -m "A/B won by 6%, see ab/..."')
    if len(text) > MAX_REASON_CHARS:
        raise DsOpsError(f"--reason is {len(text)} characters; at most {MAX_REASON_CHARS}")
    return text


def _preflight_git(dest: Path) -> Path:
    """Refuse before writing anything if git would refuse the commit afterwards."""
    root = gitio.repo_root(dest.parent)
    rel = dest.resolve().relative_to(root.resolve()).as_posix()
    gitio.refuse_unrelated_staged(root, rel)
    return root
