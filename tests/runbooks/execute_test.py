"""How a runbook's command ends when the run is told to stop: a SIGTERM to the runbook
process (a supervisor's stop; a terminal's Ctrl-C reaches the whole group, a SIGTERM does not)
is passed on to the command it is running, which ends as it would on its own SIGTERM."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from dsv4ops.cli import _sigterm_as_interrupt
from dsv4ops.errors import Terminated
from dsv4ops.runbooks.execute import INTERRUPT_GRACE_S, execute
from testing.canary import fake_server


def test_a_sigterm_to_the_run_is_passed_on_to_its_running_command() -> None:
    """Before, the command got nothing: the run waited out the 60 s grace and then SIGKILLed
    it (a child deploy killed mid-operation leaves a stale lock). Now the command (a canary
    here, mid-load) is told at once and ends on its own, within seconds."""
    with fake_server() as url:
        argv = ["dsv4ops", "canary", "--suite", "soak", "--url", url, "--model", "m", "-d", "120"]
        timer = threading.Timer(4.0, os.kill, (os.getpid(), signal.SIGTERM))
        started = time.monotonic()
        with _sigterm_as_interrupt():
            timer.start()
            try:
                with pytest.raises(Terminated):
                    execute(argv, {}, stdout_to_stderr=True)
            finally:
                # never let the timer fire after the handler is gone: it would end the worker
                timer.cancel()
                timer.join()
        took = time.monotonic() - started
    assert took < 4.0 + INTERRUPT_GRACE_S / 3, f"the command ran on for {took - 4.0:.1f} s"
