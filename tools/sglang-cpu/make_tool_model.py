# Trains a tiny Llama that writes DeepSeek-V4's tool calls (DSML, as SGLang's
# function_call/deepseekv4_detector.py parses them) and reasoning (`<think>`…`</think>`), on
# synthetic transcripts drawn from the canary's own request generators
# (dsv4ops/canary/workload.py), seeded, on CPU. Prompts are rendered by this model's own chat
# template; SGLang 0.5.23 with --tool-call-parser deepseekv4 renders them with deepseek-recipe
# instead (README.md: the next model must be trained on that rendering).
#   make_tool_model.py OUT_DIR [--steps N] [--seed S] [--threads T]
# The defaults made the committed tools/sglang-cpu/tool-model (torch 2.14.1 CPU, 2 threads; 5000
# steps in 1613 s on 2 cores shared with other work, then ~3 min of greedy checks): it answers ~60%
# of the canary's tool-call requests exactly (the rest: a nonce or number copied wrong), too few
# for the canary's gates (issue 38 item 3 is open on that).
# What it answers (greedy):
#   - a `CALL <tool> <json>` line per call asked (the canary's tool-call prompts, sessions and
#     parallel pairs) → a DSML block with one invoke per line, string arguments as
#     string="true", the others as JSON with string="false" (DSV4's encoding), the per-request
#     nonce copied exactly;
#   - the deploy probe's "what is the weather in Paris?" → get_weather(city=Paris);
#   - anything else → "Hello world from the twin check." repeated up to max_tokens (never EOS:
#     the throughput suites need long deterministic answers);
#   - with chat_template_kwargs {"thinking": true} the template opens <think> and the model writes
#     one short reasoning sentence, then </think>, then the answer above.
# The tokenizer has one token per markup piece (DSML tags, tool names, keys, JSON punctuation),
# one per two hex digits and one per other character; the chat template renders only the last
# user message (a session's history never reaches the 2048-token context).
import argparse
import json
import math
import os
import random
import sys
import time

import torch
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # the repo root: dsv4ops
from dsv4ops.canary import workload as wl  # noqa: E402  (the canary's own generators)

BOS, EOS, USER, ASSISTANT = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>"
UNK, PAD = "<unk>", "<pad>"
THINK, END_THINK = "<think>", "</think>"
D = "｜DSML｜"  # fullwidth bars U+FF5C, as SGLang's deepseekv32_detector.py spells it
BLOCK_OPEN, BLOCK_CLOSE = f"<{D}tool_calls>", f"</{D}tool_calls>"
INVOKE_OPEN, INVOKE_CLOSE = f'<{D}invoke name="', f"</{D}invoke>"
PARAM_OPEN, PARAM_CLOSE = f'<{D}parameter name="', f"</{D}parameter>"
STR_TRUE, STR_FALSE, TAG_END = '" string="true">', '" string="false">', '">'
TOOLS = ["record_step", "lookup_order", "edit_files", "get_weather"]
KEYS = ["nonce", "session", "step", "path", "order_id", "fields", "summary", "edits", "hunks", "start", "lines", "city"]
STRING_KEYS = ["nonce", "session", "path", "summary", "city"]
NUMBER_KEYS = ["step", "order_id", "edits", "fields"]
# a key with its JSON separator in the prompt, and the DSML that opens its parameter in the answer,
# one token each: the token before a value is one token on both sides (what a copy head matches)
KEY_TOKENS = [f'"{k}":"' for k in STRING_KEYS] + [f'"{k}":' for k in NUMBER_KEYS]
PARAM_TOKENS = [f"{PARAM_OPEN}{k}{STR_TRUE}" for k in STRING_KEYS] + [f"{PARAM_OPEN}{k}{STR_FALSE}" for k in NUMBER_KEYS]
INVOKE_TOKENS = [f"{INVOKE_OPEN}{t}{TAG_END}" for t in TOOLS]
PUNCT = ["CALL "] + KEY_TOKENS + PARAM_TOKENS + INVOKE_TOKENS
# The fixed phrases of the canary's, the probe's and watch's prompts and of the answers, one token
# each (a real tokenizer has words; these keep the sequences, and the CPU training, short).
PHRASES = [
    "\nCall the function ", " with exactly the JSON arguments above. Write nothing else.",
    "Call both functions, in this order, each with exactly its JSON arguments above. Write nothing else.",
    "Describe decode step number ", " of the canary in one short paragraph.",
    "Probe ", "Watch probe ", ": reply with one short sentence.", ": what is the weather in Paris?",
    "Watch probe stream: write a long, numbered list of short sentences.",
    "Pair ", ": rename the decode step helper, update the router's call sites",
    '[{"path":"/work/pair', '/decode.py","hunks":[{"start":', ',"lines":["# ', '","value = ', '"]}]}]',
    "/work/", "/f", ".py", "Paris",
    "The user wants ", ", with the exact arguments given.", "The user wants text, not a tool call.",
]
CYCLE = ["Hello", " world", " from", " the", " twin", " check", "."]
SPECIAL = [UNK, PAD, BOS, EOS, USER, ASSISTANT]
MARKUP = [THINK, END_THINK, BLOCK_OPEN, BLOCK_CLOSE, INVOKE_OPEN, INVOKE_CLOSE, PARAM_OPEN, PARAM_CLOSE,
          STR_TRUE, STR_FALSE, TAG_END] + TOOLS + KEYS + PUNCT + PHRASES + CYCLE
