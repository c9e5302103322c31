"""docs/architecture.md names only things that exist: every path it names is on disk, every
function it names is defined where it says, every command-line flag it names is one the package
takes, the decode restart's "where to change what" table names each of the five files that
decide a restart, and the worked example of adding a flag is a field that declares one (so a
rename or a move that forgets the doc fails here, not in a newcomer's afternoon; the table once
named a flag that never existed).

The doc's notations, which this test reads:
- a path in backticks: `orchestrate/pd.py`, `dsv4ops/twin/`, `testing/ports.py`, `workers.py`
  (package-relative, repository-relative, or a file name found under dsv4ops/, testing/ or
  tests/);
  unquoted `docs/<name>.md` and `runbooks/<name>.md` too;
- functions of a file: the "where to change what" rows (file | function: one file and its
  names, or as many names as files, in order) and, in prose, a file followed by parentheses
  that open with its names: `cli/__init__.py` (`main`, the one error boundary);
  `Class.method` is a method (or field) of that class;
- a flag: any `--flag` inside backticks.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
# The files a decode restart goes through (issue 24): scope, steps, what each step does, the
# grace per launcher, and the target side's SIGTERM -> SIGKILL.
RESTART_FILES = (
    "orchestrate/pd.py",
    "orchestrate/plan.py",
    "orchestrate/engine.py",
    "usecases/compose.py",
    "remote/agent/processes.py",
)
SPAN = re.compile(r"`([^`\n]+)`")
PATHLIKE = re.compile(r"[\w./-]+(\.py|\.md|\.yaml|/)")
UNQUOTED_DOC = re.compile(r"(?<![\w/`])((?:docs|runbooks)/[\w-]+\.md)")
IDENT = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?(?:\(\.\.\.\)|\(\))?"
# A file, then its names: the backticked names that open the parentheses after it.
FILE_THEN_NAMES = re.compile(rf"`([\w/]+\.py)` \((`{IDENT}`(?:\s*[,/]\s*`{IDENT}`)*)")
FLAG = re.compile(r"(?<![\w-])--[a-z][\w-]*")


def _text() -> str:
    return DOC.read_text(encoding="utf-8")


def _lines() -> Iterator[tuple[int, str]]:
    yield from enumerate(_text().splitlines(), start=1)


def _resolve(name: str) -> Path | None:
    """The file or directory a doc path names, or None."""
    name = name.rstrip("/") if name.endswith("/") else name
    for base in (ROOT, ROOT / "dsv4ops"):
        if (base / name).exists():
            return base / name
    if "/" not in name:  # a bare file name: the one under the package, its tests or helpers
        for base in (ROOT / "dsv4ops", ROOT / "testing", ROOT / "tests"):
            found = next(base.rglob(name), None)
            if found is not None:
                return found
    return None


@functools.cache
def _defined(path: Path) -> frozenset[str]:
    """Top-level and class-level names of a module: `f`, `C`, `C.m` (and `C.field`)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        names |= _names_of(node)
        if isinstance(node, ast.ClassDef):
            for member in node.body:
                names |= {f"{node.name}.{n}" for n in _names_of(member)}
    return frozenset(names)


