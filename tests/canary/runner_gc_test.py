"""The canary's guard against garbage-collection pauses (canary/runner.py `run_suite`): the
caller's heap is frozen for the suite, without a full collection of it first, and unfrozen after."""

from __future__ import annotations

import gc
from collections.abc import Coroutine
from typing import Any

import pytest

from dsv4ops.canary import eventloop, runner


def test_a_suite_freezes_the_callers_heap_without_scanning_it_and_unfreezes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A full collection on entry scanned the whole heap of a long-lived caller on every suite
    # (0.1-0.3 s of CPU each in ab, watch and the test workers); freezing alone keeps the
    # suite's collections to its own young objects.
    collections: list[int] = []

    def collect(generation: int = 2) -> int:
        collections.append(generation)
        return 0

    monkeypatch.setattr(gc, "collect", collect)
    during: list[int] = []

    def suite_loop(coro: Coroutine[Any, Any, Any]) -> Any:
        coro.close()  # the suite itself is not what this test is about
        during.append(gc.get_freeze_count())
        raise RuntimeError("the suite ended")

    monkeypatch.setattr(eventloop, "run", suite_loop)
    with pytest.raises(RuntimeError, match="the suite ended"):
        runner.run_suite("smoke", "http://127.0.0.1:9")
    assert during and during[0] > 1000, during  # the caller's objects: frozen for the suite
    assert collections == []
    assert gc.get_freeze_count() == 0  # and unfrozen once it ended, even by an exception
