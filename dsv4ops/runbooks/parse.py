"""Parse a runbook (markdown) into steps and commands. Pure: text in, frozen dataclasses out.

The format (docs/runbooks.md): numbered list items are steps; inside a step, a fenced block with
the info string `dsv4ops` holds the commands to run, one per line, as the operator types them.
A trailing `# expect exit N` (or `N or M`) states the exit codes that count as success (default
0); other trailing comments are notes. A ```` ```step ```` block gives a step another kind (wait,
diagnostics, confirm), its branches and its repeat mark (directives.py). `{target}` is the run's
--target, `{name}` any other placeholder a `--var name=VALUE` fills. A `## Rehearse` section's
blocks reproduce the incident on the twin and run only with `--rehearse`. A step without a block
is a manual step. Every mistake is refused with file:line before anything runs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import shlex
from collections.abc import Collection
from pathlib import Path

from dsv4ops.runbooks.catalogue import find_runbook
from dsv4ops.runbooks.directives import Directives, parse_directives
from dsv4ops.runbooks.model import (
    END,
    GROUPS,
    PLACEHOLDER,
    PROGRAM,
    Command,
    Runbook,
    RunbookError,
    Step,
    join,
    target_values,
)

__all__ = [
    "PROGRAM",
    "Command",
    "Runbook",
    "RunbookError",
    "Step",
    "join",
    "load_runbook",
    "parse_runbook",
]

MAX_RUNBOOK_BYTES = 1 << 20  # 1 MiB: the longest shipped runbook is a few KiB
STEP_BLOCK = "step"
SHELL_TOKENS = {"|", "||", "&", "&&", ";", ">", ">>", "<", "<<", "2>", "2>&1"}
_FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w-]*)\s*$")
_STEP = re.compile(r"^(\d+)[.)]\s+(.*)$")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_EXPECT = re.compile(r"^expect\s+exit\s+(\d+(?:\s*(?:,|or)\s*\d+)*)\s*$")
_SUMMARY = re.compile(r"^\*\*(Symptom|When)\.?\*\*\.?\s*(.*)$")


def load_runbook(ref: str, *, verbs: Collection[str] | None = None) -> Runbook:
    """Find and parse a runbook. `verbs`: the dsv4ops sub-commands a block may use."""
    path = find_runbook(ref)
    try:
        with path.open("rb") as f:
            data = f.read(MAX_RUNBOOK_BYTES + 1)  # never more than the cap, whatever the file
        if len(data) > MAX_RUNBOOK_BYTES:
            raise RunbookError(
                f"{path}: a runbook is at most {MAX_RUNBOOK_BYTES // 1024} KiB; this one is larger"
            )
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RunbookError(f"cannot read runbook {path}: {exc}") from None
    return parse_runbook(text, path=str(path), verbs=verbs)


def parse_runbook(text: str, *, path: str, verbs: Collection[str] | None = None) -> Runbook:
    """Parse runbook markdown. Raises RunbookError naming path:line."""
    title, summary = "", ""
    steps: list[_Draft] = []
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
            info = fence.group(2)
            if info not in (PROGRAM, STEP_BLOCK):
                continue  # an illustration, not something to run
            if not open_step and not (in_rehearse and info == PROGRAM):
                raise RunbookError(
                    f"{path}:{lineno}: a {info} block must be inside a numbered step"
                )
            if info == STEP_BLOCK:
                if steps[-1].directives is not None:
                    raise RunbookError(f"{path}:{lineno}: a step has one ```step block")
                steps[-1].directives = parse_directives(block, path, lineno)
                continue
            cmds = [c for n, t in block if (c := _parse_command(t, n, path, verbs)) is not None]
            if in_rehearse:
                rehearse += cmds
            else:
                steps[-1].commands.extend(cmds)
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
            if any(s.number == number for s in steps):
                raise RunbookError(f"{path}:{lineno}: step {number} appears twice")
            steps.append(_Draft(number, lineno, [step.group(2)]))
            open_step = True
        elif open_step and (raw.startswith((" ", "\t")) or not raw.strip()):
            steps[-1].prose.append(raw.strip())
        elif raw.strip():
            open_step = False  # an unindented paragraph ends the list
        i += 1
    book = _finish(title, summary, steps, rehearse, path)
    return dataclasses.replace(
        book, digest=hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()
    )


def _finish(
    title: str, summary: str, steps: list[_Draft], rehearse: list[Command], path: str
) -> Runbook:
    if not title:
        raise RunbookError(f"{path}:1: a runbook starts with a '# Title' line")
    if not steps:
        raise RunbookError(f"{path}: no numbered steps")
    built = tuple(d.build(path) for d in steps)
    _check_branches(built, steps, path)
    _check_no_cycle(built, steps, path)
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


class _Draft:
    """A step while its lines are read."""

    def __init__(self, number: int, line: int, prose: list[str]) -> None:
        self.number, self.line, self.prose = number, line, prose
        self.commands: list[Command] = []
        self.directives: Directives | None = None

    def build(self, path: str) -> Step:
        fields = dict(self.directives.fields) if self.directives else {}
        step = Step(
            self.number, "\n".join(_trim(self.prose)), self.line, tuple(self.commands), **fields
        )
        where = f"{path}:{self.directives.line if self.directives else self.line}"
        kind = step.action
        if kind == "run" and not step.commands:
            raise RunbookError(
                f"{where}: step {step.number} is kind run but has no ```dsv4ops block"
            )
        if kind != "run" and step.commands:
            raise RunbookError(
                f"{where}: step {step.number} is kind {kind}; its commands belong in a run step"
            )
        if kind == "wait" and not step.conditions:
            raise RunbookError(f"{where}: wait step {step.number} needs at least one 'until:'")
        if kind != "wait" and step.conditions:
            raise RunbookError(f"{where}: 'until:' belongs to a wait step (kind: wait)")
        if kind == "confirm" and not step.question:
            raise RunbookError(f"{where}: confirm step {step.number} needs a 'question:'")
        return step


def _check_branches(built: tuple[Step, ...], drafts: list[_Draft], path: str) -> None:
    numbers = {s.number for s in built}
    for step, draft in zip(built, drafts, strict=True):
        for name in ("if_ok", "if_failed"):
            target = getattr(step, name)
            if target and target != END and int(target) not in numbers:
                line = draft.directives.branch_lines[name] if draft.directives else draft.line
                raise RunbookError(
                    f"{path}:{line}: step {step.number} branches to step {target}, which does "
                    f"not exist (steps: {', '.join(str(n) for n in sorted(numbers))})"
                )


def _check_no_cycle(built: tuple[Step, ...], drafts: list[_Draft], path: str) -> None:
    """Refuse a runbook whose branches can lead back to a step already run: it would run for
    ever (also with --dry-run, which follows if-ok). A step's ways on are its if-ok (default: the
    next step) and its if-failed when set (without one a failure stops the run)."""
    order = [s.number for s in built]
    by_number = {s.number: (s, d) for s, d in zip(built, drafts, strict=True)}
    ways = {s.number: _ways_on(s, order) for s in built}
    done: set[int] = set()
    for first in order:  # an iterative depth-first walk: a long runbook needs no deep recursion
        if first in done:
            continue
        found = _walk(first, ways, done)
        if found is not None:
            cycle, branch = found
            _refuse_cycle(path, by_number[cycle[-2]][1], branch, cycle)


def _ways_on(step: Step, order: list[int]) -> list[tuple[int, str]]:
    """(next step number, the branch that leads there) for each way on from `step`."""
    out = []
    for name, target in (("if_ok", step.if_ok), ("if_failed", step.if_failed)):
        if target == END or (name == "if_failed" and not target):
            continue
        if target:
            out.append((int(target), name))
        elif order.index(step.number) + 1 < len(order):
            out.append((order[order.index(step.number) + 1], name))
    return out


def _walk(
    first: int, ways: dict[int, list[tuple[int, str]]], done: set[int]
) -> tuple[list[int], str] | None:
    """Depth-first from `first` (adding what it finishes to `done`): the first cycle met, as
    its step numbers from the repeated step back to it, and the branch that closes it; None."""
    path_nodes: list[int] = [first]
    stack = [iter(ways[first])]
    while stack:
        nxt_edge = next(stack[-1], None)
        if nxt_edge is None:
            done.add(path_nodes.pop())
            stack.pop()
            continue
        nxt, name = nxt_edge
        if nxt in path_nodes:
            return [*path_nodes[path_nodes.index(nxt) :], nxt], name
        if nxt not in done:
            path_nodes.append(nxt)
            stack.append(iter(ways[nxt]))
    return None


def _refuse_cycle(path: str, draft: _Draft, branch: str, cycle: list[int]) -> None:
    line = (draft.directives.branch_lines.get(branch) if draft.directives else None) or draft.line
    raise RunbookError(
        f"{path}:{line}: the branches make a cycle ({' -> '.join(f'step {n}' for n in cycle)}): "
        "the run would never end. A branch may only lead on to a step that cannot lead back, or "
        "to 'end'; to retry, repeat the commands in a later step (docs/runbooks.md)"
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
    _check_argv(argv, where, verbs)
    _check_target(argv, where)
    if comment.lower().startswith("expect"):
        return Command(tuple(argv), lineno, _expected_exits(comment, where), "")
    return Command(tuple(argv), lineno, frozenset({0}), comment)


def _check_argv(argv: list[str], where: str, verbs: Collection[str] | None) -> None:
    """A dsv4ops sub-command that runs without a shell and is not a runbook."""
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
    path = argv[1:3] if argv[1] in GROUPS else argv[1:2]
    held = [w for w in path if PLACEHOLDER.search(w)]
    if held:
        raise RunbookError(
            f"{where}: {held[0]!r} picks the command at run time; write the command itself "
            "(what it does, and whether it asks first, must show before the run)",
            hint="a placeholder may stand for an option's value or an argument, not a command",
        )
    if argv[1] == "runbook":
        raise RunbookError(f"{where}: a runbook cannot run runbooks")
    if verbs is not None and argv[1] not in verbs:
        raise RunbookError(f"{where}: unknown dsv4ops command {argv[1]!r}")


def _expected_exits(comment: str, where: str) -> frozenset[int]:
    """The exit codes an `# expect exit N [or M]` comment allows."""
    m = _EXPECT.match(comment.lower())
    if not m:
        raise RunbookError(
            f"{where}: cannot read {comment!r}; write '# expect exit 2' or '# expect exit 0 or 4'"
        )
    expect = frozenset(int(c) for c in re.findall(r"\d+", m.group(1)))
    if any(c > 255 for c in expect):  # a process exit status is 0-255
        raise RunbookError(f"{where}: {comment!r}: an exit code is 0-255")
    return expect


def _check_target(argv: list[str], where: str) -> None:
    """A hard-coded target would send a rehearsal to the box: only {target} is allowed (a
    --var value that names one is refused when the run resolves the command, model.py)."""
    for value in target_values(argv):
        if value != "{target}":
            raise RunbookError(
                f"{where}: write '--target {{target}}', not a fixed target {value!r}"
            )


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
