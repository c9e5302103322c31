"""Entry point of the agent zip (`python3 -I -S agent.zip`; copied to the zip's root)."""

import os
import sys

from dsv4ops.remote.agent.main import main

if __name__ == "__main__":
    # At the zip's root __file__ is `<zip>/__main__.py`: the zip is what the sha check hashes.
    sys.exit(main(os.path.dirname(os.path.abspath(__file__))))
