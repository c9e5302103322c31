#!/usr/bin/env bash
# OPTIONAL, never part of `make test`: builds the interpreter that benchmarks/sglang_client.py uses to
# run SGLang's own bench client (`python -m sglang.benchmark.serving`, sglang 0.5.23).
#
#   bash benchmarks/sglang_env.sh [VENV_DIR]     (default: <repo>/.venv-sglang)
#
# Minimal set, not `pip install sglang==0.5.23`: the full install pulls ~190 packages (flashinfer,
# cutlass, deep-ep, tilelang, xgrammar, ...), took 928 s and 11 GB here. sglang.benchmark.serving
# imports sglang.srt (quantization, distributed, kernels) at module level, hence torch + triton +
# the CUDA wheels even though the client runs no model; this list is exactly what that import chain
# and a `random-ids` run need (found by importing until nothing was missing), installed --no-deps.
# Measured on the 2-core python machine (torch 2.14.1 CUDA build taken from local disk through the
# /etc/xdg/pip cap): ~6.3 GB, about 4-6 minutes. Python 3.11 and PyPI access required.
# `.venv-sglang/` is git-ignored; `make bench-sglang` builds it (once) and runs the comparison.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-$ROOT/.venv-sglang}"
PY="${PYTHON:-python3.11}"
start=$(date +%s)

"$PY" -m venv "$VENV"
"$VENV/bin/pip" install -q --no-deps \
  sglang==0.5.23 \
  torch==2.14.1 torchvision==0.29.1 triton==3.8.0 \
  nvidia-cublas==13.1.1.3 nvidia-cuda-cupti==13.0.85 nvidia-cuda-nvrtc==13.0.88 \
  nvidia-cuda-runtime==13.0.96 nvidia-cudnn-cu13==9.24.0.43 nvidia-cufft==12.0.0.61 \
  nvidia-cufile==1.15.1.6 nvidia-curand==10.4.0.35 nvidia-cusolver==12.0.4.66 \
  nvidia-cusparse==12.6.3.3 nvidia-cusparselt-cu13==0.8.1 nvidia-nccl-cu13==2.30.7 \
  nvidia-nvjitlink==13.5.37 nvidia-nvshmem-cu13==3.4.5 nvidia-nvtx==13.0.85 \
  cuda-bindings==13.5.0 cuda-pathfinder==1.9.1 cuda-toolkit==13.0.3.0 \
  apache-tvm-ffi==0.1.11 compressed-tensors==0.18.0 gguf==0.19.0 sentencepiece==0.2.1 \
  transformers==5.19.0 tokenizers==0.23.2 huggingface_hub==1.33.0 hf-xet==1.8.0 safetensors==0.8.0 \
  datasets==5.2.0 pyarrow==26.0.1 pandas==3.1.1 dill==0.4.1 multiprocess==0.70.19 xxhash==4.1.0 \
  fsspec==2026.9.0 tzdata==2026.6 \
  aiohttp==3.14.5 aiohappyeyeballs==2.7.1 aiosignal==1.4.0 attrs==26.1.0 frozenlist==1.8.0 \
  multidict==7.2.1 propcache==0.5.4 yarl==1.25.1 \
  requests==2.34.2 urllib3==2.8.0 idna==3.20 certifi==2026.10.19.post1 charset-normalizer==3.5.3 \
  httpx==0.28.1 httpcore==1.0.9 h11==0.16.0 anyio==4.16.0 \
  numpy==2.4.6 msgspec==0.23.0 orjson==3.13.0 pybase64==1.5.1 psutil==7.2.2 pyzmq==27.3.0 \
  pillow==13.0.0 starlette==1.10.0 pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0 \
  typing-inspection==0.4.5 typing_extensions==4.16.0 annotated-doc==0.0.7 \
  ipython==9.18.1 ipython_pygments_lexers==1.1.1 jedi==0.20.1 parso==0.8.7 \
  matplotlib-inline==0.2.2 traitlets==5.16.1 prompt_toolkit==3.0.53 wcwidth==0.9.4 \
  Pygments==2.21.0 pexpect==4.9.0 ptyprocess==0.7.0 stack-data==0.6.3 asttokens==3.0.2 \
   executing==2.3.0 pure_eval==0.2.4 \
  loguru==0.7.3 tqdm==4.70.1 regex==2026.11.19 filelock==4.3.1 packaging==26.4 PyYAML==6.0.4 \
  Jinja2==3.1.6 MarkupSafe==3.0.4 networkx==3.6.1 sympy==1.14.0 mpmath==1.3.0 \
  click==8.5.1 typer==0.29.2 rich==15.0.0 markdown-it-py==4.3.0 mdurl==0.1.2 shellingham==1.5.4 \
  python-dateutil==4.0.0 \
  2>&1 | grep -v "is ignored: it is neither" || true

# the check that matters: the bench module imports (20-60 s: torch + sglang.srt)
"$VENV/bin/python" -W ignore -c "import sglang.benchmark.serving" 2>&1 | grep -v "support .* currently" || true
"$VENV/bin/python" -W ignore -c "import sglang.benchmark.serving" >/dev/null 2>&1 \
  || { echo "sglang_env: import sglang.benchmark.serving FAILED in $VENV" >&2; exit 1; }
echo "sglang_env: $VENV ready in $(( $(date +%s) - start )) s, $(du -sh "$VENV" | cut -f1)"
echo "use: SGLANG_PYTHON=$VENV/bin/python python benchmarks/sglang_client.py http://127.0.0.1:PORT"
