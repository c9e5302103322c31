"""The router's API key: named by reference, read on the operator's machine, sent as a bearer.

A profile never holds the key itself (a profile is committed to git and printed by `profile
show`): `router.api_key` names where it lives on the machine that runs dsv4ops, an environment
variable (`env: NAME`) or a file (`file: PATH`). Two things read it, both through this module:
starting the router (`orchestrate/model.process_spec` puts it after `--api-key`, where the
rendered argv holds only '***') and every client of the router (the deploy probe, the canary,
watch, ab: `auth_headers`). The key is never returned by anything that prints: errors say which
reference failed, never its value; dsv4ops/secrets.py hides `--api-key`'s value in every argv.

sglang-router 0.3.2 checks the key on its inference routes (`/v1/chat/completions`,
`/generate`, ...) and its admin routes (`/workers`), not on `/health`, `/readiness`,
`/liveness`, `/v1/models` or its Prometheus port (docs/deploy.md, "A router with an API key").
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from dsv4ops.errors import DsOpsError
from dsv4ops.localfiles import FileRefused, read_regular
from dsv4ops.secrets import REDACTED

API_KEY_FLAG = "--api-key"
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A key goes into an argv word and an HTTP header: visible ASCII only. At least 8 characters,
# so free-text redaction (which skips values under 4) always hides it and a typo'd one-word
# placeholder is not deployed as a key.
KEY_TEXT = re.compile(r"[\x21-\x7e]{8,4096}")
_MAX_KEY_FILE_BYTES = 64 * 1024  # a key of at most 4096 characters, with room for whitespace


class ApiKeyError(DsOpsError):
    """The key a profile names cannot be read here (nothing was started or stopped)."""


@dataclass(frozen=True)
class ApiKeyRef:
    """Where the router's key lives on this machine: exactly one of `env` and `file`."""

    env: str | None = None
    file: str | None = None

    def describe(self) -> str:
        """The reference as messages name it (never the key)."""
        return f"environment variable {self.env}" if self.env else f"file {self.file}"

    def to_record(self) -> dict[str, str | None]:
        return {"env": self.env} if self.env else {"file": self.file}

    @classmethod
    def from_record(cls, data: object) -> ApiKeyRef | None:
        """From `to_record()` (or a profile's `router.api_key` section); None when it names
        nothing (no key: a router open to anyone on its port)."""
        if not isinstance(data, Mapping):
            return None
        env, file = data.get("env"), data.get("file")
        if env:
            return cls(env=str(env))
        return cls(file=str(file)) if file else None


def read_key(ref: ApiKeyRef, environ: Mapping[str, str] | None = None) -> str:
    """The key itself. Raises ApiKeyError naming the reference (not the value) when it is unset,
    unreadable or not a usable key."""
    where = ref.describe()
    fix = "router.api_key in the profile names it"
    if ref.env:
        value = (os.environ if environ is None else environ).get(ref.env)
        if value is None:
            raise ApiKeyError(
                f"the router's API key: {where} is not set on this machine",
                hint=f"export {ref.env}=... (the key the router must require); {fix}",
            )
    else:
        path = Path(str(ref.file)).expanduser()
        try:
            # a FIFO or a device named by mistake would block or never end the read
            value = read_regular(path, _MAX_KEY_FILE_BYTES, "API key").decode("utf-8")
        except FileRefused as exc:
            raise ApiKeyError(
                f"the router's API key: {where}: {exc}",
                hint=f"write the key into {path} (mode 600); {fix}",
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ApiKeyError(
                f"the router's API key: cannot read {where}: {type(exc).__name__}",
                hint=f"write the key into {path} (mode 600); {fix}",
            ) from None
    key = value.strip()  # a file's trailing newline is not part of the key
    if not KEY_TEXT.fullmatch(key):
        raise ApiKeyError(
            f"the router's API key in {where} is not usable: it must be 8 to 4096 visible "
            "ASCII characters, without spaces",
            hint=f"put the key alone in {where}; {fix}",
        )
    return key


def auth_headers(ref: ApiKeyRef | None, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """What every client of the router adds to its requests: `Authorization: Bearer KEY` when
    the deployment's router requires a key, else nothing."""
    return {} if ref is None else {"Authorization": f"Bearer {read_key(ref, environ)}"}


def bearer_key(headers: Mapping[str, str]) -> str | None:
    """The key `auth_headers` put in `headers` (for clients that take the key itself)."""
    value = headers.get("Authorization", "")
    return value.removeprefix("Bearer ") if value.startswith("Bearer ") else None


def with_key(argv: tuple[str, ...], key: str) -> tuple[str, ...]:
    """The argv with the key in place of the '***' that follows `--api-key` (what render put)."""
    out = list(argv)
    for i, arg in enumerate(out[:-1]):
        if arg == API_KEY_FLAG and out[i + 1] == REDACTED:
            out[i + 1] = key
            return tuple(out)
    raise ApiKeyError(f"the router's argv has no {API_KEY_FLAG} {REDACTED} to put the key into")
