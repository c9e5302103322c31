"""Fixtures of the orchestrate tests: one twin environment per module, the CLI pointed at it (the
helpers they use live in testing/orchestrate.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testing.orchestrate import OrchEnv, cli, module_env, our_processes


@pytest.fixture(scope="module")
def orch_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OrchEnv]:
    """One twin environment (git repo of profiles, target on free ports) per test module."""
    yield from module_env(tmp_path_factory)


@pytest.fixture
def env(orch_env: OrchEnv, _clean_environ: None, monkeypatch: pytest.MonkeyPatch) -> OrchEnv:
    """The module environment, with the CLI pointed at it (profiles dir, state dir)."""
    for k, v in orch_env.environ.items():
        monkeypatch.setenv(k, v)
    return orch_env


@pytest.fixture
def baseline_running(env: OrchEnv, capsys: pytest.CaptureFixture[str]) -> OrchEnv:
    """Baseline deployed, healthy and known-good (deployed once per module, then reused): gated
    by the smoke canary (an INCONCLUSIVE on a loaded 2-core machine accepted: still known-good,
    ranked below a pass)."""
    from dsv4ops.journal.store import Journal

    current = Journal(env.target).deployed()
    if current is None or current.profile_name != "baseline" or len(our_processes(env)) != 3:
        code, _, err = cli(
            env,
            capsys,
            "deploy",
            "baseline",
            "--yes",
            "--canary-duration",
            "2",
            "--accept-inconclusive-canary",
        )
        assert code == 0, err
    return env
