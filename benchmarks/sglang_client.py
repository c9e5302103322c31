"""Drive SGLang's own bench client (`sglang.benchmark.serving`, sglang 0.5.23) against a local server.

Optional companion of loadgen_capacity.py: sglang needs torch and ~6-11 GB of packages, so it lives
in a separate interpreter (benchmarks/sglang_env.sh builds <repo>/.venv-sglang) and runs here
as a subprocess pinned to CPU 1. This file imports only the standard library at module level: the
parent side runs under the project's interpreter, the child side (`--child`) under sglang's.

What the child runs is sglang's unmodified CLI (`cli_main`) with:
  --backend sglang-oai-chat        POST /v1/chat/completions, stream=true, aiohttp, one
                                   ClientSession (one TCP connection) per request
  --dataset-name random-ids        random token ids; `random` would download ShareGPT from the hub
  --tokenizer/--model <tmp dir>    a tiny WordLevel tokenizer built on the spot (no hub access)
  --extra-request-body {"max_tokens": N}
                                   sglang sends `max_completion_tokens`; the instant server of
                                   loadgen_capacity.py reads `max_tokens`, so both are sent
  --max-concurrency S              closed loop: all prompts queued at t0 behind a semaphore
Three side calls of the CLI are neutralised in-process, none of them on the measured path:
GET /v1/models (skipped with --ready-check-timeout-sec 0 and an explicit --model), and
GET /model_info and GET /server_info, answered locally with 404 (the instant server answers any
request with an SSE stream and status 200, which sglang then fails to parse as JSON).
The child also stamps process CPU and wall time from the first request to the metrics step, so
`client_cpu` covers the measured phase only, not the ~20-60 s of importing torch/sglang.

sglang has no duration option: the number of prompts is sized from `rate_hint` (events/s) so the
run lasts about `window_s`, but never fewer than `streams` prompts (one request per stream).

Manual use:  python benchmarks/sglang_client.py http://127.0.0.1:PORT [--streams 100] [--window 5]
             [--tokens 4000] [--python /path/to/python]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
from typing import Any

DEFAULT_VENV_PYTHON = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".venv-sglang", "bin", "python"
)
CHILD_CPU = 1  # the server in loadgen_capacity.py is pinned to CPU 0


# ------------------------------------------------------------------------------ parent side ----
def find_sglang_python() -> str | None:
    """The interpreter that can `import sglang.benchmark.serving`, or None.

    $SGLANG_PYTHON first, then <repo>/.venv-sglang/bin/python. Only checks that the file is an
    executable: importing sglang takes 20-60 s, so `run()` reports a failed import instead.
    """
    for cand in (os.environ.get("SGLANG_PYTHON"), DEFAULT_VENV_PYTHON):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def _check_local(url: str) -> str:
    u = urllib.parse.urlsplit(url)
    if u.scheme != "http" or u.hostname != "127.0.0.1" or not u.port:
        raise ValueError(f"sglang_client talks only to http://127.0.0.1:PORT, got {url!r}")
    return f"http://127.0.0.1:{u.port}"


def _pin_child() -> None:
    with contextlib.suppress(OSError):  # a 1-core machine: leave it unpinned
        os.sched_setaffinity(0, {CHILD_CPU})


def run(
    url: str,
    streams: int,
    window_s: float,
    tokens: int,
    python: str,
    *,
    rate_hint: float = 20_000.0,
    timeout_s: float | None = None,
    input_len: int = 8,
) -> dict[str, Any]:
    """Run sglang's bench client against `url` (http://127.0.0.1:PORT) and return its numbers.

    events_per_s is sglang's `output_throughput` (output tokens/s over its benchmark duration,
    the drain at the end included); with the instant server one token = one SSE event, because
    the server sends no `usage` and sglang then counts `max_completion_tokens` per request.
    """
    base = _check_local(url)
    num_prompts = max(streams, int(round(window_s * rate_hint / max(tokens, 1))))
    if timeout_s is None:
        timeout_s = 240.0 + 8.0 * window_s + num_prompts * tokens / 2_000.0
    work = tempfile.mkdtemp(prefix="sglang_client_")
    env = dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
        TOKENIZERS_PARALLELISM="false",
        PYTHONWARNINGS="ignore",
    )
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        env.pop(k, None)
    cmd = [
        python,
        os.path.abspath(__file__),
        "--child",
        base,
        "--streams",
        str(streams),
        "--num-prompts",
        str(num_prompts),
        "--tokens",
        str(tokens),
        "--input-len",
        str(input_len),
        "--workdir",
        work,
    ]
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd,
            env=env,
            cwd=work,
            preexec_fn=_pin_child,
            timeout=timeout_s,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        wall = time.perf_counter() - t0
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        out_path = os.path.join(work, "result.jsonl")
        phase_path = os.path.join(work, "phase.json")
        if proc.returncode != 0 or not os.path.exists(out_path):
            tail = proc.stdout[-3000:] if proc.stdout else ""
            raise RuntimeError(f"sglang bench client failed (rc={proc.returncode}):\n{tail}")
        with open(out_path) as f:
            res = json.loads(f.read().strip().splitlines()[-1])
        phase = {}
        if os.path.exists(phase_path):
            with open(phase_path) as f:
                phase = json.load(f)
    except subprocess.TimeoutExpired as e:
        raise RuntimeError(f"sglang bench client timed out after {timeout_s:.0f} s") from e
    finally:
        shutil.rmtree(work, ignore_errors=True)
    child_cpu_s = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    bench_wall = phase.get("wall_s") or float("nan")
    bench_cpu = phase.get("cpu_s") or float("nan")
    events = res.get("total_output_tokens") or 0
    return {
        "events_per_s": res.get("output_throughput"),
        "median_itl_ms": res.get("median_itl_ms"),
        "p99_itl_ms": res.get("p99_itl_ms"),
        "median_ttft_ms": res.get("median_ttft_ms"),
        "p99_ttft_ms": res.get("p99_ttft_ms"),
        # measured phase only (first request -> metrics), stamped inside the child
        "client_cpu": bench_cpu / bench_wall
        if bench_wall == bench_wall and bench_wall > 0
        else float("nan"),
        "cpu_us_per_event": bench_cpu / events * 1e6 if events else float("nan"),
        # whole child process (imports, tokenizer, dataset, warmup included): RUSAGE_CHILDREN delta
        "child_cpu_s": child_cpu_s,
        "child_wall_s": wall,
        "child_cpu_whole": child_cpu_s / wall if wall > 0 else float("nan"),
        "duration_s": res.get("duration"),
        "completed": res.get("completed"),
        "num_prompts": num_prompts,
        "total_output_tokens": events,
        "total_output_tokens_retokenized": res.get("total_output_tokens_retokenized"),
        "max_output_tokens_per_s": res.get("max_output_tokens_per_s"),
        "streams": streams,
        "tokens": tokens,
    }


# ------------------------------------------------------------------------------ child side -----
def _build_tokenizer(path: str) -> None:
    """A tiny word-level tokenizer (1000 words) saved with save_pretrained: no hub access."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, "[PAD]": 1}
    vocab.update({f"w{i}": i + 2 for i in range(1000)})
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]"
    ).save_pretrained(path)