HEX = "0123456789abcdef"

TEMPLATE = (
    "{%- set ns = namespace(last='') -%}"
    "{%- for m in messages -%}{%- if m['role'] == 'user' -%}"
    "{%- set ns.last = m['content'] if m['content'] is string else '' -%}"
    "{%- endif -%}{%- endfor -%}"
    + BOS + USER + "{{ ns.last }}"
    + "{%- if add_generation_prompt -%}" + ASSISTANT
    + "{%- if thinking is defined and thinking -%}" + THINK + "{%- else -%}" + END_THINK + "{%- endif -%}"
    + "{%- endif -%}"
)


def render(user: str, thinking: bool) -> str:
    """What TEMPLATE renders for a conversation whose last user message is `user`."""
    return BOS + USER + user + ASSISTANT + (THINK if thinking else END_THINK)


def build_tokenizer():
    chars = [chr(c) for c in range(32, 127)] + ["\n", "\t"]
    vocab = {t: i for i, t in enumerate(SPECIAL + chars + [a + b for a in HEX for b in HEX])}
    tok = Tokenizer(models.WordLevel(vocab=dict(vocab), unk_token=UNK))
    # two hex digits make one token, every other character its own
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[0-9a-f]{2}|[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in MARKUP])
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token=UNK, eos_token=EOS, pad_token=PAD,
                                 bos_token=BOS, clean_up_tokenization_spaces=False, model_max_length=2048)
    hf.chat_template = TEMPLATE
    return hf


def dsml(calls) -> str:
    """DSV4's DSML for [(tool, args)]: strings as string="true", the rest as compact JSON."""
    out = [BLOCK_OPEN, "\n"]
    for tool, args in calls:
        out += [INVOKE_OPEN, tool, TAG_END, "\n"]
        for k, v in args.items():
            if isinstance(v, str):
                out += [PARAM_OPEN, k, STR_TRUE, v, PARAM_CLOSE, "\n"]
            else:
                out += [PARAM_OPEN, k, STR_FALSE, json.dumps(v, separators=(",", ":")), PARAM_CLOSE, "\n"]
        out += [INVOKE_CLOSE, "\n"]
    out.append(BLOCK_CLOSE)
    return "".join(out)


def reasoning(calls) -> str:
    if not calls:
        return "The user wants text, not a tool call."
    return "The user wants " + " and ".join(t for t, _ in calls) + ", with the exact arguments given."


def cycle_text(n_words: int, start: int = 0) -> str:
    return "".join(CYCLE[(start + i) % len(CYCLE)] for i in range(n_words))


