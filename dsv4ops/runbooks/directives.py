"""A step's ```` ```step ```` block: `key: value` lines that give it a kind other than `run`,
its conditions, branches and repeat mark. Pure; errors name file:line.

    ```step
    kind: wait
    until: metric decode sglang:num_running_reqs == 0
    until: http router /readiness 200
    timeout: 30
    if-failed: 6
    ```
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from dsv4ops.jsontypes import JSONObject
from dsv4ops.runbooks.model import END, KINDS, Condition, RunbookError

MAX_TIMEOUT_S = 86_400.0  # a wait or step longer than a day is a typo, not a plan
MAX_BUNDLE_BYTES = 1 << 34  # 16 GiB: a diagnostics bundle larger than that fills the disk
_FIELD = {
    "kind": "kind",
    "timeout": "timeout_s",
    "question": "question",
    "repeat": "repeat",
    "if-ok": "if_ok",
    "if-failed": "if_failed",
    "max-bytes": "max_bytes",
}
KEYS = ("kind", "until", "timeout", "question", "repeat", "if-ok", "if-failed", "max-bytes")
COMPONENTS = ("prefill", "decode", "router")
_OPS = ("==", "!=", "<=", ">=", "<", ">")
_SERIES = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?$")
_LABEL = re.compile(r'^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"([^"]*)"\s*$')


@dataclass
class Directives:
    """The fields a step block sets (as Step keyword arguments) and the line of each branch."""

    fields: JSONObject = field(default_factory=dict)
    branch_lines: dict[str, int] = field(default_factory=dict)  # "if_ok" -> line
    line: int = 0


def parse_directives(block: list[tuple[int, str]], path: str, opened: int) -> Directives:
    """The step block's lines -> Directives. Raises RunbookError naming path:line."""
    out = Directives(line=opened)
    conditions: list[Condition] = []
    for lineno, raw in block:
        text = raw.strip()
        if not text or text.startswith("#"):
            continue
        where = f"{path}:{lineno}"
        key, sep, value = text.partition(":")
        key, value = key.strip().lower(), value.strip()
        if not sep or key not in KEYS:
            raise RunbookError(
                f"{where}: {text!r} is not a step setting; write one of "
                + ", ".join(f"'{k}: ...'" for k in KEYS)
            )
        if key != "until" and _FIELD[key] in out.fields:
            raise RunbookError(f"{where}: '{key}' appears twice in this step")
        if key == "kind":
            if value not in KINDS:
                raise RunbookError(
                    f"{where}: unknown step kind {value!r} (kinds: {', '.join(KINDS)})"
                )
            out.fields["kind"] = value
        elif key == "until":
            conditions.append(parse_condition(value, lineno, path))
        elif key == "timeout":
            out.fields["timeout_s"] = _number(value, where, "timeout: SECONDS", MAX_TIMEOUT_S)
        elif key == "max-bytes":
            out.fields["max_bytes"] = int(
                _number(value, where, "max-bytes: BYTES", MAX_BUNDLE_BYTES)
            )
        elif key == "question":
            if not value:
                raise RunbookError(f"{where}: 'question:' needs the question to ask")
            out.fields["question"] = value
        elif key == "repeat":
            if value not in ("safe", "unsafe"):
                raise RunbookError(f"{where}: write 'repeat: safe' or 'repeat: unsafe'")
            out.fields["repeat"] = value
        else:  # if-ok / if-failed
            if value != END and not value.isdigit():
                raise RunbookError(f"{where}: '{key}:' takes a step number or '{END}'")
            name = key.replace("-", "_")
            out.fields[name] = value
            out.branch_lines[name] = lineno
    if conditions:
        out.fields["conditions"] = tuple(conditions)
    return out


def _number(value: str, where: str, form: str, most: float) -> float:
    try:
        number = float(value.removesuffix("s"))
    except ValueError:
        raise RunbookError(f"{where}: cannot read {value!r}; write '{form}'") from None
    if not math.isfinite(number):
        raise RunbookError(f"{where}: {value!r} is not a finite number; write '{form}'")
    if number <= 0:
        raise RunbookError(f"{where}: {value!r} must be more than 0")
    if number > most:
        raise RunbookError(f"{where}: {value!r} is more than the most allowed, {most:g}")
    return number


def parse_condition(text: str, lineno: int, path: str) -> Condition:
    """One `until:` value -> Condition. Raises RunbookError naming path:line."""
    where = f"{path}:{lineno}"
    words = text.split()  # not shlex: label values keep their quotes
    forms = (
        "'metric COMPONENT SERIES OP NUMBER', 'http COMPONENT PATH CODE', "
        "'process COMPONENT alive|dead' or 'status healthy'"
    )
    if words == ["status", "healthy"]:
        return Condition("status", "", lineno, text=text)
    if len(words) < 2 or words[0] not in ("metric", "http", "process"):
        raise RunbookError(f"{where}: cannot read condition {text!r}; write {forms}")
    kind, component = words[0], words[1]
    if component not in COMPONENTS:
        raise RunbookError(
            f"{where}: unknown component {component!r} (components: {', '.join(COMPONENTS)})"
        )
    if kind == "process":
        if len(words) != 3 or words[2] not in ("alive", "dead"):
            raise RunbookError(f"{where}: write 'process {component} alive' (or dead)")
        return Condition("process", component, lineno, state=words[2], text=text)
    if kind == "http":
        if len(words) != 4 or not words[2].startswith("/"):
            raise RunbookError(f"{where}: write 'http {component} /PATH CODE[,CODE]'")
        try:
            codes = frozenset(int(c) for c in words[3].split(","))
        except ValueError:
            raise RunbookError(f"{where}: {words[3]!r} is not an HTTP status code") from None
        if not all(100 <= c <= 599 for c in codes):
            raise RunbookError(f"{where}: {words[3]!r}: HTTP status codes are 100-599")
        return Condition("http", component, lineno, path=words[2], codes=codes, text=text)
    return _metric(words, component, lineno, where, text)


def _metric(words: list[str], component: str, lineno: int, where: str, text: str) -> Condition:
    rest = " ".join(words[2:])
    op = next((o for o in _OPS if f" {o} " in f" {rest} "), None)
    if op is None:
        raise RunbookError(
            f"{where}: a metric condition compares with one of {' '.join(_OPS)} "
            "(spaces around it)"
        )
    series, _, number = (p.strip() for p in rest.partition(f" {op} "))
    m = _SERIES.match(series)
    if not m:
        raise RunbookError(f"{where}: {series!r} is not a metric name with optional {{labels}}")
    labels = []
    for part in filter(None, (m.group(2) or "").split(",")):
        lm = _LABEL.match(part)
        if not lm:
            raise RunbookError(f'{where}: cannot read label {part.strip()!r}; write name="value"')
        labels.append((lm.group(1), lm.group(2)))
    try:
        value = float(number)
    except ValueError:
        raise RunbookError(f"{where}: {number!r} is not a number") from None
    if not math.isfinite(value):  # `== nan` never holds, `< inf` always: neither means anything
        raise RunbookError(f"{where}: {number!r} is not a finite number")
    return Condition(
        "metric",
        component,
        lineno,
        series=m.group(1),
        labels=tuple(labels),
        op=op,
        value=value,
        text=text,
    )
