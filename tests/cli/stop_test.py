"""`dsv4ops stop` refusals: a bad timeout variable is one clear line, nothing changed."""

from __future__ import annotations

from dsv4ops.cli import main
from dsv4ops.journal.store import Journal


def test_a_bad_ready_timeout_variable_is_one_clear_line(env, capsys, monkeypatch):
    monkeypatch.setenv("DSV4OPS_READY_TIMEOUT_S", "abc")
    before = Journal(env.target).operations()
    code = main(["stop", "--yes", "--target", env.target])
    err = capsys.readouterr().err
    assert code == 1, err
    first = err.strip().splitlines()[0]
    assert "DSV4OPS_READY_TIMEOUT_S='abc'" in first and "positive number" in first
    assert "Traceback" not in err and "internal error" not in err
    assert Journal(env.target).operations() == before  # refused before the stop began
