"""No two shipped targets on this machine bind the same port (issue 38: the sglang-cpu target's
router metrics, 29000 + 2000, was twin-local's prefill port, 30000 + 1000, so one could not run
beside the other). Every profile that renders for a target counts: a port any of them binds."""

from __future__ import annotations

import itertools

from dsv4ops.errors import DsOpsError
from dsv4ops.profiles import load_profile, render
from dsv4ops.profiles.load import list_profiles
from dsv4ops.profiles.model import Target
from dsv4ops.profiles.targets import load_targets


def _ports(target: Target) -> dict[int, str]:
    """Every port some shipped profile binds on `target`, with who binds it."""
    out: dict[int, str] = {}
    for path in list_profiles():
        try:
            deployment = render(load_profile(path.stem), target)
        except DsOpsError:
            continue  # a profile not meant for this target (its launcher or GPUs)
        for c in deployment.components:
            for port in (*c.ports, c.metrics_port):
                out.setdefault(port, f"{path.stem} {c.name}")
    return out


def test_no_two_local_targets_share_a_port() -> None:
    local = {n: t for n, t in load_targets().items() if t.transport == "local"}
    assert {"twin-local", "twin-fast", "sglang-cpu"} <= set(local)
    ports = {name: _ports(t) for name, t in local.items()}
    assert all(ports.values()), "a local target with no renderable profile"
    for a, b in itertools.combinations(sorted(local), 2):
        shared = set(ports[a]) & set(ports[b])
        assert not shared, {p: (f"{a}: {ports[a][p]}", f"{b}: {ports[b][p]}") for p in shared}
