"""Parse a runbook (markdown) into steps and commands. Pure: text in, frozen dataclasses out.

The format (docs/runbooks.md): numbered list items are steps; inside a step, a fenced block with
the info string `dsv4ops` holds the commands to run, one per line, as the operator types them.
A trailing `# expect exit N` (or `N or M`) states the exit codes that count as success (default
0); other trailing comments are notes. `{target}` is the run's --target, `{name}` any other
placeholder a `--var name=VALUE` fills. A `## Rehearse` section's blocks reproduce the incident on
the twin and run only with `--rehearse`. A step without a block is a manual step.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsv4ops.errors import DsOpsError

PROGRAM = "dsv4ops"
README = "README.md"
# Commands that change the box (or, for `profile set`, commit a profile): asked before they run.
MUTATING = {
    ("deploy",),
    ("rollback",),
    ("stop",),
    ("kernels", "deploy"),
    ("kernels", "rollback"),
    ("profile", "set"),
}
# Those of them that ask for confirmation themselves; the runbook has asked, so they get --yes.
SELF_CONFIRMING = {"deploy", "rollback", "stop"}
SHELL_TOKENS = {"|", "||", "&", "&&", ";", ">", ">>", "<", "<<", "2>", "2>&1"}
_FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w-]*)\s*$")
_STEP = re.compile(r"^(\d+)[.)]\s+(.*)$")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_EXPECT = re.compile(r"^expect\s+exit\s+(\d+(?:\s*(?:,|or)\s*\d+)*)\s*$")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_-]*)\}")
_PLAIN = re.compile(r"[\w{}@%+=:,./-]+")
_SUMMARY = re.compile(r"^\*\*(Symptom|When)\.?\*\*\.?\s*(.*)$")


class RunbookError(DsOpsError):
    """A runbook cannot be found or does not parse (exit 1). The message names file:line."""


@dataclass(frozen=True)
class Command:
    argv: tuple[str, ...]  # as written, starting with "dsv4ops", placeholders unresolved
    line: int
    expect: frozenset[int] = frozenset({0})
    note: str = ""  # a trailing comment that is not an expectation

    @property
    def mutating(self) -> bool:
        """True when the command changes the box (and so needs a confirmation)."""
        args = self.argv[1:]
        if "--dry-run" in args:
            return False
        return tuple(args[:1]) in MUTATING or tuple(args[:2]) in MUTATING

    @property
    def placeholders(self) -> set[str]:
        return {m for a in self.argv for m in _PLACEHOLDER.findall(a)}

    def resolve(self, values: Mapping[str, str]) -> list[str]:
        """argv with every {name} replaced; --yes added where the runbook did the asking.
        Raises RunbookError for a placeholder without a value."""
        missing = sorted(self.placeholders - set(values))
        if missing:
            raise RunbookError(
                f"line {self.line}: no value for {', '.join('{' + m + '}' for m in missing)}",
                hint="pass " + " ".join(f"--var {m}=VALUE" for m in missing),
            )
        argv = [_PLACEHOLDER.sub(lambda m: values[m.group(1)], a) for a in self.argv]
        if self.mutating and argv[1] in SELF_CONFIRMING and not {"--yes", "-y"} & set(argv):
            argv.append("--yes")
        return argv

    def expect_text(self) -> str:
        return " or ".join(str(c) for c in sorted(self.expect))

    def to_json(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "argv": list(self.argv),
            "expect": sorted(self.expect),
            "mutating": self.mutating,
            "note": self.note or None,
        }

    def display(self) -> str:
        text = join(self.argv)
        if self.expect != {0}:
            text += f"  # expect exit {self.expect_text()}"
        return text


@dataclass(frozen=True)
class Step:
    number: int
    text: str  # the step's prose (code blocks removed), as written
    line: int
    commands: tuple[Command, ...] = ()

    @property
    def manual(self) -> bool:
        return not self.commands

    @property
    def title(self) -> str:
        """The step's first words up to ':' or '.' (e.g. 'Confirm')."""
        first = self.text.split("\n", 1)[0]
        m = re.match(r"^(.{1,60}?)[:.](\s|$)", first)
        if m:
            return m.group(1).strip()
        return first if len(first) <= 60 else first[:57].rsplit(" ", 1)[0] + "..."

    @property
    def needs_confirmation(self) -> bool:
        return any(c.mutating for c in self.commands)


