"""Profile + target → the Deployment: exact argv and env of prefill, decode and router (sglang
0.5.23; sglang-router 0.3.2 or SMG, as router.kind says) and every port they bind. Pure: no I/O except reading targets.yaml
when no target is given."""

from __future__ import annotations

from dsv4ops.apikey import API_KEY_FLAG
from dsv4ops.deployment import Component, Deployment
from dsv4ops.errors import ProfileError
from dsv4ops.profiles.flags import context_length
from dsv4ops.profiles.model import Profile, ServerSpec, Target
from dsv4ops.profiles.profile_spec import SWITCHES
from dsv4ops.profiles.target_rules import check_against_target
from dsv4ops.recorded import RecordedProfile
from dsv4ops.secrets import REDACTED

SGLANG_MODULE = "sglang.launch_server"
TWIN_MODULE = "dsv4ops.twin.launch_server"


def _production_target() -> Target:
    from dsv4ops.profiles.targets import builtin_box, load_targets

    try:
        return load_targets().get("box") or builtin_box()
    except ProfileError:
        return builtin_box()


def _server_argv(p: Profile, side: ServerSpec, target: Target) -> list[str]:
    off = target.port_offset
    module = TWIN_MODULE if target.launcher == "twin" else SGLANG_MODULE
    argv = [target.python, "-m", module, "--model-path", p.model.path]
    if p.model.served_name:
        argv += ["--served-model-name", p.model.served_name]
    if p.model.trust_remote_code:
        argv.append("--trust-remote-code")
    if p.model.tool_call_parser:
        argv += ["--tool-call-parser", p.model.tool_call_parser]
    if p.model.reasoning_parser:
        argv += ["--reasoning-parser", p.model.reasoning_parser]
    # GPU selection by --base-gpu-id (the reference's argparse-verified form) rather than
    # CUDA_VISIBLE_DEVICES: every process keeps the box's real device ordinals, so NIXL/UCX
    # cuda_ipc between the prefill and decode GPUs and nvidia-smi output agree on GPU ids.
    # The price is contiguous GPU sets, which the rules enforce.
    argv += ["--tp-size", str(side.tp), "--base-gpu-id", str(side.gpus[0])]
    argv += ["--host", target.bind_host, "--port", str(side.port + off)]
    argv += [
        "--disaggregation-mode",
        side.role,
        "--disaggregation-transfer-backend",
        side.transfer_backend,
        # On decode this is the fallback prefill bootstrap port (scheduler.py:2970); keep it equal.
        "--disaggregation-bootstrap-port",
        str(p.bootstrap_port + off),
    ]
    argv += ["--page-size", str(side.page_size), "--kv-cache-dtype", side.kv_cache_dtype]
    if side.mem_fraction_static is not None:
        argv += ["--mem-fraction-static", f"{side.mem_fraction_static:g}"]
    if side.max_running_requests is not None:
        argv += ["--max-running-requests", str(side.max_running_requests)]
    if side.role == "decode":
        argv += ["--cuda-graph-bs-decode", *(str(b) for b in p.decode_buckets)]
    for name, switch in SWITCHES:  # each on/off flag, as its declaration says
        if side.role in switch.sides:
            argv += switch.argv(getattr(p.flags, name))
    argv.append("--enable-metrics")
    argv += list(side.extra_args)
    return argv


def _server_env(p: Profile, side: ServerSpec, target: Target) -> dict[str, str]:
    env: dict[str, str] = {}
    if target.launcher == "twin":
        env.update(target.twin_env_dict)
    env.update(side.env_dict)
    for name, switch in SWITCHES:  # an on/off flag that is an environment variable: 1 or 0
        if switch.env is not None and side.role in switch.sides:
            env[switch.env] = "1" if getattr(p.flags, name) else "0"
    return dict(sorted(env.items()))


