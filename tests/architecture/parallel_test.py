"""What makes `make test`'s parallel run safe: ports no two workers (or two runs) share, serial
tests alone, the kernels' files on one worker (testing/ports.py, testing/workers.py)."""

from __future__ import annotations

import ast
import fcntl
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from testing import ports
from testing.workers import (
    HEAVY,
    KERNELS_UNIT,
    SERIAL_SECONDS,
    SERIAL_SECONDS_DEFAULT,
    SERIAL_SUFFIX,
    RunLock,
    exclusive_if,
    next_is_serial_here,
    remove_run_dir,
    run_once,
    serial_lanes,
    unit_of,
    unit_rank,
)

ROOT = Path(__file__).resolve().parents[2]


def test_each_worker_has_its_own_band_clear_of_the_offsets_and_the_ephemeral_range(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    bands = []
    for name in ("gw0", "gw1"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", name)
        bands.append(ports.band())
    assert set(bands[0]).isdisjoint(bands[1])
    for band in bands:
        assert band.start >= 12000 and band.stop <= 28900  # the offsets use 9000-11300, 30000+
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT")
    assert ports.band() == range(12000, 28900)  # one process: the whole band


def test_a_port_another_process_holds_is_never_handed_out() -> None:
    port = ports.free_port()
    # another process (a second worker, another checkout's run) reserves the next few
    script = (
        "import fcntl, os, sys\n"
        "from testing import ports\n"
        "fds = [ports._lock(p) for p in range(int(sys.argv[1]), int(sys.argv[1]) + 40)]\n"
        "print('held', flush=True)\n"
        "sys.stdin.read()\n"
    )
    held = subprocess.Popen(
        [sys.executable, "-c", script, str(port + 1)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert held.stdout is not None and held.stdout.readline().strip() == "held"
        handed = ports.free_ports(20)
        assert not set(handed) & set(range(port + 1, port + 41))
        assert len(set(handed)) == 20 and port not in handed
    finally:
        held.communicate("", timeout=30)


def test_a_reserved_port_is_bindable_and_a_bound_one_is_skipped() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = s.getsockname()[1]
        assert not ports.reserve_ports([busy])
    port = ports.free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))  # what the server it was handed to does next


def test_an_offsets_ports_are_reserved_all_or_none() -> None:
    first = ports.free_port()
    fd = os.open(ports.LOCK_DIR / str(first + 3), os.O_CREAT | os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as another process would hold it
        assert not ports.reserve_ports([first + 1, first + 2, first + 3])
        assert ports.reserve_ports([first + 1, first + 2])  # none of them was kept before
    finally:
        os.close(fd)


def test_a_serial_test_waits_for_the_running_tests_and_holds_the_next_ones(tmp_path: Path) -> None:
    running, release, serial_in = threading.Event(), threading.Event(), threading.Event()

    def other_worker_test() -> None:
        with exclusive_if(False, tmp_path):
            running.set()
            release.wait(30)

    def serial_test() -> None:
        with exclusive_if(True, tmp_path):
            serial_in.set()

    other = threading.Thread(target=other_worker_test)
    other.start()
    assert running.wait(30)
    serial = threading.Thread(target=serial_test)
    serial.start()
    # While the other test runs, the serial one does not start (whatever the wait: it blocks).
    assert not serial_in.wait(0.3)
    release.set()
    other.join(30)
    serial.join(30)
    assert serial_in.is_set()


def test_a_worker_keeps_the_machine_between_two_serial_tests_and_lets_go_after(
    tmp_path: Path,
) -> None:
    worker = RunLock(tmp_path)
    worker.acquire(True)
    worker.after_test(next_serial_here=True)  # its next test: a serial one of the same file
    other_in = threading.Event()

    def other_worker_test() -> None:
        with exclusive_if(False, tmp_path):
            other_in.set()

    other = threading.Thread(target=other_worker_test)
    other.start()
    assert not other_in.wait(0.3)  # held between the two serial tests
    worker.acquire(True)  # the second serial test: the hold it kept, no wait
    worker.after_test(next_serial_here=False)
    assert other_in.wait(30)  # let go after the second
    other.join(30)
    assert worker.holding is None
    worker.acquire(False)
    assert worker.holding == "shared"
    worker.after_test(next_serial_here=True)  # a shared hold is never kept
    assert worker.holding is None


SERIAL_FILE = """\
import pytest
from recorder import record

def test_x(): record("x", 0.2)

@pytest.mark.serial
def test_s1(): record("s1", 1.5)

@pytest.mark.serial
def test_s2(): record("s2", 1.5)

@pytest.mark.serial
def test_s3(): record("s3", 1.5)
"""
OTHER_FILE = """\
import pytest
from recorder import record

@pytest.mark.parametrize("n", range(20))
def test_b(n): record(f"b{n}", 0.2)

@pytest.mark.serial
def test_s4(): record("s4", 1.5)
"""
RECORDER = """\
import json, os, time

def record(name, seconds):
    t0 = time.monotonic()
    time.sleep(seconds)
    with open(os.environ["RUNLOCK_LOG"], "a") as f:
        worker = os.environ.get("PYTEST_XDIST_WORKER")
        f.write(json.dumps([name, t0, time.monotonic(), worker]) + "\\n")
"""
SERIAL = ("s1", "s2", "s3", "s4")


def _run_serial_and_other_files(
    tmp_path: Path, *options: str
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """SERIAL_FILE and OTHER_FILE run on two xdist workers with tests/conftest.py's hooks; the
    tests' start and end times go to the log returned."""
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    serial: alone\n")
    (tmp_path / "recorder.py").write_text(RECORDER)
    (tmp_path / "s_test.py").write_text(SERIAL_FILE)
    (tmp_path / "b_test.py").write_text(OTHER_FILE)
    log = tmp_path / "log.jsonl"
    environ = {**os.environ, "RUNLOCK_LOG": str(log), "PYTHONPATH": f"{ROOT}:{tmp_path}"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider"]
        + ["-n", "2", "-o", "python_files=*_test.py", *options, str(tmp_path)],
        cwd=tmp_path,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc, log


def _runs(log: Path) -> dict[str, tuple[float, float, str]]:
    rows = map(json.loads, log.read_text().splitlines())
    return {name: (t0, t1, worker) for name, t0, t1, worker in rows}


def test_on_real_workers_the_serial_tests_run_first_in_two_lanes_and_nothing_beside_them(
    tmp_path: Path,
) -> None:
    """tests/conftest.py's lock hook on two xdist workers: the serial tests run first (the
    serial phase), one file's three as one stretch on one worker, the other file's beside them
    on the other worker (the lanes), and no other test before or inside the phase, though a
    test of their own file comes before them in it; and the tests that waited out the phase
    (4.5 s) are not timed out at 3 s: pytest-timeout times the test, not the wait."""
    proc, log = _run_serial_and_other_files(tmp_path, "--dist", "loadfile", "-o", "timeout=3")
    assert proc.returncode == 0 and "25 passed" in proc.stdout, proc.stdout[-3000:] + proc.stderr
    runs = _runs(log)
    s1, s2, s3, s4 = (runs[name] for name in SERIAL)
    assert s1[1] <= s2[0] and s2[1] <= s3[0] and s1[2] == s2[2] == s3[2], runs  # one lane
    assert s3[1] - s1[0] >= 4.5
    assert s4[2] != s1[2] and s4[0] < s3[1] and s1[0] < s4[1], runs  # the other lane, beside
    end = max(s3[1], s4[1])
    # Every other test, its own file's first one included, started once the phase had ended:
    # the one started first waited all of it and passed.
    early = [n for n, (t0, _, _) in runs.items() if n not in SERIAL and t0 < end]
    assert not early, (early, runs)


def test_under_another_dist_the_serial_tests_are_alone_but_not_first(tmp_path: Path) -> None:
    """`pytest -n 2` (xdist's own `--dist load`) hands the tests out in any order: a test that is
    not serial must not wait for serial tests queued behind it (the run stalled), and each serial
    test runs with no other test beside it (the flocks: no lanes here)."""
    proc, log = _run_serial_and_other_files(tmp_path, "-o", "timeout=20")
    assert proc.returncode == 0 and "25 passed" in proc.stdout, proc.stdout[-3000:] + proc.stderr
    runs = _runs(log)
    beside = [
        (name, other)
        for name in SERIAL
        for other, (t0, t1, _) in runs.items()
        if other != name and t0 < runs[name][1] and runs[name][0] < t1
    ]
    assert not beside, (beside, runs)


def test_the_serial_units_go_in_lanes_of_about_equal_seconds_each_in_the_queues_order() -> None:
    units = [f + SERIAL_SUFFIX for f in SERIAL_SECONDS] + ["tests/new_test.py" + SERIAL_SUFFIX]
    lanes = serial_lanes(units)
    assert len(lanes) == 2 and sorted(lanes[0] + lanes[1]) == sorted(units)

    def seconds(lane: list[str]) -> float:
        known = SERIAL_SECONDS.get
        return sum(known(u.removesuffix(SERIAL_SUFFIX), SERIAL_SECONDS_DEFAULT) for u in lane)

    # longest first, each to the shorter lane: apart by no more than the longest unit
    assert abs(seconds(lanes[0]) - seconds(lanes[1])) <= max(SERIAL_SECONDS.values()), lanes
    assert all(lane == [u for u in units if u in lane] for lane in lanes)  # the queue's order
    assert serial_lanes(units[:1]) == [units[:1]]  # no empty lane
    assert serial_lanes([]) == []


class _Item:
    def __init__(self, nodeid: str, serial: bool) -> None:
        self.nodeid, self.serial = nodeid, serial

    def get_closest_marker(self, name: str) -> object | None:
        return object() if name == "serial" and self.serial else None


def test_the_next_test_keeps_the_hold_only_when_serial_and_in_the_same_file() -> None:
    a1, a2 = _Item("tests/a_test.py::t1", True), _Item("tests/a_test.py::t2[x]", True)
    assert next_is_serial_here(a1, a2)
    assert not next_is_serial_here(a1, _Item("tests/a_test.py::t3", False))
    assert not next_is_serial_here(a1, _Item("tests/b_test.py::t1", True))  # its fixtures: outside
    assert not next_is_serial_here(a1, None)  # the last test of this worker


def test_the_serial_units_are_handed_out_first_then_in_heavy_order() -> None:
    units = ["tests/a_test.py", HEAVY[1], "tests/b_test.py" + SERIAL_SUFFIX, HEAVY[0]]
    units += [HEAVY[2] + SERIAL_SUFFIX]
    assert sorted(units, key=unit_rank) == [
        HEAVY[2] + SERIAL_SUFFIX,  # serial, and a long file's: its place in HEAVY among them
        "tests/b_test.py" + SERIAL_SUFFIX,
        HEAVY[0],
        HEAVY[1],
        "tests/a_test.py",
    ]


def test_a_test_that_is_not_serial_waits_for_every_serial_test_of_the_run(tmp_path: Path) -> None:
    serial_worker, other_worker = RunLock(tmp_path), RunLock(tmp_path)
    other_worker.serial_tests = frozenset({"a_test.py::s1", "b_test.py::s2"})
    waited = threading.Event()

    def other_test() -> None:
        other_worker.wait_for_serial_phase()
        waited.set()

    other = threading.Thread(target=other_test)
    other.start()
    serial_worker.serial_ended("a_test.py::s1")
    assert not waited.wait(0.5)  # one of the two has not ended
    serial_worker.serial_ended("b_test.py::s2")
    assert waited.wait(30)
    other.join(30)
    stuck = RunLock(tmp_path / "other-run")
    stuck.serial_tests = frozenset({"c_test.py::never"})
    stuck.wait_for_serial_phase(limit_s=0.3)  # a crashed worker's test: the run goes on


def test_without_xdist_no_lock_is_taken(tmp_path: Path) -> None:
    with exclusive_if(True, None), exclusive_if(True, None):
        pass  # nested: would deadlock if it locked


def test_the_kernels_files_are_one_unit_and_any_other_file_its_own() -> None:
    assert unit_of("tests/kernels/build_test.py::test_x") == KERNELS_UNIT
    assert unit_of("tests/cli/kernels_test.py::test_y[a]") == KERNELS_UNIT
    assert unit_of("tests/cli/kernels_build_test.py::test_z") == KERNELS_UNIT
    assert unit_of("tests/cli/deploy_test.py::test_a") == "tests/cli/deploy_test.py"


def _serial_pattern(path: Path) -> str:
    """The file's test functions in file order, S for a serial one (its decorator names
    `serial`, or the module's `pytestmark` does), . for any other."""
    tree = ast.parse(path.read_text())
    marks = [n for n in tree.body if isinstance(n, ast.Assign)]
    if any(
        t.id == "pytestmark" and "serial" in ast.unparse(n.value)
        for n in marks
        for t in n.targets
        if isinstance(t, ast.Name)
    ):
        return "S" * sum(
            isinstance(n, ast.FunctionDef) and n.name.startswith("test") for n in tree.body
        )
    return "".join(
        "S" if any("serial" in ast.unparse(d) for d in n.decorator_list) else "."
        for n in tree.body
        if isinstance(n, ast.FunctionDef) and n.name.startswith("test")
    )


def test_a_files_serial_tests_run_one_after_another() -> None:
    """Each time a serial test starts after a test that is not, it waits for the other worker's
    running test to end (one idle worker; a 25-75 s wait behind a long twin test). A file's
    serial tests side by side cost that wait once."""
    scattered = {}
    for path in sorted((ROOT / "tests").rglob("*_test.py")):
        pattern = _serial_pattern(path)
        if len([run for run in pattern.split(".") if run]) > 1:  # two runs of S or more
            scattered[str(path.relative_to(ROOT))] = pattern
    assert not scattered, f"serial tests apart from each other (put them side by side): {scattered}"


def test_the_serial_pattern_sees_decorators_and_the_module_mark(tmp_path: Path) -> None:
    f = tmp_path / "x_test.py"
    f.write_text(
        "import pytest\nserial = pytest.mark.serial\n"
        "@serial\ndef test_a(): pass\ndef test_b(): pass\n"
        "@pytest.mark.serial  # why\ndef test_c(): pass\ndef helper(): pass\n"
    )
    assert _serial_pattern(f) == "S.S"
    f.write_text(
        "import pytest\npytestmark = [pytest.mark.slow, pytest.mark.serial]\n"
        "def test_a(): pass\ndef test_b(): pass\n"
    )
    assert _serial_pattern(f) == "SS"


def test_the_long_files_listed_first_exist() -> None:
    missing = [u for u in HEAVY if u != KERNELS_UNIT and not (ROOT / u).is_file()]
    assert not missing, f"testing/workers.py HEAVY names no test file: {missing}"
    # a file renamed away would count the default seconds and unbalance the lanes unseen
    missing = [f for f in SERIAL_SECONDS if not (ROOT / f).is_file()]
    assert not missing, f"testing/workers.py SERIAL_SECONDS names no test file: {missing}"


def test_xdist_workers_share_one_lock_directory_per_run() -> None:
    # The key xdist names its run by: a worker without it would fail every test's setup.
    class Config:
        workerinput = {"testrunuid": "abc123", "workerid": "gw0"}

    from testing.workers import run_lock_dir

    assert run_lock_dir(Config()) == Path(tempfile.gettempdir()) / "dsv4ops-tests-abc123"
    assert run_lock_dir(object()) is None


def test_make_tests_parallel_run_works_end_to_end() -> None:
    """`-n 2 --dist loadfile` as `make test` runs it: the scheduler hook, the lock hook and
    the markers work on real workers (a broken one fails every test, not one)."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-n",
            "2",
            "--dist",
            "loadfile",
            "-p",
            "no:cacheprovider",
            "tests/architecture/parallel_test.py",
            "tests/twin/costs_test.py",
            "--co",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-n",
            "2",
            "--dist",
            "loadfile",
            "-p",
            "no:cacheprovider",
            "tests/architecture/parallel_test.py",
            "-k",
            "kernels_files or without_xdist or long_files",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and "3 passed" in proc.stdout, (
        proc.stdout[-3000:] + proc.stderr[-3000:]
    )


class _Config:
    """What run_once and remove_run_dir read of a pytest config: a worker's, or the controller's."""

    def __init__(self, uid: str, worker: bool) -> None:
        self.workerinput = {"testrunuid": uid} if worker else None
        self.option = type("Option", (), {"testrunuid": uid, "numprocesses": 2})()


def test_run_once_makes_it_on_the_first_worker_and_the_others_wait_for_the_same_result(
    tmp_path: Path,
) -> None:
    uid = f"run-once-{os.getpid()}-{tmp_path.name}"
    made: list[Path] = []
    started, release = threading.Event(), threading.Event()

    def make(home: Path) -> dict[str, str]:
        made.append(home)
        (home / "artifact").write_text("built")
        started.set()
        release.wait(30)
        return {"path": str(home / "artifact")}

    results: list[dict[str, str]] = []
    first = threading.Thread(
        target=lambda: results.append(run_once(_Config(uid, True), "thing", lambda: tmp_path, make))
    )
    first.start()
    assert started.wait(30)
    second = threading.Thread(
        target=lambda: results.append(run_once(_Config(uid, True), "thing", lambda: tmp_path, make))
    )
    second.start()
    second.join(0.3)
    assert second.is_alive() and not results  # it waits on the lock (whatever the wait: it blocks)
    release.set()
    first.join(30)
    second.join(30)
    assert len(made) == 1 and results[0] == results[1]
    assert Path(results[1]["path"]).read_text() == "built"  # the files stay for the run
    remove_run_dir(_Config(uid, False))  # the controller, at the end of the run
    assert not made[0].exists()


def test_run_once_runs_again_after_a_failed_make_and_is_plain_outside_xdist(tmp_path: Path) -> None:
    uid = f"run-once-fail-{os.getpid()}-{tmp_path.name}"
    calls: list[Path] = []

    def failing(home: Path) -> int:
        calls.append(home)
        raise RuntimeError("the build failed")

    with pytest.raises(RuntimeError):
        run_once(_Config(uid, True), "thing", lambda: tmp_path, failing)
    assert run_once(_Config(uid, True), "thing", lambda: tmp_path, lambda home: 7) == 7
    assert len(calls) == 1
    remove_run_dir(_Config(uid, False))
    outside = _Config(uid, False)
    outside.workerinput = None
    assert run_once(outside, "thing", lambda: tmp_path / "fresh", lambda home: str(home)) == str(
        tmp_path / "fresh"
    )
