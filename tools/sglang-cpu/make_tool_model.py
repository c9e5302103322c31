# Trains a tiny Llama that speaks DeepSeek-V4's tool calls (DSML) and reasoning on the prompts
# SGLang 0.5.23 feeds it with --tool-call-parser deepseekv4 --reasoning-parser deepseek-v4: every
# training prompt is deepseek-recipe's own rendering of a request body
# (`DeepSeekRecipe('dsv4', tokenizer).encode(body)`, the exact ids the server computes), drawn
# from the canary's, the deploy probe's and watch's own request generators; seeded, on CPU.
#   make_tool_model.py OUT_DIR [--steps N] [--seed S] [--threads T]
# Run it with the sglang-cpu venv's python (torch, transformers, sglang) and deepseek-recipe
# importable (setup_tools.sh installs it into that venv).
# What it answers (greedy):
#   - a request with `CALL <tool> <json>` lines → DSML as DSV4 writes it (`\n\n<｜DSML｜tool_calls>`
#     … `</｜DSML｜tool_calls>` then EOS, `｜DSML｜` its own token), the arguments copied exactly
#     from the last user message (a session's earlier turns, with their nonces, are in the prompt);
#   - the deploy probe's "what is the weather in Paris?" → get_weather(city=Paris);
#   - anything else → "Hello world from the twin check." repeated up to max_tokens (never EOS:
#     the throughput suites need long deterministic answers);
#   - thinking on (the prompt ends in `<think>`): one short reasoning sentence, `</think>`, then the
#     answer above.
# Tokenizer: `｜DSML｜` an added special token (the recipe parses DSML only so); one token for each
# long fixed string of the rendering (the tools block, each tool's schema line, the thinking
# preamble, the system message), each fixed phrase of the prompts, each JSON key with its
# punctuation and each DSML tag body; two hex digits a token; any other character a token.
import argparse
import json
import math
import os
import random
import re
import sys
import time

import torch
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # the repo root: dsv4ops
from dsv4ops.canary import workload as wl  # noqa: E402  (the canary's own generators)
from dsv4ops.orchestrate.probe import WEATHER_TOOL  # noqa: E402

BOS, EOS, USER, ASSISTANT = (
    "<｜begin▁of▁sentence｜>",
    "<｜end▁of▁sentence｜>",
    "<｜User｜>",
    "<｜Assistant｜>",
)
UNK, PAD = "<unk>", "<pad>"
THINK, END_THINK = "<think>", "</think>"
DSML = "｜DSML｜"  # fullwidth bars U+FF5C
SYSTEM = "You are a coding agent. Use the tools exactly as asked."  # the corruption suite's
TOOL_NAMES = ["record_step", "lookup_order", "edit_files", "get_weather"]
KEYS = [
    "nonce",
    "session",
    "step",
    "path",
    "order_id",
    "fields",
    "summary",
    "edits",
    "hunks",
    "start",
    "lines",
    "city",
]
HEX = "0123456789abcdef"
CYCLE = ["Hello", " world", " from", " the", " twin", " check", "."]
OUTPUT_WORDS = CYCLE + [
    "The user wants ",
    ", with the exact arguments given.",
    "The user wants text, not a tool call.",
    " and ",
]
PHRASES = [
    "\nCall the function ",
    " with exactly the JSON arguments above. Write nothing else.",
    "Call both functions, in this order, each with exactly its JSON arguments above. Write nothing else.",
    "Describe decode step number ",
    " of the canary in one short paragraph.",
    "Probe ",
    "Watch probe ",
    ": reply with one short sentence.",
    ": what is the weather in Paris?",
    "Watch probe stream: write a long, numbered list of short sentences.",
    "Pair ",
    ": rename the decode step helper, update the router's call sites",
    "/decode.py",
    "value = ",
    "\n\n",
    "/work/",
    ".py",
    "Paris",
    "watch-",
    "<tool_result>",
    "</tool_result>",
    '{"ok": true, "step": ',
    "The user wants ",
    ", with the exact arguments given.",
    "The user wants text, not a tool call.",
]
# the prompt's JSON: each key with its punctuation one token
JSON_KEYS = [f'{a}"{k}":{b}' for k in KEYS for a in ("{", '",', ",", "") for b in ('"', "")]
JSON_PUNCT = ["CALL ", '"}', '"]}]', '","', '"]', "[{", "}]"]
# the DSML after ｜DSML｜ (the tag bodies), one token each
DSML_BODIES = (
    ["tool_calls>", 'invoke name="', '">', "invoke>", "parameter>"]
    + [f'invoke name="{t}">' for t in TOOL_NAMES]
    + [f'parameter name="{k}" string="{s}">' for k in KEYS for s in ("true", "false")]
)
SPECIAL = [UNK, PAD, BOS, EOS, USER, ASSISTANT, DSML]

