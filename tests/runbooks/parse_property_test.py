"""Property (issue 21): a mutation of any shipped runbook parses or is refused with a RunbookError
naming its file and line, in bounded time, never another exception; and whatever parses can be
walked to its end (no branch cycle: every path through if-ok / if-failed ends within as many
steps as the runbook has) with only meaningful values (finite bounded timeouts, finite metric
thresholds, exit codes 0-255, HTTP codes 100-599).

Mutations: a line of a shipped runbook replaced by, or preceded with, a hostile line (branches
to any step, nasty numbers, control characters, shell syntax, unclosed fences). In-process, a
bounded number of derandomized examples (each takes milliseconds)."""

from __future__ import annotations

import math
import re
from datetime import timedelta
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsv4ops.runbooks.directives import MAX_TIMEOUT_S
from dsv4ops.runbooks.model import END, Runbook
from dsv4ops.runbooks.parse import RunbookError, parse_runbook

REPO = Path(__file__).resolve().parents[2]
SHIPPED = {
    p.name: p.read_text() for p in sorted((REPO / "runbooks").glob("*.md")) if p.name != "README.md"
}
NUMBERS = [
    "0",
    "1",
    "2",
    "3",
    "7",
    "-1",
    "999999999999",
    "1e308",
    "inf",
    "-inf",
    "nan",
    "0x10",
    "1_000",
    "",
    " ",
    "\x00",
    "1.5",
    "end",
    "END",
    "٣",
]
HOSTILE = st.one_of(
    st.builds(
        lambda k, v: f"   {k}: {v}",
        st.sampled_from(
            ["if-ok", "if-failed", "timeout", "max-bytes", "kind", "repeat", "until", "question"]
        ),
        st.sampled_from(
            NUMBERS
            + [
                "wait",
                "run",
                "safe",
                "metric decode x == nan",
                "metric decode x < inf",
                "http router /h 9999",
                "http router /h 200",
                "status healthy",
            ]
        ),
    ),
    st.builds(
        lambda n: f"   dsv4ops status --target {{target}}  # expect exit {n}",
        st.sampled_from(NUMBERS),
    ),
    st.sampled_from(
        [
            "   ```step",
            "   ```dsv4ops",
            "   ```",
            "```",
            "1. Again.",
            "9. Far.",
            "   dsv4ops status; rm -rf /",
            "   dsv4ops runbook run x",
            "\x1b[2J",
            "   dsv4ops deploy {x} --target other",
            "## Rehearse",
            "# Title",
        ]
    ),
    st.text(max_size=60),
)
SETTINGS = settings(
    max_examples=250,
    derandomize=True,
    deadline=timedelta(seconds=2),
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
_WHERE = re.compile(r"^m\.md(:\d+)?: ")


@st.composite
def mutants(draw: st.DrawFn) -> str:
    lines = SHIPPED[draw(st.sampled_from(sorted(SHIPPED)))].splitlines()
    blocks = [i for i, line in enumerate(lines) if line.strip() == "```step"]
    if len(blocks) > 0 and draw(st.booleans()):  # a branch inside a real step block: often a cycle
        at = draw(st.sampled_from(blocks))
        key = draw(st.sampled_from(["if-ok", "if-failed"]))
        lines.insert(at + 1, f"   {key}: {draw(st.integers(1, 10))}")
    for _ in range(draw(st.integers(0, 3))):
        i = draw(st.integers(0, len(lines)))
        new = draw(HOSTILE)
        if draw(st.booleans()) and i < len(lines):
            lines[i] = new
        else:
            lines.insert(i, new)
    return "\n".join(lines) + "\n"


def _paths_end(book: Runbook) -> None:
    """Follow every branch from every step: no step is reached twice on one path."""

    def walk(number: int, seen: tuple[int, ...]) -> None:
        assert number not in seen, f"cycle {seen + (number,)}"
        step = book.step(number)
        for branch in {step.if_ok, step.if_failed}:
            if branch == END or (branch == step.if_failed and not branch and step.if_ok != ""):
                continue
            nxt = book.after(step, branch)
            if nxt is not None:
                walk(nxt.number, (*seen, number))

    walk(book.steps[0].number, ())


@SETTINGS
@given(text=mutants())
def test_a_mutated_runbook_parses_or_names_file_and_line(text: str) -> None:
    try:
        book = parse_runbook(text, path="m.md")
    except RunbookError as exc:
        assert _WHERE.match(str(exc)), str(exc)
        return
    _paths_end(book)
    for s in book.steps:
        assert math.isfinite(s.timeout_s) and 0 < s.timeout_s <= MAX_TIMEOUT_S
        assert all(0 <= code <= 255 for c in s.commands for code in c.expect)
        for cond in s.conditions:
            if cond.kind == "metric":
                assert math.isfinite(cond.value)
            if cond.kind == "http":
                assert all(100 <= code <= 599 for code in cond.codes)
