"""The simulated scheduler's metrics reporter on a fake clock: when the gauges are published."""

from __future__ import annotations

from dsv4ops.twin.config import load_config
from dsv4ops.twin.reporter import SchedStats, StatsReporter


class World:
    """The scheduler state the reporter reads, plus a settable clock (wall seconds)."""

    def __init__(self) -> None:
        self.t = 1000.0
        self.live = SchedStats()
        self.idle = True

    def reporter(self, *, interval: int = 40, **env: str) -> StatsReporter:
        cfg = load_config({"DSV4_TWIN_TIME_SCALE": "0.1", **env})
        return StatsReporter(
            cfg,
            decode_log_interval=interval,
            live=lambda: self.live,
            fully_idle=lambda: self.idle,
            clock=lambda: self.t,
        )


def _decode(world: World, rep: StatsReporter, steps: int, batch: int, step_s: float = 0.01) -> None:
    world.live = SchedStats(running=batch)
    world.idle = False
    for _ in range(steps):
        world.t += step_s
        rep.decode_step(batch, batch_size=batch)


def test_gauges_are_published_only_every_decode_log_interval() -> None:
    world = World()
    rep = world.reporter(interval=7)
    rep.start()
    _decode(world, rep, 6, batch=3)
    assert rep.published.running == 0 and rep.logs == 1  # six iterations: nothing logged yet
    _decode(world, rep, 1, batch=3)
    assert rep.published.running == 3 and rep.logs == 2
    # 7 iterations x 3 tokens over 0.07 s wall = 0.7 model s (scale 0.1)
    assert abs(rep.published.gen_throughput - 21 / 0.7) < 1e-6
    _decode(world, rep, 13, batch=3)
    assert rep.logs == 3  # at iteration 14, not at 20


def test_realtime_tokens_every_iteration_or_only_at_the_log_interval() -> None:
    world = World()
    per_iteration = world.reporter(interval=7)
    _decode(world, per_iteration, 20, batch=2)
    assert per_iteration.realtime_tokens["decode"] == 40
    world = World()
    per_log = world.reporter(interval=7, DSV4_TWIN_REALTIME_TOKENS="per_log_interval")
    _decode(world, per_log, 20, batch=2)
    assert per_log.realtime_tokens["decode"] == 28  # two logs (iterations 7 and 14) x 7 x 2


def test_idle_republishes_at_once_when_the_running_gauge_is_stale() -> None:
    world = World()
    rep = world.reporter(interval=5)
    _decode(world, rep, 5, batch=4)
    assert rep.published.running == 4 and rep.published.gen_throughput > 0
    world.live, world.idle = SchedStats(), True
    assert rep.on_idle()
    assert rep.published.running == 0 and rep.published.gen_throughput == 0.0


def test_idle_republishes_every_30_model_seconds_otherwise_and_only_when_fully_idle() -> None:
    world = World()
    rep = world.reporter()  # time scale 0.1: 30 model s = 3 s wall
    rep.start()
    world.t += 2.9
    assert not rep.on_idle()
    world.t += 0.2
    world.idle = False  # a transfer in flight: on_idle is not the idle path
    assert not rep.on_idle()
    world.idle = True
    assert rep.on_idle() and rep.logs == 2


def test_a_rank_with_an_empty_batch_republishes_its_own_view() -> None:
    world = World()
    rep = world.reporter(interval=5)
    _decode(world, rep, 5, batch=6)
    # the twin still holds the batch (other ranks), rank 0 dropped it
    assert rep.on_idle(rank0_view=SchedStats(running=0))
    assert rep.published.running == 0
    assert not rep.on_idle(rank0_view=SchedStats(running=0, queued=2))  # not idle: queue


def test_prefill_batches_publish_and_count_prefill_tokens() -> None:
    world = World()
    rep = world.reporter()
    world.live = SchedStats(running=1, prefill_bootstrap_queue=2, prefill_inflight_queue=1)
    rep.prefill_batch(500, 12)
    assert rep.realtime_tokens == {"prefill_compute": 500, "prefill_cache": 12, "decode": 0}
    assert rep.published.prefill_bootstrap_queue == 2 and rep.published.running == 1


def test_cuda_graph_passes_are_counted_every_forward_pass_by_mode() -> None:
    # 0.5.23 bumps cuda_graph_passes_total on every decode batch (batch_result_processor.py
    # L994) and every prefill batch (metrics_reporter.py L807), not at the log interval.
    world = World()
    rep = world.reporter(interval=40)
    rep.start()
    assert rep.graph_passes == {}  # a labelled child appears on its first pass
    for _ in range(3):
        rep.decode_step(4, batch_size=4, cuda_graph=True)
    rep.decode_step(9, batch_size=9, cuda_graph=False)  # above the largest bucket: eager
    rep.prefill_batch(100)
    assert rep.graph_passes == {"decode_cuda_graph": 3, "decode_none": 1, "prefill_none": 1}
    assert rep.logs == 2  # the prefill batch published; no decode log yet


def test_idle_seconds_add_fully_idle_wall_time_flushed_once_a_second() -> None:
    world = World()
    rep = world.reporter()  # scale 0.1: the 1 s flush interval is 0.1 s of wall
    rep.start()
    assert rep.idle_seconds == 0.0  # registered at 0
    for _ in range(3):  # the idle path polls every 0.03 s: nothing flushed before 0.1 s
        world.t += 0.03
        rep.on_idle()
    assert rep.idle_seconds == 0.0
    world.t += 0.03
    rep.on_idle()
    assert abs(rep.idle_seconds - 1.2) < 1e-6  # 0.12 s wall idle = 1.2 model s
    _decode(world, rep, 20, batch=2)  # idle until the first batch ran (0.01 s), then busy
    world.idle = True
    world.t += 0.15
    rep.on_idle()  # the idle sample ends the busy stretch; idle starts only now
    assert abs(rep.idle_seconds - 1.3) < 1e-6
    world.t += 0.15
    rep.on_idle()
    assert abs(rep.idle_seconds - 2.8) < 1e-6


def test_idle_seconds_stand_still_while_work_waits_and_in_either_wedge() -> None:
    world = World()
    rep = world.reporter()
    rep.start()
    world.idle = False  # e.g. a request in the transfer queue: the idle path runs, not idle
    rep.on_idle()
    for _ in range(8):
        world.t += 0.05
        rep.on_idle()
    assert rep.idle_seconds == 0.0
    # Rank 0 idle in the TP desync: it republishes idle values, then blocks in its next
    # broadcast, so no idle time is sampled (a blocked rank 0 calls nothing at all).
    for _ in range(8):
        world.t += 0.05
        rep.on_idle(rank0_view=SchedStats())
    assert rep.idle_seconds == 0.0 and rep.published.running == 0
