# Greedy answers of the DSV4-speaking tiny model to fresh requests, judged as SGLang 0.5.23 judges
# them with --tool-call-parser deepseekv4 --reasoning-parser deepseek-v4, offline: the prompt is
# deepseek-recipe's rendering of the request body, the output ids go a token at a time through the
# recipe's output parser (sglang/srt/parser/deepseek_recipe_output.py, as serving_deepseek_recipe.py
# streams them), and the calls it yields are compared with the request's expected ones exactly.
#   recipe_output_check.py MODEL_DIR [--n 200] [--seed 7]
# Run with the sglang-cpu venv's python (torch, transformers, sglang, deepseek-recipe importable).
import argparse
import functools
import json
import os
import random
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
import make_tool_model as m  # noqa: E402
from sglang.srt.parser.deepseek_recipe_output import (  # noqa: E402
    DeepSeekRecipeOutputParser,
    whole_tool_calls,
)
from transformers import AutoTokenizer, LlamaForCausalLM  # noqa: E402


@torch.no_grad()
def greedy_batch(model, prompts: list[list[int]], n: int, eos: int, pad: int) -> list[list[int]]:
    """Greedy continuations (left-padded batch), each cut after its first EOS."""
    L = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), L), pad, dtype=torch.long)
    mask = torch.zeros((len(prompts), L), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, L - len(p) :] = torch.tensor(p)
        mask[i, L - len(p) :] = 1
    out = model.generate(
        ids,
        attention_mask=mask,
        max_new_tokens=n,
        do_sample=False,
        eos_token_id=eos,
        pad_token_id=pad,
    )
    res = []
    for row in out[:, L:].tolist():
        res.append(row[: row.index(eos) + 1] if eos in row else row)
    return res


def parse(recipe, ids: list[int], thinking: bool, finished: bool):
    p = DeepSeekRecipeOutputParser(
        recipe,
        thinking_stage=recipe.parse_start(thinking=thinking),
        parse_tool_calls=True,
        separate_reasoning=True,
    )
    deltas = [p.feed([t]) for t in (ids[:-1] if finished else ids)]
    deltas.append(
        p.finish(
            ids[-1:] if finished else [],
            {"type": "stop" if finished else "length"},
            keep_matched_stop=False,
        )
    )
    merged = functools.reduce(lambda a, b: a.merge(b), deltas)
    return merged, whole_tool_calls(merged)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument(
        "--n", type=int, default=200, help="requests per kind (a quarter for weather, plain)"
    )
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--max-turns", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=25)
    ap.add_argument("--teacher-forced", action="store_true", help="also the teacher-forced check")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    hf = AutoTokenizer.from_pretrained(args.model)
    model = LlamaForCausalLM.from_pretrained(args.model, torch_dtype=torch.bfloat16).eval()
    coder = m.Coder(hf)
    eos, pad = coder.eos, hf.convert_tokens_to_ids(m.PAD)
    draw = m.Draw(random.Random(args.seed), args.max_turns)
    total = {}
    for kind in m.CHECK_KINDS:
        n = args.n if kind not in ("weather", "plain") else max(20, args.n // 4)
        reqs = [draw.example(kind) for _ in range(n)]
        ok = {False: [0, 0], True: [0, 0]}
        shown = 0
        for i in range(0, n, args.batch):
            chunk = reqs[i : i + args.batch]
            prompts = [coder.prompt(body) for _, body, _ in chunk]
            gold = [coder.answer(body, calls, 64) for _, body, calls in chunk]
            outs = greedy_batch(model, prompts, max(len(g) for g in gold) + 4, eos, pad)
            for (_, body, calls), out, _gold in zip(chunk, outs, gold, strict=False):
                th = body["thinking"]
                if calls:
                    merged, got = parse(coder.r, out, th, out[-1:] == [eos])
                    try:
                        got_calls = [(c.name, json.loads(c.arguments)) for c in got]
                    except json.JSONDecodeError:
                        got_calls = None  # arguments that are not JSON: a miss
                    good = (
                        got_calls == [(t, a) for t, a in calls]
                        and not merged.content.strip()
                        and out[-1:] == [eos]
                    )
                else:  # long deterministic text, no EOS
                    merged, got = parse(coder.r, out, th, False)
                    good = not got and eos not in out and merged.content.startswith(m.cycle_text(7))
                ok[th][0] += good
                ok[th][1] += 1
                if not good and shown < 2:
                    shown += 1
                    print(
                        f"MISS {kind} thinking={th}: want {calls}\n  got {hf.decode(out)[-400:]!r}",
                        flush=True,
                    )
        total[kind] = ok
        print(
            f"{kind}: thinking off {ok[False][0]}/{ok[False][1]}, on {ok[True][0]}/{ok[True][1]}",
            flush=True,
        )
    if args.teacher_forced:
        draw2 = m.Draw(random.Random(args.seed + 1), args.max_turns)
        acc = m.exact(coder, model, draw2, args.n, pad)
        print(
            "teacher-forced (every answer token the argmax), fresh requests: "
            + " ".join(f"{k} {v:.3f}" for k, v in acc.items()),
            flush=True,
        )
    calls_ok = sum(v[th][0] for k, v in total.items() if k != "plain" for th in v)
    calls_n = sum(v[th][1] for k, v in total.items() if k != "plain" for th in v)
    print(f"tool-call requests exact: {calls_ok}/{calls_n} = {calls_ok / calls_n:.2%}", flush=True)


if __name__ == "__main__":
    main()
