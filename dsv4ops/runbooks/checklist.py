"""`runbook show`: the checklist a person reads on paper, from the same parse the engine runs."""

from __future__ import annotations

from dsv4ops.runbooks.model import END, Runbook, Step


def checklist(b: Runbook) -> list[str]:
    lines = [f"{b.title}  ({b.path})"]
    if b.summary:
        lines.append(f"symptom: {b.summary}")
    if b.placeholders:
        lines.append("needs: " + " ".join(f"--var {v}=..." for v in sorted(b.placeholders)))
    for s in b.steps:
        lines.append("")
        prose = s.text.splitlines() or [s.title]
        lines.append(f"[ ] {s.number}. {prose[0]}")
        lines += [f"       {text}" if text else "" for text in prose[1:]]
        lines.append(f"       [{_what(s)}]")
        for c in s.commands:
            lines.append(f"       $ {c.display()}" + ("   <- asks first" if c.mutating else ""))
        for cond in s.conditions:
            lines.append(f"       until {cond.text}  (at most {s.timeout_s:g} s)")
        if s.question:
            lines.append(f"       ? {s.question}")
        lines += _branches(s)
    if b.rehearse:
        lines.append("")
        lines.append("rehearse (--rehearse, twin targets only):")
        lines += [f"   $ {c.display()}" for c in b.rehearse]
    return lines


def _what(s: Step) -> str:
    kind = {"run": "asks first" if s.needs_confirmation else "runs"}.get(s.action, s.action)
    return kind + ("" if s.safe_to_repeat else ", not safe to repeat")


def _branches(s: Step) -> list[str]:
    out = []
    for label, target in (("if ok", s.if_ok), ("if it fails", s.if_failed)):
        if target:
            where = "the runbook ends" if target == END else f"go to step {target}"
            out.append(f"       {label}: {where}")
    return out
