"""`profile set` against a real git repository in a temp dir."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from dsv4ops.errors import DsOpsError, ProfileError
from dsv4ops.profiles import load_profile
from dsv4ops.profiles.git import GitError
from dsv4ops.profiles.setter import set_flags
from dsv4ops.profiles.toggles import edit_in_place, parse_toggles, worst_padding


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def repo(pdir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = pdir.parent
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
    return root


def test_set_as_new_writes_extending_profile_and_commits_only_it(repo: Path, pdir: Path) -> None:
    (repo / "notes.txt").write_text("unstaged work stays alone")
    result = set_flags("base", ["overlap=on"], as_name="fast", in_place=False)
    new = load_profile("fast")
    assert new.flags.overlap_schedule and new.chain[1].endswith("base.yaml")
    assert "extends: base" in (pdir / "fast.yaml").read_text()
    assert _git(repo, "show", "--name-only", "--format=", "HEAD") == "profiles/fast.yaml"
    message = _git(repo, "log", "-1", "--format=%B")
    assert message.startswith("profile fast: overlap on")
    assert "+5-7% throughput" in message and "wedge hazard under abort cascades" in message
    assert result.commit == _git(repo, "rev-parse", "HEAD")
    assert "notes.txt" in _git(repo, "status", "--porcelain")


def test_a_new_profile_starts_with_the_schema_line_of_its_base(repo: Path, pdir: Path) -> None:
    # The base has none: the new file gets the line every shipped profile starts with.
    set_flags("base", ["overlap=on"], as_name="fast", in_place=False, commit=False)
    first = (pdir / "fast.yaml").read_text().splitlines()[0]
    assert first == "# yaml-language-server: $schema=./schema/profile.schema.json"
    # A base with its own line (another path to the schema): the new file beside it keeps it.
    own = "# yaml-language-server: $schema=../elsewhere/profile.schema.json"
    rest = (pdir / "fast.yaml").read_text().split("\n", 1)[1]
    (pdir / "fast.yaml").write_text(own + "\n" + rest)
    set_flags("fast", ["buckets=step4"], as_name="faster", in_place=False, commit=False)
    assert (pdir / "faster.yaml").read_text().splitlines()[0] == own
    assert load_profile("faster").flags.decode_buckets == "step4"


def test_set_in_place_keeps_comments_and_changes_one_line(repo: Path, pdir: Path) -> None:
    before = (pdir / "base.yaml").read_text()
    set_flags(
        "base", ["multi-stream-overlap=on", "buckets=step4:40-96"], as_name=None, in_place=True
    )
    after = (pdir / "base.yaml").read_text()
    changed = [
        (a, b) for a, b in zip(before.splitlines(), after.splitlines(), strict=True) if a != b
    ]
    assert changed == [
        ("  multi_stream_overlap: off", "  multi_stream_overlap: on"),
        ("  decode_buckets: step8", "  decode_buckets: step4:40-96"),
    ]
    message = _git(repo, "log", "-1", "--format=%B")
    assert (
        "tool-call corruption" in message
        and "worst padding above 40 running 7 slots -> 3 slots" in message
    )
    assert message.startswith("profile base: multi-stream overlap on; buckets=step4:40-96\n")


def test_refuses_unrelated_staged_work_and_writes_nothing(repo: Path, pdir: Path) -> None:
    (repo / "other.txt").write_text("x")
    _git(repo, "add", "other.txt")
    head = _git(repo, "rev-parse", "HEAD")
    with pytest.raises(GitError, match="unrelated changes are staged \\(other.txt\\)"):
        set_flags("base", ["overlap=on"], as_name="fast", in_place=False)
    assert not (pdir / "fast.yaml").exists() and _git(repo, "rev-parse", "HEAD") == head
    # more than five: five named and the rest said to exist; the way out names --no-commit
    for i in range(6):
        (repo / f"more{i}.txt").write_text("x")
        _git(repo, "add", f"more{i}.txt")
    with pytest.raises(GitError) as refused:
        set_flags("base", ["overlap=on"], as_name="fast", in_place=False)
    assert str(refused.value).endswith(" ...)"), str(refused.value)
    assert "--no-commit" in (refused.value.hint or "")


def test_no_change_is_refused(repo: Path, pdir: Path) -> None:
    with pytest.raises(DsOpsError, match="nothing changes"):
        set_flags("base", ["overlap=off"], as_name="same", in_place=False)
    assert not (pdir / "same.yaml").exists()


def test_a_reason_that_is_no_plain_text_is_refused_and_nothing_written(
    repo: Path, pdir: Path
) -> None:
    """The commit's reason is shown by `git log` and the next operator's terminal: the setter
    refuses what the CLI's --reason refuses (a bidi override too, not only C0 controls), so a
    caller without the CLI gets the same rule; line breaks and tabs are text."""
    head = _git(repo, "rev-parse", "HEAD")
    for reason, code_point in (
        ("a\x1b[2Jb", "U+001B"),
        ("abc\u202edef", "U+202E"),
        ("a\x9bb", "U+009B"),
        ("a\u2028b", "U+2028"),  # a separator splitlines would have made a line break
        ("\x85", "U+0085"),  # one strip() would have made an empty reason
    ):
        with pytest.raises(
            DsOpsError, match=re.escape(f"--reason holds the control character {code_point}")
        ):
            set_flags("base", ["overlap=on"], as_name="fast", in_place=False, reason=reason)
        assert not (pdir / "fast.yaml").exists() and _git(repo, "rev-parse", "HEAD") == head
    set_flags("base", ["overlap=on"], as_name="fast", in_place=False, reason="A/B won\n\tby 6%")
    assert "A/B won\n\tby 6%" in _git(repo, "log", "-1", "--format=%B")


def test_invalid_result_is_refused_and_original_kept(repo: Path, pdir: Path) -> None:
    before = (pdir / "base.yaml").read_text()
    with pytest.raises(ProfileError, match="would make an invalid profile"):
        set_flags("base", ["buckets=8,4"], as_name=None, in_place=True)
    assert (pdir / "base.yaml").read_text() == before
    assert not list(pdir.glob(".*tmp*"))


def test_needs_as_or_in_place_and_refuses_existing_name(repo: Path, pdir: Path) -> None:
    with pytest.raises(DsOpsError, match="--as NEW"):
        set_flags("base", ["overlap=on"], as_name=None, in_place=False)
    (pdir / "taken.yaml").write_text("x")
    with pytest.raises(DsOpsError, match="already exists"):
        set_flags("base", ["overlap=on"], as_name="taken", in_place=False)


def test_outside_git_fails_unless_no_commit(pdir: Path) -> None:
    with pytest.raises(GitError):
        set_flags("base", ["overlap=on"], as_name="fast", in_place=False)
    assert not (pdir / "fast.yaml").exists()
    result = set_flags("base", ["overlap=on"], as_name="fast", in_place=False, commit=False)
    assert result.commit is None and load_profile("fast").flags.overlap_schedule


@pytest.mark.parametrize("bad", ["overlap", "overlap=maybe", "speed=on", "buckets=step0"])
def test_bad_toggles(bad: str) -> None:
    with pytest.raises(DsOpsError):
        parse_toggles([bad])


def test_edit_in_place_adds_missing_keys_and_replaces_block_lists() -> None:
    text = "schema_version: 1\nflags:\n  decode_buckets:\n    - 8\n    - 16\n  overlap_schedule: off  # why\n"
    toggles = parse_toggles(["buckets=[8, 96]", "overlap=on", "multi-stream-overlap=off"])
    out = edit_in_place(text, toggles)
    assert out == (
        "schema_version: 1\nflags:\n  multi_stream_overlap: off\n  decode_buckets: [8, 96]\n"
        "  overlap_schedule: on  # why\n"
    )
    assert edit_in_place("schema_version: 1\n", parse_toggles(["overlap=on"])).endswith(
        "\nflags:\n  overlap_schedule: on\n"
    )


def test_worst_padding() -> None:
    assert (
        worst_padding((8, 16, 24)) == 7
        and worst_padding((1, 2, 4)) == 1
        and worst_padding((4,)) == 3
    )
    assert worst_padding((32, 40, 44, 48), above=40) == 3 and worst_padding((32, 48), above=40) == 7


def test_the_changes_new_warnings_are_said_and_no_graph_is_never_zero_padding(
    repo: Path, pdir: Path
) -> None:
    """buckets=1,2,3 under 96 running said "worst padding above 40 running 7 -> 0 slots" and
    nothing else: above 3 running no graph is captured (eager), which the profile's own check
    warns of; the result names it, once, and a change adding no warning names none."""
    out = set_flags("base", ["buckets=1,2,3"], as_name="tiny", in_place=False, commit=False)
    assert (
        "worst padding above 40 running 7 slots -> none: no graph above 3 running, eager"
        in (out.changes[0])
    )
    (warning,) = out.warnings
    assert warning.startswith(f"{pdir / 'tiny.yaml'}:") and "run without a CUDA graph" in warning
    assert ".tmp-" not in warning  # named after the file written, not the checked temp copy
    assert out.to_json()["warnings"] == [warning]
    quiet = set_flags("base", ["buckets=step4"], as_name="step4", in_place=False, commit=False)
    assert quiet.warnings == ()
