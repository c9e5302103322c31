#!/bin/bash
# serve.sh [DIR] [PORT] [extra launch_server args]: one real SGLang 0.5.23 server on CPU, on
# 127.0.0.1:PORT (DIR defaults to .dsv4ops/sglang-cpu, made absolute; PORT to 24000), from what
# setup.sh left in DIR: its venv, its tiny model (DIR/model) and its copy of shim/ on PYTHONPATH
# (the sgl_kernel stubs; sitecustomize.py's no-ops for the CUDA bookkeeping of the PD path).
# Always: the CPU engine (SGLANG_USE_CPU_ENGINE=1), torch_native attention, pytorch sampling,
# --enable-metrics, 4096 total tokens, 16 running requests, no CUDA graphs, the qwen tool-call
# parser. Unified mode unless the extra args say otherwise: serve_pd.sh runs this script with
# --disaggregation-mode prefill|decode and mooncake over TCP for one PD server, and
# tests/twin/real_sglang_test.py with --decode-log-interval. README.md has what it showed.
set -euo pipefail
DIR=${1:-.dsv4ops/sglang-cpu}; PORT=${2:-24000}; shift 2 || true
DIR=$(cd "$DIR" && pwd)  # $DIR/shim and $DIR/model are used after the cd below
cd "$DIR"
export SGLANG_USE_CPU_ENGINE=1 PYTHONPATH=$DIR/shim
exec ./venv/bin/python -m sglang.launch_server --model-path "$DIR/model" --device cpu \
  --attention-backend torch_native --sampling-backend pytorch --host 127.0.0.1 --port "$PORT" \
  --enable-metrics --max-total-tokens 4096 --max-running-requests 16 --disable-cuda-graph \
  --tool-call-parser qwen "$@"
