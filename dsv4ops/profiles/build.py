"""Normalized profile values (plain data, already type-checked) → the frozen Profile."""

from __future__ import annotations

from typing import Any

from dsv4ops.profiles.buckets import BucketSpecError, resolve_buckets
from dsv4ops.profiles.model import (
    CanaryThresholds,
    Flags,
    HealthCheck,
    ModelSpec,
    Profile,
    RouterSpec,
    ServerSpec,
)
from dsv4ops.profiles.problems import Problems, strict
from dsv4ops.profiles.provenance import Provenance


def _env(mapping: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(mapping.items()))


def _server(role: str, v: dict[str, Any]) -> ServerSpec:
    return ServerSpec(
        role=role,
        gpus=tuple(v["gpus"]),
        tp=v["tp"],
        port=v["port"],
        transfer_backend=v["transfer_backend"],
        page_size=v["page_size"],
        kv_cache_dtype=v["kv_cache_dtype"],
        mem_fraction_static=v["mem_fraction_static"],
        max_running_requests=v["max_running_requests"],
        extra_args=tuple(v["extra_args"]),
        env=_env(v["env"]),
    )


def build_profile(
    values: dict[str, Any],
    *,
    name: str,
    path: str,
    chain: tuple[str, ...],
    prov: Provenance,
    git_rev: str | None,
    sink: Problems | None = None,
) -> Profile:
    """Build the Profile; a malformed bucket spec is reported to `sink` (default: raised)."""
    sink = sink if sink is not None else strict()
    m, r, f, c = values["model"], values["router"], values["flags"], values["canary"]
    decode = _server("decode", values["decode"])
    spec = f["decode_buckets"]
    key = "flags.decode_buckets"
    buckets: list[int] = []
    if sink.usable(key):
        try:
            buckets = resolve_buckets(
                spec, tp_size=decode.tp, max_running_requests=decode.max_running_requests
            )
        except BucketSpecError as exc:
            sink.report(prov.error(key, str(exc)))
            sink.mark_unusable(key)
        else:
            if isinstance(spec, str) and not sink.usable(
                "decode.tp", "decode.max_running_requests"
            ):
                # A spec resolves against decode's tp and max running requests: a bad one of
                # those makes the list meaningless, so the bucket rules skip it.
                buckets = []
                sink.mark_unusable(key)
    hc = r["health_check"]
    return Profile(
        name=name,
        path=path,
        chain=chain,
        schema_version=values["schema_version"],
        description=values["description"] or "",
        model=ModelSpec(
            path=m["path"],
            served_name=m["served_name"],
            tool_call_parser=m["tool_call_parser"],
            reasoning_parser=m["reasoning_parser"],
            trust_remote_code=m["trust_remote_code"],
        ),
        prefill=_server("prefill", values["prefill"]),
        decode=decode,
        bootstrap_port=values["prefill"]["bootstrap_port"],
        router=RouterSpec(
            port=r["port"],
            prometheus_port=r["prometheus_port"],
            policy=r["policy"],
            health_check=HealthCheck(
                endpoint=hc["endpoint"],
                interval_secs=hc["interval_secs"],
                timeout_secs=hc["timeout_secs"],
                failure_threshold=hc["failure_threshold"],
                success_threshold=hc["success_threshold"],
            ),
            extra_args=tuple(r["extra_args"]),
            env=_env(r["env"]),
        ),
        flags=Flags(
            overlap_schedule=f["overlap_schedule"],
            multi_stream_overlap=f["multi_stream_overlap"],
            decode_buckets_spec=spec if isinstance(spec, str) else tuple(spec),
            decode_buckets=tuple(buckets),
        ),
        kernel_package=values["kernel_package"],
        canary=CanaryThresholds(
            smoke_requests=c["smoke_requests"],
            corruption_max_rate=c["corruption_max_rate"],
            consistency_min_agreement=c["consistency_min_agreement"],
            first_token_deadline_s=c["first_token_deadline_s"],
            hang_deadline_s=c["hang_deadline_s"],
            abort_cascade_recovery_s=c["abort_cascade_recovery_s"],
            stress_concurrency=c["stress_concurrency"],
            stress_duration_s=c["stress_duration_s"],
            sweep_concurrency=tuple(c["sweep_concurrency"]),
            sweep_throughput_tolerance_pct=c["sweep_throughput_tolerance_pct"],
            sawtooth_max_drop_pct=c["sawtooth_max_drop_pct"],
            stall_s=c["stall_s"],
            freeze_s=c["freeze_s"],
            thinking=c["thinking"],
            thinking_budget_tokens=c["thinking_budget_tokens"],
        ),
        git_rev=git_rev,
    )
