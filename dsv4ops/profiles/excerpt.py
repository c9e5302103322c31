"""A value as error messages show it: a short, secret-free excerpt, in bounded time.

Error messages quote what the user wrote ("got {...}"). The value can be anything YAML produced:
a mapping with a token under HF_TOKEN, an argv with `--api-key sk-...`, a 16 KB string, a list of
thousands of items. `excerpt` walks at most a few items per level and a few levels deep, hides
secrets with the one definition in dsv4ops/secrets.py (secret-named keys, values of secret flags),
and cuts the result to MAX_EXCERPT_CHARS.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import islice

from dsv4ops.secrets import REDACTED, is_secret_flag, is_secret_key, redact_argv, redact_text

MAX_EXCERPT_CHARS = 120
_MAX_ITEMS = 6  # per list or mapping
_MAX_LEVELS = 3
_MAX_STR = MAX_EXCERPT_CHARS


class _Shown:
    """Printed as its text, without quotes (for '***' and '...' markers)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


_HIDDEN = _Shown(REDACTED)


def excerpt(value: object, *, key: str | None = None, limit: int = MAX_EXCERPT_CHARS) -> str:
    """repr-like text of `value`, at most `limit` characters; `key` is the name the value sits
    under (a secret-named key hides the whole value, whatever its shape)."""
    text = repr(_bounded(value, key, 0))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def key_excerpt(key: str, limit: int = 60) -> str:
    """A user-written key or key path, cut to `limit` characters (for locations and hints)."""
    return key if len(key) <= limit else key[: limit - 3] + "..."


def printable_key(key: str, limit: int = 60) -> str:
    """A user-written key as one part of a key path: each unprintable character (a control,
    format or separator character) as its escape (`\\x1b`, `\\u200b`), cut to `limit` characters.
    """
    head = key[: limit + 1]  # a key can be 16 KB: escape a bounded part
    shown = "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in head
    )
    return key_excerpt(shown if len(head) == len(key) else shown + "...", limit)


def _bounded(value: object, key: str | None, level: int) -> object:
    if key is not None and value is not None and is_secret_key(key):
        return _HIDDEN
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        return _Shown(f"<an integer of about {value.bit_length() * 3 // 10} digits>")
    if isinstance(value, Mapping | list | tuple) and level >= _MAX_LEVELS:
        return _Shown("{...}" if isinstance(value, Mapping) else "[...]")
    if isinstance(value, Mapping):
        out: dict[object, object] = {}
        for k, v in islice(value.items(), _MAX_ITEMS):
            shown_key = _bounded(k, None, level + 1)
            out[shown_key if _hashable(shown_key) else _Shown(repr(shown_key))] = _bounded(
                v, str(k), level + 1
            )
        if len(value) > _MAX_ITEMS:
            out[_Shown("...")] = _Shown(f"{len(value) - _MAX_ITEMS} more")
        return out
    if isinstance(value, list | tuple):
        return _bounded_list(value, level)
    if isinstance(value, bytes):
        return value[:_MAX_STR]
    return value


def _text(value: str) -> str:
    if "@" in value and "://" in value:  # a URL's password (targets.yaml's URLs)
        value = redact_text(value)
    return value if len(value) <= _MAX_STR else value[:_MAX_STR] + "..."


def _bounded_list(value: list[object] | tuple[object, ...], level: int) -> list[object]:
    """Items of an argv-like list, the values of secret flags hidden in every shape dsv4ops/
    secrets.py's redact_argv knows (`--api-key V`, `--api-key=V`, `"--api-key V"`, `--api-key=`
    then `V`)."""
    out: list[object] = []
    items = list(islice(value, _MAX_ITEMS))
    strings = [i for i in items if isinstance(i, str)]
    shown = iter(redact_argv(strings)) if len(strings) == len(items) else None
    hide_next = False
    for item in items:
        if shown is not None:
            text = next(shown)
            out.append(_HIDDEN if text == REDACTED != item else _bounded(text, None, level + 1))
            continue
        if hide_next:  # a mixed list: only the plain `--flag V` shape can be argv
            out.append(_HIDDEN)
            hide_next = False
            continue
        if (
            isinstance(item, str)
            and item.startswith("--")
            and is_secret_flag(item.partition("=")[0])
        ):
            out.append(_Shown(repr(redact_argv([item])[0])))
            hide_next = "=" not in item
            continue
        out.append(_bounded(item, None, level + 1))
    if len(value) > _MAX_ITEMS:
        out.append(_Shown(f"... {len(value) - _MAX_ITEMS} more"))
    return out


def _hashable(value: object) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True
