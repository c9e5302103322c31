"""SGLang 0.5.23's `launch_server` command line, as far as the twin needs it.

SGLang parses with `parse_args` (server_args.py:696, never `parse_known_args`), so a flag it does
not know exits 2 with argparse's `unrecognized arguments` message. The twin declares the flags it
honours with their meaning, then every other flag of the real 0.5.23 parser from the generated
table (`dsv4ops/profiles/_flag_tables.py`, 559 flags): those are accepted, logged and ignored, and
argparse's prefix matching sees exactly SGLang's flag set, so an abbreviation resolves (or is
"ambiguous", like the removed `--cuda-graph-bs`) as it does on the box.
"""

from __future__ import annotations

import argparse
import importlib.util
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import ModuleType

MODES = ("null", "prefill", "decode")
A2A_BACKENDS = (
    "none",
    "deepep",
    "mooncake",
    "nixl",
    "mori",
    "ascend_fuseep",
    "flashinfer",
    "megamoe",
    "deepep_v2",
    "pplx",
    "ascend_tp",
    "flashinfer_megamoe",
)


class StartupError(Exception):
    """SGLang would refuse to start with these arguments (ValueError at resolution time)."""


@dataclass(frozen=True)
class ServerArgs:
    model_path: str
    served_model_name: str
    host: str
    port: int
    mode: str
    bootstrap_port: int
    tp_size: int
    dp_size: int
    attn_dp_size: int
    ep_size: int
    max_running_requests: int | None
    cuda_graph_bs_decode: tuple[int, ...] | None
    cuda_graph_max_bs_decode: int | None
    disable_cuda_graph_padding: bool
    disable_decode_cuda_graph: bool
    disable_overlap_schedule: bool
    enable_two_batch_overlap: bool
    moe_a2a_backend: str
    enable_metrics: bool
    tool_call_parser: str | None
    reasoning_parser: str | None
    page_size: int
    kv_cache_dtype: str
    transfer_backend: str
    ignored: tuple[str, ...] = field(default=())
    argv: tuple[str, ...] = field(default=())
    decode_log_interval: int = 40  # decode iterations between metric reports (observability.py)
    context_length: int | None = None  # --context-length; None: the model's (twin/limits.py)

    @property
    def overlap_schedule(self) -> bool:
        return not self.disable_overlap_schedule


_TYPES = {"int": int, "float": float}


