#!/usr/bin/env bash
# The real-sglang test env for `make test-sglang`: the sglang 0.5.23 wheel, --no-deps, plus the
# few pure-python packages its import of sglang.srt.plugins and the MoE config lookup needs,
# into a --target folder used next to .venv's CPU torch/triton (PYTHONPATH). ~330 MB.
# Never `pip install sglang` with its dependencies (GPU stack, many GB).
set -euo pipefail
DIR=${1:-.dsv4ops/sglang-site}
PY=${PYTHON:-.venv/bin/python}
WHEEL=${SGLANG_WHEEL:-.dsv4ops/wheels/sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl}
"$PY" -m pip install -q --no-deps --no-compile --target "$DIR" "$WHEEL"
"$PY" -m pip install -q --no-deps --no-compile --target "$DIR" psutil pybase64 requests urllib3 \
    msgspec pyzmq tqdm ipython traitlets pygments "transformers==5.19.0" "tokenizers==0.23.2" \
    regex huggingface_hub httpx2 httpcore2 truststore safetensors charset_normalizer idna certifi
echo "$DIR"
