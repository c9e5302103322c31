"""Regenerate tests/twin/fixtures/sglang_0_5_23_surface.json from the real SGLang 0.5.23 wheel.

SGLang cannot be imported here (torch, GPU deps), so the wheel is read statically with `ast`:
HTTP endpoints, Prometheus metrics (name, type, labels), the chat stream's chunk keys and the
tool-call delta shape, each with the `file:line` it came from, plus the wheel's sha256.

    .venv/bin/python tools/extract_twin_conformance.py \
        /work/sglang-src/sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl \
        -o tests/twin/fixtures/sglang_0_5_23_surface.json

The argument may also be an unpacked wheel (a folder holding `sglang/`, or `sglang/` itself).
tests/twin/conformance_test.py holds the twin against the committed file.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.twin_conformance import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
