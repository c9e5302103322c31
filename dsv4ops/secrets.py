"""What counts as a secret, and how it is hidden: the one definition every printer uses.

Secrets reach dsv4ops as profile env values (tokens, API keys) and as values of a few SGLang /
router flags (`--api-key`, `--admin-api-key`, `--control-plane-api-keys`, `--ssl-keyfile-password`,
...). They must never appear in the journal, logs, state files on the target or printed commands,
so the executors, the journal, `profile render/show` and `deploy --dry-run` all redact with these
functions. The deploy itself keeps the real values: only what is written or shown is redacted.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence

from dsv4ops.jsontypes import JSONValue

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

# Flags of sglang 0.5.23 / sglang-router 0.3.2 whose value is a secret: what `is_secret_flag_name`
# finds in their flag tables (dsv4ops/profiles/_flag_tables.py, extracted from the wheels), plus
# --hf-token (not a 0.5.23 flag; an old profile's value stays hidden). This module ships alone in
# the agent zip and cannot read the tables, so tests/secrets_test.py derives the set from them and
# fails when a regenerated table brings a secret flag this list lacks.
SECRET_ARG_FLAGS: frozenset[str] = frozenset(
    {
        "--admin-api-key",
        "--api-key",
        "--control-plane-api-keys",
        "--hf-token",
        "--oracle-password",
        "--postgres-db-url",
        "--redis-url",
        "--ssl-keyfile-password",
        "--tenant-api-key",  # SMG 1.13.0
    }
)
# Of those, the ones that take several values (nargs "*" in the router's table).
SECRET_MULTI_VALUE_FLAGS: frozenset[str] = frozenset({"--control-plane-api-keys"})
# A flag whose name ends like one of these carries a secret, so a future `--foo-api-key` is
# covered without a change. Connection URLs carry their password (`postgres://u:PASS@h/db`).
# Not a bare "-token": `--bucket-time-to-first-token` and `...-experts-per-token` are settings.
SECRET_FLAG_SUFFIXES: tuple[str, ...] = (
    "api-key",
    "api-keys",
    "-password",
    "-passwd",
    "hf-token",
    "auth-token",
    "access-token",
    "api-token",
    "bearer-token",
    "-secret",
    "-credentials",
    "-db-url",
    "redis-url",
)
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
# `--flag VALUE` inside one string, `--flag=VALUE`, `--flag=` then the value as the next item.
_FLAG_HEAD = re.compile(r"^(--[^\s=]+)([\s=]+)?(.*)$", re.S)


def is_secret_flag_name(flag: str) -> bool:
    """The naming rule alone (what a flag table is searched with)."""
    lower = flag.lower()
    return lower.startswith("--") and lower.endswith(SECRET_FLAG_SUFFIXES)


def is_secret_key(key: str) -> bool:
    """True when an environment variable of this name holds a secret."""
    upper = key.upper()
    return any(m in upper for m in SECRET_ENV_MARKERS) or upper.endswith(SECRET_ENV_SUFFIXES)


def is_secret_flag(flag: str) -> bool:
    """True when the value of this command-line flag is a secret."""
    return flag.lower() in SECRET_ARG_FLAGS or is_secret_flag_name(flag)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """Copy of env with secret values replaced by '***'."""
    return {k: (REDACTED if is_secret_key(k) else v) for k, v in env.items()}


def _is_option(arg: str) -> bool:
    return arg.startswith("-") and not _NEGATIVE_NUMBER.match(arg)


def redact_argv(argv: Sequence[str]) -> list[str]:
    """Copy of argv with the values of secret flags replaced by '***', in every shape: `--f v`,
    `--f=v`, `"--f v"` in one item, `--f=` followed by the value; a multi-value flag's values up
    to the next option."""
    out: list[str] = []
    hide = 0  # how many of the next items are values to hide (-1: up to the next option)
    for arg in argv:
        if hide and not (hide < 0 and _is_option(arg)):
            out.append(REDACTED)
            hide -= 1 if hide > 0 else 0
            continue
        hide = 0
        m = _FLAG_HEAD.match(arg)
        if m is None or not is_secret_flag(m.group(1)):
            out.append(arg)
            continue
        flag, sep, value = m.group(1), m.group(2) or "", m.group(3)
        out.append(f"{flag}{sep}{REDACTED}" if value else f"{flag}{sep}")
        if flag.lower() in SECRET_MULTI_VALUE_FLAGS:
            hide = -1
        elif not value:
            hide = 1
    return out


def argv_secret_values(argv: Sequence[str]) -> set[str]:
    """The secret values an argv carries (what redact_argv hides), to scrub them from any text
    (a log line, a py-spy dump) that repeats them. Values shorter than 4 characters are not
    scrubbed from free text (they would hide ordinary words)."""
    out: set[str] = set()
    for orig, shown in zip(argv, redact_argv(argv), strict=True):
        if orig == shown:
            continue
        m = _FLAG_HEAD.match(orig)
        value = m.group(3) if m is not None and is_secret_flag(m.group(1)) else orig
        out.update(v for v in value.split() if len(v) >= 4)
    return out


_KEY_ENDINGS = (
    "api_key",
    "api-key",
    "apikey",
    "api_keys",
    "api-keys",
    "apikeys",
    "token",
    "password",
    "passwd",
    "secret",
    "db_url",
    "db-url",
    "redis_url",
    "redis-url",
)


def _ends(endings: Iterable[str]) -> str:
    """`(?:(?<=e1)|(?<=e2)...)`: the name just matched ends with one of them. Each branch starts
    only where a name starts (a lookbehind for "no name character before"), so a name is scanned
    from its start only, never re-tried from each of its characters: the scan stays linear (a
    64 KB base64 blob in a log must not take minutes). No possessive quantifiers: this module
    ships in the agent zip and the target's python3 may predate 3.11."""
    return "(?:" + "|".join(f"(?<={re.escape(e)})" for e in endings) + ")"


