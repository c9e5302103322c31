"""On the GPU box: is the deployed kernel package right for this machine, and correct here?

    /opt/sglang/.venv/bin/python kernels_box_check.py /opt/dsv4ops/kernels/dsv4-decode-kernels/current

Self-contained (torch + triton from the server venv, no dsv4ops). Checks, in order:
1. every file's sha256 against manifest.json;
2. this GPU's name and compute capability, and this triton's version, against the manifest;
3. the file SGLang's own lookup computes exists: `configs/triton_<ver>/<name>`, <name> from
   sglang's get_config_file_name(256, 512, "fp8_w8a8", [128, 128]) (the triton_fp8_dequant path,
   dsv4ops/sglang_paths.py), imported from the server venv; the same rule inline without it;
4. both kernels at full DSV4-Flash per-rank shapes (16 heads, 512-d, 128 + 512 rows; 256 experts,
   hidden 4096, intermediate 512) against the torch references shipped in the package, and the
   FP4-expert MoE (NVFP4 and MXFP4 W4A16, moe_fp4_configs/) at the same MoE shape, for each FP4
   format whose config files the package holds.
Exit 0 when all pass. Outside testpaths on purpose: it needs the box's GPU.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path


def _sglang_config_name(device_name: str) -> str:
    """The up-projection config name SGLang looks up for DSV4-Flash at TP4 on the FP8-dequant
    triton path: SGLang's own function when sglang imports here, else its rule (L36-51)."""
    try:
        from sglang.srt.layers.moe.moe_runner.triton_utils.fused_moe_triton_config import (
            get_config_file_name,
        )
    except Exception:  # noqa: BLE001 - any import failure: fall back to the rule
        return f"E=256,N=512,device_name={device_name},dtype=fp8_w8a8,block_shape=[128, 128].json"
    return get_config_file_name(256, 512, "fp8_w8a8", [128, 128])


def _checksum_failures(root: Path, manifest: dict) -> list[str]:
    failures = []
    for entry in manifest["files"]:
        digest = hashlib.sha256((root / entry["path"]).read_bytes()).hexdigest()
        if digest != entry["sha256"]:
            failures.append(f"checksum mismatch: {entry['path']}")
    return failures


def _machine_failures(
    torch, triton, root: Path, manifest: dict, name: str
) -> tuple[list[str], Path]:
    """This GPU and triton against the manifest, and the config file SGLang's lookup computes."""
    failures = []
    major, minor = torch.cuda.get_device_capability()
    arch = f"sm_{major}{minor}"
    if arch != manifest["target"]["arch"]:
        failures.append(f"GPU is {arch}, package targets {manifest['target']['arch']}")
    if name not in manifest["target"]["device_names"]:
        failures.append(f"GPU {name} not in {manifest['target']['device_names']}")
    if triton.__version__ != manifest["toolchain"]["triton"]:
        failures.append(
            f"triton {triton.__version__} here, package built for {manifest['toolchain']['triton']}"
        )
    lookup = (
        root
        / "configs"
        / f"triton_{triton.__version__.replace('.', '_')}"
        / _sglang_config_name(name)
    )
    if not lookup.is_file():
        failures.append(f"SGLang would not find {lookup}")
    return failures, lookup


def _correctness_failures(torch, root: Path, lookup: Path, name: str) -> list[str]:
    """Both kernels, then each FP4 MoE format the package holds configs for, against the torch
    references; the benchmark's plumbing runs the deployed copy's `kernels/`, not the repo's."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import kernels_gpu
    from kernels_gpu import (  # the benchmark's plumbing
        attn_inputs,
        check_correct,
        check_mxfp4,
        check_nvfp4,
        moe_inputs,
        moe_mxfp4_inputs,
        moe_nvfp4_inputs,
    )

    sys.path.insert(0, str(root))
    kernels_gpu.KERNEL_PACKAGE = "kernels"
    failures = []
    attn_cfg = json.loads(next((root / "attention_configs").glob("triton_*/*.json")).read_text())[
        "1"
    ]
    moe_cfg = json.loads(lookup.read_text())["1"] if lookup.is_file() else None
    if moe_cfg:
        attn = attn_inputs(torch, 1, "cuda")[0]
        verdict = check_correct(torch, attn, moe_inputs(torch, 1, "cuda")[0], attn_cfg, moe_cfg)
        if not verdict.startswith("PASS"):
            failures.append(f"correctness: {verdict}")
    fp4_dir = root / "moe_fp4_configs" / lookup.parent.name
    fp4 = (
        ("nvfp4_w4a16", moe_nvfp4_inputs, check_nvfp4),
        ("mxfp4_w4a16", moe_mxfp4_inputs, check_mxfp4),
    )
    for dtype, inputs, check in fp4:
        paths = [
            fp4_dir / f"kernel=fused_moe,E=256,N=512,device_name={name},dtype={dtype}{d}.json"
            for d in ("", "_down")
        ]
        if not all(p.is_file() for p in paths):
            print(f"skip {dtype}: the package has no {paths[0].name}")  # noqa: T201
            continue
        up_cfg, down_cfg = (json.loads(p.read_text())["1"] for p in paths)
        ok, err = check(torch, inputs(torch, 1, "cuda")[0], up_cfg, down_cfg)
        if not ok:
            failures.append(f"correctness: {dtype} MoE max rel err {err:.2e}")
    return failures


def main(argv: list[str]) -> int:
    root = Path(argv[0] if argv else ".").resolve()
    manifest = json.loads((root / "manifest.json").read_text())
    failures = _checksum_failures(root, manifest)

    import torch
    import triton

    if not torch.cuda.is_available():
        sys.stderr.write("no CUDA device: this check runs on the GPU box\n")
        return 2
    name = torch.cuda.get_device_name().replace(" ", "_")
    machine, lookup = _machine_failures(torch, triton, root, manifest, name)
    failures += machine
    try:  # an ImportError here or in the deployed `kernels/` the check imports
        failures += _correctness_failures(torch, root, lookup, name)
    except ImportError as exc:
        failures.append(
            f"cannot run the correctness check: {exc} (copy benchmarks/kernels_gpu.py next to this script)"
        )

    for f in failures:
        print(f"FAIL {f}")  # noqa: T201 - a standalone script for the box
    summary = "OK" if not failures else f"{len(failures)} check(s) failed"
    print(summary, f"({manifest['name']}@{manifest['version']})")  # noqa: T201
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
