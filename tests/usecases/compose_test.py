"""The readiness and stop bounds the use cases give a target."""

from __future__ import annotations

from dsv4ops.profiles import get_target
from dsv4ops.timings import STOP_GRACE_S
from dsv4ops.twin.config import load_config
from dsv4ops.twin.shutdown import SCHEDULER_EXIT_TIMEOUT_S
from dsv4ops.usecases.compose import timeouts_for


def test_the_twin_targets_stop_grace_outlasts_the_twins_worst_graceful_exit() -> None:
    """A wedged decode's graceful exit: the SIGTERM watchdog notices within one tick, then the
    schedulers get their 15 s and are killed. A shorter grace SIGKILLs a twin that was exiting
    the way SGLang does, and the stop reports `forced` for what was not."""
    cfg = load_config({})
    worst = cfg.wall(cfg.sigterm_tick_s + SCHEDULER_EXIT_TIMEOUT_S)
    cap = timeouts_for(get_target("twin-local")).stop_grace_cap_s
    # a shipped profile's grace (the default) as the twin cuts it
    assert cap is not None and min(STOP_GRACE_S, cap) > worst
