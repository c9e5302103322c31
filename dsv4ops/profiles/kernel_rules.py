"""The kernel package rules (in rules.RULES): a package something in the configuration loads, and
the sparse decode attention switch only where its path runs.

A package delivers two things (docs/kernels.md): MoE configs, read only on SGLang's
triton_fp8_dequant MoE path, and a REPLACE hook on the sm_120 decode attention entry point,
registered only with decode.env DSV4OPS_SPARSE_DECODE_ATTN: "1". A pin neither would load, and
a switch nothing registers or that the decode never reaches, are refused at their line.
"""

from __future__ import annotations

import re

from dsv4ops.profiles.model import Profile
from dsv4ops.profiles.problems import Problems
from dsv4ops.profiles.provenance import Provenance
from dsv4ops.sglang_paths import (
    SPARSE_ATTN_CALLEE,
    SPARSE_ATTN_ENV,
    moe_path,
    sparse_attn_asked,
    sparse_attn_blocker,
)

KERNEL_PACKAGE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*@[A-Za-z0-9][A-Za-z0-9.+_-]*$")
_SWITCH_KEY = f"decode.env.{SPARSE_ATTN_ENV}"


def rule_kernel_package_loadable(p: Profile, prov: Provenance, sink: Problems) -> None:
    """Refuse a pinned package that neither the decode's MoE path nor the attention switch
    would load."""
    if not (
        sink.usable("kernel_package")
        and p.kernel_package
        and KERNEL_PACKAGE_RE.match(p.kernel_package)
    ):
        return
    if sparse_attn_asked(p.decode.env_dict):
        return  # the attention hook loads it (rule_sparse_decode_attn checks it can run)
    path = moe_path(p.decode.extra_args, p.decode.env_dict)
    if not path.reads_triton_configs:
        sink.error(
            prov,
            "kernel_package",
            f"nothing in this configuration would load {p.kernel_package}: the decode runs "
            f"{path.name} ({path.why}). Drop kernel_package; or run its attention kernel: "
            f"decode.env {SPARSE_ATTN_ENV}: '1' (profiles/kernels-attn.yaml); or run the "
            "triton path: decode.env SGLANG_DSV4_FP4_DEQUANT: '1' and "
            "SGLANG_ENABLE_JIT_DEEPGEMM: '0' with --moe-runner-backend auto (docs/kernels.md)",
        )


def rule_sparse_decode_attn(p: Profile, prov: Provenance, sink: Problems) -> None:
    """The switch: exactly '1' or '0'; on, only with a kernel package (its plugin registers the
    hook) and a decode that calls the entry point it replaces (dsv4 backend, CUDA)."""
    env = p.decode.env_dict
    if not sink.usable("decode.env") or SPARSE_ATTN_ENV not in env:
        return
    value = env[SPARSE_ATTN_ENV]
    if value not in ("0", "1"):
        sink.error(prov, _SWITCH_KEY, f"expected '1' (on) or '0' (off), got {value!r}")
        return
    if value == "0":
        return
    if not p.kernel_package and sink.usable("kernel_package"):
        sink.error(
            prov,
            _SWITCH_KEY,
            f"{SPARSE_ATTN_ENV}: '1' turns on a hook the kernel package's SGLang plugin "
            "registers, and no kernel_package is pinned: nothing would register it. Set "
            "kernel_package: NAME@VERSION (what `dsv4ops kernels build` printed, installed "
            "by `dsv4ops kernels deploy`), or drop the switch",
        )
    blocker = sparse_attn_blocker(p.decode.extra_args)
    if blocker and sink.usable("decode.extra_args"):
        sink.error(
            prov,
            _SWITCH_KEY,
            f"{SPARSE_ATTN_ENV}: '1' replaces {SPARSE_ATTN_CALLEE}, which this decode never "
            f"calls ({blocker}); drop the switch or that flag",
        )
