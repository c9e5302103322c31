"""`make demo`: deploy the safe baseline to twin-fast ($DSV4OPS_TARGET to choose another), show status, canary it, redeploy another
profile, roll back, stop. Runs the real CLI verbs on the twin and the real sglang-router, and
leaves nothing running (a final stop runs even when a step fails).
"""

from __future__ import annotations

import os
import sys

from dsv4ops.cli import main as cli_main

DEFAULT_TARGET = "twin-fast"
TARGET_ENV = "DSV4OPS_TARGET"
# The twin models a real start-up (minutes of weight loading); the demo's target `twin-fast`
# compresses model time in its own `twin_env` (profiles/targets.yaml), so every command the demo
# prints runs the same when copied. The router's tokenizer lookup must not wait on the network:
# the one variable the demo sets itself, and says so.
DEMO_ENV = {"HF_HUB_OFFLINE": "1"}

# Short canaries; on a busy laptop the canary may not be able to judge latency (INCONCLUSIVE):
# the demo keeps such a deployment, a FAIL verdict still rolls back.
# 20 s gives the sweep enough steps per concurrency level to fit the step law.
CANARY = ["--canary-duration", "20", "--accept-inconclusive-canary"]

STEPS: list[tuple[str, list[str]]] = [
    (
        "Deploy the safe baseline (overlap off, multi-stream overlap off, step-8 buckets). The PD pair "
        "and the router restart as one unit in the safe order, an end-to-end probe proves the KV "
        "transfer, and the smoke canary runs (a first deploy has no flag change to canary).",
        ["deploy", "baseline", "--yes", *CANARY, "--reason", "demo: safe baseline"],
    ),
    ("Status: health, versions, captured buckets, load, router readiness, drift.", ["status"]),
    (
        "Dry run of a change: the plan with the exact commands; nothing is touched.",
        ["deploy", "buckets-step4", "--dry-run"],
    ),
    (
        "Deploy another profile (step-4 decode buckets). The bucket change selects the sweep canary.",
        ["deploy", "buckets-step4", "--yes", *CANARY, "--reason", "demo: finer buckets"],
    ),
    (
        "Roll back to the last known-good deployment (the baseline), rebuilt from what the journal "
        "recorded, by the same safe path; the end-to-end probe always runs.",
        ["rollback", "--yes", "--reason", "demo: roll back"],
    ),
    ("Status after the rollback.", ["status"]),
    (
        "The journal: who deployed what, when, from which commit, and how it ended.",
        ["journal", "--limit", "10"],
    ),
]


def _emit(text: str, *, err: bool = False) -> None:
    # The demo is a narrative on stdout (no click here: it drives the CLI like a user would).
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")
    stream.flush()


def _say(text: str) -> None:
    _emit(f"\n=== {text}")


def _settings(name: str) -> str | None:
    """What the demo runs on, said before it runs: the target's twin settings and ports. None
    when the target cannot be read (the first command then says why, with its hint)."""
    from dsv4ops.errors import DsOpsError
    from dsv4ops.profiles import get_target

    try:
        target = get_target(name)
    except DsOpsError:
        return None
    twin = " ".join(f"{k}={v}" for k, v in target.twin_env) or "none (real timing)"
    own = " ".join(f"{k}={v}" for k, v in DEMO_ENV.items())
    return (
        f"target {name} ({target.description}): launcher {target.launcher}, port_offset "
        f"{target.port_offset}; twin_env {twin}; the demo also sets {own}"
    )


def main() -> int:
    target = os.environ.get(TARGET_ENV) or DEFAULT_TARGET
    for key, value in DEMO_ENV.items():
        os.environ.setdefault(key, value)
    settings = _settings(target)
    if settings:
        _emit(settings)
    failed = None
    try:
        for n, (story, argv) in enumerate(STEPS, start=1):
            _say(f"{n}. {story}")
            _emit(f"$ dsv4ops {' '.join(argv)} --target {target}")
            code = cli_main([*argv, "--target", target])
            if code != 0:
                failed = f"'dsv4ops {' '.join(argv)}' exited with {code}"
                break
    finally:
        _say(
            f"{len(STEPS) + 1}. Stop everything: router, decode, prefill, in that order; no process of "
            "ours left, every port closed."
        )
        stop_code = cli_main(
            ["stop", "--yes", "--recover", "--target", target, "--reason", "demo: done"]
        )
    if failed:
        _emit(f"\ndemo failed: {failed}", err=True)
        return 1
    if stop_code != 0:
        _emit("\ndemo failed: the final stop did not complete", err=True)
        return 1
    _emit(
        "\ndemo finished: deployed, checked, changed, rolled back and stopped; nothing left running."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
