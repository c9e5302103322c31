"""A scripted stand-in for the runbook session's command executor (nothing runs)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence


def incident_present(argv: list[str]) -> int:
    """The wedge is there: the smoke canary FAILs (2), everything else succeeds."""
    return 2 if "smoke" in argv else 0


class FakeExecutor:
    """Exit codes from a script; records every argv and env it is given, runs nothing."""

    def __init__(self, code_for: Callable[[list[str]], int] = incident_present) -> None:
        self.code_for = code_for
        self.calls: list[list[str]] = []
        self.envs: list[dict[str, str]] = []

    def __call__(self, argv: Sequence[str], env: Mapping[str, str]) -> int:
        self.calls.append(list(argv))
        self.envs.append(dict(env))
        return self.code_for(list(argv))
