"""A profile's per-component stop grace (`prefill.stop_grace_s`, `decode.stop_grace_s`,
`router.stop_grace_s`): bounded, refused at file:line: key, recorded in the deployment, and no
part of the commands (existing journals' hashes stay valid)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dsv4ops.deployment import Deployment
from dsv4ops.errors import ProfileError
from dsv4ops.profiles import load_profile, load_targets, render
from dsv4ops.timings import STOP_GRACE_S
from testing.profiles import child

GRACES = "prefill:\n  stop_grace_s: 45\ndecode:\n  stop_grace_s: 3\nrouter:\n  stop_grace_s: 600\n"


def test_the_grace_is_recorded_per_component_and_changes_no_command(
    write: Callable[[str, str], Path],
) -> None:
    box = load_targets()["box"]
    plain = render(load_profile("base"), box)
    write("graces", child(GRACES))
    graced = render(load_profile("graces"), box)
    assert graced.commands_hash == plain.commands_hash
    assert [c.argv for c in graced.components] == [c.argv for c in plain.components]
    assert [c.env for c in graced.components] == [c.env for c in plain.components]
    assert {c.name: c.stop_grace_s for c in plain.components} == dict.fromkeys(
        ("prefill", "decode", "router"), STOP_GRACE_S
    )
    wanted = {"prefill": 45.0, "decode": 3.0, "router": 600.0}
    assert {c.name: c.stop_grace_s for c in graced.components} == wanted
    # the journal keeps it: a stop later reads it from the record
    record = graced.to_record()
    back = Deployment.from_record(record["profile"], record["components"])
    assert {c.name: c.stop_grace_s for c in back.components} == wanted
    assert back.commands_hash == plain.commands_hash


def test_a_record_from_before_the_setting_stops_with_the_default(
    write: Callable[[str, str], Path],
) -> None:
    write("graces", child(GRACES))
    record = render(load_profile("graces"), load_targets()["box"]).to_record()
    for c in record["components"]:
        del c["stop_grace_s"]
    back = Deployment.from_record(record["profile"], record["components"])
    assert {c.stop_grace_s for c in back.components} == {STOP_GRACE_S}


@pytest.mark.parametrize(
    ("text", "key", "fragment"),
    [
        ("decode:\n  stop_grace_s: 0.5\n", "decode.stop_grace_s", "from 1 to 600"),
        ("router:\n  stop_grace_s: 601\n", "router.stop_grace_s", "from 1 to 600"),
        ("prefill:\n  stop_grace_s: .inf\n", "prefill.stop_grace_s", "finite"),
        ("decode:\n  stop_grace_s: ten\n", "decode.stop_grace_s", "a number"),
    ],
)
def test_a_grace_out_of_bounds_is_refused_at_its_file_line_and_key(
    write: Callable[[str, str], Path], text: str, key: str, fragment: str
) -> None:
    path = write("bad", child(text))
    with pytest.raises(ProfileError) as info:
        load_profile("bad")
    message = str(info.value)
    assert message.startswith(f"{path}:4: {key}: "), message
    assert fragment in message and "Traceback" not in message