def _names_of(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    if isinstance(node, ast.Assign):
        return {t.id for t in node.targets if isinstance(t, ast.Name)}
    return set()


def _section() -> str:
    text = _text()
    start = text.index("## Where to change what")
    return text[start : text.index("\n## ", start + 1)]


def _rows(section: str) -> list[list[str]]:
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and not set(cells[0]) <= {"-", " "} and cells[0] != "to change":
            rows.append(cells)
    return rows


def _named_functions() -> Iterator[tuple[str, str]]:
    """(file, name) for every function the doc places in a file."""
    for cells in _rows(_section()):
        files = re.findall(r"`([\w/]+\.py)`", cells[1])
        if len(cells) == 3 and len(files) == len(SPAN.findall(cells[2])) > 1:
            yield from zip(files, SPAN.findall(cells[2]), strict=True)  # one name per file
        elif len(cells) == 3 and len(files) == 1:
            yield from ((files[0], n) for n in SPAN.findall(cells[2]))
    for match in FILE_THEN_NAMES.finditer(_text()):
        for name in SPAN.findall(match.group(2)):
            yield match.group(1), name


def test_every_path_the_doc_names_exists() -> None:
    bad = []
    for n, line in _lines():
        spans = [s for s in SPAN.findall(line) if "<" not in s and " " not in s]
        candidates = [s for s in spans if PATHLIKE.fullmatch(s)] + UNQUOTED_DOC.findall(line)
        bad += [
            f"docs/architecture.md:{n}: {p}: no such path" for p in candidates if not _resolve(p)
        ]
    assert not bad, "\n".join(bad)


def test_every_function_the_doc_names_is_defined_where_it_says() -> None:
    bad = []
    for file, name in _named_functions():
        if not re.fullmatch(IDENT, name):
            continue  # a command or a phrase in the parentheses, not a name
        path = _resolve(file)
        bare = name.removesuffix("(...)").removesuffix("()")
        if path is None or not path.is_file():
            bad.append(f"{file}: no such file")
        elif bare not in _defined(path):
            bad.append(f"{file}: defines no {bare}")
    assert not bad, "docs/architecture.md names what is not there:\n" + "\n".join(bad)


def _click_flags(command: click.Command, ctx: click.Context) -> Iterator[str]:
    for param in command.params:
        yield from (o for o in (*param.opts, *param.secondary_opts) if o.startswith("--"))
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None:
                yield from _click_flags(sub, click.Context(sub, parent=ctx, info_name=name))


@functools.cache
def _known_flags() -> frozenset[str]:
    """The CLI's own flags (click), and every flag the package spells as a string of its own:
    the agent's argparse, the SGLang and router flag tables, the twin's launcher."""
    from dsv4ops.cli import cli

    known = set(_click_flags(cli, click.Context(cli, info_name="dsv4ops")))
    for path in (ROOT / "dsv4ops").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                known |= set(FLAG.findall(node.value)) if FLAG.fullmatch(node.value) else set()
    known |= set(FLAG.findall((ROOT / "Makefile").read_text(encoding="utf-8")))
    return frozenset(known)


def test_every_flag_the_doc_names_is_one_the_package_takes() -> None:
    bad = []
    for n, line in _lines():
        for span in SPAN.findall(line):
            for flag in FLAG.findall(span):
                if flag not in _known_flags():
                    bad.append(f"docs/architecture.md:{n}: {flag}: no such flag")
    assert not bad, "\n".join(bad)


def test_the_decode_restart_table_names_its_five_files() -> None:
    section = _section()
    restart = section[: section.index("Elsewhere:")]
    named = {f for cells in _rows(restart) for f in re.findall(r"`([\w/]+\.py)`", cells[1])}
    assert set(RESTART_FILES) <= named, sorted(set(RESTART_FILES) - named)


def test_the_worked_flag_example_is_one_field_that_declares_a_flag() -> None:
    """ "Adding a flag: a worked example" is code that works: its field, run as a field of
    FlagsSection, declares one on/off flag whose server flag SGLang 0.5.23 takes (without a value)
    and whose names are its own; the example lists at most three files."""
    from typing import Annotated

    from pydantic import Field as Key

    from dsv4ops.profiles._flag_tables import SGLANG_SERVER_TABLE
    from dsv4ops.profiles.profile_spec import SWITCHES, FlagsSection
    from dsv4ops.profiles.schema import OnOff
    from dsv4ops.profiles.switch import Switch

    text = _text()
    start = text.index("### Adding a flag: a worked example")
    section = text[start : text.index("\n## ", start)]
    assert 1 <= len(re.findall(r"^\d+\. `[^`]+`", section, re.M)) <= 3
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None, "the example shows its field"
    names = {"Annotated": Annotated, "OnOff": OnOff, "Switch": Switch, "Key": Key}
    # Compiled without this module's `from __future__ import annotations`: pydantic then sees
    # the annotation itself, not a string to look up in a module the class has none of.
    source = f"class Example(FlagsSection):\n{code.group(1)}"
    example = compile(source, "docs/architecture.md", "exec", dont_inherit=True)
    exec(example, {**names, "FlagsSection": FlagsSection}, names)
    fields = names["Example"].model_fields  # type: ignore[attr-defined]
    added = [
        (key, mark)
        for key, info in fields.items()
        if key not in FlagsSection.model_fields
        for mark in info.metadata
        if isinstance(mark, Switch)
    ]
    assert len(added) == 1, added
    key, switch = added[0]
    assert key not in dict(SWITCHES) and switch.toggle not in {s.toggle for _, s in SWITCHES}
    args = (*switch.argv_on, *switch.argv_off)
    assert args and all(SGLANG_SERVER_TABLE[a][0] == 0 for a in args), args