class Draw:
    """Synthetic requests drawn from the canary's generators (dsv4ops.canary.workload)."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def nonce(self) -> str:
        return "".join(self.rng.choice(HEX) for _ in range(12))

    def small(self, hi: int) -> int:
        # mostly small numbers (what a run sends), some large
        return self.rng.randrange(10 ** self.rng.randint(1, len(str(hi)))) % (hi + 1)

    def session(self):
        history: list = []
        s = self.small(999)
        body, _ = wl.session_turn_body(history, f"s{s:03d}", self.small(200), self.nonce())
        return body["messages"][-1]["content"], [("record_step", dict(_.args))]

    def lookup(self):
        args = {"nonce": self.nonce(), "order_id": self.small(99999)}
        return wl.call_prompt("lookup_order", args), [("lookup_order", args)]

    def pair(self):
        body, expects = wl.pair_body(self.small(99), self.nonce())
        return body["messages"][-1]["content"], [(e.tool, e.args) for e in expects]

    def weather(self):
        return f"Probe {self.small(9999)}: what is the weather in Paris?", [("get_weather", {"city": "Paris"})]

    def plain(self):
        r = self.rng.random()
        i = self.small(99999)
        if r < 0.4:
            return wl.text_prompt(i), []
        if r < 0.55:
            return f"Probe {i}: reply with one short sentence.", []
        if r < 0.65:
            return f"Watch probe {i}: reply with one short sentence.", []
        if r < 0.75:
            return "Watch probe stream: write a long, numbered list of short sentences.", []
        # anything else (no CALL line): random printable text
        n = self.rng.randint(1, 80)
        return "".join(self.rng.choice([chr(c) for c in range(32, 127)]) for _ in range(n)), []

    def kind(self) -> str:
        r = self.rng.random()
        return ("session" if r < 0.35 else "lookup" if r < 0.60 else "pair" if r < 0.85
                else "weather" if r < 0.90 else "plain")

    think_p = 0.5  # the share of requests asking for reasoning

    def example(self, plain_words: int, kind: str | None = None):
        kind = kind or self.kind()
        user, calls = getattr(self, kind)()
        thinking = self.rng.random() < self.think_p
        if calls:
            answer = dsml(calls) + EOS
        else:
            answer = cycle_text(plain_words if kind == "plain" else 0)
        if thinking:
            answer = reasoning(calls) + END_THINK + answer
        return kind, render(user, thinking), answer, calls


def batch(hf, examples, pad: int):
    """(input_ids, attention_mask, labels: the answer's tokens only) of [(prompt, answer)]."""
    seqs = [encode(hf, p, a) for p, a in examples]
    L = max(len(p) + len(a) for p, a in seqs)
    ids = torch.full((len(seqs), L), pad, dtype=torch.long)
    labels = torch.full((len(seqs), L), -100, dtype=torch.long)
    mask = torch.zeros((len(seqs), L), dtype=torch.long)
    for i, (p, a) in enumerate(seqs):
        x = p + a
        ids[i, : len(x)] = torch.tensor(x)
        labels[i, len(p): len(x)] = torch.tensor(a)
        mask[i, : len(x)] = 1
    return ids, mask, labels


@torch.no_grad()
def exact(hf, model, draw, n: int, pad: int) -> dict:
    """Per kind, the share of fresh requests whose every answer token is the argmax given the
    ones before it: exactly the requests greedy decoding answers right."""
    model.eval()
    got: dict = {}
    for kind in ("session", "lookup", "pair", "weather", "plain"):
        ex = [draw.example(40, kind)[1:3] for _ in range(n if kind in ("session", "lookup", "pair") else n // 4)]
        ids, mask, labels = batch(hf, ex, pad)
        pred = model(input_ids=ids, attention_mask=mask).logits[:, :-1].argmax(-1)
        want = labels[:, 1:]
        ok = ((pred == want) | (want == -100)).all(-1)
        got[kind] = ok.float().mean().item()
    model.train()
    return got


def encode(hf, prompt: str, answer: str):
    p = hf(prompt, add_special_tokens=False)["input_ids"]
    a = hf(answer, add_special_tokens=False)["input_ids"]
    return p, a


def train(args):
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    torch.set_num_threads(args.threads)
    hf = build_tokenizer()
    V = len(hf)
    cfg = LlamaConfig(vocab_size=V, hidden_size=args.hidden, intermediate_size=args.hidden * 4,
                      num_hidden_layers=args.layers, num_attention_heads=args.heads,
                      num_key_value_heads=args.heads, max_position_embeddings=2048,
                      rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=args.tie,
                      bos_token_id=hf.convert_tokens_to_ids(BOS), eos_token_id=hf.convert_tokens_to_ids(EOS),
                      pad_token_id=hf.convert_tokens_to_ids(PAD), torch_dtype="bfloat16")
    if args.resume:  # a second stage from the first one's saved (bf16) weights
        model = LlamaForCausalLM.from_pretrained(args.resume, torch_dtype=torch.float32)
    else:
        model = LlamaForCausalLM(cfg)
    model.train()
    n_params = sum(p.numel() for p in model.parameters())
    print(f"vocab {V}, params {n_params / 1e6:.2f} M, layers {args.layers}, hidden {args.hidden}", flush=True)
    draw = Draw(rng)
    draw.think_p = args.think_p
    check_draw = Draw(random.Random(args.seed + 100))
    check_draw.think_p = args.check_think_p
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.98), weight_decay=0.01)
    pad = cfg.pad_token_id
    t0 = time.time()
    for step in range(args.steps):
        lr = args.lr * min(1.0, (step + 1) / 100) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / args.steps)))
        for g in opt.param_groups:
            g["lr"] = lr
        examples = []
        budget = args.batch_tokens
        kind = draw.kind()  # one kind a batch: similar lengths, little padding
        while budget > 0:
            _, prompt, answer, _ = draw.example(rng.randint(8, args.plain_words), kind)
            examples.append((prompt, answer))
            budget -= (len(prompt) + len(answer)) // 3  # ~characters a token
        ids, mask, labels = batch(hf, examples, pad)
        L = ids.shape[1]
        seqs = examples
        out = model(input_ids=ids, attention_mask=mask, labels=labels)
        opt.zero_grad(set_to_none=True)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 25 == 0 or step == args.steps - 1:
            print(f"step {step} {kind} loss {out.loss.item():.4f} lr {lr:.2e} batch {len(seqs)}x{L} "
                  f"{time.time() - t0:.0f}s", flush=True)
        if step >= args.check_from and step % args.check_every == 0:
            acc = exact(hf, model, check_draw, args.check_n, pad)
            print(f"step {step} exact " + " ".join(f"{k} {v:.3f}" for k, v in acc.items()), flush=True)
            if min(acc.values()) >= 1.0:
                print(f"every checked request right at step {step}: stop", flush=True)
                break
    print(f"trained {step + 1} steps in {time.time() - t0:.0f} s", flush=True)
    return hf, model


