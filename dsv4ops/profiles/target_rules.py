"""The profile rules that need a target: its GPUs present, and every port in range after the
target's port offset (and out of Linux's ephemeral range). The target-independent rules are in
rules.py.
"""

from __future__ import annotations

from dsv4ops.errors import ProfileError
from dsv4ops.profiles.model import Profile, Target
from dsv4ops.profiles.problems import Problems, strict
from dsv4ops.profiles.provenance import Provenance
from dsv4ops.profiles.rules import EPHEMERAL_PORTS, in_ephemeral_range, profile_ports


def check_against_target(p: Profile, target: Target, sink: Problems | None = None) -> None:
    """GPUs present on the target and ports in range after its offset. Raises ProfileError
    (without a sink) or reports each problem, skipping keys that already have one."""
    sink = sink if sink is not None else strict()
    if target.endpoint is not None:
        # A cluster places pods itself: the box's GPU ids and ports do not apply there.
        sink.report(
            ProfileError(
                f"target {target.name!r} is an endpoint (transport: endpoint): its GPUs and ports "
                "are the cluster's, so a profile is not checked against it",
                path=p.path,
                line=1,  # the whole profile against this target, not one of its lines
                hint=f"--target box checks the box; dsv4ops export rbg {p.name} checks the export",
            )
        )
        return
    prov = Provenance(p.path, p.origins)
    available = set(target.gpus)
    for side in (p.prefill, p.decode):
        key = f"{side.role}.gpus"
        if not sink.usable(key) or sink.has_problem(key):
            continue
        missing = sorted(set(side.gpus) - available)
        if missing:
            sink.error(
                prov,
                key,
                f"GPU(s) {missing} are not on target '{target.name}' (it has {sorted(available)})",
            )
    for key, port in profile_ports(p):
        if not sink.usable(key) or sink.has_problem(key):
            continue
        shifted = port + target.port_offset
        if shifted > 65535:
            sink.error(
                prov,
                key,
                f"port {port} + target '{target.name}' port_offset {target.port_offset} = "
                f"{shifted} > 65535",
            )
            continue
        if target.port_offset and in_ephemeral_range(shifted) and not in_ephemeral_range(port):
            # An error, not a warning: the failure is intermittent (the bind fails only when some
            # outgoing connection happened to take that source port, e.g. one in TIME_WAIT), so
            # a warning would be ignored on the runs that pass and flake the others. The offset
            # is ours to choose, so there is always a fix; SGLang's own defaults are below it.
            low, high = EPHEMERAL_PORTS
            sink.error(
                prov,
                key,
                f"port {port} + target '{target.name}' port_offset {target.port_offset} = "
                f"{shifted} is in Linux's ephemeral port range ({low}-{high}), where a client "
                "socket can hold it and make the server's bind fail; choose a port_offset "
                f"that keeps every port below {low}",
            )
