from __future__ import annotations

import importlib.util
import os
import signal
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import hypothesis
import pytest

if TYPE_CHECKING:
    from testing.kernels import Built, ShippedAot
    from testing.remote import SshdServer


# The canary client's lag limit on this machine ($DSV4OPS_CANARY_LAG_P99_MAX_MS, default 50 ms):
# a 2-core VM that runs the twin pair, the router, the client and pytest at once. The tests that
# deploy, rehearse runbooks or run the tour judge what the suites find, not this VM's scheduler:
# CI's run once stopped two rehearsals with a smoke canary INCONCLUSIVE at a lag p99 of 81 ms
# (machine 74% busy). twin_e2e_test (300 ms) and suites_test (1000 ms) loosen it the same way in
# their Thresholds; the self-check's own tests set theirs.
CANARY_LAG_LIMIT_MS = "250"
SERIAL_FIRST = "dsv4ops_serial_first"  # the workerinput key: the serial tests go first


def pytest_sessionstart(session: pytest.Session) -> None:
    """SIGINT back to Python's default: a run started as a background job of a non-interactive
    shell (`make test &`, nohup) inherits SIGINT ignored, and so would every process the tests
    start, so the Ctrl-C tests (runbooks, deploy interrupts) would see no interrupt at all.
    And the canary's lag limit above, for the fixtures set up before `_clean_environ`."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    os.environ["DSV4OPS_CANARY_LAG_P99_MAX_MS"] = CANARY_LAG_LIMIT_MS


if importlib.util.find_spec("xdist") is not None:  # a hook of pytest-xdist's (the dev extra)

    def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
        """`make test`'s `-n 2 --dist loadfile`: by file, the kernels as one unit, the long
        files first (testing/workers.py). Any other --dist is xdist's own."""
        if config.getoption("dist") != "loadfile":
            return None
        from testing.workers import FileScheduling

        return FileScheduling(config, log)

    def pytest_configure_node(node: Any) -> None:
        """On the controller: tell each worker whether the scheduler hands the serial tests out
        first (`--dist loadfile`, FileScheduling)."""
        node.workerinput[SERIAL_FIRST] = node.config.getoption("dist") == "loadfile"

    def pytest_configure(config: pytest.Config) -> None:
        """The controller fixes the run's uid, so that it can remove the run's shared directory
        (testing/workers.py `run_once`, the serial locks) once the workers are done."""
        from testing.workers import pin_run_uid

        pin_run_uid(config)

    def pytest_unconfigure(config: pytest.Config) -> None:
        from testing.workers import remove_run_dir

        remove_run_dir(config)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    """A test marked `serial` (it measures time) runs while no other worker runs a test that
    is not serial (under `--dist loadfile`, beside at most one other serial test: the lanes of
    testing/workers.py); every other test shares the run with the other workers, once every
    serial test of the run has ended (testing/workers.py `RunLock`).

    Outermost around the whole protocol: the wait for the lock comes before pytest-timeout's
    clock starts (a test that waited out another worker's serial stretch was timed out for it)
    and before the test's fixtures are set up (a session fixture's build would otherwise load
    the machine under a serial test). After the teardown (a skipped test's too) the lock is let
    go, unless this worker's next test is a serial one of the same file."""
    from testing.workers import next_is_serial_here, run_lock

    lock = run_lock(item.config)
    serial = item.get_closest_marker("serial") is not None
    if not serial:
        lock.wait_for_serial_phase()
    if not (serial and lock.in_lanes):
        lock.acquire(serial)
    try:
        return (yield)
    finally:
        if serial:
            lock.serial_ended(item.nodeid)
        lock.after_test(next_serial_here=next_is_serial_here(item, nextitem))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The run's serial tests, once the collection is final (after -k and -m): they run first,
    as a phase of their own (testing/workers.py), where the scheduler hands them out first:
    under `--dist loadfile` only (any other --dist is xdist's own, and a test that is not serial
    waiting for serial tests queued behind it would stall the run)."""
    from testing.workers import record_serial, run_lock

    workerinput = getattr(config, "workerinput", None) or {}
    if not workerinput.get(SERIAL_FIRST):  # (a worker's own --dist reads "no")
        return
    serial = [item.nodeid for item in items if item.get_closest_marker("serial") is not None]
    lock = run_lock(config)
    lock.serial_tests = record_serial(config, serial)
    lock.in_lanes = True


# Where an install put a venv, in place of the record `make install` writes into .venv (a checkout
# sharing another's .venv names its own this way): a location, not a setting a test could read.
_INSTALL_PATHS = frozenset({"DSV4OPS_SMG_PYTHON"})


@pytest.fixture(autouse=True)
def _clean_environ(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """No DSV4OPS_* leaks in from the caller; operator state goes to a temp dir, never ~ or cwd;
    the canary lag limit of this machine (CANARY_LAG_LIMIT_MS)."""
    for key in list(os.environ):
        if key.startswith("DSV4OPS_") and key not in _INSTALL_PATHS:
            monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("DSV4OPS_STATE_DIR", str(tmp_path_factory.mktemp("state")))
    monkeypatch.setenv("DSV4OPS_CANARY_LAG_P99_MAX_MS", CANARY_LAG_LIMIT_MS)


@pytest.fixture(scope="session")
def shipped_aot(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> ShippedAot:
    """The sm_120 compile of every shipped config, once per run from an empty cache (about 25 s
    on 2 cores; under xdist on the first worker that asks: testing/workers.py `run_once`): its
    results, and the aot-cache it filled for `warm_aot_cache`."""
    from testing.kernels import compile_shipped
    from testing.workers import run_once

    return run_once(
        request.config,
        "shipped-aot",
        lambda: tmp_path_factory.mktemp("aot-state"),
        lambda home: compile_shipped(home / "aot-state"),
    )


@pytest.fixture
def warm_aot_cache(_clean_environ: None, shipped_aot: ShippedAot) -> ShippedAot:
    """This test's state directory starts with the session's shipped compile results, so a build
    of the shipped package compiles only what differs from it (a changed config). For tests whose
    subject is not the compile itself; a cold compile is `shipped_aot`'s (and installed_build's)."""
    from testing.kernels import seed_aot_cache

    seed_aot_cache(shipped_aot, Path(os.environ["DSV4OPS_STATE_DIR"]))
    return shipped_aot


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Built:
    """Two real kernel artifacts, built once per run (tests/kernels, tests/cli/kernels_test and
    the kernel-rollout rehearsal share them, under xdist too: `run_once`; the interpreter run is
    the slow part). Their compile results come from `shipped_aot`'s cache; their state stays in
    a temp dir, never the working directory. Tests read the artifacts; a changed one is a copy."""
    pytest.importorskip("torch")
    from testing.kernels import build_pair, seed_aot_cache
    from testing.workers import run_once

    def make(home: Path) -> Built:
        (home / "state").mkdir(parents=True, exist_ok=True)
        (home / "dist").mkdir(exist_ok=True)
        seed_aot_cache(request.getfixturevalue("shipped_aot"), home / "state")
        return build_pair(home / "dist", home / "state")

    return run_once(request.config, "built", lambda: tmp_path_factory.mktemp("built"), make)


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshdServer]:
    """A real OpenSSH server on 127.0.0.1, one for the whole session (testing/remote.py):
    tests/remote, tests/orchestrate, tests/cli and tests/kernels share it."""
    import shutil

    from testing.remote import ensure_sshd_installed, running_sshd

    if shutil.which("ssh-keygen") is None:
        ensure_sshd_installed()
    with running_sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server


# Property tests draw the same examples every run (CI is never flaky on a random draw).
hypothesis.settings.register_profile("dsv4ops", derandomize=True, database=None)
hypothesis.settings.load_profile("dsv4ops")
