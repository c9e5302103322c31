"""How `make test` spreads the suite over pytest-xdist workers (Makefile TEST_WORKERS: 5).

One work unit per test file, as `--dist loadfile` has it: a file's module-scoped fixtures (a
twin stack, an sshd session) start once, on one worker. Two exceptions:

- every test of the kernels (tests/kernels/, tests/cli/kernels*) is one unit: they share the
  session fixtures `shipped_aot` and `built` (a 25 s compile and an interpreter run), which
  each worker that ran one of them would build again;
- the units known to be long go first (HEAVY, most expensive first), so the last one to start
  is a short one and neither worker idles while the other finishes a four-minute file.

A file missing from HEAVY only runs later; a name in HEAVY that is no test file fails
tests/architecture/parallel_test.py.

The serial tests (below) run first, as a phase of their own: each file's serial tests are a unit
of their own (`FILE::serial`), handed out before every other unit, and a test that is not serial
waits until every serial test of the run has ended. Interleaved, each serial test waited for the
tests running on the other workers to end, and they idled meanwhile (260 s of such waits in a
15-minute stretch of one run); at the start, nothing runs beside them to wait for. The serial
units go to SERIAL_LANES workers, all at once, as lanes of about equal length (`serial_lanes`):
a lane runs one serial test at a time, the lanes side by side. Alone, the serial tests kept 23%
of the two cores busy over a 170 s phase (by /proc/stat, 0.25 s windows: above 75% in 4 of 738);
in two lanes the phase took 80-84 s and every serial test passed in each of five runs. No
deadlock: a worker runs its units in the order handed out, so every worker's serial tests come
before any test of its that waits for them. The kernels' two costly session fixtures are made
once per run, not per worker (`run_once`): the kernel-rollout rehearsal, on the other worker,
reuses them.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import pickle
import shutil
import sys
import tempfile
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, TypeVar

import pytest
from xdist.scheduler import LoadScopeScheduling
from xdist.workermanage import WorkerController

KERNELS_UNIT = "kernels"
KERNELS_PREFIXES = ("tests/kernels/", "tests/cli/kernels")

# The longest units, longest first: worker-seconds of a full `make test` (-n 3 on this 2-core
# machine, with the local agent session: remote/agent_session.py), stop 21; the files of stop
# 47 from its runs' slowest tests and the helpers' timings.
# The kernels go first, beside the rehearsals' three shared resume tests (first in their file):
# the kernel-rollout rehearsal then finds `built` made, instead of building it (22 s) while it
# holds the machine alone, and the rehearsals' baseline deploy shares the machine too. The
# 20-30 s files follow, so that the run ends on short files, not on one of them started last.
# The serial tests run before all of these (their own units, first): the long units start once
# they have ended, side by side, and the run ends on short files.
HEAVY: tuple[str, ...] = (
    KERNELS_UNIT,  # 121 s: the interpreter checks, the AOT compile, the installed build
    "tests/cli/runbook_rehearsal_test.py",  # 157 s, of it the bucket-tuning rehearsal serial
    "tests/cli/main_tour_test.py",  # 101 s, one test (~83 s with its five-level sweep)
    # ~120 s cold (CI has no mypy cache): late, it was the tail of stop 47's runs
    "tests/architecture/mypy_test.py",
    "tests/cli/ab_test.py",  # 175 s (issue 20's gates and its A/B; issue 39's B decode killed)
    "tests/orchestrate/unrecorded_test.py",  # ~2 min: four full-disk deploys (issue 40)
    "tests/orchestrate/faults_test.py",  # 68 s
    "tests/monitoring/prometheus_e2e_test.py",  # 55 s: both routers (issue 43)
    "tests/cli/deploy_smg_test.py",  # ~50 s: deploys behind the real SMG and back
    # ~123 s alone (was ~145 before its FAIL-by-corruption tests ran 16 sessions), of it the
    # two sweeps and the wedge serial
    "tests/canary/twin_e2e_test.py",
    "tests/canary/suites_test.py",  # 58 s
    "tests/orchestrate/known_good_live_test.py",  # 52 s
    "tests/usecases/ab_test.py",  # ~50 s, of it the step-4 A/B (~31 s) serial
    "tests/orchestrate/live_test.py",  # 28 s, of it the drain serial
    "tests/cli/deploy_progress_test.py",  # 28 s
    "tests/orchestrate/interrupt_live_test.py",  # 27 s
    "tests/orchestrate/agent_wire_faults_test.py",  # 33 s
    "tests/watch/kv_stuck_test.py",  # 27 s
    "tests/canary/streampair_test.py",  # 20 s
    "tests/cli/deploy_api_key_test.py",
    "tests/watch/health_lies_test.py",
    "tests/cli/journal_operators_test.py",  # 11 s alone (50 s on CI with bob's sweep gate)
    "tests/orchestrate/ssh_flow_test.py",  # 24 s
    "tests/cli/deploy_ssh_test.py",  # 22 s
    "tests/twin/hazard_wedge_test.py",  # 22 s
    "tests/architecture/parallel_test.py",  # 22 s
    "tests/watch/twin_e2e_test.py",  # 21 s
    "tests/journal/target_hostile_test.py",  # 19 s
    "tests/orchestrate/status_kernels_twin_test.py",  # 18 s
    "tests/remote/supervisor_test.py",  # 17 s
    "tests/profiles/secrets_in_errors_test.py",  # ~6 s (67 s on CI with a process per command)
)


def unit_of(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    return KERNELS_UNIT if path.startswith(KERNELS_PREFIXES) else path


SERIAL_SUFFIX = "::serial"


def unit_rank(unit: str) -> tuple[int, int]:
    """Where a unit goes in the queue: the serial units first, then HEAVY's order, then the
    rest (sorted() keeps the collection's order among equals)."""
    rank = {name: i for i, name in enumerate(HEAVY)}
    if unit.endswith(SERIAL_SUFFIX):
        return (0, rank.get(unit.removesuffix(SERIAL_SUFFIX), len(rank)))
    return (1, rank.get(unit, len(rank)))


class FileScheduling(LoadScopeScheduling):  # type: ignore[misc]  # xdist ships no types: its base is Any
    """LoadScopeScheduling by file (kernels as one unit), each file's serial tests a unit of
    their own, the serial units first (in lanes, a lane to a worker), then the long units."""

    _serial: frozenset[str] | None = None
    _lanes: list[list[str]] | None = None  # the serial units' lanes not yet handed out

    def _split_scope(self, nodeid: str) -> str:
        if self._serial is None:
            # Called once the workers' collections are complete: each wrote the run's serial
            # tests (`record_serial`) before it reported its collection.
            self._serial = read_serial(_run_dir(self.config.option.testrunuid))
        unit = unit_of(nodeid)
        return unit + SERIAL_SUFFIX if nodeid in self._serial else unit

    def _assign_work_unit(self, node: WorkerController) -> None:
        if self._lanes is None:  # the first assignment: the queue is complete, nothing sent yet
            units = sorted(self.workqueue.items(), key=lambda kv: unit_rank(kv[0]))
            self.workqueue = OrderedDict(units)
            self._lanes = serial_lanes([u for u in self.workqueue if u.endswith(SERIAL_SUFFIX)])
        if self._lanes:
            # A whole lane to the worker that asks, at once: handed out one unit at a time, a
            # serial unit could go to a worker whose test waits for the serial phase, which
            # waits for that unit.
            for unit in self._lanes.pop(0):
                self.workqueue.move_to_end(unit, last=False)
                super()._assign_work_unit(node)
            return
        super()._assign_work_unit(node)


# Two serial tests side by side, no more: two lanes kept the phase under half the machine.
SERIAL_LANES = 2
# Seconds of each file's serial tests, alone (setup included; a full `make test`, 2026-12-07),
# for the lanes' balance; a file not named counts SERIAL_SECONDS_DEFAULT.
SERIAL_SECONDS: dict[str, float] = {
    "tests/canary/twin_e2e_test.py": 42.2,
    "tests/usecases/ab_test.py": 41.6,
    "tests/canary/suites_test.py": 25.6,
    "tests/cli/runbook_rehearsal_test.py": 17.0,
    "tests/twin/fidelity_test.py": 12.8,
    "tests/orchestrate/live_test.py": 9.0,
    "tests/twin/costs_test.py": 6.6,
    "tests/profiles/bounded_input_test.py": 2.0,
}
SERIAL_SECONDS_DEFAULT = 10.0


def serial_lanes(units: list[str], lanes: int = SERIAL_LANES) -> list[list[str]]:
    """The serial units as `lanes` lists of about equal seconds (the longest first, each to the
    shortest lane so far), each in the queue's order; no empty lane."""

    def seconds(unit: str) -> float:
        return SERIAL_SECONDS.get(unit.removesuffix(SERIAL_SUFFIX), SERIAL_SECONDS_DEFAULT)

    chosen: list[list[str]] = [[] for _ in range(lanes)]
    totals = [0.0] * lanes
    for unit in sorted(units, key=seconds, reverse=True):
        shortest = totals.index(min(totals))
        chosen[shortest].append(unit)
        totals[shortest] += seconds(unit)
    order = {unit: i for i, unit in enumerate(units)}
    return [sorted(lane, key=order.__getitem__) for lane in chosen if lane]


def record_serial(config: Any, nodeids: list[str]) -> frozenset[str]:
    """On a worker, once its collection is final: the run's serial tests, written for the
    controller's scheduler (every worker collects the same tests and writes the same list)."""
    serial = frozenset(nodeids)
    run_dir = run_lock_dir(config)
    if run_dir is not None:
        run_dir.mkdir(parents=True, exist_ok=True)
        partial = run_dir / f"serial.json.{os.getpid()}"
        partial.write_text(json.dumps(sorted(serial)))
        partial.replace(run_dir / "serial.json")  # whole or absent
    return serial


def read_serial(run_dir: Path) -> frozenset[str]:
    try:
        return frozenset(json.loads((run_dir / "serial.json").read_text()))
    except FileNotFoundError:  # no worker wrote one (no xdist run dir): nothing is serial
        return frozenset()


# --- serial tests: apart from every other test while they run ----------------------------------
#
# A test that measures time (a step-law fit, a stall caught within 3 s, model seconds from a
# twin's sleeps) is marked `serial`: while it runs, no test that is not serial runs on another
# worker. Under `--dist loadfile` the serial phase gives that (the tests that are not serial wait
# for it), and a serial test takes no lock: the lanes are what runs side by side (`in_lanes`).
# Under any other --dist, a serial test runs alone, by the flocks that follow. Every test
# holds a shared flock on the run's lock file, a serial one an exclusive flock; a turnstile lock,
# taken before either and released once it is held, keeps the shared holders from starving a
# waiting serial test (a new test waits at the turnstile behind it). Module-scoped fixtures of
# other files (an idle twin stack) stay up meanwhile; they cost no CPU when no test drives them.
# A worker whose next test is a serial one of the same file keeps its exclusive hold: released
# between them, the turnstile lets the other worker's next test in, and the next serial test
# then waits (this worker idle) for all of it, 25-37 s behind a twin fault test in a full run.
# Outside xdist (one process) no lock is taken: there is nothing to run beside.


# How long a test that is not serial waits for the serial phase at most: a worker that crashed
# in a serial test never marks it ended, and the run goes on rather than hang (its failure is
# reported anyway). The whole phase takes about 3 minutes on 2 cores.
SERIAL_PHASE_LIMIT_S = 900.0


class RunLock:
    """One worker's hold on the run's lock (`lock_dir` None: outside xdist, no lock)."""

    def __init__(self, lock_dir: Path | None) -> None:
        self.lock_dir = lock_dir
        self._held: IO[str] | None = None
        self._exclusive = False
        self.serial_tests: frozenset[str] = frozenset()  # the run's (record_serial)
        # the serial tests run in FileScheduling's lanes (--dist loadfile): no lock for them
        self.in_lanes = False
        self._serial_phase_over = False

    def wait_for_serial_phase(self, limit_s: float = SERIAL_PHASE_LIMIT_S) -> None:
        """Before a test that is not serial: wait until every serial test of the run has ended
        (each worker marks its own: `serial_ended`). Polled: a wait costs no CPU to speak of."""
        if self.lock_dir is None or self._serial_phase_over:
            return
        keys = {_serial_key(nodeid) for nodeid in self.serial_tests}
        ended = self.lock_dir / "serial-ended"
        deadline = time.monotonic() + limit_s
        while keys and time.monotonic() < deadline:
            keys -= set(os.listdir(ended)) if ended.is_dir() else set()
            if keys:
                time.sleep(0.2)
        if keys:
            print(f"serial tests never ended; going on: {len(keys)}", file=sys.stderr)
        self._serial_phase_over = True

    def serial_ended(self, nodeid: str) -> None:
        """A serial test ended (passed, failed or skipped): the others' wait counts it."""
        if self.lock_dir is not None:
            ended = self.lock_dir / "serial-ended"
            ended.mkdir(parents=True, exist_ok=True)
            (ended / _serial_key(nodeid)).touch()

    def acquire(self, serial: bool) -> None:
        """Hold the lock for one test: exclusive for a serial test, shared for any other (an
        exclusive hold kept from the previous test serves a serial one as it is)."""
        if self.lock_dir is None or (self._held is not None and self._exclusive and serial):
            return
        self.release()
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        with open(self.lock_dir / "turnstile", "a+") as turnstile:
            fcntl.flock(turnstile, fcntl.LOCK_EX)
            try:
                held = open(self.lock_dir / "tests", "a+")  # noqa: SIM115  # kept across tests
                try:
                    fcntl.flock(held, fcntl.LOCK_EX if serial else fcntl.LOCK_SH)
                except BaseException:  # interrupted while waiting: nothing is held
                    held.close()
                    raise
            finally:
                fcntl.flock(turnstile, fcntl.LOCK_UN)
        self._held, self._exclusive = held, serial

    def after_test(self, *, next_serial_here: bool) -> None:
        """The test ended: keep an exclusive hold when this worker's next test is a serial one
        of the same file, else let the other workers in."""
        if not (next_serial_here and self._exclusive):
            self.release()

    @property
    def holding(self) -> str | None:
        """What this worker holds: "exclusive", "shared", or None."""
        if self._held is None:
            return None
        return "exclusive" if self._exclusive else "shared"

    def release(self) -> None:
        if self._held is not None:
            self._held.close()  # closing the file drops its flock
            self._held, self._exclusive = None, False


def _serial_key(nodeid: str) -> str:
    return hashlib.sha1(nodeid.encode()).hexdigest()  # a file name for any node id


_RUN_LOCK = pytest.StashKey[RunLock]()


def run_lock(config: pytest.Config) -> RunLock:
    """This worker's RunLock (one per process, kept on its pytest config)."""
    if _RUN_LOCK not in config.stash:
        config.stash[_RUN_LOCK] = RunLock(run_lock_dir(config))
    return config.stash[_RUN_LOCK]


@contextlib.contextmanager
def exclusive_if(serial: bool, lock_dir: Path | None) -> Iterator[None]:
    """Hold the run's lock for one test: exclusive for a serial test, shared for any other."""
    lock = RunLock(lock_dir)
    lock.acquire(serial)
    try:
        yield
    finally:
        lock.release()


def next_is_serial_here(item: Any, nextitem: Any) -> bool:
    """Whether the test this worker runs after `item` is a serial test of the same file."""
    return (
        nextitem is not None
        and nextitem.get_closest_marker("serial") is not None
        and nextitem.nodeid.split("::", 1)[0] == item.nodeid.split("::", 1)[0]
    )


def run_lock_dir(config: Any) -> Path | None:
    """The lock directory of this xdist run (its workers share the run's uid), None outside xdist."""
    workerinput = getattr(config, "workerinput", None)
    if not workerinput:
        return None
    return _run_dir(workerinput["testrunuid"])


def _run_dir(uid: str) -> Path:
    return Path(tempfile.gettempdir()) / f"dsv4ops-tests-{uid}"


def pin_run_uid(config: Any) -> None:
    """On the controller of an xdist run: fix the run's uid now (xdist draws one otherwise, out
    of reach), so that `remove_run_dir` finds the directory its workers share."""
    if getattr(config, "workerinput", None) is None and getattr(
        config.option, "numprocesses", None
    ):
        config.option.testrunuid = config.option.testrunuid or uuid.uuid4().hex


def remove_run_dir(config: Any) -> None:
    """On the controller, once its workers are gone: the run's shared directory (locks, the
    `run_once` results) goes with it, so no run leaves anything in the temp directory."""
    if getattr(config, "workerinput", None) is None and getattr(config.option, "testrunuid", None):
        shutil.rmtree(_run_dir(config.option.testrunuid), ignore_errors=True)


# --- once per run: a session fixture's work shared by the workers --------------------------
#
# A session fixture runs once per worker: the kernels' sm_120 compile and interpreter build
# (about a minute of CPU) ran on both workers when a test outside the kernels unit (the
# kernel-rollout rehearsal) asked for it. `run_once` does it on the first worker to ask, in the
# run's directory, under an exclusive flock; a worker that asks meanwhile waits on the lock (no
# CPU) and then reads the same result. Outside xdist it is the plain fixture.

T = TypeVar("T")


def run_once(config: Any, name: str, fresh_dir: Callable[[], Path], make: Callable[[Path], T]) -> T:
    """`make(directory)` once per run, whichever worker asks first; the others get its result
    (pickled; its files stay in the run's directory until the run ends). `fresh_dir` gives the
    directory outside xdist. A `make` that raised left no result: the next asker runs it again."""
    run_dir = run_lock_dir(config)
    if run_dir is None:
        return make(fresh_dir())
    run_dir.mkdir(parents=True, exist_ok=True)
    home, result = run_dir / name, run_dir / f"{name}.pickle"
    with open(run_dir / f"{name}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if result.exists():
                value: T = pickle.loads(result.read_bytes())
                return value
            shutil.rmtree(home, ignore_errors=True)  # what a failed `make` left
            home.mkdir()
            made = make(home)
            partial = result.with_suffix(".partial")
            partial.write_bytes(pickle.dumps(made))
            partial.replace(result)  # whole or absent
            return made
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