@dataclass(frozen=True)
class Runbook:
    name: str
    path: str
    title: str
    summary: str  # the **Symptom.** (or **When.**) paragraph, one line
    steps: tuple[Step, ...]
    rehearse: tuple[Command, ...] = ()
    placeholders: frozenset[str] = field(default_factory=frozenset)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "symptom": self.summary,
            "path": self.path,
            "variables": sorted(self.placeholders),
            "rehearse": [c.to_json() for c in self.rehearse],
            "steps": [
                {
                    "step": s.number,
                    "title": s.title,
                    "text": s.text,
                    "manual": s.manual,
                    "confirm": s.needs_confirmation,
                    "commands": [c.to_json() for c in s.commands],
                }
                for s in self.steps
            ],
        }

    def step(self, number: int) -> Step:
        for s in self.steps:
            if s.number == number:
                return s
        raise RunbookError(
            f"{self.name} has no step {number} (steps: {', '.join(str(s.number) for s in self.steps)})"
        )


def runbooks_dir() -> Path:
    """Directory holding runbooks: $DSV4OPS_RUNBOOKS_DIR, else ./runbooks."""
    return Path(os.environ.get("DSV4OPS_RUNBOOKS_DIR", "runbooks"))


def list_runbooks(directory: Path | None = None) -> list[Path]:
    d = directory or runbooks_dir()
    return sorted(p for p in d.glob("*.md") if p.name != README)


def find_runbook(ref: str, directory: Path | None = None) -> Path:
    """A runbook by name (runbooks/NAME.md) or path. Raises RunbookError."""
    path = Path(ref)
    if ref.endswith(".md") or os.sep in ref:
        if path.is_file():
            return path
        raise RunbookError(f"no runbook file {ref}")
    d = directory or runbooks_dir()
    candidate = d / f"{ref}.md"
    if candidate.is_file() and candidate.name != README:
        return candidate
    names = ", ".join(p.stem for p in list_runbooks(d)) or "none"
    raise RunbookError(f"no runbook named {ref!r} in {d}/ (have: {names})")


def load_runbook(ref: str, *, verbs: Collection[str] | None = None) -> Runbook:
    """Find and parse a runbook. `verbs`: the dsv4ops sub-commands a block may use."""
    path = find_runbook(ref)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RunbookError(f"cannot read runbook {path}: {exc}") from None
    return parse_runbook(text, path=str(path), verbs=verbs)


def parse_runbook(text: str, *, path: str, verbs: Collection[str] | None = None) -> Runbook:
    """Parse runbook markdown. Raises RunbookError naming path:line."""
    title, summary = "", ""
    steps: list[tuple[int, int, list[str], list[Command]]] = []  # number, line, prose, commands
    rehearse: list[Command] = []
    in_rehearse = False
    open_step = False  # prose and blocks still belong to the last step
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        raw = lines[i]
        lineno = i + 1
        fence = _FENCE.match(raw)
        if fence:
            i, block = _read_block(lines, i, fence.group(1), path)
            if fence.group(2) != PROGRAM:
                continue  # an illustration, not something to run
            cmds = [c for n, t in block if (c := _parse_command(t, n, path, verbs)) is not None]
            if in_rehearse:
                rehearse += cmds
            elif open_step:
                steps[-1][3].extend(cmds)
            else:
                raise RunbookError(
                    f"{path}:{lineno}: a dsv4ops block must be inside a numbered step"
                )
            continue
        heading = _HEADING.match(raw)
        if heading:
            if len(heading.group(1)) == 1 and not title:
                title = heading.group(2)
            else:
                in_rehearse = heading.group(2).lower() == "rehearse"
            open_step = False
            i += 1
            continue
        m = _SUMMARY.match(raw)
        if m and not summary:
            para = [m.group(2)]
            while i + 1 < len(lines) and lines[i + 1].strip():
                i += 1
                para.append(lines[i].strip())
            summary = " ".join(p for p in para if p)
            i += 1
            continue
        step = _STEP.match(raw)
        if step and not in_rehearse:
            number = int(step.group(1))
            if any(s[0] == number for s in steps):
                raise RunbookError(f"{path}:{lineno}: step {number} appears twice")
            steps.append((number, lineno, [step.group(2)], []))
            open_step = True
        elif open_step and (raw.startswith((" ", "\t")) or not raw.strip()):
            steps[-1][2].append(raw.strip())
        elif raw.strip():
            open_step = False  # an unindented paragraph ends the list
        i += 1
    if not title:
        raise RunbookError(f"{path}:1: a runbook starts with a '# Title' line")
    if not steps:
        raise RunbookError(f"{path}: no numbered steps")
    built = tuple(
        Step(n, "\n".join(_trim(prose)), line, tuple(cmds)) for n, line, prose, cmds in steps
    )
    names = frozenset(p for s in built for c in s.commands for p in c.placeholders) | frozenset(
        p for c in rehearse for p in c.placeholders
    )
    return Runbook(
        name=Path(path).stem,
        path=path,
        title=title,
        summary=summary,
        steps=built,
        rehearse=tuple(rehearse),
        placeholders=names - {"target"},
    )


