"""`router.api_key` (issue 40, item 7): a profile names where the router's key lives (an
environment variable or a file on the operator's machine), never the key. The rendered router
command holds `--api-key ***`; the key goes in only when the router starts, and the command then
parses with the real sglang-router 0.3.2 parser. A key written into the profile is an error at
its file:line, and the error does not quote it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from dsv4ops.apikey import ApiKeyRef
from dsv4ops.deployment import Component, Deployment
from dsv4ops.errors import ProfileError
from dsv4ops.orchestrate.model import process_spec
from dsv4ops.profiles import load_profile, load_targets, render
from testing.profiles import child

KEY = "rk-profile-5d4c3b2a19"
KEYED = "router:\n  api_key:\n    env: ROUTER_KEY\n"


def test_the_router_command_holds_a_placeholder_and_starts_with_the_key(
    write: Callable[[str, str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from sglang_router.launch_router import parse_router_args

    write("p", child(KEYED))
    d = render(load_profile("p"), load_targets()["box"])
    router = d.component("router")
    assert router.argv[router.argv.index("--api-key") + 1] == "***"
    assert d.router_key == ApiKeyRef(env="ROUTER_KEY")
    monkeypatch.setenv("ROUTER_KEY", KEY)
    started = process_spec(router).argv
    assert KEY in started and KEY not in router.argv
    parsed = parse_router_args(list(started[3:]))  # the real sglang-router 0.3.2 parser
    assert parsed.api_key == KEY and parsed.pd_disaggregation


def test_the_hash_follows_the_reference_not_the_key(
    write: Callable[[str, str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    box = load_targets()["box"]
    plain = render(load_profile("base"), box)
    assert "--api-key" not in plain.component("router").argv  # no key: the command as before
    write("p", child(KEYED))
    keyed = render(load_profile("p"), box)
    monkeypatch.setenv("ROUTER_KEY", KEY)
    again = render(load_profile("p"), box)
    assert keyed.commands_hash == again.commands_hash != plain.commands_hash
    write("q", child("router:\n  api_key:\n    file: /etc/dsv4ops/router.key\n"))
    assert render(load_profile("q"), box).commands_hash != keyed.commands_hash


def test_a_journaled_router_restarts_from_its_reference(
    write: Callable[[str, str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rollback to the recorded commands: the record holds '***' and where the key lives."""
    write("p", child(KEYED))
    d = render(load_profile("p"), load_targets()["box"])
    record = d.to_record()
    assert KEY not in str(record)
    back = Deployment.from_record(record["profile"], record["components"])
    router = back.component("router")
    assert router.api_key == ApiKeyRef(env="ROUTER_KEY") and not router.has_redacted_values
    assert back.commands_hash == d.commands_hash
    monkeypatch.setenv("ROUTER_KEY", KEY)
    assert KEY in process_spec(router).argv
    # a real secret blanked in the record still cannot be restarted from it
    blanked = replace(router, env={"HF_TOKEN": "***"})
    assert isinstance(blanked, Component) and blanked.has_redacted_values


@pytest.mark.parametrize(
    ("text", "key"),
    [
        # the key written into the profile, as a router flag or as the section itself
        ("router:\n  extra_args: ['--api-key', 'sk-live-0123456789']\n", "router.extra_args[0]"),
        ("router:\n  extra_args: ['--api-key=sk-live-0123456789']\n", "router.extra_args[0]"),
        ("router:\n  api_key: sk-live-0123456789\n", "router.api_key"),
        # the key pasted where its variable's name goes
        ("router:\n  api_key:\n    env: sk-live-0123456789\n", "router.api_key.env"),
        (
            "router:\n  api_key:\n    env: ROUTER_KEY\n    file: /etc/dsv4ops/router.key\n",
            "router.api_key",
        ),
    ],
)
def test_a_key_in_the_profile_is_an_error_at_its_line_that_does_not_quote_it(
    write: Callable[[str, str], Path], text: str, key: str
) -> None:
    path = write("p", child(text))
    with pytest.raises(ProfileError) as info:
        load_profile("p")
    err = info.value
    assert err.key == key and err.path is not None and Path(err.path).name == path.name
    assert err.line is not None and err.line >= 3, str(err)
    assert "sk-live-0123456789" not in str(err) + str(err.hint)
    # what to write instead reads whole: the redaction of secrets must not eat the advice
    assert "***" not in (str(err) + str(err.hint)).replace("--api-key ***", ""), str(err)
