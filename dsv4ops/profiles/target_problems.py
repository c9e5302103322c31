"""targets.yaml's problems as the user reads them: each pydantic error of profiles/target_spec.py
named `file:line: key.path: why`, all of them in one ProfileError (the first by line leads)."""

from __future__ import annotations

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from dsv4ops._yaml import LineInfo
from dsv4ops.errors import ProfileError
from dsv4ops.profiles.excerpt import excerpt, key_excerpt, printable_key
from dsv4ops.profiles.problems import unknown_key
from dsv4ops.profiles.target_spec import PROCESS_KEYS, BoxTarget, EndpointTarget, TargetsFile

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
    found = sorted(
        (_problem(err, file, lines) for err in exc.errors(include_url=False)),
        key=lambda e: (e.line or 0, e.key or ""),
    )
    head = found[0]
    if len(found) == 1:
        return head
    rest = "".join(f"\n{e}" for e in found[1:])
    return ProfileError(
        f"{head.bare_message}{rest}", path=head.path, line=head.line, key=head.key, hint=head.hint
    )


def _problem(err: ErrorDetails, file: str, lines: LineInfo) -> ProfileError:
    loc = list(err["loc"])
    # A mapping's key (a target's name, a twin_env name) refused: named by its mapping, as the
    # profile's errors name it, the key itself shown escaped in the message.
    refused_key = str(loc[-2]) if len(loc) >= 2 and loc[-1] == "[key]" else None
    if refused_key is not None:
        del loc[-2:]
    model: type[BaseModel] = TargetsFile
    if len(loc) >= 2 and loc[0] == "targets" and isinstance(loc[1], str):
        model = EndpointTarget if len(loc) > 2 and loc[2] == "endpoint" else BoxTarget
        if len(loc) > 2 and loc[2] in TRANSPORTS:
            del loc[2]  # the discriminated union's tag: no key of the file
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
    if kind == "literal_error":
        choices = str(ctx["expected"]).replace("'", "").replace(" or ", ", ")
        return f"expected one of {choices}, got {excerpt(err['input'])}", None, []
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
