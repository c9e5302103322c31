"""Profile loader: file (or git revision) → extends chain → merged, checked, frozen Profile.

Raises only ProfileError. Order: YAML syntax, `schema_version` (alone, so an old dsv4ops says
"upgrade" instead of listing key errors), unknown keys per file, `extends`, merge (lists replaced),
types and defaults, semantic rules.

`load_profile` stops at the first problem; `check_profile_file` / `validate_profile` run the same
checks collecting every problem (problems.py); YAML syntax, `schema_version` and `extends` errors
still end the check, since nothing after them can be trusted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from dsv4ops._yaml import LineInfo, YAMLSyntaxError, load_with_lines
from dsv4ops.constants import PROFILE_SCHEMA_VERSION, PROJECT_HINT, profiles_dir
from dsv4ops.errors import ProfileError
from dsv4ops.jsontypes import JSONObject
from dsv4ops.profiles import git as gitio
from dsv4ops.profiles.build import build_profile
from dsv4ops.profiles.excerpt import excerpt, key_excerpt
from dsv4ops.profiles.files import check_reference, read_bounded, reference_problem
from dsv4ops.profiles.model import Profile, Target
from dsv4ops.profiles.problems import Problem, Problems, strict
from dsv4ops.profiles.profile_spec import ProfileSpec, construct
from dsv4ops.profiles.provenance import Provenance
from dsv4ops.profiles.rules import check_profile
from dsv4ops.profiles.target_rules import check_against_target
from dsv4ops.profiles.typecheck import check_unknown_keys, normalize

MAX_EXTENDS_DEPTH = 16
_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class _Doc:
    path: str  # as shown in messages
    data: JSONObject
    lines: LineInfo


def profile_path(ref: str | Path, *, base_dir: Path | None = None) -> Path:
    """Map a profile reference to a file: a path to a YAML file, or a name under profiles/.
    Raises ProfileError for a reference no file can have (files.reference_problem)."""
    text = str(ref)
    if base_dir is None:
        check_reference(text)
    try:
        return _profile_path(text, base_dir)
    except (OSError, RuntimeError) as exc:  # a symlink loop, a directory we may not list
        raise ProfileError(f"cannot look up profile {excerpt(text, limit=60)}: {exc}") from None


def _profile_path(text: str, base_dir: Path | None) -> Path:
    as_path = Path(text)
    if text.endswith(_SUFFIXES) or "/" in text or (base_dir is None and as_path.is_file()):
        # In `extends`, a relative path is relative to the extending file's directory.
        if not as_path.is_absolute() and base_dir is not None:
            as_path = base_dir / as_path
        return as_path
    directory = base_dir if base_dir is not None else profiles_dir()
    for suffix in _SUFFIXES:
        candidate = directory / f"{text}{suffix}"
        if candidate.exists():
            return candidate
    return directory / f"{text}.yaml"


def list_profiles(directory: Path | None = None) -> list[Path]:
    """Every shipped profile file (targets.yaml excluded), sorted by name."""
    directory = directory if directory is not None else profiles_dir()
    if not directory.is_dir():
        # An empty listing would read as "no profiles"; a wrong directory is the likelier mistake.
        raise ProfileError(
            f"profiles directory {directory} does not exist",
            hint=PROJECT_HINT + " (or set DSV4OPS_PROFILES_DIR)",
        )
    files = [p for s in _SUFFIXES for p in directory.glob(f"*{s}") if p.stem != "targets"]
    return sorted(files, key=lambda p: p.stem)


def load_profile(ref: str | Path, *, git_rev: str | None = None) -> Profile:
    """Load, merge and check one profile. `git_rev`: read it (and its chain) at that commit.

    Raises ProfileError for the first problem (file:line: key path and what would be valid);
    `validate_profile` lists them all.
    """
    return _load(ref, git_rev, strict())


@dataclass(frozen=True)
class ProfileCheck:
    """Every problem of one profile file. `profile` is the loaded profile when there are none."""

    ref: str
    problems: tuple[Problem, ...]  # sorted by file, line, key
    profile: Profile | None

    @property
    def ok(self) -> bool:
        return not self.problems


def check_profile_file(
    ref: str | Path, *, targets: Iterable[Target] = (), git_rev: str | None = None
) -> ProfileCheck:
    """Load one profile collecting every problem instead of stopping at the first.

    YAML syntax errors, a bad `schema_version` and a broken `extends` chain still end the check
    (nothing after them can be trusted). Unknown keys, wrong types, out-of-range values and rule
    violations are all gathered; rules that need a value with a type error are skipped. Each
    target in `targets` is checked too (GPUs present, ports after its offset).
    """
    sink = Problems(collect=True)
    profile: Profile | None = None
    try:
        profile = _load(ref, git_rev, sink)
        for target in targets:
            check_against_target(profile, target, sink)
    except ProfileError as exc:  # YAML syntax, schema_version or extends: the check ends here
        sink.report(exc)
    problems = tuple(sorted(sink.items, key=Problem.sort_key))
    return ProfileCheck(str(ref), problems, None if problems else profile)


def validate_profile(ref: str | Path, *, git_rev: str | None = None) -> list[Problem]:
    """Every problem of one profile file (sorted by file and line); [] if it is valid."""
    return list(check_profile_file(ref, git_rev=git_rev).problems)


def _load(ref: str | Path, git_rev: str | None, sink: Problems) -> Profile:
    path = profile_path(ref)
    reader = partial(gitio.show_file, rev=git_rev) if git_rev else _fs_reader
    chain = _load_chain(path, reader, sink)
    shown = chain[0].path
    prov = Provenance(shown)
    merged: JSONObject = {}
    for doc in reversed(chain):  # base first, child last
        prov.record(doc.path, doc.lines, doc.data)
        merged = deep_merge(merged, doc.data)
    merged.pop("extends", None)
    values = normalize(merged, ProfileSpec, prov, sink=sink)
    # Every value usable: the models validate the document as a whole; else it is assembled
    # around the placeholders of the bad values (which no rule reads).
    spec = (
        construct(ProfileSpec, values) if sink.any_unusable else ProfileSpec.model_validate(values)
    )
    profile = build_profile(
        spec,
        name=path.stem,
        path=shown,
        chain=tuple(d.path for d in chain),
        prov=prov,
        git_rev=git_rev,
        sink=sink,
    )
    warnings = check_profile(profile, prov, sink)
    return replace(profile, warnings=tuple(warnings), origins=prov.snapshot())


def deep_merge(base: JSONObject, override: JSONObject) -> JSONObject:
    """Mappings merge key by key; anything else (lists included) is replaced by the override."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


