"""Reading profile and targets files in bounded time and memory, and checking profile names.

A profile reference (a CLI argument, or an `extends:` value) becomes a file name. Anything the OS
would refuse with an OSError (a 5,000-character name, a NUL) is refused here first with a clear
message; anything that is not a regular file (a FIFO would block the read, /dev/zero would never
end) is refused before it is opened; a file is read up to MAX_FILE_BYTES and no further.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

from dsv4ops._yaml import MAX_DOCUMENT_CHARS
from dsv4ops.errors import ProfileError
from dsv4ops.localfiles import FileRefused, read_regular, too_big
from dsv4ops.profiles.excerpt import excerpt

MAX_FILE_BYTES = MAX_DOCUMENT_CHARS  # profiles are a few KB
MAX_NAME_CHARS = 1024  # a whole reference; Linux's PATH_MAX is 4096
MAX_PART_BYTES = 255  # one path component (Linux NAME_MAX)
# Format characters (the bidi overrides and isolates, zero-width joiners) and the line and
# paragraph separators: shown, they change how the rest of a line reads.
_UNSEEN = frozenset({"Cf", "Zl", "Zp"})


def reference_problem(ref: str) -> str | None:
    """Why `ref` cannot name a profile file (None when it can): empty, control, invisible or
    reordering characters, or longer than a file name may be."""
    if not ref.strip():
        return "expected the name of a profile or a path to a .yaml file, got an empty name"
    for i, ch in enumerate(ref):
        category = unicodedata.category(ch)
        if category == "Cc":
            return (
                f"a profile name cannot contain the control character U+{ord(ch):04X} "
                f"(position {i})"
            )
        if category in _UNSEEN:
            # A bidi override or a zero-width character makes the name a prompt shows ("deploy
            # X to box?") read as another profile's; no file name needs one.
            return (
                f"a profile name cannot contain the invisible or reordering character "
                f"U+{ord(ch):04X} (position {i})"
            )
    if len(ref) > MAX_NAME_CHARS:
        return f"a profile name of {len(ref)} characters is longer than {MAX_NAME_CHARS}"
    for part in ref.split("/"):
        if len(part.encode("utf-8", "surrogatepass")) + len(".yaml") > MAX_PART_BYTES:
            return (
                f"{excerpt(part, limit=40)} is too long for a file name (at most "
                f"{MAX_PART_BYTES - len('.yaml')} bytes per path part, without '.yaml')"
            )
    return None


def check_reference(ref: str) -> None:
    """Raise ProfileError (no file, no line: the name came from the command line) if `ref`
    cannot name a profile file."""
    problem = reference_problem(ref)
    if problem is not None:
        raise ProfileError(f"{problem} (the profile named on the command line)")


def read_bounded(path: Path, what: str = "profile") -> str:
    """The UTF-8 text of a regular file of at most MAX_FILE_BYTES. Raises ProfileError for
    anything else, at the line of the bad byte, or at line 1 when the whole file is the problem
    (so every error reads file:line, which editors and CI annotations jump to);
    FileNotFoundError is left to the caller."""
    try:
        data = read_regular(path, MAX_FILE_BYTES, what)
    except FileRefused as exc:
        raise ProfileError(str(exc), path=str(path), line=1) from None
    return decode_bounded(data, str(path), what)


def decode_bounded(data: bytes, shown: str, what: str = "profile") -> str:
    if len(data) > MAX_FILE_BYTES:
        raise ProfileError(too_big(what, len(data), MAX_FILE_BYTES), path=shown, line=1)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ProfileError(
            f"not UTF-8 text: byte 0x{data[exc.start]:02x} cannot start a character",
            path=shown,
            line=line,
        ) from None
