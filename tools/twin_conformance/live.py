"""The live conformance run (`make test-real-sglang`): the same probes against a twin and a real
SGLang 0.5.23 server, reduced to shapes (keys, kinds, orders, status codes, metric families and
label names), never to values the two models cannot share (text, ids, latencies).

`probe(url)` returns one flat mapping `name -> shape`; `diff(twin, real)` lists every name whose
shapes differ and that `EXPLAINED` does not list with its reason (docs/twin.md, "Measured against
the real server", holds the same list). The real server's tiny model answers any prompt; the twin
is asked with its own prompt convention (`SAY ...`) so both produce plain text.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

# name -> why the twin differs there (each is also in docs/twin.md).
# Both servers run with this --decode-log-interval (ARGS and serve.sh's extra arguments): SGLang's
# default. An update must outlast the cadence probe's 50 ms scrape period: on an idle machine the
# real CPU server decodes the tiny model at ~400 tok/s, so at 10 an update came every 25 ms and the
# probe saw every other one ("2 intervals", run of 2026-12-06 21:16); at 40, every 100 ms.
LOG_INTERVAL = 40

EXPLAINED: dict[str, str] = {
    "generate.meta_info.keys": "the real server adds request timestamps, queue_time, dp_rank, "
    "weight_versions and cached_tokens_details; no dsv4ops reader uses them",
    "chat.full.keys": "the real chat body adds metadata.weight_versions (same reason)",
    "chat.tool_required": "the real tiny model cannot spell the qwen structural tag that "
    "tool_choice required constrains it to (`Grammar accept_token failed ... token [0]`, HTTP "
    "500, unified and PD alike); the twin treats required like auto and constrains nothing",
}
# Families only the real server exports are expected (the twin exports what dsv4ops, the rules
# and the dashboard read); one only the twin exports is a difference. `*_created` series are
# not families: SGLang's multiprocess collector drops them, the twin's registry writes them.

Shape = Any
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def _events(resp: httpx.Response) -> list[Any]:
    out: list[Any] = []
    for line in resp.iter_lines():
        if line.startswith("data:"):
            payload = line[5:].strip()
            out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out


def _chunk_kind(ev: Any) -> str:
    if ev == "[DONE]":
        return "done"
    if not ev.get("choices"):
        return "usage" if ev.get("usage") else "empty"
    ch = ev["choices"][0]
    delta = ch.get("delta") or {}
    if ch.get("finish_reason"):
        return "finish"
    if delta.get("role"):
        return "role"
    return "content"


def chat_stream_shape(events: list[Any]) -> dict[str, Shape]:
    """Chunk kinds in order (runs of content chunks collapsed) and each kind's key sets."""
    kinds: list[str] = []
    keys: dict[str, Any] = {}
    for ev in events:
        kind = _chunk_kind(ev)
        if not (kinds and kinds[-1] == kind == "content"):
            kinds.append(kind)
        if kind in ("done", "empty") or kind in keys:
            continue
        choice = (ev.get("choices") or [{}])[0]
        keys[kind] = {
            "chunk": sorted(ev),
            "choice": sorted(choice) if ev.get("choices") else [],
            "delta": sorted(choice.get("delta") or {}),
            "usage": sorted(ev.get("usage") or {}),
        }
    return {"kinds": kinds, "keys": keys}


def _post_stream(c: httpx.Client, url: str, path: str, body: dict[str, Any]) -> list[Any]:
    with c.stream("POST", url + path, json={**body, "stream": True}) as r:
        r.raise_for_status()
        return _events(r)


def _logprob_shape(value: Any, keyed_by_token: bool = False) -> Shape:
    """Keys all the way down (a completion's top_logprobs is keyed by token text: `<token>`),
    the first element of a list, every element of a mixed list (a tuple)."""
    if isinstance(value, dict):
        if keyed_by_token:
            return {"<token>": sorted({type(v).__name__ for v in value.values()})}
        return {
            k: _logprob_shape(
                v,
                k == "top_logprobs"
                and isinstance(v, list)
                and bool(v)
                and isinstance(v[0], dict)
                and "token" not in v[0],
            )
            for k, v in sorted(value.items())
        }
    if isinstance(value, list):
        kinds = [type(v).__name__ for v in value]
        if value and not any(isinstance(v, list | dict) for v in value) and len(set(kinds)) > 1:
            return kinds  # a tuple such as [logprob, token_id, text]
        return [_logprob_shape(value[0], keyed_by_token)] if value else []
    return type(value).__name__


