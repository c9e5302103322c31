# What SGLang 0.5.23's deepseek-recipe output parser streams of the twin's own DSML, fed one of
# the twin's stand-in tokens a step (offline; the sglang-cpu venv with deepseek-recipe 0.2.0):
#   PYTHONPATH=RECIPE_DIR .dsv4ops/sglang-cpu/venv/bin/python tools/sglang-cpu/recipe_stream_shape.py \
#       > tools/sglang-cpu/observed/recipe-stream-twin-tokens.json
# Each stand-in token is fed as the ids of its characters (｜DSML｜ its own added token, as in
# DSV4's tokenizer), all at once, as serving_deepseek_recipe.py stream_chat_chunks feeds a step's
# new output ids. dsv4ops/twin/recipe.py is held to this output by tests/twin/recipe_test.py.
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
from recipe_tokens import hf, ids_of, recipe  # noqa: E402
from sglang.srt.parser.deepseek_recipe_output import DeepSeekRecipeOutputParser  # noqa: E402

from dsv4ops.twin import dsml  # noqa: E402

EXAMPLES = [
    [
        (
            "record_step",
            {
                "nonce": "314f68d9dcbd",
                "session": "s455-314f68d9dcbd",
                "step": 5,
                "path": "/work/s455/314f68d9dcbd/f5.py",
            },
        )
    ],
    [
        ("lookup_order", {"nonce": "ab12cd34", "order_id": 7, "fields": ["status", "eta"]}),
        ("get_weather", {"city": "Paris"}),
    ],
    [
        (
            "edit_files",
            {
                "nonce": "9f",
                "edits": [{"path": "a.py", "hunks": [{"start": 3, "lines": 2}]}],
                "summary": 'say "hi"\\n',
            },
        )
    ],
    # a string value with spaces around it: streamed as written (the detector strips it)
    [("search", {"query": " pd restart ", "nonce": "x1"})],
]

out = []
for calls in EXAMPLES:
    tokens = dsml.tokens(dsml.render_calls([(n, dict(a)) for n, a in calls]))
    parser = DeepSeekRecipeOutputParser(recipe, thinking_stage=None, parse_tool_calls=True)
    steps = []
    for t in tokens:
        d = parser.feed(ids_of(t))
        assert not d.content and not d.reasoning, (t, d)
        steps.append({"token": t, "pieces": [[c.index, c.name, c.arguments] for c in d.tool_calls]})
    eos = hf.convert_tokens_to_ids("<｜end▁of▁sentence｜>")
    last = parser.finish([eos], {"type": "stop"}, keep_matched_stop=False)
    assert not last.tool_calls and not last.content, last
    out.append({"calls": [[n, a] for n, a in calls], "steps": steps})
json.dump(
    {"sglang": "0.5.23", "deepseek_recipe": "0.2.0", "examples": out},
    sys.stdout,
    ensure_ascii=False,
    indent=1,
)
print()
