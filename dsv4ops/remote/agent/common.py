"""What every agent command shares: its error type, the work-dir layout, JSON files on disk."""

from __future__ import annotations

import json
import os
import re
import time

from dsv4ops.jsontypes import JSONObject

# A JSON object as `json.loads` decodes it: one call's request, its reply, a record on disk.
# Its values are whatever the JSON held, so each command checks the ones it uses where it uses
# them (check_name, int(...), isinstance); the operator side decodes replies into the typed
# results of dsv4ops/remote/results.py.
JsonObject = JSONObject  # the package's alias (dsv4ops/jsontypes.py, in the agent's zip too)

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class AgentError(Exception):
    """A refusal or failure the operator gets as {"ok": false, "kind": ..., "error": ...}."""

    def __init__(self, kind: str, message: str, **extra: object) -> None:
        super().__init__(message)
        self.kind = kind
        self.extra = extra


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def check_name(value: object) -> str:
    """A component or state name usable as one file name."""
    if not isinstance(value, str) or not NAME_RE.match(value):
        raise AgentError("bad_request", f"invalid name {value!r}")
    return value


def check_seconds(req: JsonObject, key: str) -> float:
    """A request's `key`: a positive, finite number of seconds, which the operator side always
    sends. The agent has no default of its own: the one home of each timing is
    dsv4ops/timings.py on the operator's side, so a caller that forgets it is refused, not
    silently given a second default."""
    value = req.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1e9:
        op = req.get("op") or "this request"
        raise AgentError(
            "bad_request", f"{op} needs {key}: a positive number of seconds, got {value!r}"
        )
    return float(value)


def write_json_atomic(path: str, data: object) -> None:
    """Temp file, fsync, rename, fsync the directory: readers see the old or the new file."""
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dfd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def read_json_value(path: str) -> object:
    """The JSON value in `path` (None when the file is absent); unreadable JSON is corrupt."""
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise AgentError("corrupt", f"cannot read {path}: {exc}") from exc


def read_json(path: str) -> JsonObject | None:
    """The JSON object in `path` (a record the agent wrote), None when the file is absent."""
    data = read_json_value(path)
    if data is not None and not isinstance(data, dict):
        raise AgentError("corrupt", f"cannot read {path}: not a JSON object")
    return data


class Workdir:
    """Paths under the target's work directory (parents created on first use)."""

    def __init__(self, root: str) -> None:
        if not root or not os.path.isabs(root):
            raise AgentError("bad_request", f"workdir must be an absolute path, got {root!r}")
        self.root = root

    def sub(self, *parts: str) -> str:
        path = os.path.join(self.root, *parts)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return path

    def log(self, name: str) -> str:
        return self.sub("logs", f"{name}.log")

    def run(self, name: str) -> str:
        return self.sub("run", f"{name}.json")

    def exit(self, name: str) -> str:
        return self.sub("run", f"{name}.exit.json")

    def state(self, name: str) -> str:
        return self.sub("state", f"{name}.json")

    def lock(self) -> str:
        return self.sub("deploy.lock")

    def journal(self) -> str:
        return self.sub("journal.jsonl")
