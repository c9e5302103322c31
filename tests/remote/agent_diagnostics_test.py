"""The agent's `diagnostics` op on a real process: its process tree, log tail and `py-spy dump`,
with the process's own secret values scrubbed before anything leaves the target."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from dsv4ops.remote import ProcessSpec, Supervisor
from testing.ports import free_ports
from testing.remote import toy_argv, wait_for_log_line

SECRET = "hf_agentSideSecret77"


def test_tree_log_and_py_spy_scrubbed_on_the_target(local_sup: Supervisor, workdir: Path) -> None:
    assert shutil.which("py-spy", path=str(Path(sys.executable).parent)), "py-spy: the dev extra"
    (port,) = free_ports(1)
    # issue 21, F3: every secret flag of the tables, each shape; py-spy prints the cmdline
    argv = toy_argv(
        "--port",
        port,
        "--api-key",
        "flag-secret-1",
        "--admin-api-key",
        "flag-secret-2",
        "--ssl-keyfile-password=flag-secret-3",
        "--control-plane-api-keys",
        "flag-secret-4",
        "flag-secret-5",
        SECRET,
    )
    local_sup.start(ProcessSpec("web", argv, {"HF_TOKEN": SECRET}, (port,)))
    wait_for_log_line(workdir, "web", "toy: argv=")
    reply = local_sup.call("diagnostics", names=["web", "absent"], log_lines=50)
    web, absent = reply["components"]
    assert [p["argv"][0] for p in web["processes"]] == [sys.executable]
    argv_seen = web["processes"][0]["argv"]
    assert "***" in argv_seen and SECRET not in argv_seen and "flag-secret" not in str(argv_seen)
    assert "toy: argv=" in web["log_tail"] and SECRET not in web["log_tail"]
    assert "flag-secret" not in web["log_tail"], web["log_tail"]
    (dump,) = web["py_spy"].values()
    assert "Thread" in dump and SECRET not in dump, dump[:400]
    assert "flag-secret" not in dump, dump[:400]
    assert web["py_spy_missing"] is None
    assert absent["processes"] == [] and absent["py_spy"] == {}