def _text_pattern() -> re.Pattern[str]:
    multi = "|".join(re.escape(f) for f in SECRET_MULTI_VALUE_FLAGS)
    flag_ends = _ends([*SECRET_FLAG_SUFFIXES, *SECRET_ARG_FLAGS])
    return re.compile(
        # --control-plane-api-keys a b c (up to the next option)
        rf"(?<![A-Za-z0-9-])(?P<multi>(?:{multi})(?:=|[ \t]+))"
        r"(?P<mval>[^\s'\"-][^\s'\",]*(?:[ \t]+[^\s'\"-][^\s'\",]*)*)"
        # --api-key v, --api-key=v, --foo-api-key v
        rf"|(?<![A-Za-z0-9-])(?P<flag>--[A-Za-z0-9-]+{flag_ends}(?:=|[ \t]+))"
        r"(?P<fq>['\"]?)(?P<fval>[^\s'\",)]+)"
        # api_key='v', "admin_api_key": "v", HF_TOKEN=v, ssl_keyfile_password: v, redis_url=...
        rf"|(?<![A-Za-z0-9_-])(?P<key>(?i:[A-Za-z0-9_-]+{_ends(_KEY_ENDINGS)})"
        r"['\"]?[ \t]*[=:][ \t]*)(?P<kq>['\"]?)(?P<kval>[^'\"\s,)\]}]+)"
        # any URL's password: scheme://user:PASS@host
        r"|(?<![A-Za-z0-9+.-])(?P<url>[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@'\"]*:)"
        r"(?P<uval>[^\s@/'\"]+)(?=@)"
    )


_SECRET_TEXT = _text_pattern()
_NOT_SET = ("None", "null", "none", "REDACTED", REDACTED)
_NUMBER = re.compile(r"^-?\d+(\.\d+)?(e-?\d+)?$")


def _text_sub(m: re.Match[str]) -> str:
    for head, quote in (("multi", None), ("flag", "fq"), ("key", "kq"), ("url", None)):
        if m.group(head) is not None:
            if head == "key" and (m.group("kval") in _NOT_SET or _NUMBER.match(m.group("kval"))):
                return m.group(0)  # no secret set, or a number (first_token: 3.2 s is a time)
            return m.group(head) + (m.group(quote) if quote else "") + REDACTED
    return m.group(0)


def redact_text(text: str, values: Iterable[str] = ()) -> str:
    """Free text (a log tail, a py-spy dump, a JSON body, an error message) with secrets hidden:
    each of `values` wherever it appears, the values of secret flags and secret-named keys in
    the shapes above, and the password of any URL."""
    for v in sorted(values, key=len, reverse=True):
        if len(v) >= 4:
            text = text.replace(v, REDACTED)
    return _SECRET_TEXT.sub(_text_sub, text)


def redact_tree(
    value: JSONValue, *, key: str | None = None, text: Callable[[str], str] | None = None
) -> JSONValue:
    """Deep copy of JSON-like data with secrets hidden: values under secret-named keys, and the
    values of secret flags in any list of strings (an argv). `text` post-processes every other
    string (the journal uses it to hide secret values that leaked into free text)."""
    if key is not None and is_secret_key(key) and isinstance(value, str | int | float):
        return REDACTED
    if key is not None and is_secret_key(key) and isinstance(value, list | tuple):
        return [REDACTED for _ in value]  # e.g. control_plane_api_keys: ["k1", "k2"]
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
