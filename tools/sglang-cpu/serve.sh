#!/bin/bash
# serve.sh [DIR] [PORT] [extra args]: one real SGLang 0.5.23 server (unified mode) on 127.0.0.1:PORT.
# Seen on 2 cores: ~100 s to "fired up" under load, ~3.5 GB RSS (3 processes), 13-15 tok/s for one stream.
# PD (prefill/decode): see README.md; it does not serve yet.
set -euo pipefail
DIR=${1:-.dsv4ops/sglang-cpu}; PORT=${2:-24000}; shift 2 || true
cd "$DIR"
export SGLANG_USE_CPU_ENGINE=1 PYTHONPATH=$DIR/shim
exec ./venv/bin/python -m sglang.launch_server --model-path "$DIR/model" --device cpu \
  --attention-backend torch_native --sampling-backend pytorch --host 127.0.0.1 --port "$PORT" \
  --enable-metrics --max-total-tokens 4096 --max-running-requests 16 --disable-cuda-graph \
  --tool-call-parser qwen "$@"