def probe_generation(c: httpx.Client, url: str, say: str) -> dict[str, Shape]:
    """Stream shapes, stop strings, logprobs, n and the generate body of one server."""
    chat = {"model": "m", "max_tokens": 32, "messages": [{"role": "user", "content": say}]}
    out: dict[str, Shape] = {}
    events = _post_stream(
        c, url, "/v1/chat/completions", {**chat, "stream_options": {"include_usage": True}}
    )
    out["chat.stream"] = chat_stream_shape(events)
    out["chat.stream.multi_token_chunks"] = None  # both may join tokens; not comparable
    full = c.post(url + "/v1/chat/completions", json=chat).json()
    out["chat.full.keys"] = sorted(full) + sorted(full.get("metadata") or {})
    out["chat.full.choice"] = sorted(full["choices"][0])
    text = full["choices"][0]["message"]["content"]
    stop = text.split()[1] if len(text.split()) > 1 else text
    stopped = c.post(url + "/v1/chat/completions", json={**chat, "stop": [stop]}).json()
    ch = stopped["choices"][0]
    out["chat.stop"] = {
        "finish_reason": ch["finish_reason"],
        "matched_stop": ch["matched_stop"] == stop,
        "cut": stop not in (ch["message"]["content"] or ""),
    }
    ev = _post_stream(c, url, "/v1/chat/completions", {**chat, "stop": [stop]})
    fin = [
        e["choices"][0]
        for e in ev
        if e != "[DONE]" and e["choices"] and e["choices"][0]["finish_reason"]
    ]
    out["chat.stop.stream_finish"] = [
        {
            "delta": sorted(f["delta"]),
            "reason": f["finish_reason"],
            "matched": f["matched_stop"] == stop,
        }
        for f in fin
    ]
    lp = c.post(
        url + "/v1/chat/completions", json={**chat, "logprobs": True, "top_logprobs": 2}
    ).json()
    out["chat.logprobs"] = _logprob_shape(lp["choices"][0]["logprobs"])
    comp = c.post(
        url + "/v1/completions", json={"model": "m", "prompt": say, "max_tokens": 3, "logprobs": 2}
    ).json()
    out["completion.logprobs"] = _logprob_shape(comp["choices"][0]["logprobs"])
    forced = c.post(
        url + "/v1/chat/completions", json={**chat, "tools": [WEATHER], "tool_choice": "required"}
    )
    out["chat.tool_required"] = [
        forced.status_code,
        forced.json()["choices"][0]["finish_reason"]
        if forced.status_code == 200
        else forced.json().get("error", {}).get("code"),
    ]
    two = c.post(url + "/v1/chat/completions", json={**chat, "n": 2}).json()
    out["chat.n2.indices"] = [x["index"] for x in two["choices"]]
    gen = c.post(
        url + "/generate",
        json={
            "text": say,
            "sampling_params": {"max_new_tokens": 32},
            "return_logprob": True,
            "top_logprobs_num": 2,
        },
    ).json()
    out["generate.keys"] = sorted(gen)
    out["generate.meta_info.keys"] = sorted(gen["meta_info"])
    out["generate.finish_reason"] = sorted(gen["meta_info"]["finish_reason"])
    out["generate.logprobs"] = _logprob_shape(
        {
            k: gen["meta_info"][k]
            for k in ("output_token_logprobs", "output_top_logprobs")
            if k in gen["meta_info"]
        }
    )
    return out


def probe_abort(c: httpx.Client, url: str, long: str) -> dict[str, Shape]:
    """`/abort_request {"rid"}` on a running /generate: both answers' status and shape."""
    rid = f"abort-{time.monotonic_ns()}"
    result: dict[str, Any] = {}

    def run() -> None:
        r = c.post(
            url + "/generate",
            json={
                "text": long,
                "rid": rid,
                "sampling_params": {"max_new_tokens": 2000, "ignore_eos": True},
            },
            timeout=120,
        )
        result["status"], result["body"] = r.status_code, r.json()

    t = threading.Thread(target=run)
    t.start()
    time.sleep(1.5)
    ab = c.post(url + "/abort_request", json={"rid": rid})
    t.join(130)
    reason = result["body"]["meta_info"]["finish_reason"]
    return {
        "abort.request": [ab.status_code, ab.text],
        "abort.generate": [result["status"], reason.get("type"), sorted(reason)],
    }


_SAMPLE = re.compile(r"^([a-zA-Z_:][\w:]*)(?:\{([^}]*)\})? ")


def metric_shape(text: str) -> dict[str, list[str]]:
    """Metric family -> sorted label names (`sglang:` and `http` families only)."""
    fams: dict[str, set[str]] = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if not m or not m.group(1).startswith("sglang:"):
            continue
        name = re.sub(r"_(bucket|sum|count)$", "", m.group(1))
        labels = {p.split("=")[0] for p in (m.group(2) or "").split(",") if "=" in p} - {"le"}
        fams.setdefault(name, set()).update(labels)
    return {k: sorted(v) for k, v in sorted(fams.items())}


