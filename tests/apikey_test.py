"""The router's API key by reference (dsv4ops/apikey.py): read from this machine's environment
or a file, sent as a bearer, put into the router's argv only when it starts; every error names
the reference, never the key."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dsv4ops.apikey import ApiKeyError, ApiKeyRef, auth_headers, read_key, with_key

KEY = "rk-unit-9a8b7c6d5e"


def test_a_key_from_the_environment_is_sent_as_a_bearer() -> None:
    ref = ApiKeyRef(env="ROUTER_KEY")
    assert read_key(ref, {"ROUTER_KEY": KEY}) == KEY
    assert auth_headers(ref, {"ROUTER_KEY": KEY}) == {"Authorization": f"Bearer {KEY}"}
    assert auth_headers(None, {"ROUTER_KEY": KEY}) == {}  # a router without a key: nothing


def test_a_key_file_is_read_without_its_trailing_newline(tmp_path: Path) -> None:
    path = tmp_path / "router.key"
    path.write_text(KEY + "\n")
    assert read_key(ApiKeyRef(file=str(path))) == KEY


def test_an_unset_variable_or_missing_file_says_which_and_how_to_fix(tmp_path: Path) -> None:
    with pytest.raises(ApiKeyError) as info:
        read_key(ApiKeyRef(env="ROUTER_KEY"), {})
    assert "environment variable ROUTER_KEY is not set" in str(info.value)
    assert info.value.hint is not None and "export ROUTER_KEY=" in info.value.hint
    with pytest.raises(ApiKeyError, match="cannot read file .*missing.key: FileNotFoundError"):
        read_key(ApiKeyRef(file=str(tmp_path / "missing.key")))


@pytest.mark.timeout(10)  # a regression blocks in open(): fail in seconds, not the suite's 300
def test_a_key_file_that_is_a_fifo_or_a_device_is_refused_at_once(tmp_path: Path) -> None:
    """A FIFO waited for a writer and /dev/zero never ended: every deploy, canary and watch
    that reads the key hung."""
    fifo = tmp_path / "router.key"
    os.mkfifo(fifo)
    for path in (str(fifo), "/dev/zero"):
        with pytest.raises(ApiKeyError, match=f"file {path}: cannot read API key: not a regular"):
            read_key(ApiKeyRef(file=path))


@pytest.mark.parametrize(
    "value", ["", "short", "two words here", "tab\there-long", "ключ-ключ-ключ"]
)
def test_an_unusable_key_is_refused_without_quoting_it(value: str) -> None:
    with pytest.raises(ApiKeyError) as info:
        read_key(ApiKeyRef(env="K"), {"K": value})
    message = str(info.value) + str(info.value.hint)
    assert "not usable" in message
    assert not value.strip() or value.strip() not in message


def test_the_key_replaces_only_the_placeholder_after_api_key() -> None:
    argv = ("python", "-m", "sglang_router.launch_router", "--api-key", "***", "--port", "1")
    assert with_key(argv, KEY) == (*argv[:4], KEY, "--port", "1")
    with pytest.raises(ApiKeyError):
        with_key(("python", "--port", "1"), KEY)


def test_the_reference_round_trips_through_a_record() -> None:
    for ref in (ApiKeyRef(env="ROUTER_KEY"), ApiKeyRef(file="~/.config/dsv4ops/router.key")):
        assert ApiKeyRef.from_record(ref.to_record()) == ref
    assert ApiKeyRef.from_record(None) is None
    assert ApiKeyRef.from_record({"env": None, "file": None}) is None
