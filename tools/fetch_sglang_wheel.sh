#!/usr/bin/env bash
# The pinned sglang 0.5.23 wheel (tools/sglang_wheel.txt: version and sha256) into the project
# cache, for tests/twin/conformance_extractor_test.py and tests/kernels/sglang_real_test.py, which
# read it as a zip (no dependency is installed, nothing is imported). Part of `make install`, so CI
# regenerates the conformance fixture from the very wheel it came from and fails on a difference.
#   fetch_sglang_wheel.sh [DIR]   (default .dsv4ops/wheels; ~39 MB, once)
set -euo pipefail
DIR=${1:-.dsv4ops/wheels}
PY=${PYTHON:-.venv/bin/python}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$DIR"
# The wheel is platform-tagged (cp311, manylinux_2_34_x86_64): ask for exactly that one, whatever
# this machine is, so the download is the same file everywhere.
"$PY" -m pip download -q --no-deps --require-hashes --only-binary=:all: --python-version 3.11 \
    --implementation cp --abi cp311 --platform manylinux_2_34_x86_64 -d "$DIR" \
    -r "$HERE/sglang_wheel.txt"
ls "$DIR"/sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl
