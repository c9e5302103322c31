# What SGLang 0.5.23's deepseek-recipe output parser makes of two DSML blocks, streamed (fed one of
# the twin's stand-in tokens a step, as recipe_stream_shape.py) and whole (all ids in one
# `finish`, as serving_deepseek_recipe.py parse_chat_response does for stream=false, then
# `whole_tool_calls`, and "stop" becomes "tool_calls" when there is a call):
#   * a string value with spaces around it (the detector strips it);
#   * the twin's malformed invoke (dsml.malformed: the `dropped_call` corruption shape), the
#     first parameter declared non-string with a value that is not JSON, as the box wrote one.
# Offline, the sglang-cpu venv with deepseek-recipe 0.2.0:
#   .dsv4ops/sglang-cpu/venv/bin/python tools/sglang-cpu/recipe_whole_shape.py \
#       > tools/sglang-cpu/observed/recipe-whole-twin-tokens.json
# dsv4ops/twin is held to this output by tests/twin/recipe_test.py.
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
from recipe_tokens import hf, ids_of, recipe  # noqa: E402
from sglang.srt.parser.deepseek_recipe_output import (  # noqa: E402
    DeepSeekRecipeOutputParser,
    whole_tool_calls,
)

from dsv4ops.twin import dsml  # noqa: E402

EXAMPLES = [
    ("as_written", [("search", {"query": " pd restart ", "nonce": "x1"})]),
    (
        "malformed",
        [("record_step", {"nonce": "314f68d9dcbd", "session": "s455-314f68d9dcbd", "step": 5})],
    ),
    (
        "malformed",
        [
            ("lookup_order", {"nonce": "ab12cd34", "order_id": 7}),
            ("get_weather", {"city": "Paris"}),
        ],
    ),
    ("malformed", [("ping", {})]),
]
EOS = hf.convert_tokens_to_ids("<｜end▁of▁sentence｜>")


def parser():
    return DeepSeekRecipeOutputParser(recipe, thinking_stage=None, parse_tool_calls=True)


out = []
for kind, calls in EXAMPLES:
    markup = dsml.render_calls([(n, dict(a)) for n, a in calls])
    if kind == "malformed":
        markup = dsml.malformed(markup)
    tokens = dsml.tokens(markup)
    p = parser()
    steps = []
    for t in tokens:
        d = p.feed(ids_of(t))
        steps.append(
            {
                "token": t,
                "content": d.content,
                "pieces": [[c.index, c.name, c.arguments] for c in d.tool_calls],
            }
        )
    last = p.finish([EOS], {"type": "stop", "matched": EOS}, keep_matched_stop=False)
    ids = [i for t in tokens for i in ids_of(t)] + [EOS]
    whole = parser().finish(ids, {"type": "stop", "matched": EOS}, keep_matched_stop=False)
    found = whole_tool_calls(whole)
    out.append(
        {
            "kind": kind,
            "calls": [[n, a] for n, a in calls],
            "markup": markup,
            "steps": steps,
            "last": {
                "content": last.content,
                "pieces": [[c.index, c.name, c.arguments] for c in last.tool_calls],
            },
            "whole": {
                "content": whole.content,
                "reasoning": whole.reasoning,
                "tool_calls": [[c.index, c.name, c.arguments] for c in found],
                "finish_reason": "tool_calls" if found else "stop",
            },
        }
    )
json.dump(
    {"sglang": "0.5.23", "deepseek_recipe": "0.2.0", "examples": out},
    sys.stdout,
    ensure_ascii=False,
    indent=1,
)
print()
