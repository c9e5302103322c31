"""Preflight: is the work directory writable, who holds each port, which GPUs are busy."""

from __future__ import annotations

import contextlib
import os
import socket

from .common import JsonObject, Workdir, read_json
from .procfs import group_is_ours, listeners, pids_by_inode, port_open, proc_stat


def _gpus(indices: list[int]) -> JsonObject:
    import subprocess

    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,uuid,memory.used", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        apps = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=gpu_uuid,pid", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except FileNotFoundError:
        return {"available": False, "note": "no nvidia-smi", "busy": {}}
    except subprocess.TimeoutExpired:
        return {"available": False, "note": "nvidia-smi timed out", "busy": {}}
    if out.returncode != 0:
        return {
            "available": False,
            "note": f"nvidia-smi failed: {out.stderr.strip()[:200]}",
            "busy": {},
        }
    by_uuid: dict[str, list[int]] = {}
    for line in apps.stdout.splitlines():
        if "," in line:
            uuid, pid = (x.strip() for x in line.split(",", 1))
            with contextlib.suppress(ValueError):
                by_uuid.setdefault(uuid, []).append(int(pid))
    gpus = {}
    for line in out.stdout.splitlines():
        parts = [x.strip() for x in line.split(",")]
        if len(parts) == 3:
            gpus[int(parts[0])] = {"pids": by_uuid.get(parts[1], []), "memory_used_mib": parts[2]}
    want = indices if indices else sorted(gpus)
    missing = [i for i in want if i not in gpus]
    return {
        "available": True,
        "note": None,
        "missing": missing,
        "busy": {str(i): gpus[i]["pids"] for i in want if i in gpus and gpus[i]["pids"]},
    }


def _our_pgids(wd: Workdir) -> dict[int, str]:
    run_dir = os.path.join(wd.root, "run")
    out = {}
    if os.path.isdir(run_dir):
        for fn in os.listdir(run_dir):
            if fn.endswith(".json") and not fn.endswith(".exit.json"):
                rec = read_json(os.path.join(run_dir, fn)) or {}
                if group_is_ours(rec):
                    out[int(rec["pgid"])] = rec.get("name", fn[:-5])
    return out


def op_preflight(wd: Workdir, req: JsonObject) -> JsonObject:
    writable, why = True, None
    try:
        probe = wd.sub(".dsv4ops", f"write-probe.{os.getpid()}")
        with open(probe, "w") as f:
            f.write("ok")
        os.remove(probe)
    except OSError as exc:
        writable, why = False, str(exc)
    ours = _our_pgids(wd)
    lst = listeners()
    ports = {}
    for p in req.get("ports") or []:
        p = int(p)
        in_use = p in lst or port_open(p)
        if in_use and p not in lst:
            # It was bound between the table read and the connect (a component still starting
            # up): read the table again, or its owner would look like a stranger's.
            lst = listeners()
        pids = pids_by_inode(lst.get(p, set())) if in_use else []
        owners = []
        for pid in pids:
            st = proc_stat(pid)
            owners.append({"pid": pid, "ours": ours.get(st[1]) if st else None})
        ports[str(p)] = {"in_use": in_use, "holders": owners}
    paths = {str(p): os.path.exists(p) for p in req.get("paths") or []}
    return {
        "workdir": wd.root,
        "writable": writable,
        "writable_error": why,
        "ports": ports,
        "gpus": _gpus(req.get("gpus") or []),
        "paths": paths,
        "host": socket.gethostname(),
    }
