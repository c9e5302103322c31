"""Where each resolved value came from: key path → (file, line), across an `extends` chain."""

from __future__ import annotations

import re

from dsv4ops._yaml import LineInfo
from dsv4ops.errors import ProfileError
from dsv4ops.profiles.model import ProfileWarning


class Provenance:
    """Origins of the merged document; later files (children) override earlier ones (bases)."""

    def __init__(
        self, default_file: str, origins: dict[str, tuple[str, int]] | None = None
    ) -> None:
        self.default_file = default_file
        self._origins: dict[str, tuple[str, int]] = dict(origins or {})

    def record(self, file: str, lines: LineInfo, data: object) -> None:
        """Record one file's key paths; call for the base first, then each child."""
        # The child's value replaces the base's whole subtree (lists are replaced): forget what
        # the bases recorded under each of its scalars and lists. One pass over the origins,
        # each checked by its ancestors (a file can have thousands of keys).
        replaced = {path for path in lines.lines if _is_leafish(data, path)}
        if replaced:
            for stale in [p for p in self._origins if any(a in replaced for a in _ancestors(p))]:
                del self._origins[stale]
        for path, line in lines.lines.items():
            self._origins[path] = (file, line)

    def snapshot(self) -> dict[str, tuple[str, int]]:
        return dict(self._origins)

    def where(self, key_path: str) -> tuple[str, int]:
        """(file, line) of a key path, falling back to the nearest recorded parent, then to
        line 1 of the profile itself (a missing top-level section: the whole file lacks it)."""
        parts = key_path
        while parts:
            if parts in self._origins:
                return self._origins[parts]
            cut = max(parts.rfind("."), parts.rfind("["))
            parts = parts[:cut] if cut > 0 else ""
        return self.default_file, 1

    def warning(self, code: str, key_path: str, message: str) -> ProfileWarning:
        """A warning located like an error ('file:line: key')."""
        file, line = self.where(key_path)
        where = f"{file}:{line}: {key_path}" if line else f"{file}: {key_path}"
        return ProfileWarning(code=code, message=message, where=where)

    def error(self, key_path: str, message: str, *, hint: str | None = None) -> ProfileError:
        file, line = self.where(key_path)
        if file != self.default_file:
            # The location names the base file that set the value; say who inherited it.
            message = f"{message} (inherited by {self.default_file})"
        return ProfileError(message, path=file, line=line, key=key_path, hint=hint)


def _ancestors(path: str) -> list[str]:
    """Proper prefixes of a key path at '.' and '[': 'a.b[0]' -> ['a', 'a.b']."""
    return [path[:i] for i, ch in enumerate(path) if ch in ".[" and i > 0]


def _is_leafish(data: object, path: str) -> bool:
    """True if the value at `path` in `data` is not a mapping (a scalar or a list)."""
    node = data
    for token in _tokens(path):
        if isinstance(token, int):
            if not isinstance(node, list) or token >= len(node):
                return True
            node = node[token]
        else:
            if not isinstance(node, dict) or token not in node:
                return True
            node = node[token]
    return not isinstance(node, dict)


# A key path's parts: names, and list indexes written [N]. A key may hold '[' itself (an unknown
# key the checks report): then it is a name that no document path matches.
_TOKEN = re.compile(r"\[([0-9]+)\]|([^.\[]+|\[)")


def _tokens(path: str) -> list[str | int]:
    return [int(index) if index else name for index, name in _TOKEN.findall(path)]
