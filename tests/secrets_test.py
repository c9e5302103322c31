"""One definition of 'secret' for every printer: env names, flag values, nested data."""

from __future__ import annotations

import pytest

from dsv4ops import secrets
from dsv4ops.jsontypes import JSONObject


@pytest.mark.parametrize(
    "key",
    ["HF_TOKEN", "OPENAI_API_KEY", "OPENAI_KEY", "DB_PASS", "MY_PASSWORD", "AWS_SECRET_ACCESS_KEY"],
)
def test_secret_env_names(key: str) -> None:
    assert secrets.is_secret_key(key)


@pytest.mark.parametrize(
    "key",
    [
        "PATH",
        "CUDA_VISIBLE_DEVICES",
        "SGLANG_MOE_CONFIG_DIR",
        "SGLANG_OPT_USE_MULTI_STREAM_OVERLAP",
        # settings whose names mention tokens are not credentials (they were once hidden in the
        # journal, which broke `canary --target`)
        "first_token_deadline_s",
        "max_tokens",
        "TOKENIZER_PATH",
    ],
)
def test_ordinary_env_names(key: str) -> None:
    assert not secrets.is_secret_key(key)


def test_secret_flag_values_hidden_in_both_spellings() -> None:
    argv = [
        "python",
        "-m",
        "sglang.launch_server",
        "--admin-api-key",
        "S1",
        "--api-key=S2",
        "--ssl-keyfile-password",
        "S3",
        "--max-prefill-tokens",
        "16384",
        "--some-new-api-key",
        "S4",
    ]
    out = secrets.redact_argv(argv)
    assert "S1" not in out and "--api-key=***" in out and "S3" not in out and "S4" not in out
    assert out[out.index("--max-prefill-tokens") + 1] == "16384"  # "-tokens" is not a secret


def test_redact_tree_hides_nested_env_and_argv() -> None:
    data: JSONObject = {
        "components": [{"argv": ["x", "--api-key", "S"], "env": {"HF_TOKEN": "T", "A": "b"}}]
    }
    out = secrets.redact_tree(data)
    assert out == {
        "components": [{"argv": ["x", "--api-key", "***"], "env": {"HF_TOKEN": "***", "A": "b"}}]
    }
    assert data["components"][0]["env"]["HF_TOKEN"] == "T"  # a copy: the input is untouched


def test_the_secret_flags_are_those_the_flag_tables_hold() -> None:
    """issue 21, F3: derived from SGLang 0.5.23's, sglang-router 0.3.2's and SMG 1.13.0's own
    parsers (profiles/_flag_tables.py, _smg_flag_table.py): a regenerated table with a new secret flag fails here until
    secrets.py lists it (the agent zip ships secrets.py alone, so it cannot read the tables)."""
    from dsv4ops.profiles import _flag_tables as t
    from dsv4ops.profiles import _smg_flag_table as smg

    tables = {**t.SGLANG_SERVER_TABLE, **t.SGLANG_ROUTER_TABLE, **smg.SMG_ROUTER_TABLE}
    derived = {f for f in tables if secrets.is_secret_flag_name(f)}
    assert derived == secrets.SECRET_ARG_FLAGS - {"--hf-token"}
    multi = {f for f in derived if tables[f][0] in ("*", "+")}
    assert multi == secrets.SECRET_MULTI_VALUE_FLAGS
    # ... and the rule is not so wide that it hides settings
    assert not secrets.is_secret_flag("--max-total-tokens") and not secrets.is_secret_flag(
        "--tls-key-path"
    )


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        (["--api-key", "sekr1t"], ["--api-key", "***"]),
        (["--api-key=sekr1t"], ["--api-key=***"]),
        (["--api-key sekr1t"], ["--api-key ***"]),
        (["--api-key=", "sekr1t", "--port", "1"], ["--api-key=", "***", "--port", "1"]),
        (
            ["--control-plane-api-keys", "k1", "k2", "--port", "1"],
            ["--control-plane-api-keys", "***", "***", "--port", "1"],
        ),
        (["--redis-url", "redis://:pw@h"], ["--redis-url", "***"]),
        (["--api-key", "sekr1t", "junk"], ["--api-key", "***", "junk"]),  # a stray stays visible
    ],
)
def test_every_argv_shape_is_redacted(argv: list[str], shown: list[str]) -> None:
    assert secrets.redact_argv(argv) == shown


def test_free_text_redaction_covers_flags_keys_and_urls() -> None:
    text = (
        "Process 7: python -m sglang.launch_server --admin-api-key sekr1t-a --api-key=sekr1t-b "
        "--control-plane-api-keys sekr1t-c sekr1t-d --port 1 | ServerArgs(admin_api_key='sekr1t-e', "
        'api_key=None) {"ssl_keyfile_password": "sekr1t-f"} postgres://u:sekr1t-g@db/x '
        "first_token: 3.2 s"
    )
    out = secrets.redact_text(text, {"only-here-9"})
    assert "sekr1t" not in out, out
    assert "api_key=None" in out and "--port 1" in out and "first_token: 3.2 s" in out
    assert secrets.redact_text("uses only-here-9 now", {"only-here-9"}) == "uses *** now"
    assert secrets.argv_secret_values(["--api-key sekr1t", "--api-key=", "zzzz"]) == {
        "sekr1t",
        "zzzz",
    }


@pytest.mark.parametrize(
    "text", ["a" * 65536, "--" + "a-" * 32768, "x" * 32768 + "://" + "a" * 32768, "a:" * 32768]
)
def test_free_text_redaction_is_linear(text: str) -> None:
    """A 64 KB base64 blob or dash run in a log tail took minutes with a backtracking pattern."""
    import time

    t0 = time.process_time()
    secrets.redact_text(text)
    assert time.process_time() - t0 < 1.0  # linear: milliseconds; quadratic: minutes