def _trim(prose: list[str]) -> list[str]:
    out = list(prose)
    while out and not out[-1]:
        out.pop()
    return out


def _read_block(
    lines: list[str], start: int, fence: str, path: str
) -> tuple[int, list[tuple[int, str]]]:
    """(index after the closing fence, [(line number, text)]) of the block opened at `start`."""
    body: list[tuple[int, str]] = []
    for j in range(start + 1, len(lines)):
        if lines[j].strip().startswith(fence[:3]) and lines[j].strip().strip(fence[0]) == "":
            return j + 1, body
        body.append((j + 1, lines[j]))
    raise RunbookError(f"{path}:{start + 1}: code block is never closed")


def _parse_command(
    text: str, lineno: int, path: str, verbs: Collection[str] | None
) -> Command | None:
    """One block line -> Command (None for blank or comment-only lines). Raises RunbookError."""
    where = f"{path}:{lineno}"
    code, comment = split_comment(text.strip())
    if not code:
        return None
    try:
        argv = shlex.split(code)
    except ValueError as exc:
        raise RunbookError(f"{where}: cannot parse {code!r}: {exc}") from None
    if argv[0] != PROGRAM:
        raise RunbookError(
            f"{where}: only dsv4ops commands run in a runbook, not {argv[0]!r}",
            hint="write other commands as prose (or in a block that is not ```dsv4ops)",
        )
    if len(argv) < 2:
        raise RunbookError(f"{where}: 'dsv4ops' needs a sub-command")
    shell = [a for a in argv if a in SHELL_TOKENS or "$(" in a or "`" in a]
    if shell:
        raise RunbookError(
            f"{where}: {shell[0]!r} is shell syntax; runbook commands run without a shell"
        )
    if argv[1] == "runbook":
        raise RunbookError(f"{where}: a runbook cannot run runbooks")
    if verbs is not None and argv[1] not in verbs:
        raise RunbookError(f"{where}: unknown dsv4ops command {argv[1]!r}")
    _check_target(argv, where)
    expect, note = frozenset({0}), comment
    if comment.lower().startswith("expect"):
        m = _EXPECT.match(comment.lower())
        if not m:
            raise RunbookError(
                f"{where}: cannot read {comment!r}; write '# expect exit 2' or '# expect exit 0 or 4'"
            )
        expect = frozenset(int(c) for c in re.findall(r"\d+", m.group(1)))
        note = ""
    return Command(tuple(argv), lineno, expect, note)


def _check_target(argv: list[str], where: str) -> None:
    """A hard-coded target would send a rehearsal to the box: only {target} is allowed."""
    for i, a in enumerate(argv):
        value = None
        if a in ("--target", "-t") and i + 1 < len(argv):
            value = argv[i + 1]
        elif a.startswith("--target="):
            value = a.split("=", 1)[1]
        if value is not None and value != "{target}":
            raise RunbookError(
                f"{where}: write '--target {{target}}', not a fixed target {value!r}"
            )


def join(argv: tuple[str, ...] | list[str]) -> str:
    """shlex.join, but a bare {placeholder} stays readable (it is not shell syntax here)."""
    return " ".join(a if _PLAIN.fullmatch(a) else shlex.quote(a) for a in argv)


def split_comment(line: str) -> tuple[str, str]:
    """(code, comment) of a line: the comment starts at the first '#' that begins a word outside
    quotes (as in a POSIX shell; shlex's own comment handling also cuts 'a#b')."""
    quote = ""
    escaped = False
    for i, ch in enumerate(line):
        if escaped:
            escaped = False
        elif ch == "\\" and quote != "'":
            escaped = True
        elif quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].strip(), line[i + 1 :].strip()
    return line.strip(), ""
