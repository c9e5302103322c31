"""Problems of one profile file, and the sink the loader reports them to.

The loader runs in one of two modes with the same checks in the same order:

* strict (`load_profile`): the first problem is raised as a ProfileError, as it always was;
* collecting (`validate_profile`): problems are recorded and the checks go on, so one run lists
  every mistake of a file. Only errors after which nothing can be trusted (YAML syntax, a bad
  `schema_version`, a broken `extends` chain) stop the collection; they are raised as before and
  recorded by the caller.

A value that failed its type check is marked *unusable*: the loader puts a placeholder in its
place so the profile can still be built, and the rules skip whatever reads it (no crash, no
second error about the same mistake).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, NotRequired, TypedDict, cast

from dsv4ops.errors import ProfileError

if TYPE_CHECKING:
    from dsv4ops.profiles.model import ProfileWarning
    from dsv4ops.profiles.provenance import Provenance


class ProblemJSON(TypedDict):
    """A problem as `profile validate --json` prints it (Problem.to_json)."""

    path: str | None
    line: int | None
    key: str | None
    message: str
    hint: str | None


class ValidateResult(TypedDict):
    """One profile's result of `profile validate` (views.validate_many): every problem of its
    file, the first as one line (`error`); a valid one's path and the targets it renders for."""

    profile: str
    path: NotRequired[str]
    ok: bool
    error: str | None
    problems: list[ProblemJSON]
    targets: NotRequired[list[str]]
    warnings: list[dict[str, object]]  # each ProfileWarning's fields


@dataclass(frozen=True)
class Problem:
    """One error in a profile: where (file, line, dotted key) and what would be valid."""

    path: str | None
    line: int | None
    key: str | None
    message: str
    hint: str | None = None

    def sort_key(self) -> tuple[str, int, str]:
        return (self.path or "", self.line or 0, self.key or "")

    def __str__(self) -> str:
        # 'file:line: key: message', exactly as ProfileError says it
        return str(ProfileError(**asdict(self)))

    def to_json(self) -> ProblemJSON:
        return cast(ProblemJSON, asdict(self))


def unknown_key(name: str, valid: Iterable[str]) -> tuple[str, str | None]:
    """Why a key is refused and a did-you-mean hint, from the keys valid there. A key can be
    anything YAML allows (16 KB of text): match a bounded part."""
    keys = list(valid)
    close = difflib.get_close_matches(name[:64], keys, n=1)
    hint = f"did you mean '{close[0]}'?" if close else None
    return f"unknown key; valid keys here: {', '.join(keys)}", hint


def _related(a: str, b: str) -> bool:
    """True if one key path is the other or lies under it ('decode' and 'decode.tp')."""
    if a == b:
        return True
    short, long = (a, b) if len(a) < len(b) else (b, a)
    return long.startswith((short + ".", short + "["))


class Problems:
    """Where checks report errors. Strict: `report` raises. Collecting: it records and returns."""

    def __init__(self, *, collect: bool) -> None:
        self.collect = collect
        self._items: list[Problem] = []
        self._seen: set[Problem] = set()  # a set: a file can have thousands of problems
        self._unusable: set[str] = set()
        self.warnings: list[ProfileWarning] = []  # in the order the rules found them

    def report(self, err: ProfileError) -> None:
        if not self.collect:
            raise err
        problem = Problem(err.path, err.line, err.key, err.bare_message, err.hint)
        if problem not in self._seen:
            self._seen.add(problem)
            self._items.append(problem)

    def error(self, prov: Provenance, key: str, message: str, *, hint: str | None = None) -> None:
        """Report an error at a key path, located by `prov` (file:line, or the base that set it)."""
        self.report(prov.error(key, message, hint=hint))

    def warn(self, prov: Provenance, code: str, key: str, message: str) -> None:
        """Record a warning at a key path (never raised: a profile with warnings loads)."""
        self.warnings.append(prov.warning(code, key, message))

    def mark_unusable(self, key: str) -> None:
        """The value at `key` (or the whole section) failed its check; rules must not read it."""
        self._unusable.add(key)

    def usable(self, *keys: str) -> bool:
        """True if no key in `keys` is (in, or contains) a value marked unusable."""
        return not any(_related(k, bad) for k in keys for bad in self._unusable)

    @property
    def any_unusable(self) -> bool:
        """True if any value failed its check (the profile holds placeholders)."""
        return bool(self._unusable)

    def has_problem(self, key: str) -> bool:
        """True if a problem was already reported at `key` (or at a key above or below it)."""
        return any(p.key is not None and _related(key, p.key) for p in self._items)

    @property
    def items(self) -> list[Problem]:
        """Every problem, in the order the checks found them."""
        return list(self._items)


def strict() -> Problems:
    return Problems(collect=False)
