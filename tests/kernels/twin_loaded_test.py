"""After a deploy, the real twin decode (a process, started with the recorded env) loads the
package's plugin through importlib.metadata entry points, as SGLang does, and `loaded_check`
says "in use" only with that evidence; without the entry point, or on a MoE path that reads
nothing, it says so."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from dsv4ops.kernels import deploy as kd
from dsv4ops.kernels import loaded_check
from dsv4ops.kernels.loaded import IN_USE, NOT_LOADED, NOT_USED_BY_BACKEND
from dsv4ops.remote.local import LocalExecutor
from dsv4ops.sglang_paths import moe_path
from testing.kernels import Built
from testing.twin import twin_stack

pytestmark = [pytest.mark.kernels, pytest.mark.slow]
REF = "dsv4-decode-kernels@0.2.0"
TRITON = {"SGLANG_DSV4_FP4_DEQUANT": "1", "SGLANG_ENABLE_JIT_DEEPGEMM": "0"}


def test_twin_decode_loads_the_plugin_and_reads_the_package_configs(
    built: Built, tmp_path: Path
) -> None:
    workdir = tmp_path / "target"
    with LocalExecutor() as ex:
        kd.deploy(ex, str(workdir), sys.executable, built.v2.path, kd.twin_runtime())
    env = json.loads((workdir / "state" / "kernels.json").read_text())["env"]
    assert set(env) == {"SGLANG_MOE_CONFIG_DIR", "SGLANG_PLUGINS", "PYTHONPATH"}
    root = Path(env["SGLANG_MOE_CONFIG_DIR"])
    with twin_stack(
        decode_env={**env, **TRITON}, prefill_env=env, workdir=tmp_path / "stack"
    ) as stack:
        decode_log, prefill_log = stack.decode.log_tail(200), stack.prefill.log_tail(200)
    decode = loaded_check("{}", decode_log, expected=REF, moe=moe_path([], {**env, **TRITON}))
    assert decode.used and decode.state == IN_USE and decode.package == REF, decode
    assert "[dsv4ops-kernel-plugin] loaded dsv4-decode-kernels 0.2.0" in decode.evidence[0]
    assert f"Using MoE kernel config from {root}/configs/triton_3_8_0/" in decode.evidence[-1]
    # The prefill loads the plugin too, but runs the flashinfer path: nothing of it is used.
    prefill = loaded_check("{}", prefill_log, expected=REF, moe=moe_path([], env))
    assert not prefill.used and prefill.state == NOT_USED_BY_BACKEND, prefill

    # Without the entry point (the dist-info gone), SGLang's loader finds nothing: not loaded.
    for d in (root / "site").glob("*.dist-info"):
        shutil.rmtree(d)
    with twin_stack(decode_env={**env, **TRITON}, workdir=tmp_path / "stack2") as stack:
        log = stack.decode.log_tail(200)
    gone = loaded_check("{}", log, expected=REF, moe=moe_path([], {**env, **TRITON}))
    assert not gone.used and gone.state == NOT_LOADED, gone
