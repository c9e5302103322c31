# What SGLang 0.5.23's deepseek-recipe output parser makes of DSML fed a token at a time (offline):
#   recipe_output_check.py MODEL_DIR   (run with the sglang-cpu venv; deepseek-recipe installed)
# Output as in observed/recipe-output-deltas.txt (README.md, "The DSV4-speaking tiny model").
import functools
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
import make_tool_model as m  # noqa: E402
from sglang.srt.parser.deepseek_recipe_output import (  # noqa: E402
    DeepSeekRecipeOutputParser,
    whole_tool_calls,
)
from sglang.srt.parser.deepseek_recipe_renderer import DeepSeekRecipe  # noqa: E402
from tokenizers import AddedToken  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

hf = AutoTokenizer.from_pretrained(sys.argv[1])
hf.add_tokens([AddedToken("｜DSML｜", special=True, normalized=False)])
r = DeepSeekRecipe.from_hf_tokenizer("dsv4", hf)
d = m.Draw(random.Random(3))
for lead in ("", "\n\n"):
    _, _, answer, calls = d.example(10, "pair")
    answer = answer.split(m.END_THINK)[-1]
    ids = hf(lead + answer, add_special_tokens=False)["input_ids"]
    p = DeepSeekRecipeOutputParser(r, thinking_stage=None, parse_tool_calls=True)
    deltas = [p.feed([t]) for t in ids[:-1]]
    last = p.finish(ids[-1:], {"type": "stop"}, keep_matched_stop=False)
    got = [x for x in deltas if x.tool_calls or x.content]
    print(repr(lead), "deltas with content/calls:", len(got), "first:", got[:2])
    print("  finish:", last)
print("--- with ｜DSML｜ as its own token")
dsml_id = hf.convert_tokens_to_ids("｜DSML｜")
_, _, answer, calls = d.example(10, "session")
answer = answer.split(m.END_THINK)[-1]
pieces = answer.split("｜DSML｜")
# the markup around ｜DSML｜ one token a character (the merged markup tokens left out)
ids = []
for i, piece in enumerate(pieces):
    if i:
        ids.append(dsml_id)
    for ch in piece.replace(m.EOS, ""):
        ids.append(hf.convert_tokens_to_ids(ch))
ids.append(hf.convert_tokens_to_ids(m.EOS))
p = DeepSeekRecipeOutputParser(r, thinking_stage=None, parse_tool_calls=True)
deltas = [p.feed([t]) for t in ids[:-1]]
last = p.finish(ids[-1:], {"type": "stop"}, keep_matched_stop=False)
calls_seen = [x for x in deltas + [last] if x.tool_calls]
content = "".join(x.content for x in deltas + [last])
print("tool-call deltas:", len(calls_seen), calls_seen[:3])
print("content:", repr(content[:200]))
print("want:", calls)
args = "".join(tc.arguments for x in calls_seen for tc in x.tool_calls)
print("arguments joined:", args)
print(
    "equal:",
    json.loads(args) == calls[0][1],
    "deltas carrying arguments:",
    sum(1 for x in calls_seen for tc in x.tool_calls if tc.arguments),
)
print(
    "whole:",
    whole_tool_calls(functools.reduce(lambda a, b: a.merge(b), deltas + [last])),
)
