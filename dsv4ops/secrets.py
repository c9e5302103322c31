"""What counts as a secret, and how it is hidden: the one definition every printer uses.

Secrets reach dsv4ops as profile env values (tokens, API keys) and as values of a few SGLang /
router flags (`--api-key`, `--admin-api-key`, `--control-plane-api-keys`, `--ssl-keyfile-password`,
...). They must never appear in the journal, logs, state files on the target or printed commands,
so the executors, the journal, `profile render/show` and `deploy --dry-run` all redact with these
functions. The deploy itself keeps the real values: only what is written or shown is redacted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

REDACTED = "***"

# Substrings of environment variable names whose values are secrets.
SECRET_ENV_MARKERS: tuple[str, ...] = (
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "API_KEY",
    "APIKEY",
    "PRIVATE_KEY",
    "ACCESS_KEY",
)
# Name endings that mark a secret too (HF_TOKEN, OPENAI_KEY, DB_PASS, ...). TOKEN only as an
# ending: names like max_tokens or first_token_deadline_s are settings, not credentials.
SECRET_ENV_SUFFIXES: tuple[str, ...] = ("TOKEN", "_KEY", "_PASS", "_PW", "_AUTH")

# Flags of sglang 0.5.23 / sglang-router 0.3.2 whose value is a secret; plus any flag whose name
# ends like one of SECRET_FLAG_SUFFIXES, so a future `--foo-api-key` is covered without a change.
SECRET_ARG_FLAGS: frozenset[str] = frozenset(
    {
        "--api-key",
        "--admin-api-key",
        "--control-plane-api-keys",
        "--hf-token",
        "--oracle-password",
        "--ssl-keyfile-password",
    }
)
SECRET_FLAG_SUFFIXES: tuple[str, ...] = ("api-key", "api-keys", "-password", "-token", "-secret")


def is_secret_key(key: str) -> bool:
    """True when an environment variable of this name holds a secret."""
    upper = key.upper()
    return any(m in upper for m in SECRET_ENV_MARKERS) or upper.endswith(SECRET_ENV_SUFFIXES)


def is_secret_flag(flag: str) -> bool:
    """True when the value of this command-line flag is a secret."""
    lower = flag.lower()
    return lower in SECRET_ARG_FLAGS or (
        lower.startswith("--") and lower.endswith(SECRET_FLAG_SUFFIXES)
    )


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """Copy of env with secret values replaced by '***'."""
    return {k: (REDACTED if is_secret_key(k) else v) for k, v in env.items()}


def redact_argv(argv: Sequence[str]) -> list[str]:
    """Copy of argv with the values of secret flags replaced by '***' (`--f v` and `--f=v`)."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        flag, eq, _ = arg.partition("=")
        if flag.startswith("--") and is_secret_flag(flag):
            out.append(f"{flag}={REDACTED}" if eq else arg)
            hide_next = not eq
            continue
        out.append(arg)
    return out


def redact_tree(value: Any, *, key: str | None = None, text: Callable[[str], str] | None = None) -> Any:
    """Deep copy of JSON-like data with secrets hidden: values under secret-named keys, and the
    values of secret flags in any list of strings (an argv). `text` post-processes every other
    string (the journal uses it to hide secret values that leaked into free text)."""
    if key is not None and is_secret_key(key) and isinstance(value, str | int | float):
        return REDACTED
    if isinstance(value, Mapping):
        return {str(k): redact_tree(v, key=str(k), text=text) for k, v in value.items()}
    if isinstance(value, list | tuple):
        items = [redact_tree(v, text=text) for v in value]
        if all(isinstance(v, str) for v in items):
            items = redact_argv(items)
        return items
    if isinstance(value, str) and text is not None:
        return text(value)
    return value
