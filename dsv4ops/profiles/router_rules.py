"""The router rule (one of rules.RULES): extra_args and policies checked against the router
`router.kind` runs, naming what the other router takes that this one lacks."""

from __future__ import annotations

from dsv4ops.profiles.flags import check_router_args
from dsv4ops.profiles.model import Profile
from dsv4ops.profiles.problems import Problems
from dsv4ops.profiles.provenance import Provenance
from dsv4ops.profiles.routers import POLICY_FLAGS, policies


def rule_router(p: Profile, prov: Provenance, sink: Problems) -> None:
    if not sink.usable("router.kind"):
        return  # an unknown kind: the schema error says so; nothing to check against
    kind = p.router.router_kind
    if sink.usable("router.extra_args"):
        for problem in check_router_args(p.router.extra_args, kind):
            sink.error(prov, f"router.extra_args[{problem.index}]", problem.message)
    r = p.router
    chosen = {
        "policy": r.policy,
        "prefill_policy": r.prefill_policy,
        "decode_policy": r.decode_policy,
    }
    for key, value in chosen.items():
        if value is None or not sink.usable(f"router.{key}") or value in policies(kind, key):
            continue
        sink.error(
            prov,
            f"router.{key}",
            f"{value!r} is a policy of {kind.other.label} that {kind.label} lacks "
            f"({POLICY_FLAGS[key]} takes {', '.join(policies(kind, key))})",
            hint=f"pick one of those, or router.kind: {kind.other} to run {kind.other.label}",
        )
    _forced_call_while_thinking(p, prov, sink)


def _forced_call_while_thinking(p: Profile, prov: Provenance, sink: Problems) -> None:
    """A probe that forces its tool call while the profile reasons: a router that says
    thinking off out loud (SMG) applies DeepSeek's rule, no forced call with thinking on."""
    kind = p.router.router_kind
    keys = ("probe.tool_call", "canary.thinking")
    if not (kind.thinking_off_explicit and sink.usable(*keys)):
        return
    if not (p.canary.thinking and p.probe.tool_call == "required"):
        return
    message = (
        f"{kind.label} refuses a forced tool call (tool_choice: required) with thinking on "
        "for a model it serves as DeepSeek V4 (400 tool_choice_not_supported), so the "
        "deploy's probe would fail; set probe.tool_call: auto, or canary.thinking: false"
    )
    sink.warn(prov, "smg-forced-tool-call-thinking", "probe.tool_call", message)
