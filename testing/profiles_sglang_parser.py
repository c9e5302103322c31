"""An argparse parser rebuilt from the vendored SGLang 0.5.23 flag table.

SGLang's real parser needs torch and the whole wheel; the table (dsv4ops/profiles/_flag_tables.py)
was dumped from that real parser by tools/extract_flag_tables.py, so rebuilding it gives the same
accept/reject decisions for option names, abbreviations, arity, int/float types and choices.
"""

from __future__ import annotations

import argparse

from dsv4ops.profiles._flag_tables import SGLANG_SERVER_TABLE


class ParseFailed(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise ParseFailed(message)


def sglang_server_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="sglang serve", add_help=False)
    for flag, (nargs, kind, choices) in SGLANG_SERVER_TABLE.items():
        dest = flag.lstrip("-").replace("-", "_")
        if nargs == 0:
            parser.add_argument(flag, dest=dest, action="store_true")
            continue
        conv = {"int": int, "float": float}.get(kind, str)
        kwargs: dict[str, object] = {"dest": dest, "type": conv}
        if nargs != 1:
            kwargs["nargs"] = nargs
        if choices:
            kwargs["choices"] = [conv(c) for c in choices] if conv is not str else list(choices)
        parser.add_argument(flag, **kwargs)  # type: ignore[arg-type]
    return parser
