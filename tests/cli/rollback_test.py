"""`dsv4ops rollback` refusals: nothing to roll back to, an unknown --to."""

from __future__ import annotations

import pytest

from dsv4ops.cli import main
from dsv4ops.journal.records import Kind, Status
from dsv4ops.journal.store import Journal
from testing.journal import gate_step
from testing.orchestrate import OrchEnv, make_deployment


def test_rollback_with_nothing_to_roll_back_to(
    env: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["rollback", "--yes", "--target", env.target])
    err = capsys.readouterr().err
    assert code == 1 and "no earlier known-good deployment" in err


# -- user mistakes: one clear line, exit 1, nothing changed ------------------------------------


def _known_good(env: OrchEnv, commit: str) -> str:
    """A SUCCEEDED deploy in the journal (nothing runs; rollback --to only looks it up)."""
    d = make_deployment("baseline")
    j = Journal(env.target)
    op = j.begin(
        Kind.DEPLOY,
        profile={**d.profile_record(), "git_commit": commit},
        components=d.component_records(),
    )
    j.transition(op, Status.RUNNING)
    gate_step(j, op)
    j.transition(op, Status.SUCCEEDED, running=op, known_good=True)
    return op


def test_rollback_to_an_unknown_id_is_a_user_mistake_listing_the_choices(
    env: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    op = _known_good(env, "0123456789abcdef")
    before = Journal(env.target).operations()
    code = main(["rollback", "--to", "nosuchid", "--yes", "--target", env.target])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "no deployment in the journal matches 'nosuchid'" in err
    assert f"{op} (baseline @ 0123456789ab)" in err  # what --to accepts: IDs and REVs
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 2  # error + hint
    assert Journal(env.target).operations() == before and not (env.workdir / "run").exists()


def test_rollback_to_an_empty_id_is_refused_never_read_as_the_default(
    env: OrchEnv, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--to "$ID"` with ID unset: refused, not a rollback to the last known-good."""
    _known_good(env, "0123456789abcdef")
    before = Journal(env.target).operations()
    for empty in ("", " "):
        code = main(["rollback", "--to", empty, "--yes", "--target", env.target])
        err = capsys.readouterr().err
        assert code == 1, err  # a usage error: the user's mistake
        assert "--to" in err and "an empty value names nothing" in err, err
    assert Journal(env.target).operations() == before and not (env.workdir / "run").exists()