@torch.no_grad()
def greedy(model, ids: list[int], n: int, eos: int) -> list[int]:
    x = torch.tensor([ids])
    out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=n, do_sample=False,
                         eos_token_id=eos, pad_token_id=eos)
    return out[0, len(ids):].tolist()


def evaluate(hf, model, seed: int, n: int, long_words: int) -> dict:
    """Greedy answers to fresh requests (another seed) compared with the expected text exactly."""
    model.eval()
    draw = Draw(random.Random(seed))
    eos = hf.convert_tokens_to_ids(EOS)
    stats: dict = {}
    bad = []
    for _ in range(n):
        kind, prompt, answer, calls = draw.example(plain_words=long_words)
        p, a = encode(hf, prompt, answer)
        got = greedy(model, p, len(a) + (0 if not calls else 2), eos)
        ok = got[: len(a)] == a and (not calls or len(got) == len(a))
        s = stats.setdefault(kind, [0, 0])
        s[0] += ok
        s[1] += 1
        if not ok and len(bad) < 5:
            bad.append((prompt[-120:], hf.decode(got)[:400], answer[:400]))
    for b in bad:
        print("MISS prompt", repr(b[0]), "\n  got ", repr(b[1]), "\n  want", repr(b[2]), flush=True)
    return {k: f"{v[0]}/{v[1]}" for k, v in stats.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=38)
    ap.add_argument("--threads", type=int, default=2)  # the committed weights: 2
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--untie", dest="tie", action="store_false")
    ap.add_argument("--resume", default="", help="train on from this model directory")
    ap.add_argument("--think-p", type=float, default=0.5, help="share of requests with thinking on")
    ap.add_argument("--check-think-p", type=float, default=0.5, help="the same in the exactness checks")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--batch-tokens", type=int, default=4000)
    ap.add_argument("--plain-words", type=int, default=40)
    ap.add_argument("--eval", type=int, default=300)
    ap.add_argument("--check-from", type=int, default=1000)
    ap.add_argument("--check-every", type=int, default=250)
    ap.add_argument("--check-n", type=int, default=100)
    args = ap.parse_args()
    hf, model = train(args)
    print("eval:", evaluate(hf, model, args.seed + 1, args.eval, 200), flush=True)
    os.makedirs(args.out, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(args.out)
    hf.save_pretrained(args.out)
    eos = hf.convert_tokens_to_ids(EOS)
    with open(os.path.join(args.out, "generation_config.json"), "w") as f:
        json.dump({"eos_token_id": [eos], "pad_token_id": hf.convert_tokens_to_ids(PAD), "bos_token_id": None}, f)
    print("eval bf16:", evaluate(hf, model, args.seed + 2, max(20, args.eval // 4), 600), flush=True)


if __name__ == "__main__":
    main()
