"""`profile set` when git refuses the commit (issue 40 item 5): a real repository, a real
`.git/hooks/pre-commit` that exits 1, the real CLI process. Nothing may be left half done: the
working tree and the index are exactly as before, nothing is committed, the exit code is the
refusal one, and the message says so and shows what the hook said (its secrets hidden)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from dsv4ops import exitcodes
from testing.cli import run_cli

HOOK = """\
#!/bin/sh
echo "profile-lint: flags.overlap_schedule needs a ticket in the message" >&2
echo "profile-lint: HF_TOKEN=hf_SEKRETSEKRET is not how to log in" >&2
exit 1
"""


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def repo(pdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The profiles dir committed in a fresh repository whose pre-commit hook refuses."""
    root = pdir.parent
    (tmp_path / "gitconfig").write_text("")  # no user config (a core.hooksPath) in the way
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for key, value in {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }.items():
        monkeypatch.setenv(key, value)
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "init")
    hook = root / ".git" / "hooks" / "pre-commit"
    hook.write_text(HOOK)
    hook.chmod(0o755)
    return root


def _state(root: Path) -> tuple[dict[str, bytes], str, str, str]:
    """Every file of the work tree (bytes), the index (entries), HEAD, and git status."""
    files = {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }
    return (
        files,
        _git(root, "ls-files", "--stage"),
        _git(root, "rev-parse", "HEAD"),
        _git(root, "status", "--porcelain", "--untracked-files=all"),
    )


@pytest.mark.parametrize(
    ("args", "staged_before"),
    [
        (["--as", "fast"], False),
        (["--in-place"], False),
        (["--in-place"], True),
    ],
    ids=["as-new", "in-place", "in-place-over-staged-edit"],
)
def test_a_refusing_pre_commit_hook_leaves_nothing_changed(
    repo: Path, pdir: Path, args: list[str], staged_before: bool
) -> None:
    if staged_before:  # an edit of the same file already staged: it must stay staged, as it was
        base = pdir / "base.yaml"
        base.write_text(base.read_text().replace("description: test base", "description: edited"))
        _git(repo, "add", "profiles/base.yaml")
    before = _state(repo)
    new = args[0] == "--as"

    run = run_cli("profile", "set", "base", "overlap=on", *args, "-m", "try it", profiles_dir=pdir)

    assert run.code == exitcodes.REFUSED, run.text
    assert _state(repo) == before
    assert "Traceback" not in run.text
    assert "git commit failed, so nothing was changed" in run.err
    assert "nothing was committed" in run.err
    now = "is not written and the git index is as it was" if new else "are as they were"
    assert now + " before this command" in run.err
    assert "profile-lint: flags.overlap_schedule needs a ticket in the message" in run.err
    assert "SEKRET" not in run.text and "HF_TOKEN=***" in run.err
    assert "hint: fix what git (or its pre-commit hook) reports" in run.err
    assert not list(pdir.glob(".*"))  # no temp or restore file left beside the profiles


def test_with_json_the_refusal_is_one_object_with_the_same_words(repo: Path, pdir: Path) -> None:
    before = _state(repo)
    run = run_cli(
        "profile", "set", "base", "overlap=on", "--as", "fast", "--json", profiles_dir=pdir
    )
    assert run.code == exitcodes.REFUSED and _state(repo) == before
    data = json.loads(run.out)
    assert data["exit"] == exitcodes.REFUSED and "nothing was changed" in data["error"]
    assert "profile-lint" in data["error"] and "SEKRET" not in run.out


def test_once_the_hook_passes_the_same_command_commits(repo: Path, pdir: Path) -> None:
    """The hint's "run the same command again" holds: nothing left behind blocks it."""
    assert run_cli("profile", "set", "base", "overlap=on", "--as", "fast", profiles_dir=pdir).code
    (repo / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
    run = run_cli("profile", "set", "base", "overlap=on", "--as", "fast", profiles_dir=pdir)
    assert run.code == exitcodes.OK, run.text
    assert _git(repo, "show", "--name-only", "--format=", "HEAD").strip() == "profiles/fast.yaml"


def test_when_the_undo_fails_too_the_state_and_the_commands_that_undo_it_are_said(
    repo: Path, pdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Neither the file nor the index could be put back (a seam made to fail: a read-only
    directory, a locked index): the error says what is left, is not a refusal, and its hint's
    commands, run as printed, bring back the state from before."""
    from dsv4ops.profiles import git as gitio
    from dsv4ops.profiles import setter

    def cannot(*_args: object) -> None:
        raise OSError("read-only file system")

    monkeypatch.setattr(setter._Original, "restore", cannot)
    monkeypatch.setattr(gitio, "_restore_index_entry", lambda *_args: False)
    before = _state(repo)
    with pytest.raises(gitio.ChangeLeftBehind) as info:
        setter.set_flags("base", ["overlap=on"], as_name="fast", in_place=False)
    err = info.value
    assert err.exit_code == exitcodes.FAILED
    assert "git commit failed and nothing was committed, but the change could not be undone" in str(
        err
    )
    assert f"{pdir / 'fast.yaml'} holds the new profile" in str(err)
    assert "the git index has profiles/fast.yaml staged" in str(err)
    assert "profile-lint: flags.overlap_schedule" in str(err) and "SEKRET" not in str(err)
    undo = "git restore --staged -- profiles/fast.yaml && rm -- profiles/fast.yaml"
    assert err.hint == f"undo it from the repository's top directory: {undo}"
    subprocess.run(undo, shell=True, cwd=repo, check=True)  # noqa: S602 - the hint, as printed
    assert _state(repo) == before
