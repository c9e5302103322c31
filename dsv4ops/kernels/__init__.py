"""Tuned decode-kernel packages: build (checks + artifact), verify, deploy, list, roll back.

Entry points other parts call: `package_present(executor_or_supervisor, workdir, "name@version")`
for deploy preflight and `loaded_check(server_info_json, log_text, expected)` after a deploy.
torch/triton are imported only by the checks that need them.
"""

from __future__ import annotations

from dsv4ops.kernels.deploy import package_present
from dsv4ops.kernels.loaded import LoadedCheck, loaded_check

__all__ = ["LoadedCheck", "loaded_check", "package_present"]
