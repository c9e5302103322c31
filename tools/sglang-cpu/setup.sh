#!/bin/bash
# Real SGLang 0.5.23 on a CPU-only x86_64 machine, with a tiny deterministic model built locally.
#   setup.sh [DIR]      (DIR defaults to ~/.cache/sglang-cpu; ~6.5 GB; 6-8 min on 2 cores)
# Then: serve.sh [DIR] [PORT] [extra launch_server args]
# The one part that is not real: sgl_kernel. Its PyPI wheels (sglang-kernel 0.4.10, sgl-kernel 0.3.21)
# hold CUDA ops only, and the CPU build is compiled from source; the CPU engine imports a few *_cpu
# symbols at module load (kernels/ops/kvcache/cache_move.py:10), so shim/sgl_kernel hands out stubs that
# raise if called. With --attention-backend torch_native on a CPU without AMX none is called.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DIR=${1:-.dsv4ops/sglang-cpu}
mkdir -p "$DIR"; DIR=$(cd "$DIR" && pwd)
mkdir -p "$DIR"; cd "$DIR"
[ -x venv/bin/python ] || python3.11 -m venv venv
./venv/bin/pip -q install -U pip
# PyPI's torch 2.14.1 is the CUDA build; it runs on CPU (torchvision would replace a CPU torch with it anyway).
./venv/bin/pip install -q "torch==2.14.1" torchvision triton
./venv/bin/pip install -q --no-deps sglang==0.5.23
./venv/bin/pip install -q "transformers==5.19.0" "tokenizers==0.23.2" sentencepiece safetensors aiohttp fastapi "uvicorn>=0.51" uvloop \
  orjson "pyzmq>=25.1.2" psutil "prometheus-client>=0.20.0" pydantic requests numpy setproctitle msgspec pybase64 partial_json_parser \
  einops interegular python-multipart tqdm regex scipy pillow xxhash zstandard packaging blobfile tiktoken distro watchfiles \
  "openai==2.8.0" "openai-harmony==0.0.4" "anthropic>=0.20.0" python-dateutil easydict gguf IPython dill apache-tvm-ffi==0.1.11 \
  compressed_tensors xgrammar==0.2.7 jsonschema soundfile sglang-router==0.3.2
# deepseek-recipe (sglang's pin for --tool-call-parser deepseekv4) and the tool model: setup_tools.sh
rm -rf shim; cp -r "$HERE/shim" shim
./venv/bin/python "$HERE/make_model.py" "$DIR/model"
touch "$DIR/.ready"
echo "ready: $DIR (serve with $HERE/serve.sh $DIR)"
