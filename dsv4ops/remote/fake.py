"""FakeExecutor: a scripted Executor for unit tests.

Results are scripted by exact argv or by a regex over the shell-quoted command line; anything
unscripted raises `UnscriptedCommand` (an AssertionError, so it fails the test loudly rather
than being mistaken for a target error). Every call is recorded in `calls`.

    fake = FakeExecutor()
    fake.script(["nvidia-smi", "-L"], stdout="GPU 0: ...")
    fake.script(re.compile(r"agent\\.zip$"), handler=lambda argv, stdin: (0, '{"ok": true}', ""))
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dsv4ops.remote._redact import check_result, make_result
from dsv4ops.remote.base import CommandResult

Handler = Callable[[tuple[str, ...], str | None], tuple[int, str, str]]


class UnscriptedCommand(AssertionError):
    """A command reached the fake executor without a scripted result."""


@dataclass
class _Rule:
    match: tuple[str, ...] | re.Pattern[str]
    exit_code: int
    stdout: str
    stderr: str
    handler: Handler | None
    times: int | None  # None: unlimited

    def matches(self, argv: tuple[str, ...]) -> bool:
        if isinstance(self.match, re.Pattern):
            return self.match.search(shlex.join(argv)) is not None
        return self.match == argv


@dataclass(frozen=True)
class Call:
    argv: tuple[str, ...]
    stdin: str | None
    env: Mapping[str, str] | None
    cwd: str | None
    timeout: float | None


class FakeExecutor:
    """Executor double: scripted results, recorded calls, files kept in memory."""

    def __init__(self, host: str = "fake-host") -> None:
        self.host = host
        self.calls: list[Call] = []
        self.files: dict[str, bytes] = {}
        self.closed = False
        self._rules: list[_Rule] = []

    def script(
        self,
        match: Sequence[str] | re.Pattern[str],
        *,
        exit_code: int = 0,
        stdout: str = "",
        stderr: str = "",
        handler: Handler | None = None,
        times: int | None = None,
    ) -> FakeExecutor:
        """Add a rule; the first matching rule with uses left answers. Returns self for chaining."""
        key = match if isinstance(match, re.Pattern) else tuple(match)
        self._rules.append(_Rule(key, exit_code, stdout, stderr, handler, times))
        return self

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        check: bool = True,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: str | None = None,
    ) -> CommandResult:
        argv_t = tuple(str(a) for a in argv)
        self.calls.append(Call(argv_t, stdin, dict(env) if env else None, cwd, timeout))
        for rule in self._rules:
            if rule.times == 0 or not rule.matches(argv_t):
                continue
            if rule.times is not None:
                rule.times -= 1
            code, out, err = (
                rule.handler(argv_t, stdin)
                if rule.handler
                else (rule.exit_code, rule.stdout, rule.stderr)
            )
            result = make_result(
                argv_t, code, out, err, 0.0, host=self.host, timed_out=False, env=env
            )
            return check_result(result) if check else result
        raise UnscriptedCommand(f"unscripted command on {self.host}: {shlex.join(argv_t)}")

    def put(self, local: Path, remote: str) -> None:
        self.files[remote] = Path(local).read_bytes()

    def get(self, remote: str, local: Path) -> None:
        if remote not in self.files:
            raise UnscriptedCommand(f"get of unknown file {remote} on {self.host}")
        Path(local).write_bytes(self.files[remote])

    def close(self) -> None:
        self.closed = True
