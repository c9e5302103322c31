"""Plain-language causes for component start failures the operator can fix on the target.

A component whose interpreter lacks its module exits at once and the readiness wait fails with
the log tail; the traceback's last line ("No module named 'dsv4ops'") is easy to miss in it, and
for the twin over SSH it means the target's `python` has no dsv4ops installed.
"""

from __future__ import annotations

import re

_MISSING = re.compile(r"No module named '([A-Za-z0-9_.]+)'")
# Top-level module -> what to install into the target's python.
_PROVIDES = {
    "dsv4ops": "dsv4ops (the twin launcher runs `python -m dsv4ops.twin.launch_server` there)",
    "sglang": "sglang 0.5.23",
    "sglang_router": "sglang-router 0.3.2",
}


def missing_module_hint(log_text: str, python: str) -> str | None:
    """One sentence when the log shows the interpreter could not import a module, else None."""
    match = _MISSING.search(log_text)
    if match is None:
        return None
    module = match.group(1)
    top = module.split(".")[0]
    what = _PROVIDES.get(top, f"the package that provides '{top}'")
    return (
        f"the target's python ({python}) cannot import '{module}': install {what} into it, "
        "or set `python:` for this target in targets.yaml to an interpreter that has it"
    )