@cache
def _flag_tables() -> ModuleType:
    """The generated table of the real parser's flags, loaded by path: the twin is its own
    program and must not pull in the profiles package (yaml, validation) to start."""
    path = Path(__file__).resolve().parent.parent / "profiles" / "_flag_tables.py"
    spec = importlib.util.spec_from_file_location("_dsv4ops_sglang_flag_tables", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _add_unmodelled_flags(p: argparse.ArgumentParser) -> None:
    """Every real SGLang flag the twin does not model: accepted with SGLang's arity, ignored."""
    declared = set(p._option_string_actions)
    for flag, (nargs, kind, choices) in _flag_tables().SGLANG_SERVER_TABLE.items():
        if flag in declared:
            continue
        name = flag.lstrip("-").replace("-", "_")
        dest = "unmodelled_" + name
        if nargs == 0:
            p.add_argument(flag, dest=dest, action="store_true")
        else:  # metavar: what SGLang's usage line shows
            p.add_argument(
                flag,
                dest=dest,
                nargs=None if nargs == 1 else nargs,
                type=_TYPES.get(kind, str),
                choices=choices,
                default=None,
                metavar=None if choices else name.upper(),
            )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sglang serve")
    add = p.add_argument
    add("--model-path", "--model", dest="model_path", required=True)
    add("--served-model-name")
    add("--tokenizer-path")
    add("--host", default="127.0.0.1")
    add("--port", type=int, default=30000)
    add("--tp-size", "--tensor-parallel-size", dest="tp_size", type=int, default=1)
    add("--dp-size", "--data-parallel-size", dest="dp_size", type=int, default=1)
    add(
        "--attn-dp-size", "--attention-data-parallel-size", dest="attn_dp_size", type=int, default=1
    )
    add("--ep-size", "--expert-parallel-size", "--ep", dest="ep_size", type=int, default=1)
    add("--max-running-requests", type=int)
    add("--context-length", type=int)
    add("--page-size", type=int)
    add("--kv-cache-dtype", default="auto")
    add("--disable-overlap-schedule", action="store_true")
    add("--enable-two-batch-overlap", action="store_true")
    add("--enable-single-batch-overlap", action="store_true")
    add("--moe-a2a-backend", choices=A2A_BACKENDS, default="none")
    add("--enable-metrics", action="store_true")
    add("--enable-metrics-for-all-schedulers", action="store_true")
    add("--decode-log-interval", type=int, default=40)
    add("--tool-call-parser")
    add("--reasoning-parser")
    add("--disaggregation-mode", choices=MODES, default="null")
    add(
        "--disaggregation-transfer-backend",
        default="mooncake",
        choices=("mooncake", "nixl", "ascend", "fake", "mori", "mooncake_tcp"),
    )
    add("--disaggregation-bootstrap-port", type=int, default=8998)
    # CUDA-graph flags of 0.5.23: declaring both phases makes the removed un-suffixed names
    # ambiguous prefixes, as in SGLang.
    add("--cuda-graph-bs-decode", type=int, nargs="+")
    add("--cuda-graph-bs-prefill", type=int, nargs="+")
    add("--cuda-graph-max-bs-decode", type=int)
    add("--cuda-graph-max-bs-prefill", type=int)
    add("--cuda-graph-max-seq-len-prefill", type=int)
    add("--cuda-graph-config")
    add("--cuda-graph-backend-decode", choices=("full", "breakable", "disabled"))
    add("--cuda-graph-backend-prefill", choices=("full", "breakable", "disabled"))
    add("--disable-decode-cuda-graph", action="store_true")
    add("--disable-prefill-cuda-graph", action="store_true")
    add("--disable-cuda-graph-padding", action="store_true")
    _add_unmodelled_flags(p)
    return p


def _unmodelled(argv: list[str], parser: argparse.ArgumentParser) -> tuple[str, ...]:
    """The real SGLang flags on the command line the twin does not model (for the log/state)."""
    out = []
    for arg in argv:
        if not arg.startswith("--"):
            continue
        action = parser._option_string_actions.get(arg.split("=", 1)[0])
        if action is not None and action.dest.startswith("unmodelled_"):
            out.append(arg.split("=", 1)[0])
    return tuple(out)


def parse_args(argv: list[str]) -> ServerArgs:
    """Parse like SGLang. argparse errors exit 2; StartupError for resolution-time refusals."""
    parser = build_parser()
    ns = parser.parse_args(argv)  # unknown flags: exit 2, as SGLang (server_args.py:696)
    if ns.enable_two_batch_overlap and ns.moe_a2a_backend == "none" and ns.attn_dp_size <= 1:
        # arg_groups/validation_hook.py:756-771
        raise StartupError(
            "ValueError: --enable-two-batch-overlap requires --moe-a2a-backend other than 'none' "
            "or attention data parallelism (--attn-dp-size > 1)"
        )
    if ns.disaggregation_mode == "prefill" and ns.disaggregation_transfer_backend == "fake":
        raise StartupError("ValueError: the fake transfer backend cannot be used on a prefill")
    if ns.decode_log_interval < 1:
        # SGLang accepts it and dies on the first decode batch (`forward_ct % 0`); refuse early.
        raise StartupError(
            f"ValueError: --decode-log-interval must be >= 1, got " f"{ns.decode_log_interval}"
        )
    ep_size = ns.tp_size if ns.moe_a2a_backend != "none" else ns.ep_size
    kv_dtype = "fp8_e4m3" if ns.kv_cache_dtype == "auto" else ns.kv_cache_dtype
    return ServerArgs(
        model_path=ns.model_path,
        served_model_name=ns.served_model_name or ns.model_path,
        host=ns.host,
        port=ns.port,
        mode=ns.disaggregation_mode,
        bootstrap_port=ns.disaggregation_bootstrap_port,
        tp_size=ns.tp_size,
        dp_size=ns.dp_size,
        attn_dp_size=ns.attn_dp_size,
        ep_size=ep_size,
        max_running_requests=ns.max_running_requests,
        cuda_graph_bs_decode=tuple(ns.cuda_graph_bs_decode) if ns.cuda_graph_bs_decode else None,
        cuda_graph_max_bs_decode=ns.cuda_graph_max_bs_decode,
        disable_cuda_graph_padding=ns.disable_cuda_graph_padding,
        disable_decode_cuda_graph=ns.disable_decode_cuda_graph
        or ns.cuda_graph_backend_decode == "disabled",
        disable_overlap_schedule=ns.disable_overlap_schedule,
        enable_two_batch_overlap=ns.enable_two_batch_overlap,
        moe_a2a_backend=ns.moe_a2a_backend,
        enable_metrics=ns.enable_metrics,
        tool_call_parser=ns.tool_call_parser,
        reasoning_parser=ns.reasoning_parser,
        page_size=ns.page_size or 256,  # DSV4 default
        kv_cache_dtype=kv_dtype,
        transfer_backend=ns.disaggregation_transfer_backend,
        ignored=_unmodelled(argv, parser),
        argv=tuple(argv),
        decode_log_interval=ns.decode_log_interval,
        context_length=ns.context_length,
    )
