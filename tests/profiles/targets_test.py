"""profiles/targets.py: where a local target's relative paths point."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsv4ops.errors import ProfileError
from dsv4ops.profiles import load_targets

TARGETS = """schema_version: 1
targets:
  here:
    transport: local
    gpus: [0, 1]
    workdir: ops
    python: env/bin/python
    launcher: sglang
    bind_host: 127.0.0.1
"""


def test_a_relative_local_python_is_relative_to_where_dsv4ops_runs_like_the_workdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The components start in the workdir, where the same relative path names another file
    (the agent ran `env/bin/python` from here and the servers from `ops/`)."""
    (tmp_path / "targets.yaml").write_text(TARGETS)
    monkeypatch.chdir(tmp_path)
    target = load_targets(tmp_path / "targets.yaml")["here"]
    assert target.python == str(tmp_path / "env/bin/python")
    assert target.workdir == str(tmp_path / "ops")
    (tmp_path / "t2.yaml").write_text(TARGETS.replace("env/bin/python", "python3.11"))
    assert load_targets(tmp_path / "t2.yaml")["here"].python == "python3.11"


SSH_TARGET = """schema_version: 1
targets:
  box:
    transport: ssh
    ssh:
      host: dsv4-box
      reconnect_s: RECONNECT
    gpus: [0, 1]
    workdir: /opt/dsv4ops
"""


def test_an_ssh_target_rides_out_30_s_of_outage_unless_told(tmp_path: Path) -> None:
    path = tmp_path / "targets.yaml"
    path.write_text(SSH_TARGET.replace("      reconnect_s: RECONNECT\n", ""))
    ssh = load_targets(path)["box"].ssh
    assert ssh is not None and ssh.reconnect_s == 30.0
    path.write_text(SSH_TARGET.replace("RECONNECT", "0"))
    ssh = load_targets(path)["box"].ssh
    assert ssh is not None and ssh.reconnect_s == 0.0


@pytest.mark.parametrize("value", ["-1", "601", "soon"])
def test_a_bad_reconnect_budget_names_its_file_line_and_key(tmp_path: Path, value: str) -> None:
    path = tmp_path / "targets.yaml"
    path.write_text(SSH_TARGET.replace("RECONNECT", value))
    with pytest.raises(ProfileError) as raised:
        load_targets(path)
    assert raised.value.path == str(path) and raised.value.line == 7
    assert raised.value.key == "targets.box.ssh.reconnect_s", raised.value.key


def test_every_problem_of_the_file_is_named_in_one_run_by_file_line_and_key(
    tmp_path: Path,
) -> None:
    """targets.yaml is checked by its pydantic models (profiles/target_spec.py): no value is
    coerced (a quoted "22" is not a port), and all the problems come back at once."""
    path = tmp_path / "targets.yaml"
    path.write_text(
        "schema_version: 1\ntargets:\n  box:\n    transport: ssh\n"
        '    ssh: {host: h, port: "22", hots: x}\n'
        "    gpus: [0, 0]\n    workdir: /w\n"
        "  odd:\n    transport: pigeon\n"
    )
    with pytest.raises(ProfileError) as raised:
        load_targets(path)
    lines = str(raised.value).splitlines()
    assert [line.split(": ")[:2] for line in lines] == [
        [f"{path}:5", "targets.box.ssh.hots"],
        [f"{path}:5", "targets.box.ssh.port"],
        [f"{path}:6", "targets.box.gpus"],
        [f"{path}:9", "targets.odd.transport"],
    ], lines
    assert (
        raised.value.key == "targets.box.ssh.hots" and raised.value.hint == "did you mean 'host'?"
    )
    assert "expected one of local, ssh, endpoint, got 'pigeon'" in lines[3]


@pytest.mark.parametrize(
    ("old", "new", "key", "why"),
    [
        (
            "port: 22",
            "port: x",
            "targets.box.ssh.port",
            "expected an integer from 1 to 65535, got 'x'",
        ),
        ("gpus: [0]", "gpus: [0, a]", "targets.box.gpus", "expected a list of integers, each "),
        (
            "gpus: [0]",
            "gpus: [0, 300]",
            "targets.box.gpus[1]",
            "expected a list of integers, each ",
        ),
    ],
)
def test_a_targets_type_error_reads_like_the_profiles(
    tmp_path: Path, old: str, new: str, key: str, why: str
) -> None:
    """targets.yaml's values are named by the profile's translator (typecheck.value_problem):
    what the key takes, from its declared type and bounds, then what was written."""
    path = tmp_path / "targets.yaml"
    text = "schema_version: 1\ntargets:\n  box:\n    transport: ssh\n"
    path.write_text(text + "    ssh: {host: h, port: 22}\n    gpus: [0]\n    workdir: /w\n")
    path.write_text(path.read_text().replace(old, new))
    with pytest.raises(ProfileError) as raised:
        load_targets(path)
    assert raised.value.key == key and raised.value.bare_message.startswith(why), raised.value
    assert "Input should" not in str(raised.value)


