"""One definition of 'secret' for every printer: env names, flag values, nested data."""

from __future__ import annotations

import pytest

from dsv4ops import secrets


@pytest.mark.parametrize(
    "key", ["HF_TOKEN", "OPENAI_API_KEY", "OPENAI_KEY", "DB_PASS", "MY_PASSWORD", "AWS_SECRET_ACCESS_KEY"]
)
def test_secret_env_names(key: str) -> None:
    assert secrets.is_secret_key(key)


@pytest.mark.parametrize(
    "key",
    ["PATH", "CUDA_VISIBLE_DEVICES", "SGLANG_MOE_CONFIG_DIR", "SGLANG_OPT_USE_MULTI_STREAM_OVERLAP",
     # settings whose names mention tokens are not credentials (they were once hidden in the
     # journal, which broke `canary --target`)
     "first_token_deadline_s", "max_tokens", "TOKENIZER_PATH"],
)
def test_ordinary_env_names(key: str) -> None:
    assert not secrets.is_secret_key(key)


def test_secret_flag_values_hidden_in_both_spellings() -> None:
    argv = ["python", "-m", "sglang.launch_server", "--admin-api-key", "S1", "--api-key=S2",
            "--ssl-keyfile-password", "S3", "--max-prefill-tokens", "16384", "--some-new-api-key", "S4"]
    out = secrets.redact_argv(argv)
    assert "S1" not in out and "--api-key=***" in out and "S3" not in out and "S4" not in out
    assert out[out.index("--max-prefill-tokens") + 1] == "16384"  # "-tokens" is not a secret


def test_redact_tree_hides_nested_env_and_argv() -> None:
    data = {"components": [{"argv": ["x", "--api-key", "S"], "env": {"HF_TOKEN": "T", "A": "b"}}]}
    out = secrets.redact_tree(data)
    assert out == {"components": [{"argv": ["x", "--api-key", "***"], "env": {"HF_TOKEN": "***", "A": "b"}}]}
    assert data["components"][0]["env"]["HF_TOKEN"] == "T"  # a copy: the input is untouched
