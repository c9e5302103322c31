"""Where `dsv4ops canary` sends load and what judges it (usecases/canary.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from dsv4ops.canary import Thresholds
from dsv4ops.errors import CanaryError
from dsv4ops.journal.records import Kind, Status
from dsv4ops.journal.store import Journal
from dsv4ops.usecases.canary import resolve_endpoint
from testing.orchestrate import journal_session, make_deployment


def record_deployed(
    target: str, content: dict[str, Any], flags: dict[str, Any], decode_args: tuple[str, ...] = ()
) -> None:
    dep = make_deployment("recorded")
    dep = replace(
        dep,
        commands_hash="",
        components=tuple(
            replace(c, argv=(*c.argv, *decode_args)) if c.name == "decode" else c
            for c in dep.components
        ),
    )
    journal = Journal(target)
    op = journal.begin(
        Kind.DEPLOY,
        profile={**dep.profile_record(), "content": content, "flags": flags},
        components=dep.component_records(),
    )
    journal.transition(op, Status.RUNNING)
    journal.transition(op, Status.SUCCEEDED, running=op)


def test_a_url_is_used_as_given_with_default_thresholds() -> None:
    ep = resolve_endpoint(None, None, "http://h:1", ("http://w:2",))
    assert (ep.base_url, ep.worker_urls, ep.buckets, ep.model) == (
        "http://h:1",
        ("http://w:2",),
        (),
        "default",
    )
    assert ep.thresholds == Thresholds()
    assert ep.decode_log_interval == 40  # nothing known of the decode: SGLang's default


def test_the_deployed_unit_is_judged_by_its_recorded_profile() -> None:
    record_deployed(
        "twin-local",
        {"canary": {"smoke_requests": 3}, "model": {"served_name": "dsv4-flash"}},
        {"decode_buckets": [1, 8, 16]},
    )
    ep = resolve_endpoint(journal_session("twin-local"), None, None)
    assert ep.base_url == "http://127.0.0.1:8000"
    assert ep.worker_urls == ("http://127.0.0.1:30000", "http://127.0.0.1:30001")
    assert ep.thresholds.smoke_requests == 3 and ep.buckets == (1, 8, 16)
    assert ep.model == "dsv4-flash"
    assert ep.decode_log_interval == 40
    assert (
        resolve_endpoint(journal_session("twin-local"), None, None, model="asked").model == "asked"
    )


def test_the_freeze_window_follows_the_deployed_decode_log_interval() -> None:
    record_deployed("twin-local", {}, {}, decode_args=("--decode-log-interval", "200"))
    assert resolve_endpoint(journal_session("twin-local"), None, None).decode_log_interval == 200


def test_nothing_deployed_and_no_profile_is_a_clear_refusal() -> None:
    with pytest.raises(CanaryError, match="records no running deployment on target 'twin-local'"):
        resolve_endpoint(journal_session("twin-local"), None, None)
