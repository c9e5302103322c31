"""The one name for a value that is untyped JSON (issue 24: `Any` only there, and named).

`json.loads`, an HTTP response body, a journal record read back: their shape is whatever the
other side wrote, and the code that reads them checks it at run time (a key missing, a wrong
type: a clear error). `JSONValue` is `Any` so that those reads need no cast at every step; the
name says why a value is untyped, and `grep JSONValue` finds every such place. A value of a
known shape gets its own type (a dataclass, a TypedDict), never this alias.
"""

from __future__ import annotations

from typing import Any, TypeAlias

JSONValue: TypeAlias = Any
JSONObject: TypeAlias = dict[str, JSONValue]

__all__ = ["JSONObject", "JSONValue"]