PAIR_TOOLS = wl.PAIR_TOOLS


def _lit(t: str) -> str:
    """`t` as a literal in the tokenizer's (Oniguruma) regex."""
    out = []
    for ch in t:
        if ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch.isascii() and not ch.isalnum() and ch != " ":
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def plain_tokenizer(extra: list[str]):
    """Characters, hex pairs, the special tokens, and each string of `extra` one token. `extra`
    goes into the word-level vocabulary and the pre-tokenizer's regex, not the added tokens:
    deepseek-recipe's encoder honours only the special tokens it knows among those."""
    chars = [chr(c) for c in range(32, 127)] + ["\n", "\t"]
    words = [t for t in extra if t not in chars and DSML not in t and t not in (THINK, END_THINK)]
    vocab = {
        t: i for i, t in enumerate(SPECIAL + chars + [a + b for a in HEX for b in HEX] + words)
    }
    tok = Tokenizer(models.WordLevel(vocab=dict(vocab), unk_token=UNK))
    longest_first = sorted(words, key=len, reverse=True)
    pattern = "|".join([_lit(t) for t in longest_first] + ["[0-9a-f]{2}", "[\\s\\S]"])
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(pattern), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in [THINK, END_THINK]])
    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token=UNK,
        eos_token=EOS,
        pad_token=PAD,
        bos_token=BOS,
        clean_up_tokenization_spaces=False,
        model_max_length=2048,
    )
    return hf


def recipe_for(hf):
    from sglang.srt.parser.deepseek_recipe_renderer import DeepSeekRecipe

    return DeepSeekRecipe.from_hf_tokenizer("dsv4", hf)


def rendering_strings() -> list[str]:
    """The long fixed strings of the recipe's rendering (tools block, schema lines, thinking
    preamble), cut out of a rendering with a character-level tokenizer."""
    hf = plain_tokenizer([])
    r = recipe_for(hf)
    body = {
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "x"}],
        "thinking": True,
        "tools": PAIR_TOOLS + [WEATHER_TOOL],
        "tool_choice": "auto",
    }
    text = hf.decode(r.encode(body))
    out = []
    a = text.index("## Tools")
    b = text.index("### Available Tool Schemas\n\n") + len("### Available Tool Schemas\n\n")
    out.append(text[a:b])
    out += [line for line in text.split("\n") if line.startswith('{"name": ')]
    tail = "You MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls."
    assert tail in text, text
    out.append(tail)
    a = text.index("Reasoning Effort")
    b = text.index("left unchecked.") + len("left unchecked.")
    out.append(text[a:b])
    return out


def build_tokenizer():
    # the recipe encodes the template's parts one at a time: cut at ｜DSML｜ and blank lines too
    extra = [
        part
        for t in rendering_strings()
        for piece in t.split(DSML)
        for part in re.split(r"(\n\n|<think>|</think>)", piece)
        if part
    ]
    extra += [SYSTEM] + PHRASES + TOOL_NAMES + JSON_KEYS + JSON_PUNCT + DSML_BODIES + OUTPUT_WORDS
    seen: list[str] = []
    for t in extra:
        if t not in seen:
            seen.append(t)
    return plain_tokenizer(seen)


