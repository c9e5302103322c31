"""The one reader of a section of a recorded profile: a journal's `begin` record holds the
resolved profile (`profile.content`, `Profile.to_dict()`), and `Deployment` reads each section it
needs back through its declaration (dsv4ops/settings.py) here, once.

A setting the record lacks is at its default (what the release that wrote it ran); a redacted
'***' of a release before 15ec807 is not known and reads the same way; any other value that does
not fit raises RecordedSettingError naming the operation, the key, the value and the way back
(docs/deploy.md, "Recorded settings"). It is never replaced by a default without a word.

Also a component's recorded stop grace (`recorded_grace`). Imports only `errors`, `secrets`,
`routerkind`, `settings` and `timings`. Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from dsv4ops.errors import RecordedSettingError
from dsv4ops.routerkind import RouterKind
from dsv4ops.secrets import REDACTED
from dsv4ops.settings import UnfitValue, from_record, setting
from dsv4ops.timings import STOP_GRACE_MAX_S, STOP_GRACE_S

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    Section = TypeVar("Section", bound=DataclassInstance)
else:
    Section = TypeVar("Section")


@dataclass(frozen=True)
class RecordedModel:
    """What a deployment reads of its recorded `model` section (the parsers are in its argv):
    the name requests carry, by `deployment.served_model_name`'s rule."""

    path: str | None = setting(None, doc="the model's path (`model.path`)")
    served_name: str | None = setting(None, doc="`--served-model-name` (`model.served_name`)")


@dataclass(frozen=True)
class RecordedRouter:
    """What a deployment reads of its recorded `router` section (its flags are in its argv)."""

    # records written before the choice existed ran sglang-router, the only router then
    kind: str = setting(
        RouterKind.SGLANG_ROUTER.value,
        choices=tuple(k.value for k in RouterKind),
        doc="which router fronts the pair (`router.kind`)",
    )


def read_section(
    content: object, name: str, cls: type[Section], *, op: str | None, profile: str
) -> Section:
    """Section `name` of the recorded profile `content` (None: nothing recorded), read through
    `cls`. `op`: the journal operation it was recorded by; `profile`: the profile to name in the
    way back (its path, else its name)."""
    try:
        if content is None:
            return from_record(cls, None)
        if not isinstance(content, Mapping):
            raise UnfitValue("", content, "a mapping of sections")
        return from_record(cls, content.get(name), redacted=REDACTED)
    except UnfitValue as exc:
        key = f"{name}.{exc.name}" if exc.name else name
        raise RecordedSettingError(
            op, key, exc.value, exc.expected, hint=_way_back(name, op, profile)
        ) from None


def _way_back(section: str, op: str | None, profile: str) -> str:
    judge = (
        f"judge by the profile instead: `dsv4ops canary --profile {profile} ...`; or "
        if section == "canary"
        else ""
    )
    return (
        f"mend `profile.content.{section}` of the begin record of {op} where it was edited "
        f'(docs/deploy.md, "Recorded settings"); or {judge}redeploy the profile, which records '
        f"it afresh: `dsv4ops deploy {profile} --target TARGET`"
    )


def recorded_grace(value: object) -> float:
    """A component's recorded stop grace. A record from before the setting has none and was
    deployed with the default, which is what stopping it then gave it; a value no version
    writes (not a positive number) is judged the same way, so a stop still begins."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(min(value, STOP_GRACE_MAX_S))
    return STOP_GRACE_S
