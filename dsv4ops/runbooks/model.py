"""What a parsed runbook is: its steps, their kinds, commands, conditions and branches. Pure.

A step is one of five kinds (docs/runbooks.md): `run` (dsv4ops commands), `wait` (until every
condition holds, or a timeout), `diagnostics` (one bundle of what the target shows), `confirm`
(a person's answer, journaled with who and when) and `manual` (a person does it; Enter goes on).
Each keeps its prose next to its action and says whether running it twice is safe, which
`--resume` needs to know about a step that was in flight when a run died.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypedDict

from dsv4ops.errors import DsOpsError

PROGRAM = "dsv4ops"
KINDS = ("run", "wait", "diagnostics", "confirm", "manual")
END = "end"  # a branch target: the run ends here, successfully
# Commands that change the box (or, for `profile set`, commit a profile): asked before they run.
MUTATING = {
    ("deploy",),
    ("rollback",),
    ("stop",),
    ("kernels", "deploy"),
    ("kernels", "rollback"),
    ("profile", "set"),
    ("twin", "hazard"),
}
# Those of them that ask for confirmation themselves; the runbook has asked, so they get --yes.
SELF_CONFIRMING = {
    ("deploy",),
    ("rollback",),
    ("stop",),
    ("kernels", "deploy"),
    ("kernels", "rollback"),
    ("twin", "hazard"),
}
# The options of the MUTATING commands that take a value (all others there are flags): what
# follows one is its value, never a flag, as click parses it (`stop -m --dry-run` stops, with
# the reason "--dry-run"). tests/runbooks/parse_test.py checks this against the CLI's own.
VALUE_OPTIONS = frozenset(
    {"--target", "-t", "--only", "--canary-duration", "--reason", "-m", "--to", "--name"}
    | {"--as", "--state"}
)
# The groups whose sub-command is the word after them (a placeholder there would pick the
# command at run time, past what `runbook show` says of it).
GROUPS = frozenset({"buckets", "export", "kernels", "monitoring", "profile", "twin"})
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_-]*)\}")
_PLAIN = re.compile(r"[\w{}@%+=:,./-]+")


class RunbookError(DsOpsError):
    """A runbook cannot be found, does not parse, or cannot run as asked (exit 1). A parse
    error names file:line."""


class CommandRecord(TypedDict):
    """A command as `runbook show --json` prints it (Command.to_json)."""

    line: int
    argv: list[str]
    expect: list[int]
    mutating: bool
    note: str | None


class StepRecord(TypedDict):
    """A step as `runbook show --json` prints it (Step.to_json; its digest hashes this)."""

    step: int
    title: str
    text: str
    kind: str
    manual: bool
    confirm: bool
    safe_to_repeat: bool
    commands: list[CommandRecord]
    until: list[str]
    timeout_s: float | None
    question: str | None
    if_ok: str | None
    if_failed: str | None


class RunbookRecord(TypedDict):
    """A runbook as `runbook show --json` prints it (Runbook.to_json)."""

    name: str
    title: str
    symptom: str
    path: str
    variables: list[str]
    rehearse: list[CommandRecord]
    steps: list[StepRecord]


@dataclass(frozen=True)
class Command:
    argv: tuple[str, ...]  # as written, starting with "dsv4ops", placeholders unresolved
    line: int
    expect: frozenset[int] = frozenset({0})
    note: str = ""  # a trailing comment that is not an expectation

    @property
    def mutating(self) -> bool:
        """True when the command changes the box (and so needs a confirmation)."""
        return mutating(self.argv)

    @property
    def placeholders(self) -> set[str]:
        return {m for a in self.argv for m in PLACEHOLDER.findall(a)}

    def resolve(self, values: Mapping[str, str]) -> list[str]:
        """argv with every {name} replaced; --yes added where the runbook did the asking.
        Raises RunbookError for a placeholder without a value."""
        missing = sorted(self.placeholders - set(values))
        if missing:
            raise RunbookError(
                f"line {self.line}: no value for {', '.join('{' + m + '}' for m in missing)}",
                hint="pass " + " ".join(f"--var {m}=VALUE" for m in missing),
            )
        argv = [PLACEHOLDER.sub(lambda m: values[m.group(1)], a) for a in self.argv]
        # A --var value must not change what the command is: one that made it mutating (an
        # option that swallows its --dry-run) would run it unasked; one that names a target
        # would send it elsewhere than the run's target.
        if mutating(argv) and not self.mutating:
            raise RunbookError(
                f"line {self.line}: with these --var values `{join(argv)}` would change the "
                "target, where the runbook shows it as a dry run (never asked); nothing ran",
                hint="a --var value is a value, not an option",
            )
        wrong = [v for v in target_values(argv) if v != values.get("target")]
        if wrong:
            raise RunbookError(
                f"line {self.line}: with these --var values `{join(argv)}` goes to target "
                f"{wrong[0]!r}, not the run's {values.get('target')!r}; nothing ran",
                hint="a --var value is a value, not an option; the run's --target is the target",
            )
        asks = tuple(argv[1:2]) in SELF_CONFIRMING or tuple(argv[1:3]) in SELF_CONFIRMING
        if self.mutating and asks and not {"--yes", "-y"} & {o for o, _ in options(argv[1:])}:
            argv.append("--yes")
        return argv

    def expect_text(self) -> str:
        return " or ".join(str(c) for c in sorted(self.expect))

    def to_json(self) -> CommandRecord:
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
class Condition:
    """One `until:` of a wait step: `metric COMPONENT SERIES OP NUMBER`, `http COMPONENT PATH
    CODE[,CODE]`, `process COMPONENT alive|dead` or `status healthy`."""

    kind: str  # metric | http | process | status
    component: str  # "" for status
    line: int
    series: str = ""  # metric: name (labels parsed into `labels`)
    labels: tuple[tuple[str, str], ...] = ()
    op: str = ""  # metric: == != < <= > >=
    value: float = 0.0
    path: str = ""  # http
    codes: frozenset[int] = frozenset()  # http
    state: str = ""  # process: alive | dead
    text: str = ""  # as written

    def holds(self, observed: float) -> bool:
        """For a metric condition: whether the observed value satisfies it."""
        return {
            "==": observed == self.value,
            "!=": observed != self.value,
            "<": observed < self.value,
            "<=": observed <= self.value,
            ">": observed > self.value,
            ">=": observed >= self.value,
        }[self.op]


@dataclass(frozen=True)
class Step:
    number: int
    text: str  # the step's prose (code blocks removed), as written
    line: int
    commands: tuple[Command, ...] = ()
    kind: str = ""  # "" = from the blocks: run with commands, manual without
    conditions: tuple[Condition, ...] = ()
    timeout_s: float = 60.0
    question: str = ""  # confirm
    repeat: str = ""  # "safe" | "unsafe" | "" (the kind's default)
    if_ok: str = ""  # a step number or "end"; "" = the next step
    if_failed: str = ""  # a step number or "end"; "" = the run stops (exit 2)
    max_bytes: int = 4_000_000  # diagnostics: the bundle's size cap

    @property
    def action(self) -> str:
        if self.kind:
            return self.kind
        return "run" if self.commands else "manual"

    @property
    def manual(self) -> bool:
        return self.action == "manual"

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

    @property
    def safe_to_repeat(self) -> bool:
        """Whether running the step again after it was cut short can do no harm: stated with
        `repeat:`, else everything but a step that changes the target."""
        if self.repeat:
            return self.repeat == "safe"
        return not self.needs_confirmation

    def to_json(self) -> StepRecord:
        return {
            "step": self.number,
            "title": self.title,
            "text": self.text,
            "kind": self.action,
            "manual": self.manual,
            "confirm": self.needs_confirmation or self.action == "confirm",
            "safe_to_repeat": self.safe_to_repeat,
            "commands": [c.to_json() for c in self.commands],
            "until": [c.text for c in self.conditions],
            "timeout_s": self.timeout_s if self.action == "wait" else None,
            "question": self.question or None,
            "if_ok": self.if_ok or None,
            "if_failed": self.if_failed or None,
        }


@dataclass(frozen=True)
class Runbook:
    name: str
    path: str
    title: str
    summary: str  # the **Symptom.** (or **When.**) paragraph, one line
    steps: tuple[Step, ...]
    rehearse: tuple[Command, ...] = ()
    placeholders: frozenset[str] = field(default_factory=frozenset)
    digest: str = ""  # sha256 of the runbook's text: a run records it, --resume compares it

    def step_digests(self) -> dict[str, str]:
        """Step number -> a short hash of what the step is (text, commands, settings): a run
        records them so a resume after an edit can say which steps changed."""
        return {
            str(s.number): hashlib.sha256(
                json.dumps(s.to_json(), sort_keys=True).encode()
            ).hexdigest()[:16]
            for s in self.steps
        }

    def to_json(self) -> RunbookRecord:
        return {
            "name": self.name,
            "title": self.title,
            "symptom": self.summary,
            "path": self.path,
            "variables": sorted(self.placeholders),
            "rehearse": [c.to_json() for c in self.rehearse],
            "steps": [s.to_json() for s in self.steps],
        }

    def step(self, number: int) -> Step:
        for s in self.steps:
            if s.number == number:
                return s
        raise RunbookError(
            f"{self.name} has no step {number} (steps: {', '.join(str(s.number) for s in self.steps)})"
        )

    def after(self, step: Step, branch: str) -> Step | None:
        """The step a branch leads to: "" the next one, "end" none, else that number."""
        if branch == END:
            return None
        if branch:
            return self.step(int(branch))
        i = self.steps.index(step)
        return self.steps[i + 1] if i + 1 < len(self.steps) else None


def join(argv: tuple[str, ...] | list[str]) -> str:
    """shlex.join, but a bare {placeholder} stays readable (it is not shell syntax here)."""
    return " ".join(a if _PLAIN.fullmatch(a) else shlex.quote(a) for a in argv)


def options(args: Sequence[str]) -> list[tuple[str, str | None]]:
    """(option, its value or None for a flag) as click reads `args`: a VALUE_OPTIONS option
    takes the next word (`-m --dry-run`: the value "--dry-run"), or what follows `=` or, for a
    short one, its letter (`-mX`); `--` ends the options; other words are arguments."""
    found: list[tuple[str, str | None]] = []
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if a == "--":
            break
        if a.startswith("--"):
            name, eq, value = a.partition("=")
            if name in VALUE_OPTIONS and not eq:
                value, i = (args[i], i + 1) if i < len(args) else ("", i)
            found.append((name, value if name in VALUE_OPTIONS else None))
        elif a.startswith("-") and len(a) > 1:
            for j, ch in enumerate(a[1:], start=2):
                if f"-{ch}" in VALUE_OPTIONS:
                    value = a[j:]
                    if not value:
                        value, i = (args[i], i + 1) if i < len(args) else ("", i)
                    found.append((f"-{ch}", value))
                    break
                found.append((f"-{ch}", None))
    return found


def mutating(argv: Sequence[str]) -> bool:
    """Does this dsv4ops command change the box? A MUTATING command, unless --dry-run is one of
    its flags (not an option's value)."""
    args = list(argv[1:])
    path = next((args[:n] for n in (2, 1) if tuple(args[:n]) in MUTATING), None)
    if path is None:
        return False
    return ("--dry-run", None) not in options(args[len(path) :])


def target_values(argv: Sequence[str]) -> list[str]:
    """The values of each --target/-t in the command as click reads it."""
    return [v or "" for o, v in options(argv[1:]) if o in ("--target", "-t")]
