"""`loaded_check`: did the server use the tuned package, judged from /server_info and its log."""

from __future__ import annotations

import json

from dsv4ops.kernels import loaded_check

SGLANG_DEFAULT = ("[2026-11-29 10:00:01 TP0] Using default MoE kernel config. Performance might be "
                  "sub-optimal! Config file not found at /x/configs/triton_3_8_0/E=256,N=512,...json")


def test_real_sglang_without_package_report_is_judged_by_the_log() -> None:
    info = json.dumps({"version": "0.5.23"})
    assert loaded_check(info, "[TP0] Load weight end.\n").used
    result = loaded_check(info, "boot\n" + SGLANG_DEFAULT + "\nready\n")
    assert not result.used and "Using default MoE kernel config" in result.reason


def test_twin_report_must_name_the_expected_package() -> None:
    info = {"twin_kernel_package": {"name": "dsv4-decode-kernels", "version": "0.2.0", "dir": "/w"}}
    assert loaded_check(info, "", expected="dsv4-decode-kernels@0.2.0").used
    wrong = loaded_check(info, "", expected="dsv4-decode-kernels@0.1.0")
    assert not wrong.used and "loaded dsv4-decode-kernels@0.2.0, expected" in wrong.reason
    none = loaded_check({"twin_kernel_package": None}, "", expected="dsv4-decode-kernels@0.1.0")
    assert not none.used and none.package is None
