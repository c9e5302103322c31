"""Test helpers and doubles for `dsv4ops.profiles` (one module per package area).

- factory: Test helpers: a profiles directory in a temp dir, with a valid base profile and targets.
- sglang_parser: An argparse parser rebuilt from the vendored SGLang 0.5.23 flag table.
- smg_parser: a router argv parsed by SMG's own parser, in the SMG venv (its own process).

SGLang's real parser needs torch and the whole wheel; the table (dsv4ops/profiles/_flag_tables.py)
was dumped from that real parser by tools/extract_flag_tables.py, so rebuilding it gives the same
accept/reject decisions for option names, abbreviations, arity, int/float types and choices.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from collections.abc import Sequence
from pathlib import Path

from dsv4ops.jsontypes import JSONObject
from dsv4ops.profiles._flag_tables import SGLANG_SERVER_TABLE
from dsv4ops.profiles.routers import SMG_PYTHON_ENV, smg_python

# --- factory (was testing/profiles.py) ---

BASE_PROFILE = """\
schema_version: 1
description: test base
model:
  path: /models/DeepSeek-V4-Flash
  served_name: dsv4
prefill:
  gpus: [0, 1, 2, 3]
  tp: 4
  port: 30000
  bootstrap_port: 8998
  env: {SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT: "300"}
decode:
  gpus: [4, 5, 6, 7]
  tp: 4
  port: 30001
  max_running_requests: 96
  extra_args: [--context-length, "1048576"]
  env: {SGLANG_DISAGGREGATION_WAITING_TIMEOUT: "300"}
router:
  port: 8000
  prometheus_port: 29000
flags:
  overlap_schedule: off
  multi_stream_overlap: off
  decode_buckets: step8
"""


def targets_yaml(ports_offset: int = 1000, gpus: str = "[0, 1, 2, 3, 4, 5, 6, 7]") -> str:
    return f"""\
schema_version: 1
targets:
  box:
    transport: ssh
    ssh: {{host: box.example, user: ops}}
    gpus: {gpus}
    workdir: /opt/dsv4ops
    python: /opt/venv/bin/python
    launcher: sglang
    bind_host: 0.0.0.0
  twin-local:
    transport: local
    gpus: {gpus}
    workdir: work
    launcher: twin
    bind_host: 127.0.0.1
    port_offset: {ports_offset}
    twin_env: {{DSV4_TWIN_SEED: "7"}}
"""


def make_profiles_dir(root: Path, **files: str) -> Path:
    """Create root/profiles with base.yaml, targets.yaml and any NAME=TEXT given (NAME.yaml)."""
    directory = root / "profiles"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "base.yaml").write_text(BASE_PROFILE)
    (directory / "targets.yaml").write_text(targets_yaml())
    for name, text in files.items():
        (directory / f"{name.replace('_', '-')}.yaml").write_text(text)
    return directory


def child(extra: str, extends: str = "base") -> str:
    """A profile extending `extends`; `extra` is YAML starting on line 3."""
    return f"schema_version: 1\nextends: {extends}\n{extra}"


# A decode on the one MoE path that reads a kernel package's configs (dsv4ops/sglang_paths.py:
# FP4 experts cast to FP8, triton runner); a profile with kernel_package needs it to validate.
TRITON_MOE_PATH_YAML = """\
decode:
  env:
    SGLANG_DSV4_FP4_DEQUANT: "1"
    SGLANG_ENABLE_JIT_DEEPGEMM: "0"
"""


# --- sglang_parser (was testing/profiles.py) ---


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


# --- smg_parser ---

# Runs in the SMG venv: its parser imports SMG's Rust core, which the project venv does not carry.
_SMG_PARSE = """
import contextlib, dataclasses, io, json, sys
from smg.launch_router import parse_router_args
err = io.StringIO()
try:
    with contextlib.redirect_stderr(err):
        parsed = dataclasses.asdict(parse_router_args(json.load(sys.stdin)))
except SystemExit:
    print(json.dumps({"error": err.getvalue().strip().splitlines()[-1]}))
else:
    print(json.dumps({k: v for k, v in parsed.items() if not callable(v)}, default=str))
"""


def smg_parse(args: Sequence[str]) -> JSONObject:
    """`args` as SMG's own `parse_router_args` (smg/launch_router.py) reads them: the parsed
    RouterArgs as JSON, or {"error": argparse's message}. Needs the SMG venv `make install`
    builds (or $DSV4OPS_SMG_PYTHON)."""
    python = smg_python()
    if not python.is_file():
        raise AssertionError(
            f"no SMG venv at {python}: run `make install` (it builds .venv-smg and records it) "
            f"or set {SMG_PYTHON_ENV}"
        )
    done = subprocess.run(
        [str(python), "-c", _SMG_PARSE],
        input=json.dumps(list(args)),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result: JSONObject = json.loads(done.stdout)
    return result