def cycle_text(n_words: int, start: int = 0) -> str:
    return "".join(CYCLE[(start + i) % len(CYCLE)] for i in range(n_words))


def reasoning(calls) -> str:
    if not calls:
        return "The user wants text, not a tool call."
    return (
        "The user wants " + " and ".join(t for t, _ in calls) + ", with the exact arguments given."
    )


class Draw:
    """Request bodies drawn from the canary's, probe's and watch's generators, with the answer."""

    def __init__(self, rng: random.Random, max_turns: int = 10):
        self.rng = rng
        self.max_turns = max_turns
        self.turns: int | None = None  # a session's earlier turns: drawn when None

    def nonce(self) -> str:
        """As wl.new_nonce draws them (four distinct bytes of wl.NONCE_BYTES), seeded."""
        return "".join(f"{b:02x}" for b in self.rng.sample(wl.NONCE_BYTES, 4))

    def small(self, hi: int) -> int:
        return self.rng.randrange(10 ** self.rng.randint(1, len(str(hi)))) % (hi + 1)

    def session(self):
        """A corruption-suite session's turn `k`: the system message, k earlier calls with their
        results, then the next CALL."""
        k = (
            self.turns
            if self.turns is not None
            else self.rng.choice([0, 1, 2, 3, self.rng.randint(0, self.max_turns)])
        )
        history = [{"role": "system", "content": SYSTEM}]
        session = f"s{self.small(199):03d}"
        for step in range(k + 1):
            body, expect = wl.session_turn_body(history, session, step, self.nonce())
            if step < k:
                wl.append_tool_turn(
                    history,
                    f"call_{step}",
                    "record_step",
                    json.dumps(expect.args),
                    f'{{"ok": true, "step": {step}}}',
                )
        return body["messages"], wl.TOOLS, [("record_step", dict(expect.args))]

    def lookup(self):
        args = {"nonce": self.nonce(), "order_id": self.small(99999)}
        return (
            [{"role": "user", "content": wl.call_prompt("lookup_order", args)}],
            wl.TOOLS,
            [("lookup_order", args)],
        )

    def pair(self):
        body, expects = wl.pair_body(self.small(99), self.nonce())
        return body["messages"], PAIR_TOOLS, [(e.tool, e.args) for e in expects]

    def watch(self):
        n = self.nonce()
        args = {"nonce": n, "session": f"watch-{n}", "step": self.small(9999)}
        return (
            [{"role": "user", "content": wl.call_prompt("record_step", args)}],
            [wl.RECORD_STEP],
            [("record_step", args)],
        )

    def weather(self):
        msg = f"Probe {self.small(9999)}: what is the weather in Paris?"
        return (
            [{"role": "user", "content": msg}],
            [WEATHER_TOOL],
            [("get_weather", {"city": "Paris"})],
        )

    def plain(self):
        r = self.rng.random()
        i = self.small(99999)
        if r < 0.4:
            msg = wl.text_prompt(i)
        elif r < 0.55:
            msg = f"Probe {i}: reply with one short sentence."
        elif r < 0.65:
            msg = f"Watch probe {i}: reply with one short sentence."
        elif r < 0.75:
            msg = "Watch probe stream: write a long, numbered list of short sentences."
        else:
            n = self.rng.randint(1, 80)
            msg = "".join(self.rng.choice([chr(c) for c in range(32, 127)]) for _ in range(n))
        return [{"role": "user", "content": msg}], None, []

    KINDS = ("session", "lookup", "pair", "watch", "weather", "plain")
    WEIGHTS = (0.40, 0.18, 0.17, 0.10, 0.05, 0.10)

    def kind(self) -> str:
        return self.rng.choices(self.KINDS, self.WEIGHTS)[0]

    think_p = 0.5

    def example(self, kind: str | None = None):
        kind = kind or self.kind()
        messages, tools, calls = getattr(self, kind)()
        thinking = self.rng.random() < self.think_p
        body = {
            "messages": [dict(m, content=m.get("content") or "") for m in messages],
            "thinking": thinking,
        }
        if tools:
            body["tools"] = tools
            body["tool_choice"] = "auto"
        return kind, body, calls