def probe_metrics(c: httpx.Client, url: str, read: Callable[[], None]) -> dict[str, Shape]:
    """Families the twin exports must carry the real label names; `read` runs load between."""
    idle = metric_shape(c.get(url + "/metrics").text)
    read()
    loaded = metric_shape(c.get(url + "/metrics").text)
    return {"metrics.idle": idle, "metrics.loaded": loaded, "metrics.families": sorted(loaded)}


_VALUE = re.compile(
    r"^(sglang:(?:num_running_reqs|gen_throughput|realtime_tokens_total))"
    r"(\{[^}]*\})? ([-+0-9.eE]+|NaN)$"
)


def _gauges(text: str) -> tuple[float, float, float]:
    """(running, gen_throughput, decode tokens) of one scrape; summed over ranks."""
    got = {
        "sglang:num_running_reqs": 0.0,
        "sglang:gen_throughput": 0.0,
        "sglang:realtime_tokens_total": 0.0,
    }
    for line in text.splitlines():
        m = _VALUE.match(line)
        if m and (
            m.group(1) != "sglang:realtime_tokens_total" or 'mode="decode"' in (m.group(2) or "")
        ):
            got[m.group(1)] += float(m.group(3))
    return (
        got["sglang:num_running_reqs"],
        got["sglang:gen_throughput"],
        got["sglang:realtime_tokens_total"],
    )


def probe_cadence(c: httpx.Client, url: str, long: str, interval: int) -> dict[str, Shape]:
    """The gauges' publish cadence and idle drop: one /generate of 6 log intervals, /metrics read
    every 50 ms. `tokens_per_update`: decode tokens between two changes of gen_throughput, in log
    intervals (1.0: published every --decode-log-interval iterations); `idle`: running and
    gen_throughput once the request ended (read for up to 15 s until both are 0)."""
    done = threading.Event()

    def run() -> None:
        c.post(
            url + "/generate",
            json={
                "text": long,
                "sampling_params": {"max_new_tokens": 6 * interval, "ignore_eos": True},
            },
            timeout=300,
        )
        done.set()

    t = threading.Thread(target=run)
    t.start()
    updates: list[float] = []
    last = None
    while not done.is_set():
        _running, thr, tokens = _gauges(c.get(url + "/metrics").text)
        if last is not None and thr != last:
            updates.append(tokens)
        last = thr
        time.sleep(0.05)
    t.join(300)
    gaps = sorted(b - a for a, b in zip(updates, updates[1:], strict=False))
    # whole log intervals: a scrape lands a few tokens after the update it sees
    per_update = round(gaps[len(gaps) // 2] / interval) if gaps else None
    end = time.monotonic() + 15
    running, thr, _ = _gauges(c.get(url + "/metrics").text)
    while (running or thr) and time.monotonic() < end:
        time.sleep(0.5)
        running, thr, _ = _gauges(c.get(url + "/metrics").text)
    return {
        "cadence.tokens_per_update": per_update,
        "cadence.idle": {"running": running, "gen_throughput_zero": thr == 0},
    }


def probe(url: str, say: str, long: str) -> dict[str, Shape]:
    """`say`: a prompt both answer with plain text that ends by itself; `long`: one that runs
    to max_new_tokens (the abort probe)."""
    with httpx.Client(timeout=120) as c:
        out = {
            "health": c.get(url + "/health").status_code,
            "health_generate": c.get(url + "/health_generate").status_code,
        }
        out.update(probe_metrics(c, url, lambda: out.update(probe_generation(c, url, say))))
        out.update(probe_abort(c, url, long))
        out.update(probe_cadence(c, url, long, LOG_INTERVAL))
        return out


def diff(twin: dict[str, Shape], real: dict[str, Shape]) -> list[str]:
    """Unexplained differences, one line each. Metric label sets are compared on the families
    both export; a family only the twin exports is a difference."""
    lines = []
    for name in sorted(set(twin) | set(real)):
        a, b = twin.get(name), real.get(name)
        if name == "metrics.families":
            extra = sorted(f for f in set(a or ()) - set(b or ()) if not f.endswith("_created"))
            if extra:
                lines.append(f"{name}: only the twin exports {json.dumps(extra)}")
            continue
        if name in ("metrics.idle", "metrics.loaded"):
            a, b = a or {}, b or {}  # a side without the probe compares as empty
            common = set(a) & set(b)
            a = {k: a[k] for k in common}
            b = {k: b[k] for k in common}
        if a != b and name not in EXPLAINED:
            lines.append(f"{name}: twin {json.dumps(a)} != real {json.dumps(b)}")
    return lines