Reader = Callable[[Path], str]


def _fs_reader(path: Path) -> str:
    try:
        return read_bounded(path)
    except FileNotFoundError:
        raise ProfileError(
            "no such profile file",
            path=str(path),
            hint="run 'dsv4ops profile list' to see the shipped profiles, or give a path to a .yaml file",
        ) from None


def _load_chain(path: Path, reader: Reader, sink: Problems) -> list[_Doc]:
    chain: list[_Doc] = []
    seen: list[Path] = []
    current = path
    while True:
        try:
            resolved = current.resolve()
        except (OSError, RuntimeError) as exc:  # a symlink loop
            raise ProfileError(
                f"cannot resolve the profile's path: {exc}", path=str(current)
            ) from None
        # Both errors point at the `extends:` line that leads back (or too deep); the first
        # file has none, and cannot be seen before or be too deep.
        if resolved in seen:
            names = " -> ".join(p.name for p in [*seen, resolved])
            raise _at_extends(chain[-1], f"'extends' forms a cycle: {names}")
        if len(seen) >= MAX_EXTENDS_DEPTH:
            raise _at_extends(chain[-1], f"'extends' chain deeper than {MAX_EXTENDS_DEPTH}")
        seen.append(resolved)
        doc = _parse(current, _read(current, reader, chain), sink)
        chain.append(doc)
        parent = doc.data.get("extends")
        if parent is None:
            return chain
        problem = (
            reference_problem(parent)
            if isinstance(parent, str)
            else f"expected the name of a profile or a path to a .yaml file, got {excerpt(parent)}"
        )
        if problem is not None:
            raise _at_extends(doc, problem)
        try:
            current = _profile_path(parent.strip(), current.parent)
            found = reader is not _fs_reader or current.is_file()  # git reports a missing file
        except (OSError, RuntimeError) as exc:
            why = f"cannot look up {excerpt(parent, limit=60)}: {exc.__class__.__name__}"
            raise _at_extends(doc, why) from None
        if not found:
            what = "is not a regular file" if _exists_at_all(current) else "does not exist"
            raise _at_extends(
                doc,
                f"extends {excerpt(parent, limit=80)}, but {key_excerpt(str(current), 200)} {what}",
                hint="name a profile in the same directory (without .yaml) or a relative path",
            )


def _at_extends(doc: _Doc, message: str, hint: str | None = None) -> ProfileError:
    """An error at the `extends:` line of `doc`, where the chain breaks."""
    line = doc.lines.get("extends")
    return ProfileError(message, path=doc.path, line=line, key="extends", hint=hint)


def _read(path: Path, reader: Reader, chain: list[_Doc]) -> str:
    """The text of `path`; a base that cannot be read at all (missing at a git revision) is
    reported at the `extends:` line that names it, as a missing base on disk is."""
    try:
        return reader(path)
    except ProfileError as exc:
        if exc.line is not None or not chain:
            raise
        why = f"extends {key_excerpt(str(path), 200)}, which is {exc.bare_message}"
        raise _at_extends(chain[-1], why, exc.hint) from None


def _exists_at_all(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:
        return False


def _parse(path: Path, text: str, sink: Problems) -> _Doc:
    shown = str(path)
    try:
        data, lines = load_with_lines(text)
    except YAMLSyntaxError as exc:
        # No line from the parser (the document as a whole is too long or too deep): line 1.
        raise ProfileError(f"invalid YAML: {exc}", path=shown, line=exc.line or 1) from None
    if not isinstance(data, dict):
        raise ProfileError("a profile must be a YAML mapping of keys", path=shown, line=1)
    _check_schema_version(data, shown, lines)
    check_unknown_keys(data, ProfileSpec, shown, lines, sink=sink)
    return _Doc(shown, data, lines)


def _check_schema_version(data: JSONObject, path: str, lines: LineInfo) -> None:
    version = data.get("schema_version")
    line, hint = lines.get("schema_version"), None
    if version is None:
        why, line = f"missing schema_version; expected schema_version: {PROFILE_SCHEMA_VERSION}", 1
    elif isinstance(version, bool) or not isinstance(version, int):
        why = f"schema_version must be an integer, got {excerpt(version)}"
    elif version > PROFILE_SCHEMA_VERSION:
        why = (
            f"schema_version {excerpt(version)} is newer than this dsv4ops understands "
            f"({PROFILE_SCHEMA_VERSION})"
        )
        hint = "upgrade dsv4ops"
    elif version < PROFILE_SCHEMA_VERSION:
        why = (
            f"schema_version {excerpt(version)} is not supported; expected {PROFILE_SCHEMA_VERSION}"
        )
    else:
        return
    raise ProfileError(why, path=path, line=line, key="schema_version", hint=hint)
