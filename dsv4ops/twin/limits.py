"""SGLang 0.5.23's context-length refusals, as the twin answers them.

Two checks, in SGLang's order (the pinned wheel):
* serving_chat.py `_validate_request` ~L1180 (chat only, before tokenizing):
  `max_completion_tokens` (else `max_tokens`) larger than the context length;
* tokenizer_manager.py `_validate_one_request` ~L1333-1377 (every generation endpoint): the
  input alone `>=` the context length, then input + `max_new_tokens` `>` it.

Each is a ValueError there, answered 400 before any byte of a stream is sent (serving_chat.py
`_handle_streaming_request` ~L2422 kick-starts the generator for exactly this); the OpenAI
endpoints wrap it in an ErrorResponse, `/generate` in `{"error": {"message": ...}}`
(http_app.py). `--allow-auto-truncate` (which truncates instead) is not modelled: the box does
not set it.
"""

from __future__ import annotations

from .formats import Job

# DeepSeek-V4-Flash's own context length (its config), what SGLang uses without --context-length.
MODEL_CONTEXT_LEN = 1048576


def refusal(job: Job, context_len: int) -> str | None:
    """The message SGLang refuses `job` with, or None when it fits."""
    if job.kind == "chat" and job.max_tokens > context_len:
        return (  # sic: no space after the period, as in serving_chat.py
            f"max_completion_tokens is too large: {job.max_tokens}."
            f"This model supports at most {context_len} completion tokens."
        )
    n_in = job.prompt_tokens
    if n_in >= context_len:
        return (
            f"The input ({n_in} tokens) is longer than the model's context length "
            f"({context_len} tokens)."
        )
    if job.max_tokens + n_in > context_len:
        return (
            "Requested token count exceeds the model's maximum context length "
            f"of {context_len} tokens. You requested a total of {job.max_tokens + n_in} "
            f"tokens: {n_in} tokens from the input messages and "
            f"{job.max_tokens} tokens for the completion. Please reduce the number "
            "of tokens in the input messages or the completion to fit within the limit."
        )
    return None
