"""`profile set`: parse KEY=VALUE toggles, write the new (or edited) profile, explain the change.

The YAML is edited as text so comments and layout survive; the result is re-loaded and checked
before it replaces anything.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from dsv4ops.errors import DsOpsError, ProfileError
from dsv4ops.profiles.buckets import SPEC_HELP, BucketSpecError, resolve_buckets
from dsv4ops.profiles.excerpt import excerpt
from dsv4ops.profiles.model import Profile
from dsv4ops.profiles.profile_spec import SWITCHES, FlagsSection

# toggle name → schema key under `flags`: each on/off flag's, as declared, then the buckets
TOGGLES = {
    **{switch.toggle: flag for flag, switch in SWITCHES},
    "buckets": "decode_buckets",
}
_SWITCH_OF = {switch.toggle: (flag, switch) for flag, switch in SWITCHES}
_ONOFF = {"on": True, "off": False}


def toggle_usage(name: str) -> str:
    """How a toggle is written: NAME=on|off for an on/off flag, buckets=SPEC."""
    return f"{name}=on|off" if name in _SWITCH_OF else f"{name}=SPEC"


def toggle_rows() -> list[tuple[str, str, str]]:
    """(usage, key, what it sets) of each toggle, from its declaration (the field of
    `FlagsSection`, its Switch): what `profile set --help` and docs/profiles.md list."""
    return [
        (toggle_usage(name), f"flags.{key}", FlagsSection.model_fields[key].description or "")
        for name, key in TOGGLES.items()
    ]


def gate_suite(name: str) -> str:
    """The canary suite a deploy that changes the toggle's flag runs besides smoke: an on/off
    flag's as its Switch declares; the buckets' is the gate's own rule (canary/runner.py
    `suites_for_change`, which tests/canary/verdict_test.py holds this to)."""
    if name in _SWITCH_OF:
        return _SWITCH_OF[name][1].suite or "smoke"
    return "sweep"


# What `profile set` takes, in one line: overlap=on|off ... buckets=SPEC.
TOGGLES_USAGE = " ".join(toggle_usage(name) for name in TOGGLES)
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class Toggle:
    name: str  # a TOGGLES name
    key: str  # flags.<key>
    value: bool | str
    yaml_value: str  # as written into the file


def parse_toggles(items: tuple[str, ...] | list[str]) -> list[Toggle]:
    """Parse 'overlap=on' style arguments. Raises DsOpsError naming what is valid."""
    if not items:
        raise DsOpsError("nothing to set", hint=f"give one or more of {TOGGLES_USAGE}")
    out: dict[str, Toggle] = {}
    given: dict[str, str] = {}  # each key's first value, as YAML
    for item in items:
        name, eq, raw = item.partition("=")
        name, raw = name.strip(), raw.strip()
        if not eq or name not in TOGGLES:
            raise DsOpsError(
                f"bad toggle {excerpt(item)}; expected one of: {', '.join(f'{t}=...' for t in TOGGLES)}"
            )
        if name == "buckets":
            try:
                resolve_buckets(_bucket_value(raw), tp_size=4, max_running_requests=None)
            except (BucketSpecError, ValueError) as exc:
                raise DsOpsError(
                    f"bad buckets value {excerpt(raw)}: {exc}", hint=f"use {SPEC_HELP}"
                ) from None
            out[name] = Toggle(name, TOGGLES[name], raw, _bucket_yaml(raw))
        else:
            if raw.lower() not in _ONOFF:
                raise DsOpsError(f"bad value in {excerpt(item)}; expected on or off")
            out[name] = Toggle(name, TOGGLES[name], _ONOFF[raw.lower()], raw.lower())
        _refuse_second_value(name, given, out[name].yaml_value)
    return list(out.values())


def _refuse_second_value(name: str, given: dict[str, str], yaml_value: str) -> None:
    """`overlap=on overlap=off` kept the last and then said "nothing changes: baseline already
    has overlap=on, overlap=off"; one key with two values is refused (the same value twice is
    one change)."""
    first = given.setdefault(name, yaml_value)
    if first != yaml_value:
        raise DsOpsError(
            f"{name} is given twice, as {excerpt(first)} and {excerpt(yaml_value)}",
            hint=f"give {name}=... once",
        )


def _bucket_value(raw: str) -> str | list[int]:
    if raw.startswith("[") or "," in raw:
        inner = raw.removeprefix("[").removesuffix("]").strip()
        if not inner:
            return []  # the profile's check names the empty list
        parts = [p.strip() for p in inner.split(",")]
        if "" in parts:
            raise ValueError("an empty item between commas")
        return [int(p) for p in parts]  # ValueError ('1 2', 'a') → reported by the caller
    return raw


def _bucket_yaml(raw: str) -> str:
    value = _bucket_value(raw)
    return "[" + ", ".join(str(v) for v in value) + "]" if isinstance(value, list) else value


def effective_changes(profile: Profile, toggles: list[Toggle], new: Profile) -> list[str]:
    """One line per real change: what changed and why it matters (from the seed measurements)."""
    lines = []
    for t in toggles:
        if t.name in _SWITCH_OF:
            flag, switch = _SWITCH_OF[t.name]
            on = getattr(new.flags, flag)
            if getattr(profile.flags, flag) != on:
                lines.append(switch.on_words if on else switch.off_words)
        elif profile.decode_buckets != new.decode_buckets:
            old_pad = _padding_words(profile.decode_buckets)
            new_pad = _padding_words(new.decode_buckets)
            lines.append(
                f"buckets={t.yaml_value}: {len(profile.decode_buckets)} -> {len(new.decode_buckets)} decode "
                f"CUDA graphs, worst padding above {PADDING_FROM} running {old_pad} -> {new_pad} (step-8 edges cost 726->663 tok/s at "
                f"56->57 running in the seeds; more graphs cost capture time and memory)"
            )
    return lines


PADDING_FROM = 40  # the seeds' operating range (C60 -> C90) starts above this


def _padding_words(buckets: tuple[int, ...]) -> str:
    """The worst padding in the seeds' range, or that the range has no graph at all: a batch
    above the largest bucket runs eager (no padding, but far slower steps), never "0 slots"."""
    top = max(buckets, default=0)
    if top <= PADDING_FROM:
        return f"none: no graph above {top} running, eager"
    return f"{worst_padding(buckets, PADDING_FROM)} slots"


def worst_padding(buckets: tuple[int, ...], above: int = 0) -> int:
    """Most padded slots a batch can incur, for batch sizes above `above` (up to the largest bucket)."""
    worst, prev = 0, 0
    for bs in buckets:
        if bs > above:
            worst = max(worst, bs - max(prev, above) - 1)
        prev = bs
    return worst


def new_profile_text(
    base: Profile, base_ref: str, toggles: list[Toggle], command: str, modeline: str
) -> str:
    """A new profile file that extends `base_ref` and sets only the toggled flags; `modeline`
    (the yaml-language-server line) goes first, as in every shipped profile."""
    desc = f"{base.name} with " + ", ".join(f"{t.name}={t.yaml_value}" for t in toggles)
    body = [
        modeline,
        f"# Written by `{command}`.",
        "schema_version: 1",
        f"extends: {base_ref}",
        f"description: {_yaml_str(desc)}",
        "",
        "flags:",
    ]
    body += [f"  {t.key}: {t.yaml_value}" for t in toggles]
    return "\n".join(body) + "\n"


def _yaml_str(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def edit_in_place(text: str, toggles: list[Toggle]) -> str:
    """Set flags.<key> in the file's text, keeping everything else byte for byte."""
    lines = text.splitlines(keepends=True)
    for t in toggles:
        lines = _set_flag(lines, t.key, t.yaml_value)
    out = "".join(lines)
    return out if out.endswith("\n") else out + "\n"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _set_flag(lines: list[str], key: str, value: str) -> list[str]:
    flags_at = next(
        (i for i, ln in enumerate(lines) if re.match(r"^flags:\s*(#.*)?$", ln.rstrip("\n"))), None
    )
    if flags_at is None:
        tail = [] if not lines or lines[-1].endswith("\n") else ["\n"]
        return [*lines, *tail, "\nflags:\n", f"  {key}: {value}\n"]
    # The section body: following lines that are blank, comments or indented.
    end, child_indent = flags_at + 1, None
    while end < len(lines) and (not lines[end].strip() or lines[end].startswith((" ", "#"))):
        if lines[end].strip() and not lines[end].lstrip().startswith("#") and child_indent is None:
            child_indent = _indent(lines[end])
        end += 1
    child_indent = child_indent or 2
    for i in range(flags_at + 1, end):
        match = re.match(
            rf"^( {{{child_indent}}}){re.escape(key)}:(\s*)([^#\n]*?)(\s*#.*)?$",
            lines[i].rstrip("\n"),
        )
        if not match:
            continue
        # Drop a block-style value (list items on the following, deeper or '- ' lines).
        stop = i + 1
        while (
            stop < end
            and lines[stop].strip()
            and (_indent(lines[stop]) > child_indent or lines[stop].lstrip().startswith("- "))
        ):
            stop += 1
        comment = match.group(4) or ""
        return [*lines[:i], f"{match.group(1)}{key}: {value}{comment}\n", *lines[stop:]]
    insert = flags_at + 1
    return [*lines[:insert], f"{' ' * child_indent}{key}: {value}\n", *lines[insert:]]


def write_atomically(path: Path, text: str, check: object, *, replace: bool = True) -> None:
    """Write `text` to a temp file beside `path`, run `check(temp_path)`, then replace `path`.

    `check` loads the temp file as a profile (raising ProfileError); nothing is replaced on error,
    nor at all without `replace` (a dry run: checked beside its siblings, as `extends` needs).
    """
    tmp = path.with_name(f".{path.stem}.tmp-{os.getpid()}-{threading.get_ident()}{path.suffix}")
    tmp.write_text(text, encoding="utf-8")
    try:
        check(tmp)  # type: ignore[operator]
        if replace:
            os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def check_new_name(name: str) -> None:
    if not _NAME_RE.match(name) or name == "targets":
        raise ProfileError(f"invalid profile name {name!r}; use letters, digits, '.', '_' or '-'")
