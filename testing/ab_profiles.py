"""Profiles for the A/B tests on the twin (testing/orchestrate_env.py): the shipped ones with
the decode's metrics published every 10 decode steps instead of 40, so the sweep's short levels
span whole log intervals and the A/B can use the server's own accounting; and the twin settings
those tests run at."""

from __future__ import annotations

from testing.orchestrate_env import OrchEnv, commit_all

# Model time x 0.2: slow enough that the client keeps up with 60 streams on a shared 2-core
# machine. Every block restarts the unit: the schedulers' exit after ShutdownReq and the SIGTERM
# watchdog's tick (3 s and 5 s model time by default) are cut to keep a block near 8 s.
AB_TWIN_ENV = {"DSV4_TWIN_TIME_SCALE": "0.2", "DSV4_TWIN_SCHEDULER_EXIT_S": "0.5",
               "DSV4_TWIN_SIGTERM_TICK_S": "0.5"}
# Short sweep requests: the staircase's drain after the last level waits for them.
AB_WORKLOAD = {"sweep_max_tokens": 64}
VARIANTS = {"ab-base": "baseline", "ab-overlap": "overlap-on", "ab-step4": "buckets-step4"}


def add_ab_profiles(env: OrchEnv) -> None:
    """Write and commit the A/B variants (each extends the shipped profile of its name)."""
    for name, base in VARIANTS.items():
        (env.profiles_dir / f"{name}.yaml").write_text(
            f"schema_version: 1\nextends: {base}\n"
            f"description: {base} with decode metrics every 10 steps (A/B tests)\n"
            "decode:\n  extra_args: [--decode-log-interval, '10']\n"
        )
    commit_all(env, "A/B test profiles")
