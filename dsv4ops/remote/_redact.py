"""Helpers both executors use to keep secrets out of results and error messages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dsv4ops.errors import RemoteCommandError
from dsv4ops.remote.base import CommandResult, is_secret_key, redact_argv


def secret_values(env: Mapping[str, str] | None) -> list[str]:
    """Values of secret keys worth scrubbing (very short values would mangle unrelated text)."""
    return sorted(
        (v for k, v in (env or {}).items() if is_secret_key(k) and len(v) >= 4),
        key=len,
        reverse=True,
    )


def scrub(text: str, secrets: Sequence[str]) -> str:
    for value in secrets:
        text = text.replace(value, "***")
    return text


def make_result(
    argv: Sequence[str],
    exit_code: int,
    stdout: str,
    stderr: str,
    duration_s: float,
    *,
    host: str,
    timed_out: bool,
    env: Mapping[str, str] | None,
) -> CommandResult:
    """A CommandResult with secret flag values and secret env values removed everywhere."""
    secrets = secret_values(env)
    return CommandResult(
        argv=tuple(scrub(a, secrets) for a in redact_argv(list(argv))),
        exit_code=exit_code,
        stdout=scrub(stdout, secrets),
        stderr=scrub(stderr, secrets),
        duration_s=duration_s,
        host=host,
        timed_out=timed_out,
    )


def check_result(result: CommandResult) -> CommandResult:
    """Raise RemoteCommandError (holding the result) when the command failed."""
    if result.ok:
        return result
    what = "timed out" if result.timed_out else f"exited {result.exit_code}"
    first = result.stderr.strip().splitlines()[-1:] or result.stdout.strip().splitlines()[-1:]
    detail = f": {first[0][:300]}" if first else ""
    raise RemoteCommandError(
        f"on {result.host}: `{' '.join(result.argv)[:300]}` {what}{detail}",
        result=result,
    )