class _NoJson:
    status_code = 404
    text = ""

    def json(self):  # type: ignore[no-untyped-def]
        raise ValueError("not served")


def _child(a: argparse.Namespace) -> None:
    a.url = a.url.rstrip("/")
    tokdir = os.path.join(a.workdir, "tokenizer")
    _build_tokenizer(tokdir)

    import sglang.benchmark.serving as S  # noqa: N812  (20-60 s: torch, transformers, sglang.srt)

    real_requests = S.requests

    class _Requests:  # side endpoints the instant server does not implement
        def __getattr__(self, name):  # type: ignore[no-untyped-def]
            return getattr(real_requests, name)

        def get(self, url, *args, **kw):  # type: ignore[no-untyped-def]
            if url.endswith(("/server_info", "/model_info")):
                return _NoJson()
            return real_requests.get(url, *args, **kw)

    S.requests = _Requests()

    phase: dict[str, Any] = {}
    real_get_request, real_metrics = S.get_request, S.calculate_metrics

    def get_request(*args, **kw):  # type: ignore[no-untyped-def]  # called at benchmark_start_time
        phase["cpu0"], phase["t0"] = time.process_time(), time.perf_counter()
        return real_get_request(*args, **kw)

    def calculate_metrics(*args, **kw):  # type: ignore[no-untyped-def]  # called right after the run
        phase["cpu1"], phase["t1"] = time.process_time(), time.perf_counter()
        return real_metrics(*args, **kw)

    S.get_request, S.calculate_metrics = get_request, calculate_metrics

    sys.argv = [
        "sglang.benchmark.serving",
        "--backend",
        "sglang-oai-chat",
        "--base-url",
        a.url,
        "--model",
        tokdir,
        "--served-model-name",
        "x",
        "--tokenizer",
        tokdir,
        "--dataset-name",
        "random-ids",
        "--random-input-len",
        str(a.input_len),
        "--random-output-len",
        str(a.tokens),
        "--random-range-ratio",
        "1.0",
        "--num-prompts",
        str(a.num_prompts),
        "--max-concurrency",
        str(a.streams),
        "--request-rate",
        "inf",
        "--extra-request-body",
        json.dumps({"max_tokens": a.tokens}),
        "--warmup-requests",
        "1",
        "--ready-check-timeout-sec",
        "0",
        "--disable-tqdm",
        "--output-file",
        os.path.join(a.workdir, "result.jsonl"),
    ]
    S.cli_main()
    if "t1" in phase:
        with open(os.path.join(a.workdir, "phase.json"), "w") as f:
            json.dump(
                {"cpu_s": phase["cpu1"] - phase["cpu0"], "wall_s": phase["t1"] - phase["t0"]}, f
            )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("url", nargs="?", help="http://127.0.0.1:PORT of an instant server")
    ap.add_argument("--streams", type=int, default=100)
    ap.add_argument("--window", type=float, default=5.0)
    ap.add_argument("--tokens", type=int, default=4000)
    ap.add_argument("--rate-hint", type=float, default=20_000.0)
    ap.add_argument("--python", default=None)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--num-prompts", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--input-len", type=int, default=8, help=argparse.SUPPRESS)
    ap.add_argument("--workdir", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        _child(a)
        return
    if not a.url:
        ap.error("url required")
    py = a.python or find_sglang_python()
    if py is None:
        sys.exit("no sglang interpreter: set SGLANG_PYTHON or run benchmarks/sglang_env.sh")
    r = run(a.url, a.streams, a.window, a.tokens, py, rate_hint=a.rate_hint)
    print(json.dumps(r, indent=1))
    print(
        f"sglang bench client: {r['events_per_s']:.0f} events/s, ITL p50/p99 {r['median_itl_ms']:.2f}/"
        f"{r['p99_itl_ms']:.2f} ms, TTFT p50/p99 {r['median_ttft_ms']:.1f}/{r['p99_ttft_ms']:.1f} ms, "
        f"client CPU {r['client_cpu']:.2f} ({r['cpu_us_per_event']:.1f} us/event)"
    )


if __name__ == "__main__":
    main()
