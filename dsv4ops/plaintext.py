"""What is not plain text, decided once: the characters a terminal acts on instead of showing
(C0 and C1 controls, DEL, the line and paragraph separators, the bidirectional overrides that
reorder what it shows). The CLI escapes them in what it prints (cli/_output.py
`terminal_safe`); a `--reason`, journaled and shown to the next operator, refuses them, on every
verb and in `profile set`'s commit (profiles/setter.py) alike."""

from __future__ import annotations

import re

CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def first_control(text: str, *, allowed: str = "") -> str | None:
    """The first character of `text` that is no plain text, but those in `allowed` (a reason's
    line breaks and tabs), or None."""
    for match in CONTROL.finditer(text):
        if match.group() not in allowed:
            return match.group()
    return None


def reason_problem(text: str) -> str | None:
    """Why an operator's reason is refused, or None: line breaks and tabs are text."""
    bad = first_control(text, allowed="\n\t")
    return None if bad is None else f"holds the control character U+{ord(bad):04X}; plain text only"
