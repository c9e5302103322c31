from __future__ import annotations

import sys

from dsv4ops.cli import main

if __name__ == "__main__":
    sys.exit(main())
