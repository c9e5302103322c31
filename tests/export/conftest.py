from __future__ import annotations

from tests.profiles.conftest import pdir, write  # noqa: F401  (temp profiles dir fixtures)
