# ruff: noqa: T201
"""Parse every shipped profile's rendered commands with SGLang 0.5.23's and sglang-router 0.3.2's
own argument parsers (needs the unpacked wheel on PYTHONPATH; see extract_flag_tables.py).

    PYTHONPATH=/tmp/sg/full:/tmp/sg/deps .venv/bin/python tools/check_rendered_with_sglang.py

Exit 0 when every command parses; prints one line per command.
"""

from __future__ import annotations

import argparse
import sys


def main() -> int:
    from sglang.srt.server_args import ServerArgs
    from sglang_router.launch_router import parse_router_args

    from dsv4ops.profiles import list_profiles, load_profile, load_targets, render

    server = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(server)
    failures = 0
    for target in load_targets().values():
        for path in list_profiles():
            rendered = render(load_profile(path), target)
            for comp in rendered.components:
                args = list(comp.argv[3:])  # drop PYTHON -m MODULE
                try:
                    if comp.name == "router":
                        parse_router_args(args)
                    else:
                        ns = server.parse_args(args)
                        assert ns.disaggregation_mode == comp.name
                    print(f"ok    {target.name:10} {path.stem:16} {comp.name}")
                except SystemExit as exc:
                    failures += 1
                    print(f"FAIL  {target.name:10} {path.stem:16} {comp.name}: exit {exc.code}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
