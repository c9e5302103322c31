"""After a deploy, the real twin decode (a process, started with the recorded env) loads the
package, and `loaded_check` tells it apart from a server that fell back to default configs."""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path

import pytest

from dsv4ops.kernels import deploy as kd
from dsv4ops.kernels import loaded_check
from dsv4ops.remote.local import LocalExecutor
from testing.twin_stack import twin_stack

pytestmark = [pytest.mark.kernels, pytest.mark.slow]


def _server_info(url: str) -> str:
    with urllib.request.urlopen(f"{url}/server_info", timeout=10) as resp:
        return resp.read().decode()


def test_twin_decode_reports_the_deployed_package(built, tmp_path: Path) -> None:
    workdir = tmp_path / "target"
    with LocalExecutor() as ex:
        kd.deploy(ex, str(workdir), sys.executable, built.v2.path, kd.twin_runtime())
    env = json.loads((workdir / "state" / "kernels.json").read_text())["env"]
    with twin_stack(decode_env=env, workdir=tmp_path / "stack") as stack:
        decode = loaded_check(_server_info(stack.decode.url), stack.decode.log_tail(200),
                              expected="dsv4-decode-kernels@0.2.0")
        prefill = loaded_check(_server_info(stack.prefill.url), stack.prefill.log_tail(200),
                               expected="dsv4-decode-kernels@0.2.0")
    assert decode.used and decode.package == "dsv4-decode-kernels@0.2.0", decode
    assert not prefill.used and "Using default MoE kernel config" in prefill.reason