def test_a_url_list_error_says_what_the_list_holds(tmp_path: Path) -> None:
    # It read "a list of strings, e.g. ['--flag', 'value']": the argv lists' example
    path = tmp_path / "targets.yaml"
    path.write_text(
        "schema_version: 1\ntargets:\n  ep:\n    transport: endpoint\n"
        "    router_url: http://127.0.0.1:9\n    metrics:\n      prefill: [1, 2]\n"
    )
    with pytest.raises(ProfileError) as raised:
        load_targets(path)
    assert raised.value.key == "targets.ep.metrics.prefill", raised.value
    assert raised.value.bare_message == (
        "expected a list of strings (prefill server URLs), got [1, 2]"
    ), raised.value


@pytest.mark.parametrize("body", ["targets: {}", "targets: []", "targets: 5"])
def test_a_targets_section_that_holds_no_target_says_what_it_takes(
    tmp_path: Path, body: str
) -> None:
    # It read pydantic's "Dictionary should have at least 1 item after validation, not 0"
    path = tmp_path / "targets.yaml"
    path.write_text(f"schema_version: 1\n{body}\n")
    with pytest.raises(ProfileError) as raised:
        load_targets(path)
    assert (raised.value.line, raised.value.key) == (2, "targets"), raised.value
    assert raised.value.bare_message.startswith(
        "expected a mapping of target names to targets, at least one, got "
    ), raised.value


def test_a_key_written_as_null_takes_its_default(tmp_path: Path) -> None:
    path = tmp_path / "targets.yaml"
    path.write_text(
        "schema_version: 1\ntargets:\n  5:\n    transport: local\n    gpus: [0]\n    workdir: w\n"
        "    ssh: null\n    twin_env: null\n    port_offset: null\n    launcher: null\n"
    )
    target = load_targets(path)["5"]  # a name YAML reads as a number is still a name
    assert (target.ssh, target.twin_env, target.port_offset, target.launcher) == (
        None,
        (),
        0,
        "sglang",
    )


TWIN_TARGET = """schema_version: 1
targets:
  here:
    transport: local
    gpus: [0, 1]
    workdir: ops
    launcher: twin
    twin_env:
      KEY: "1"
"""
LONG = 20_000

# (what replaces what in TWIN_TARGET, line, key, the message's start)
BAD_KEYS = {
    "twin_env-control": (
        ("KEY", '"A\\x01B"'),
        9,
        "targets.here.twin_env",
        "key 'A\\x01B': contains the control character U+0001 at position 1",
    ),
    "twin_env-long": (
        ('KEY: "1"', "? " + "K" * LONG + '\n      : "1"'),  # a key over 1024: ? KEY
        9,
        "targets.here.twin_env",
        "key '" + "K" * 56 + f"...: {LONG} characters long; at most 16384",
    ),
    "twin_env-long-control": (
        ('KEY: "1"', '? "' + "K" * LONG + '\\e[2J"\n      : "1"'),
        9,
        "targets.here.twin_env",
        "key 'KKK",
    ),
    "name-control": (
        ("here:", '"he\\e[2Jre":'),
        3,
        "targets",
        "key 'he\\x1b[2Jre': contains the control character U+001B at position 2",
    ),
    "name-long": (
        ("  here:", "  ? " + "h" * 2000 + "\n  :\n    python: 5"),
        5,
        f"targets.{'h' * 57}....python",
        "expected a string (or null), got 5",
    ),
    "unknown-control": (
        ("launcher: twin", '"lau\\encher": twin'),
        7,
        "targets.here.lau\\x1bncher",
        "unknown key; valid keys here: description",
    ),
    "unknown-invisible": (
        ("launcher: twin", '"launcher\\u200b": twin'),
        7,
        "targets.here.launcher\\u200b",
        "unknown key",
    ),
}


@pytest.mark.parametrize("case", BAD_KEYS.values(), ids=BAD_KEYS)
def test_a_bad_mapping_key_is_named_by_file_line_and_a_printable_bounded_key_path(
    tmp_path: Path, case: tuple[tuple[str, str], int, str, str]
) -> None:
    """A key of targets.yaml can be anything YAML allows (an escape sequence, 20,000
    characters): the error shows it escaped and cut, never pydantic's `[key]` location."""
    (old, new), line, key, start = case
    path = tmp_path / "targets.yaml"
    path.write_text(TWIN_TARGET.replace(old, new, 1))
    with pytest.raises(ProfileError) as raised:
        load_targets(path)
    error = raised.value
    assert (error.path, error.line, error.key) == (str(path), line, key), error
    assert error.bare_message.startswith(start), error.bare_message
    assert "[key]" not in str(error) and str(error).isprintable(), str(error)
    assert len(str(error)) < len(str(path)) + 400