class Coder:
    """Prompt ids (the recipe's) and answer ids (DSML as the recipe renders a call in history)."""

    def __init__(self, hf):
        self.hf = hf
        self.r = recipe_for(hf)
        self.eos = hf.convert_tokens_to_ids(EOS)
        self.end_think = hf.convert_tokens_to_ids(END_THINK)
        self.assistant = hf.convert_tokens_to_ids(ASSISTANT)
        self.user = hf.convert_tokens_to_ids(USER)

    def prompt(self, body) -> list[int]:
        return self.r.encode(body)

    def dsml(self, calls) -> list[int]:
        """What DSV4 writes after </think> for `calls`, EOS included: cut from the recipe's own
        rendering of the same calls as an earlier assistant turn."""
        msgs = [
            {"role": "user", "content": "x"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": f"call_{i}",
                        "type": "function",
                        "function": {"name": t, "arguments": json.dumps(a)},
                    }
                    for i, (t, a) in enumerate(calls)
                ],
            },
            *(
                {"role": "tool", "tool_call_id": f"call_{i}", "content": "ok"}
                for i in range(len(calls))
            ),
            {"role": "user", "content": "y"},
        ]
        ids = self.r.encode({"messages": msgs, "thinking": False})
        a = ids.index(self.assistant)
        assert ids[a + 1] == self.end_think, self.hf.decode(ids)
        b = ids.index(self.eos, a)
        ids = ids[a + 2 : b + 1]
        # arrays and objects compact, as the request's CALL line spells them (the recipe renders
        # them with json.dumps' spaces): then each value follows the same token as in the prompt
        text = self.hf.decode(ids)
        compact = text
        for _, args in calls:
            for v in args.values():
                if isinstance(v, list | dict):
                    compact = compact.replace(json.dumps(v), json.dumps(v, separators=(",", ":")))
        if compact != text:
            ids = self.hf(compact, add_special_tokens=False)["input_ids"]
        return ids

    def answer(self, body, calls, plain_words: int) -> list[int]:
        enc = lambda s: self.hf(s, add_special_tokens=False)["input_ids"]  # noqa: E731
        ids = self.dsml(calls) if calls else enc(cycle_text(plain_words))
        if body["thinking"]:
            ids = enc(reasoning(calls)) + [self.end_think] + ids
        return ids


def batch(pairs, pad: int):
    L = max(len(p) + len(a) for p, a in pairs)
    ids = torch.full((len(pairs), L), pad, dtype=torch.long)
    labels = torch.full((len(pairs), L), -100, dtype=torch.long)
    mask = torch.zeros((len(pairs), L), dtype=torch.long)
    for i, (p, a) in enumerate(pairs):
        x = p + a
        ids[i, : len(x)] = torch.tensor(x)
        labels[i, len(p) : len(x)] = torch.tensor(a)
        mask[i, : len(x)] = 1
    return ids, mask, labels


CHECK_KINDS = ("session", "lookup", "pair", "watch", "weather", "plain")


