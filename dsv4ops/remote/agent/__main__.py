"""Entry point of the agent zip (`python3 -I -S agent.zip`; copied to the zip's root).

Python cannot cache bytecode for modules imported from a zip, so every agent call compiled its
modules from source: about a third of a call's CPU, and a twin deploy makes about forty calls. The
first call of a given agent under a given python therefore writes the compiled modules next to
the zip (`.dsv4ops/agent-bytecode/<sha256>-<python magic>.zip`, .pyc only, written under a
temporary name and renamed) and every later call imports from that copy. Its name is the sha256
of the zip bytes this process read and hashed, so it can only hold those modules; any python
with another magic number gets a copy of its own. Whatever goes wrong with the copy (a
read-only directory, a damaged file), the call imports from the zip as before.

This file is compiled from source on every call, so it stays small and imports only what the
agent imports anyway.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

_CACHE_DIR = "agent-bytecode"


def compiled_copy_path(zip_path: str, sha256: str, magic: bytes) -> str:
    return os.path.join(os.path.dirname(zip_path), _CACHE_DIR, f"{sha256}-{magic.hex()}.zip")


def write_compiled_copy(zip_path: str, path: str, magic: bytes) -> None:
    """Compile every module of the zip at `zip_path` into a .pyc-only zip at `path` (atomic)."""
    import marshal
    import zipfile

    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with zipfile.ZipFile(zip_path) as src, zipfile.ZipFile(tmp, "w") as out:
            for name in src.namelist():
                if not name.endswith(".py") or name == "__main__.py":
                    continue
                code = compile(src.read(name), f"{zip_path}/{name}", "exec", dont_inherit=True)
                # A timestamp pyc with no source beside it: zipimport checks only the magic.
                header = magic + b"\0" * 12
                out.writestr(name + "c", header + marshal.dumps(code))
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    _remove_other_copies(path)


def _remove_other_copies(keep: str) -> None:
    """Copies of earlier agent versions (this one's name is its own)."""
    folder = os.path.dirname(keep)
    for name in os.listdir(folder):
        other = os.path.join(folder, name)
        if other != keep and name.endswith(".zip") and ".tmp." not in name:
            with contextlib.suppress(OSError):
                os.unlink(other)


def use_compiled_copy(zip_path: str, sha256: str) -> str | None:
    """Put the compiled copy of this zip first on sys.path (writing it first when missing);
    the copy's path, or None when the modules will come from the zip itself."""
    from importlib.util import MAGIC_NUMBER

    path = compiled_copy_path(zip_path, sha256, MAGIC_NUMBER)
    if not os.path.exists(path):
        try:
            write_compiled_copy(zip_path, path, MAGIC_NUMBER)
        except (OSError, SyntaxError, ValueError):
            return None  # e.g. a read-only work directory: compile from the zip, as always
    sys.path.insert(0, path)
    return path


def _import_main(zip_path: str, sha256: str) -> tuple[Callable[..., int], str | None]:
    compiled = use_compiled_copy(zip_path, sha256)
    try:
        from dsv4ops.remote.agent.main import main
    except Exception:
        if compiled is None:
            raise
        # A damaged copy: forget it and what came from it, import from the zip.
        sys.path.remove(compiled)
        sys.path_importer_cache.pop(compiled, None)
        for name in [m for m in sys.modules if m == "dsv4ops" or m.startswith("dsv4ops.")]:
            del sys.modules[name]
        _drop(compiled)
        from dsv4ops.remote.agent.main import main

        return main, None
    origin = str(getattr(sys.modules[main.__module__], "__file__", ""))
    if compiled is not None and not origin.startswith(compiled + os.sep):
        _drop(compiled)  # not a zip python could read: every module came from the agent zip
        return main, None
    return main, compiled


def _drop(copy: str) -> None:
    """Remove a damaged copy: the next call writes a new one."""
    with contextlib.suppress(OSError):
        os.unlink(copy)


if __name__ == "__main__":
    # At the zip's root __file__ is `<zip>/__main__.py`: the zip is what the sha check hashes.
    zip_path = os.path.dirname(os.path.abspath(__file__))
    with open(zip_path, "rb") as f:
        sha256 = hashlib.sha256(f.read()).hexdigest()
    main, compiled = _import_main(zip_path, sha256)
    if sys.argv[1:] == ["--serve"]:  # a session: one request a line (main.py `serve`)
        from dsv4ops.remote.agent.main import serve

        sys.exit(serve(zip_path, sha256=sha256, compiled=compiled))
    sys.exit(main(zip_path, sha256=sha256, compiled=compiled))
