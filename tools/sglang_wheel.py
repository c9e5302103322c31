"""Where the pinned sglang 0.5.23 wheel lives in the project cache (tools/fetch_sglang_wheel.sh,
run by `make install`), and reading one source file out of it without unpacking or importing."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NAME = "sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl"
WHEEL = Path(os.environ.get("SGLANG_WHEEL") or ROOT / ".dsv4ops" / "wheels" / NAME)
MISSING = f"the pinned sglang wheel is not in the cache ({WHEEL}): `make install` fetches it"


def source(rel: str) -> str:
    """`sglang/<rel>` from the wheel, as text."""
    with zipfile.ZipFile(WHEEL) as zf:
        return zf.read(f"sglang/{rel}").decode("utf-8")
