# The tool model's tokenizer as the recipe scripts feed SGLang's deepseek-recipe parser
# (recipe_stream_shape.py, recipe_whole_shape.py): ｜DSML｜ its own added token, as in DSV4's
# tokenizer, and each of the twin's stand-in tokens fed as the ids of its characters.
import os

from sglang.srt.parser.deepseek_recipe_renderer import DeepSeekRecipe
from tokenizers import AddedToken
from transformers import AutoTokenizer

from dsv4ops.twin import dsml

HERE = os.path.dirname(os.path.abspath(__file__))

hf = AutoTokenizer.from_pretrained(os.path.join(HERE, "tool-model"))
hf.add_tokens([AddedToken(dsml.DSML_TOKEN, special=True, normalized=False)])
recipe = DeepSeekRecipe.from_hf_tokenizer("dsv4", hf)
dsml_id = hf.convert_tokens_to_ids(dsml.DSML_TOKEN)


def ids_of(token: str) -> list[int]:
    out: list[int] = []
    for i, piece in enumerate(token.split(dsml.DSML_TOKEN)):
        if i:
            out.append(dsml_id)
        for ch in piece:
            tid = hf.convert_tokens_to_ids(ch)
            if tid == hf.unk_token_id:
                raise SystemExit(f"no token for {ch!r} (of {token!r}) in the tool-model tokenizer")
            out.append(tid)
    return out