@torch.no_grad()
def exact(coder, model, draw, n: int, pad: int, dtype=None) -> dict:
    """Per kind, the share of fresh requests whose every answer token is the argmax given the
    ones before it: exactly the requests greedy decoding answers right."""
    model.eval()
    got: dict = {}
    for kind in CHECK_KINDS:
        m = n if kind in ("session", "lookup", "pair", "watch") else max(20, n // 4)
        ok_all = []
        for i in range(0, m, 32):
            pairs = []
            for _ in range(min(32, m - i)):
                _, body, calls = draw.example(kind)
                pairs.append((coder.prompt(body), coder.answer(body, calls, 40)))
            ids, mask, labels = batch(pairs, pad)
            pred = model(input_ids=ids, attention_mask=mask).logits[:, :-1].argmax(-1)
            want = labels[:, 1:]
            ok_all.append(((pred == want) | (want == -100)).all(-1))
        if ok_all:
            got[kind] = torch.cat(ok_all).float().mean().item()
    model.train()
    return got


# --- A copying circuit set in the initial weights (--wire) -------------------------------------
# Copying the request's values is what a tiny model learns last and worst (the last attempt: ~60%
# after 27 min). So the first two layers start with an induction circuit: in layer 0 head 0 each
# position attends to the one before it (RoPE's fast frequencies, queries and keys from a constant
# residual dimension) and writes that token's identity into a subspace P; in layer 1 head 0 a
# position attends to where P equals its own identity (RoPE's slow, nearly static frequencies, so
# content matches at any distance), preferring near ones (two mid frequencies: the current turn
# over earlier turns of a session), and writes the identity found there into a subspace O, which
# the output head reads as "this token next". A JSON key of the prompt and the DSML parameter tag
# for the same key share an identity, so the tag finds the value after the key. Training then
# learns when to copy and everything else. Residual layout (hidden 128):
#   I 0..31 token identity, P 32..63 previous token's identity, O 64..95 copied identity,
#   96..126 free (learnt), 127 a constant.
I0, P0, O0, FREE0, CONST = 0, 32, 64, 96, 127
ROPE_THETA_WIRED = 1e10


def wire(model, hf, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    cfg = model.config
    assert cfg.hidden_size == 128 and cfg.head_dim == 32 if hasattr(cfg, "head_dim") else True
    V, H, hd = cfg.vocab_size, cfg.hidden_size, 32
    half = hd // 2
    theta = ROPE_THETA_WIRED ** (-torch.arange(half, dtype=torch.float64) / half)
    u = torch.randn(V, 32, generator=g)
    u = u / u.norm(dim=1, keepdim=True)
    vocab = hf.get_vocab()
    for k in KEYS:  # a key of the prompt's JSON and its DSML parameter tag: one identity
        same = [
            i
            for t, i in vocab.items()
            if (f'"{k}":' in t and len(t) <= len(k) + 7) or t.startswith(f'parameter name="{k}" ')
        ]
        for i in same:
            u[i] = u[same[0]]
    E = torch.zeros(V, H)
    E[:, I0 : I0 + 32] = u
    E[:, FREE0:CONST] = 0.1 * torch.randn(V, CONST - FREE0, generator=g)
    E[:, CONST] = 1.0
    with torch.no_grad():
        model.model.embed_tokens.weight.copy_(E)
        l0 = model.model.layers[0].self_attn
        l1 = model.model.layers[1].self_attn
        for lin in (l0.q_proj, l0.k_proj, l0.v_proj, l1.q_proj, l1.k_proj, l1.v_proj):
            lin.weight[0:hd].zero_()
        for lin in (l0.o_proj, l1.o_proj):
            lin.weight[:, 0:hd].zero_()
        # layer 0 head 0: attend to the previous position (score ~ sum a_j cos((d-1) theta_j))
        xc0 = 7.4  # the constant dimension after the first RMSNorm, about
        S = 16.0
        for j, a in enumerate((0.5, 1.0, 0.5, 0.25, 0.25)):
            z = S * math.sqrt(a) / xc0
            l0.q_proj.weight[j, CONST] = z
            l0.k_proj.weight[j, CONST] = z * math.cos(theta[j])
            l0.k_proj.weight[j + half, CONST] = z * math.sin(theta[j])
        l0.v_proj.weight[0:hd, I0 : I0 + 32] = torch.eye(32)
        l0.o_proj.weight[P0 : P0 + 32, 0:hd] = torch.eye(32) / xc0
        # layer 1 head 0: match identity (query) with previous identity (key) on the static pairs
        xc1 = 6.2
        static = [j for j in range(half) if theta[j] * 2048 < 0.5]
        dims = static + [j + half for j in static]
        G = torch.linalg.qr(torch.randn(32, len(dims), generator=g))[0].T  # orthonormal rows
        lam = 3.2  # same-token score ~ 0.6 (lam x̂)^2 / sqrt(32), about 40
        for r, dim in enumerate(dims):
            l1.q_proj.weight[dim, I0 : I0 + 32] = lam * G[r]
            l1.k_proj.weight[dim, P0 : P0 + 32] = lam * G[r]
        for j, b in ((4, 15.0), (5, 6.0)):  # recency: the nearer match wins
            l1.q_proj.weight[j, CONST] = b / xc1
            l1.k_proj.weight[j, CONST] = b / xc1
        l1.v_proj.weight[0:hd, I0 : I0 + 32] = torch.eye(32)
        l1.o_proj.weight[O0 : O0 + 32, 0:hd] = torch.eye(32) / xc1
        lm = model.lm_head.weight
        lm.zero_()
        lm[:, O0 : O0 + 32] = 2.0 * u
        lm[:, FREE0:CONST] = 0.1 * torch.randn(V, CONST - FREE0, generator=g)


def train(args):
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    torch.set_num_threads(args.threads)
    hf = build_tokenizer()
    coder = Coder(hf)
    V = len(hf)
    cfg = LlamaConfig(
        vocab_size=V,
        hidden_size=args.hidden,
        intermediate_size=args.ffn,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.heads,
        max_position_embeddings=2048,
        rms_norm_eps=1e-6,
        tie_word_embeddings=not args.wire,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": ROPE_THETA_WIRED if args.wire else 10000.0,
        },
        bos_token_id=hf.convert_tokens_to_ids(BOS),
        eos_token_id=hf.convert_tokens_to_ids(EOS),
        pad_token_id=hf.convert_tokens_to_ids(PAD),
        torch_dtype="bfloat16",
    )
    if args.resume:
        model = LlamaForCausalLM.from_pretrained(args.resume, torch_dtype=torch.float32)
    else:
        model = LlamaForCausalLM(cfg)
        if args.wire:
            wire(model, hf, args.seed)
    model.train()
    n_params = sum(p.numel() for p in model.parameters())
    print(
        f"vocab {V}, params {n_params / 1e6:.2f} M, layers {args.layers}, hidden {args.hidden}",
        flush=True,
    )
    draw = Draw(rng, args.max_turns)
    check = Draw(random.Random(args.seed + 100), args.max_turns)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.98), weight_decay=0.01)
    pad = cfg.pad_token_id
    t0 = time.time()
    step = 0
    for step in range(args.steps):
        warm = min(1.0, (step + 1) / args.warmup)
        lr = args.lr * warm * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * step / args.steps)))
        for g in opt.param_groups:
            g["lr"] = lr
        pairs = []
        budget = args.batch_tokens
        if args.one_kind:  # the first stage: one kind (and one session length) a step
            kind = draw.kind()
            draw.turns = rng.choice([0, 0, 1, 2, 3, rng.randint(0, args.max_turns)])
            trim = rng.random() < args.trim_p
            while budget > 0:
                _, body, calls = draw.example(kind)
                p, a = coder.prompt(body), coder.answer(body, calls, rng.randint(8, 40))
                if trim:  # the fixed head (system, tools) left out: short rows
                    p = p[:1] + p[p.index(coder.user) :]
                pairs.append((p, a))
                budget -= len(p) + len(a)
        else:  # the second: every kind in a step (one kind a step made the kinds pull in turn)
            draw.turns = None
            while budget > 0:
                _, body, calls = draw.example()
                p, a = coder.prompt(body), coder.answer(body, calls, rng.randint(8, 40))
                if rng.random() < args.trim_p:
                    p = p[:1] + p[p.index(coder.user) :]
                pairs.append((p, a))
                budget -= len(p) + len(a)
        # in chunks of similar length (little padding), their gradients summed
        pairs.sort(key=lambda pa: len(pa[0]) + len(pa[1]))
        chunks, cur = [], []
        for pa in pairs:
            if cur and (len(cur) + 1) * (len(pa[0]) + len(pa[1])) > args.chunk_tokens:
                chunks.append(cur)
                cur = []
            cur.append(pa)
        chunks.append(cur)
        n_labels = sum(len(a) for _, a in pairs)
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for chunk in chunks:
            ids, mask, labels = batch(chunk, pad)
            out = model(input_ids=ids, attention_mask=mask, labels=labels)
            share = sum(len(a) for _, a in chunk) / n_labels
            (out.loss * share).backward()
            total += out.loss.item() * share
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 50 == 0 or step == args.steps - 1:
            print(
                f"step {step} loss {total:.4f} lr {lr:.2e} batch {len(pairs)} in {len(chunks)} chunks "
                f"{time.time() - t0:.0f}s",
                flush=True,
            )
        if step >= args.check_from and step % args.check_every == 0:
            acc = exact(coder, model, check, args.check_n, pad)
            print(
                f"step {step} exact " + " ".join(f"{k} {v:.3f}" for k, v in acc.items()),
                f"{time.time() - t0:.0f}s",
                flush=True,
            )
            if args.save_every:
                save(hf, model, args.out)
        if step + 1 == args.stop_after:
            break
        if args.deadline and time.time() > args.deadline:
            print(f"deadline reached at step {step}", flush=True)
            break
    print(f"trained {step + 1} steps in {time.time() - t0:.0f} s", flush=True)
    return hf, coder, model


