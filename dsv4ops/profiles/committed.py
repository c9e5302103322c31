"""Git provenance of a loaded profile: the commit its files are, unchanged, at (or None).

A deploy records this commit so a rollback can read the profile back from git; a file edited
since (or untracked) has no commit that holds it, and then the journal's exact commands are the
only way back (orchestrate/restore.py).
"""

from __future__ import annotations

from pathlib import Path

from dsv4ops.errors import DsOpsError
from dsv4ops.profiles import git as gitio
from dsv4ops.profiles.model import Profile


def clean_head_commit(profile: Profile) -> str | None:
    """HEAD's sha when every file of the profile's extends chain is committed unchanged, else None."""
    files = [Path(p) for p in (profile.chain or (profile.path,))]
    sha = gitio.head_sha(files[0].resolve())
    if sha is None:
        return None
    for f in files:
        try:
            if gitio.show_file(f, sha) != f.read_text(encoding="utf-8"):
                return None
        except (DsOpsError, OSError):
            return None
    return sha
