"""What makes a string a server's http(s) URL, decided once: targets.yaml's URLs
(profiles/target_spec.py `check_url`) and the CLI's URL options (cli/_params.py `HttpUrl`) each
put the problem in their own words and add their own rules (a base URL without a path, no
credentials)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit


class Flaw(enum.Enum):
    UNPARSABLE = "unparsable"  # urlsplit or its port refused it (`detail` says why)
    NOT_HTTP = "not_http"  # another scheme, or none
    NO_HOST = "no_host"
    PORT_ZERO = "port_zero"


@dataclass(frozen=True)
class Checked:
    parts: SplitResult | None  # None when unparsable
    flaw: Flaw | None = None
    detail: str = ""


def check_http_url(url: str) -> Checked:
    """The URL's parts and its first flaw (None: an http(s) URL of a host, its port if any 1-65535)."""
    try:
        parts = urlsplit(url)
        port = parts.port  # ValueError for a port that is not a number in 0-65535
    except ValueError as exc:
        return Checked(None, Flaw.UNPARSABLE, str(exc))
    if parts.scheme not in ("http", "https"):
        return Checked(parts, Flaw.NOT_HTTP)
    if not parts.hostname:
        return Checked(parts, Flaw.NO_HOST)
    if port == 0:
        return Checked(parts, Flaw.PORT_ZERO)
    return Checked(parts)
