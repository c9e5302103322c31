"""Option types the commands share: a value is refused by click, as a usage error naming the
option, before any command runs."""

from __future__ import annotations

import math

import click

from dsv4ops.cli._output import terminal_safe
from dsv4ops.urls import Flaw, check_http_url


class HttpUrl(click.ParamType[str]):
    """An http:// or https:// URL with a host and, if given, a port from 1 to 65535. Anything
    else was a bug's traceback (`http://[::1`, a port of 99999) or a connection error that
    blamed the network (`ftp://x`)."""

    name = "URL"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> str:
        text = str(value).strip()
        problem = _problem(text)
        if problem is not None:
            self.fail(f"{terminal_safe(repr(_without_user(text)))}: {problem}", param, ctx)
        return text


_SAID = {
    Flaw.NOT_HTTP: "expected an http:// or https:// URL (e.g. http://127.0.0.1:8000)",
    Flaw.NO_HOST: "the URL names no host (e.g. http://127.0.0.1:8000)",
    Flaw.PORT_ZERO: "port 0 is not a port a server listens on",
}


def _problem(text: str) -> str | None:
    if any(ch.isspace() for ch in text):
        return "a URL has no spaces or line breaks"
    checked = check_http_url(text)
    if checked.flaw is Flaw.UNPARSABLE:
        return f"not a URL ({checked.detail})"
    return None if checked.flaw is None else _SAID[checked.flaw]


def _without_user(text: str) -> str:
    """The URL as typed, all between its scheme and its last "@" as `***`: a user:password@
    part is a secret. Found by the text, not by urlsplit (a refused URL may be one it cannot
    parse), and to the last "@" because a password typed raw may hold "/", "?" or "#"."""
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "", text
    user_end = rest.rfind("@")
    return text if user_end < 0 else f"{scheme}{sep}***{rest[user_end:]}"


HTTP_URL = HttpUrl()


class FiniteFloatRange(click.FloatRange):
    """click.FloatRange that also refuses nan and infinity: a range check passes nan (every
    comparison with it is false), and `--duration inf` or `--block-duration nan` ran a load or
    an experiment without end, or printed "nan h" as its estimate."""

    # `value` is what was typed (a str) or a default; click's stubs declare the base's as float
    def convert(
        self, value: float, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        number = float(super().convert(value, param, ctx))
        if not math.isfinite(number):
            self.fail(f"{number} is not a finite number", param, ctx)
        return number
