"""The validated profile spec (profiles/profile_spec.py) → the frozen Profile."""

from __future__ import annotations

from dsv4ops.apikey import ENV_NAME, ApiKeyRef
from dsv4ops.profiles.buckets import BucketSpecError, resolve_buckets
from dsv4ops.profiles.model import Profile
from dsv4ops.profiles.problems import Problems, strict
from dsv4ops.profiles.profile_spec import (
    ApiKeySection,
    DecodeSection,
    ProfileSpec,
)
from dsv4ops.profiles.provenance import Provenance


def _decode_buckets(
    spec: str | list[int], decode: DecodeSection, prov: Provenance, sink: Problems
) -> list[int]:
    """flags.decode_buckets resolved against decode's tp and max running requests; [] when the
    spec (or what it resolves against) is unusable, which is reported to `sink`."""
    key = "flags.decode_buckets"
    if not sink.usable(key):
        return []
    try:
        buckets = resolve_buckets(
            spec, tp_size=decode.tp, max_running_requests=decode.max_running_requests
        )
    except BucketSpecError as exc:
        sink.report(prov.error(key, str(exc)))
        sink.mark_unusable(key)
        return []
    if isinstance(spec, str) and not sink.usable("decode.tp", "decode.max_running_requests"):
        # A spec resolves against decode's tp and max running requests: a bad one of
        # those makes the list meaningless, so the bucket rules skip it.
        sink.mark_unusable(key)
        return []
    return buckets


def _api_key(section: ApiKeySection, prov: Provenance, sink: Problems) -> ApiKeyRef | None:
    """router.api_key: where the key lives (an env var name or a file path), never the key;
    a value that cannot be a reference is reported to `sink` (without quoting it: it may be
    the key itself, pasted in the wrong place)."""
    env, file = section.env, section.file
    if env and file:
        sink.report(
            prov.error(
                "router.api_key",
                "names both env and file; the router has one key",
                hint="keep one of router.api_key.env and router.api_key.file",
            )
        )
        return None
    if env and not ENV_NAME.fullmatch(env):
        sink.report(
            prov.error(
                "router.api_key.env",
                "is not an environment variable name (letters, digits, _): it names where the "
                "key is, never the key itself",
                hint="export the key as e.g. DSV4_ROUTER_API_KEY and write env: DSV4_ROUTER_API_KEY",
            )
        )
        return None
    return ApiKeyRef.from_record(section.model_dump())


def build_profile(
    spec: ProfileSpec,
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
    buckets = _decode_buckets(spec.flags.decode_buckets, spec.decode, prov, sink)
    return Profile(
        name=name,
        path=path,
        chain=chain,
        schema_version=spec.schema_version,
        description=spec.description or "",
        model=spec.model,
        prefill=spec.prefill,
        decode=spec.decode,
        bootstrap_port=spec.prefill.bootstrap_port,
        router=spec.router,
        router_key=(
            _api_key(spec.router.api_key, prov, sink) if sink.usable("router.api_key") else None
        ),
        flags=spec.flags,
        decode_buckets=tuple(buckets),
        kernel_package=spec.kernel_package,
        canary=spec.canary,
        probe=spec.probe,
        git_rev=git_rev,
    )