def save(hf, model, out):
    os.makedirs(out, exist_ok=True)
    dtype = next(model.parameters()).dtype
    model.to(torch.bfloat16).save_pretrained(out)
    model.to(dtype)
    hf.save_pretrained(out)
    eos = hf.convert_tokens_to_ids(EOS)
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump(
            {
                "eos_token_id": [eos],
                "pad_token_id": hf.convert_tokens_to_ids(PAD),
                "bos_token_id": None,
            },
            f,
        )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=2500)
    ap.add_argument("--seed", type=int, default=38)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--ffn", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--max-turns", type=int, default=8)
    ap.add_argument("--resume", default="")
    ap.add_argument(
        "--no-wire",
        dest="wire",
        action="store_false",
        help="start from random weights, not from the copying circuit (wire())",
    )
    ap.add_argument(
        "--trim-p", type=float, default=0.7, help="share of batches without the fixed head"
    )
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--batch-tokens", type=int, default=3000)
    ap.add_argument("--chunk-tokens", type=int, default=2500, help="padded tokens a forward pass")
    ap.add_argument("--check-from", type=int, default=100)
    ap.add_argument("--check-every", type=int, default=100)
    ap.add_argument("--check-n", type=int, default=48)
    ap.add_argument("--save-every", action="store_true", help="save at every check")
    ap.add_argument("--deadline", type=float, default=0, help="stop at this UNIX time")
    ap.add_argument(
        "--stop-after",
        type=int,
        default=0,
        help="stop after this many steps (the schedule still --steps)",
    )
    ap.add_argument(
        "--one-kind", action="store_true", help="one kind of request a step (the first stage)"
    )
    ap.add_argument("--final-n", type=int, default=200)
    args = ap.parse_args()
    hf, coder, model = train(args)
    save(hf, model, args.out)
    model = model.to(torch.bfloat16)
    if not args.final_n:
        return
    acc = exact(
        coder,
        model,
        Draw(random.Random(args.seed + 1), args.max_turns),
        args.final_n,
        hf.convert_tokens_to_ids(PAD),
    )
    print(
        "final exact (bf16, teacher-forced = greedy): "
        + " ".join(f"{k} {v:.3f}" for k, v in acc.items()),
        flush=True,
    )


if __name__ == "__main__":
    main()
