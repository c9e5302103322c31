"""targets.yaml's problems as the user reads them: each pydantic error of profiles/target_spec.py
named `file:line: key.path: why`, all of them in one ProfileError (the first by line leads)."""

from __future__ import annotations

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from dsv4ops._yaml import LineInfo
from dsv4ops.errors import ProfileError
from dsv4ops.profiles.excerpt import excerpt, key_excerpt, printable_key
from dsv4ops.profiles.problems import unknown_key
from dsv4ops.profiles.schema import section_of
from dsv4ops.profiles.target_spec import PROCESS_KEYS, BoxTarget, EndpointTarget, TargetsFile
from dsv4ops.profiles.typecheck import missing, value_problem

TRANSPORTS = ("local", "ssh", "endpoint")
_ENDPOINT_PROCESS_KEY = (
    "an endpoint target is reached over HTTP only and runs no process of ours: '{key}' does not "
    "apply (the cluster's controller runs the pods)"
)
_ENDPOINT_HINT = "remove it; keep router_url (and metrics) - see docs/kubernetes.md"


def problems(
    exc: ValidationError, data: dict[str, object], file: str, lines: LineInfo
) -> ProfileError:
    """One ProfileError for every problem pydantic found, the first (by line) at its head."""
    found: dict[str, ProfileError] = {}  # a list's wrong items name the list once
    for err in exc.errors(include_url=False):
        loc, model = _located(err)
        field = _field_at(loc, model) if err["type"] != "dsv4ops" else None
        if field is None:
            problem = _problem(err, loc, model, file, lines)
        else:  # a key's value, named as the profile's are: the error located under the key
            depth, info = field
            inner = ErrorDetails(**{**err, "loc": tuple(loc[depth:])})
            problem = _value_problem(loc[:depth], info, inner, data, file, lines)
        found.setdefault(str(problem), problem)
    ordered = sorted(found.values(), key=lambda e: (e.line or 0, e.key or ""))
    head = ordered[0]
    if len(ordered) == 1:
        return head
    rest = "".join(f"\n{e}" for e in ordered[1:])
    return ProfileError(
        f"{head.bare_message}{rest}", path=head.path, line=head.line, key=head.key, hint=head.hint
    )


def _located(err: ErrorDetails) -> tuple[list[int | str], type[BaseModel]]:
    """The keys of the file an error is at, and the model of the target they are in (the
    discriminated union's tag, no key of the file, taken out), else TargetsFile."""
    loc = list(err["loc"])
    if len(loc) > 2 and loc[0] == "targets" and loc[2] in TRANSPORTS:
        return [*loc[:2], *loc[3:]], EndpointTarget if loc[2] == "endpoint" else BoxTarget
    return loc, TargetsFile


def _field_at(loc: list[int | str], model: type[BaseModel]) -> tuple[int, FieldInfo] | None:
    """How many keys of `loc` lead to the value of a target's key the error is in, and the key's
    field; None for an error of a target or section itself, or of a mapping's key."""
    if model is TargetsFile or loc[-1] == "[key]":
        return None
    for depth, name in enumerate(loc[2:], start=3):
        info = model.model_fields.get(str(name))
        section = section_of(info) if info is not None else None
        if info is None or section is None:
            return (depth, info) if info is not None else None
        model = section
    return None


def _value_problem(
    key: list[int | str],
    info: FieldInfo,
    err: ErrorDetails,
    data: object,
    file: str,
    lines: LineInfo,
) -> ProfileError:
    if err["type"] == "missing":
        why, at = missing(info), ""
    else:
        for part in key:  # the value as read (a target's name YAML read as a number too)
            items = (
                data.items()
                if isinstance(data, dict)
                else enumerate(data if isinstance(data, list) else [])
            )
            data = next((v for k, v in items if k == part or str(k) == part), None)
        why, at = value_problem([err], data, info, str(key[-1]))
    line = lines.get(_path(key) + at) or 1
    return ProfileError(
        why, path=file, line=line, key=key_excerpt(_path(key, shown=True) + at, 120)
    )


def _problem(
    err: ErrorDetails, loc: list[int | str], model: type[BaseModel], file: str, lines: LineInfo
) -> ProfileError:
    # A mapping's key (a target's name, a twin_env name) refused: named by its mapping, as the
    # profile's errors name it, the key itself shown escaped in the message.
    refused_key = str(loc[-2]) if len(loc) >= 2 and loc[-1] == "[key]" else None
    if refused_key is not None:
        del loc[-2:]
    why, hint, at = _why(err, loc, model)
    if refused_key is not None:
        why = f"key {excerpt(refused_key, limit=60)}: {why}"
    # A key the file lacks at its top level: the whole file lacks it (line 1); a refused key
    # of a mapping is at its own line.
    line = lines.get(_path([*loc, *at, *([refused_key] if refused_key else [])])) or 1
    key = key_excerpt(_path([*loc, *at], shown=True), 120)
    return ProfileError(why, path=file, line=line, key=key, hint=hint)


def _why(
    err: ErrorDetails, loc: list[int | str], model: type[BaseModel]
) -> tuple[str, str | None, list[int | str]]:
    """What is wrong, the hint, and the keys under `loc` the problem is at (named by our
    checks: no user-written text)."""
    ctx = err.get("ctx") or {}
    kind = err["type"]
    if kind == "dsv4ops":
        hint = str(ctx["hint"]) if "hint" in ctx else None
        return str(ctx["why"]), hint, [str(ctx["at"])] if "at" in ctx else []
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        got = f", got {excerpt(ctx['tag'])}" if "tag" in ctx else ""
        missing = "missing required key; " if not got else ""
        return f"{missing}expected one of {', '.join(TRANSPORTS)}{got}", None, ["transport"]
    if kind == "extra_forbidden":
        return (*_unknown(loc, model), [])
    if kind == "missing":
        return "missing required key", None, []
    if kind in ("model_type", "model_attributes_type"):
        return f"expected a mapping (a section of keys), got {excerpt(err['input'])}", None, []
    if loc == ["targets"] and kind in ("dict_type", "too_short"):
        got = excerpt(err["input"])
        return f"expected a mapping of target names to targets, at least one, got {got}", None, []
    return f"{err['msg']}, got {excerpt(err['input'])}", None, []


def _unknown(loc: list[int | str], model: type[BaseModel]) -> tuple[str, str | None]:
    """Why a key is refused: a process key of an endpoint target by name, else unknown (with a
    did-you-mean hint from the keys valid there)."""
    name = str(loc[-1])
    if model is EndpointTarget and len(loc) == 3 and name in PROCESS_KEYS:
        return _ENDPOINT_PROCESS_KEY.format(key=name), _ENDPOINT_HINT
    return unknown_key(
        name, _model_at(model, loc[2:-1] if loc[0] == "targets" else []).model_fields
    )


def _model_at(model: type[BaseModel], sections: list[int | str]) -> type[BaseModel]:
    for section in sections:
        inner = model.model_fields[str(section)].annotation
        if not (isinstance(inner, type) and issubclass(inner, BaseModel)):
            break
        model = inner
    return model


def _path(loc: list[int | str], *, shown: bool = False) -> str:
    """The key path of `loc` (`shown`: as a message shows it, each key bounded and escaped)."""
    out = ""
    for part in loc:
        name = printable_key(part) if shown and isinstance(part, str) else str(part)
        out += f"[{part}]" if isinstance(part, int) else (f".{name}" if out else name)
    return out
