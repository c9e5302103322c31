"""CHANGELOG.md is written for the people who run dsv4ops (issue 42 item 7): Keep a Changelog's
shape, releases newest first with ISO dates, the newest one the version the package says it is,
and entries about what an operator sees and does, short, never naming source or test files nor
talking about the test suite (those belong in docs/development-notes.md or commit messages).

Shape, as https://keepachangelog.com/en/1.1.0/ has it:

    # Changelog
    ## [Unreleased]                 (first; Added, Changed and Fixed headings kept, maybe empty)
    ## [X.Y.Z] - YYYY-MM-DD         (newest first; every section has at least one entry)
    ### Added | Changed | Deprecated | Removed | Fixed | Security   (in that order, once each)
    - an entry, continued on lines indented by two spaces
"""

from __future__ import annotations

import datetime
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import dsv4ops

ROOT = Path(__file__).resolve().parents[2]
CHANGELOG = ROOT / "CHANGELOG.md"
MAX_ENTRY_CHARS = 600
SECTIONS = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")
UNRELEASED_KEEPS = ("Added", "Changed", "Fixed")  # where the next bullets go
RELEASE = re.compile(r"## \[(\d+)\.(\d+)\.(\d+)\] - (\d{4}-\d{2}-\d{2})")
# A source or test path (not the project's `.dsv4ops/` state directory), or the test suite.
NOT_FOR_USERS = re.compile(
    r"(?<![\w.])(?:dsv4ops|tests|testing)/|\b[\w/-]+\.py\b|pytest|flak[ey]", re.IGNORECASE
)


@dataclass
class Entry:
    line: int
    text: str


@dataclass
class Section:
    name: str
    line: int
    entries: list[Entry] = field(default_factory=list)


@dataclass
class Release:
    heading: str
    line: int
    sections: list[Section] = field(default_factory=list)


def _parse() -> tuple[list[Release], list[str]]:
    """The releases (Unreleased first) and every line that fits no part of the shape."""
    lines = CHANGELOG.read_text(encoding="utf-8").splitlines()
    bad = [] if lines[:1] == ["# Changelog"] else ["CHANGELOG.md:1: the title is not '# Changelog'"]
    releases: list[Release] = []
    for n, line in enumerate(lines[1:], start=2):
        section = releases[-1].sections[-1] if releases and releases[-1].sections else None
        if line.startswith("## "):
            releases.append(Release(line, n))
        elif line.startswith("### ") and releases:
            releases[-1].sections.append(Section(line[4:], n))
        elif line.startswith("- ") and section is not None:
            section.entries.append(Entry(n, line[2:]))
        elif line.startswith("  ") and section is not None and section.entries:
            section.entries[-1].text += " " + line.strip()
        elif line.strip() and (releases or line.startswith(("#", "- "))):
            bad.append(f"CHANGELOG.md:{n}: not a heading, an entry or its continuation: {line!r}")
    return releases, bad


def _releases() -> list[Release]:
    releases, bad = _parse()
    assert not bad, "\n".join(bad)
    assert releases and releases[0].heading == "## [Unreleased]", "no '## [Unreleased]' on top"
    return releases


def test_the_shape_is_keep_a_changelog() -> None:
    releases = _releases()
    bad = []
    for release in releases[1:]:
        if not RELEASE.fullmatch(release.heading):
            bad.append(f"CHANGELOG.md:{release.line}: not '## [X.Y.Z] - YYYY-MM-DD'")
    for release in releases:
        names = [s.name for s in release.sections]
        if any(n not in SECTIONS for n in names) or names != sorted(names, key=SECTIONS.index):
            bad.append(f"CHANGELOG.md:{release.line}: sections {names}, not in {SECTIONS} order")
        elif len(set(names)) != len(names) or not names:
            bad.append(f"CHANGELOG.md:{release.line}: sections {names}: each once, at least one")
    kept = [s.name for s in releases[0].sections]
    if not set(UNRELEASED_KEEPS) <= set(kept):
        bad.append(f"CHANGELOG.md:{releases[0].line}: Unreleased lacks {UNRELEASED_KEEPS}")
    assert not bad, "\n".join(bad)


def test_only_unreleased_has_empty_sections() -> None:
    empty = [
        f"CHANGELOG.md:{s.line}: {r.heading} has an empty '### {s.name}'"
        for r in _releases()[1:]
        for s in r.sections
        if not s.entries
    ]
    assert not empty, "\n".join(empty)


def test_entries_are_short_and_speak_to_operators() -> None:
    bad = []
    for release in _releases():
        for section in release.sections:
            for e in section.entries:
                if len(e.text) > MAX_ENTRY_CHARS:
                    bad.append(f"CHANGELOG.md:{e.line}: {len(e.text)} chars (> {MAX_ENTRY_CHARS})")
                found = NOT_FOR_USERS.search(e.text)
                if found:
                    bad.append(f"CHANGELOG.md:{e.line}: names {found.group(0)!r}")
    assert not bad, "\n".join(bad)


def test_releases_are_newest_first_with_iso_dates() -> None:
    seen: list[tuple[tuple[int, ...], datetime.date, int]] = []
    for release in _releases()[1:]:
        m = RELEASE.fullmatch(release.heading)
        assert m, f"CHANGELOG.md:{release.line}: not '## [X.Y.Z] - YYYY-MM-DD'"
        date = datetime.date.fromisoformat(m.group(4))  # raises on 2026-13-40
        seen.append((tuple(int(g) for g in m.groups()[:3]), date, release.line))
    for (newer, newer_date, line), (older, older_date, _) in zip(seen, seen[1:], strict=False):
        assert newer > older and newer_date >= older_date, f"CHANGELOG.md:{line}: not newest first"


def test_the_newest_release_is_the_package_version() -> None:
    newest = RELEASE.fullmatch(_releases()[1].heading)
    assert newest, "no release below Unreleased"
    version = ".".join(newest.groups()[:3])
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["project"]["version"] == version, "pyproject.toml's version"
    assert dsv4ops.__version__ == version, "dsv4ops.__version__ (what `dsv4ops --version` says)"
