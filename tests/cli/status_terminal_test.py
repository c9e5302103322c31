"""Hostile bytes from the network never reach the terminal raw (issue 21, F9): `status` and
`watch` of an endpoint target whose router is malicious (a real HTTP server on 127.0.0.1,
testing/watch.py): a worker URL with a line break cannot forge a "worker ... ok" line, and ESC
sequences from a garbage /metrics body are shown escaped."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsv4ops.cli import main
from dsv4ops.cli._output import table, terminal_safe
from testing.orchestrate import SHIPPED_PROFILES
from testing.watch import hostile_http

RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")  # any control byte but the line break


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with hostile_http() as url:
        profiles = tmp_path / "profiles"
        shutil.copytree(SHIPPED_PROFILES, profiles)
        (profiles / "targets.yaml").write_text(f"""schema_version: 1
targets:
  cluster:
    description: a malicious router
    transport: endpoint
    router_url: {url}
    metrics:
      prefill: [{url}]
      decode: [{url}]
      router: {url}
    profile: baseline
    namespace: inference
    replicas: 1
""")
        monkeypatch.setenv("DSV4OPS_PROFILES_DIR", str(profiles))
        yield url


def test_status_shows_a_hostile_worker_url_on_one_escaped_line(
    cluster: str, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["status", "--target", "cluster"])
    out = capsys.readouterr().out
    workers = [line for line in out.splitlines() if line.startswith("worker ")]
    assert len(workers) == 1, out  # the forged "worker ... ok" line is not a line of its own
    assert "\\nworker (as the router lists it): decode http://forged:1 ok UNHEALTHY" in workers[0]
    assert not RAW_CONTROL.search(out) and "decode\\x1b[8m" in out


def test_watch_shows_a_garbage_metrics_body_escaped(
    cluster: str, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["watch", "--target", "cluster", "--once", "--interval", "0.2", "--probe-every", "0"])
    out = capsys.readouterr().out
    assert "DOWN (" in out and "\\x1b[31m" in out, out
    assert not RAW_CONTROL.search(out), out


def test_the_escape_rule() -> None:
    assert terminal_safe("a\x1b[2Jb\nc\u202ed\x9b") == "a\\x1b[2Jb\\nc\\u202ed\\x9b"
    assert terminal_safe("one\ntwo\x07", keep_newlines=True) == "one\ntwo\\x07"
    assert table([["x\ny", 1]], ["a", "b"]).count("\n") == 2  # header, rule, one row
