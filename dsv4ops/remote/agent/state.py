"""Small JSON state files (`<workdir>/state/<name>.json`) the operator side reads and writes."""

from __future__ import annotations

from .common import JsonObject, Workdir, check_name, read_json_value, write_json_atomic


def op_read_state(wd: Workdir, req: JsonObject) -> JsonObject:
    return {"data": read_json_value(wd.state(check_name(req.get("name"))))}


def op_write_state(wd: Workdir, req: JsonObject) -> JsonObject:
    write_json_atomic(wd.state(check_name(req.get("name"))), req.get("data"))
    return {"written": True}
