"""`transport: endpoint` targets: a cluster reached only over HTTP (its router and, optionally,
the prefill/decode servers' metrics). Checked here with file:line like every other target."""

from __future__ import annotations

import sys
from urllib.parse import urlsplit

from dsv4ops._yaml import LineInfo
from dsv4ops.errors import ProfileError
from dsv4ops.jsontypes import JSONObject
from dsv4ops.profiles.excerpt import excerpt
from dsv4ops.profiles.model import EndpointSpec, Target
from dsv4ops.profiles.provenance import Provenance
from dsv4ops.profiles.targets_schema import ENDPOINT_TARGET_SCHEMA
from dsv4ops.profiles.typecheck import check_unknown_keys, normalize

# Settings of a target whose processes dsv4ops starts: meaningless for a cluster, whose
# controller runs the pods. Refused by name rather than as unknown keys, so the message says why.
PROCESS_KEYS = (
    "ssh",
    "gpus",
    "workdir",
    "python",
    "launcher",
    "bind_host",
    "connect_host",
    "port_offset",
    "twin_env",
)


def is_endpoint(raw: JSONObject) -> bool:
    return raw.get("transport") == "endpoint"


def build_endpoint_target(
    name: str, raw: JSONObject, file: str, lines: LineInfo, prov: Provenance, prefix: str
) -> Target:
    """The Target for one `transport: endpoint` entry. Raises ProfileError naming file:line."""
    for key in PROCESS_KEYS:
        if key in raw:
            raise ProfileError(
                f"an endpoint target is reached over HTTP only and runs no process of ours: "
                f"'{key}' does not apply (the cluster's controller runs the pods)",
                path=file,
                line=lines.get(f"{prefix}.{key}"),
                key=f"{prefix}.{key}",
                hint="remove it; keep router_url (and metrics) - see docs/kubernetes.md",
            )
    check_unknown_keys(raw, ENDPOINT_TARGET_SCHEMA, file, lines, prefix)
    v = normalize(raw, ENDPOINT_TARGET_SCHEMA, prov, prefix)
    router = check_url(v["router_url"], prov, f"{prefix}.router_url")
    workers = {
        role: tuple(
            check_url(u, prov, f"{prefix}.metrics.{role}[{i}]")
            for i, u in enumerate(v["metrics"][role])
        )
        for role in ("prefill", "decode")
    }
    prom = v["metrics"]["router"]
    router_metrics = check_url(prom, prov, f"{prefix}.metrics.router") if prom else None
    host = urlsplit(router).hostname or ""
    return Target(
        name=name,
        description=v["description"] or "",
        transport="endpoint",
        ssh=None,
        gpus=(),
        workdir="",
        python=sys.executable,
        launcher="none",
        bind_host="",
        connect_host=host,
        port_offset=0,
        twin_env=(),
        endpoint=EndpointSpec(
            router_url=router,
            prefill=workers["prefill"],
            decode=workers["decode"],
            router_metrics=router_metrics,
            profile=v["profile"],
            namespace=v["namespace"],
            replicas=v["replicas"],
        ),
    )


def check_url(url: str, prov: Provenance, path: str) -> str:
    """A server's base URL, `http(s)://host[:port]` (no path: the callers append /metrics,
    /readiness ...); returned without a trailing '/'. Raises ProfileError."""
    try:
        parts = urlsplit(url)
        port = parts.port  # ValueError for a port that is not a number in 0-65535
    except ValueError as exc:
        raise prov.error(path, f"not a URL ({exc}): {excerpt(url)}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise prov.error(
            path, f"expected http://host[:port] or https://host[:port], got " f"{excerpt(url)}"
        )
    if parts.username is not None or parts.password is not None:
        # It would be printed, journaled and sent in every report: no credentials in a URL.
        raise prov.error(
            path,
            "a URL with credentials (user:password@) is refused: it would "
            "be printed and written to reports",
        )
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise prov.error(
            path,
            f"expected the server's base URL without a path, got " f"{excerpt(url)}",
            hint="/metrics, /readiness ... are appended",
        )
    if port == 0:
        raise prov.error(path, f"port 0 is not a port to connect to: {excerpt(url)}")
    return f"{parts.scheme}://{parts.netloc}"
