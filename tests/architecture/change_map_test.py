"""docs/architecture.md "Where to change what": every file it names exists and defines the
functions it names, and the decode restart's table names each of the five files that decide
a restart (so a move that forgets the table fails here, not in a newcomer's afternoon)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
# The files a decode restart goes through (issue 24): scope, steps, what each step does, the
# grace per launcher, and the target side's SIGTERM -> SIGKILL.
RESTART_FILES = (
    "orchestrate/pd.py",
    "orchestrate/plan.py",
    "orchestrate/engine.py",
    "orchestrate/usecases/compose.py",
    "remote/agent/processes.py",
)


def _section() -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("## Where to change what")
    return text[start : text.index("\n## ", start + 1)]


def _rows(section: str) -> list[list[str]]:
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and not set(cells[0]) <= {"-", " "} and cells[0] != "to change":
            rows.append(cells)
    return rows


def _path(name: str) -> Path:
    """A named file: the package's, or the test helpers' under testing/."""
    return ROOT / name if name.startswith("testing/") else ROOT / "dsv4ops" / name


def _defined(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
    return names


def test_every_named_file_exists_and_defines_the_named_functions() -> None:
    bad = []
    for cells in _rows(_section()):
        files = re.findall(r"`([\w/]+\.py)`", cells[1])
        for f in files:
            if not _path(f).is_file():
                bad.append(f"{f}: no such file")
        if len(cells) < 3 or len(files) != 1 or not _path(files[0]).is_file():
            continue  # a row of the second table, or one naming two files: files only
        defined = _defined(_path(files[0]))
        for name in re.findall(r"`([\w.]+)`", cells[2]):
            if name.split(".")[-1] not in defined:
                bad.append(f"{files[0]}: no function {name}")
    assert not bad, "docs/architecture.md 'Where to change what' is stale:\n" + "\n".join(bad)


def test_the_decode_restart_table_names_its_five_files() -> None:
    section = _section()
    restart = section[: section.index("Elsewhere:")]
    named = {f for cells in _rows(restart) for f in re.findall(r"`([\w/]+\.py)`", cells[1])}
    assert set(RESTART_FILES) <= named, sorted(set(RESTART_FILES) - named)