def _server(p: Profile, side: ServerSpec, target: Target) -> Component:
    off = target.port_offset
    ports = (
        (side.port + off, p.bootstrap_port + off) if side.role == "prefill" else (side.port + off,)
    )
    return Component(
        name=side.role,
        argv=tuple(_server_argv(p, side, target)),
        env=_server_env(p, side, target),
        host=target.connect_host,
        port=side.port + off,
        ports=ports,
        metrics_port=side.port + off,
        bootstrap_port=p.bootstrap_port + off if side.role == "prefill" else None,
        bind_host=target.bind_host,
        stop_grace_s=side.stop_grace_s,
    )


def _router(p: Profile, target: Target) -> Component:
    off = target.port_offset
    r, hc, kind = p.router, p.router.health_check, p.router.router_kind
    # The router runs on the same machine as the servers; a wildcard bind is reached via loopback.
    local = "127.0.0.1" if target.bind_host in ("0.0.0.0", "::", "") else target.bind_host
    argv = [
        target.router_python(kind),
        "-m",
        # Both routers take this PD argv (checked against each one's own parser in the tests).
        kind.module,
        "--pd-disaggregation",
        # Always the explicit bootstrap port: omitted, the router sends bootstrap_port null and the
        # decode falls back to its own flag (reference §2.2).
        "--prefill",
        f"http://{local}:{p.prefill.port + off}",
        str(p.bootstrap_port + off),
        "--decode",
        f"http://{local}:{p.decode.port + off}",
        "--host",
        target.bind_host,
        "--port",
        str(r.port + off),
        "--prometheus-host",
        target.bind_host,
        "--prometheus-port",
        str(r.prometheus_port + off),
        "--policy",
        r.policy,
        *(("--prefill-policy", r.prefill_policy) if r.prefill_policy else ()),
        *(("--decode-policy", r.decode_policy) if r.decode_policy else ()),
        "--health-check-endpoint",
        hc.endpoint,
        "--health-check-interval-secs",
        str(hc.interval_secs),
        "--health-check-timeout-secs",
        str(hc.timeout_secs),
        "--health-failure-threshold",
        str(hc.failure_threshold),
        "--health-success-threshold",
        str(hc.success_threshold),
        # The key is read on the operator's machine only when the router starts
        # (orchestrate/model.process_spec): what renders, prints and is hashed holds '***'.
        *((API_KEY_FLAG, REDACTED) if p.router_key is not None else ()),
        *r.extra_args,
    ]
    return Component(
        name="router",
        argv=tuple(argv),
        env=r.env_dict,
        host=target.connect_host,
        port=r.port + off,
        ports=(r.port + off, r.prometheus_port + off),
        metrics_port=r.prometheus_port + off,
        bind_host=target.bind_host,
        api_key=p.router_key,
        stop_grace_s=r.stop_grace_s,
    )


def render(profile: Profile, target: Target | None = None) -> Deployment:
    """Exact commands for prefill, decode and router, in start order, as one Deployment.

    target None → the production box (targets.yaml's `box`, else a built-in default).
    Raises ProfileError if the profile does not fit the target (GPUs, ports). The git commit is
    not known here (the caller adds it with `dataclasses.replace`); `profile_path` is the
    profile's path as loaded.
    """
    tgt = target if target is not None else _production_target()
    if tgt.endpoint is not None:
        # A cluster runs the export (`dsv4ops export rbg`), not commands dsv4ops starts.
        raise ProfileError(
            f"target {tgt.name!r} is an endpoint (transport: endpoint): dsv4ops starts no "
            "process there, so nothing renders for it",
            hint=f"dsv4ops export rbg {profile.name} renders it for the cluster; "
            "--target box shows the box's commands",
        )
    check_against_target(profile, tgt)
    content = profile.to_dict()
    return Deployment(
        profile_name=profile.name,
        components=(
            _server(profile, profile.prefill, tgt),
            _server(profile, profile.decode, tgt),
            _router(profile, tgt),
        ),
        profile_path=profile.path,
        # The decode's context length rides with the flags: the DSV4 decode graph width follows
        # it (sglang#40442), so a change of it calls for the sweep like a bucket change does.
        recorded=RecordedProfile(
            content,
            {
                **content["flags"],
                "decode_context_length": context_length(profile.decode.extra_args),
            },
        ),
        kernel_package=profile.kernel_package,
        target=tgt.name,
        warnings=profile.warnings,
    )
