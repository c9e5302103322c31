#!/bin/bash
# What profile tiny-cpu serves since it speaks DSV4 (issue 38): the DSV4-speaking tiny tool model
# (DIR/tool-model) and deepseek-recipe 0.2.0, which 0.5.23 needs to start with
# --tool-call-parser deepseekv4 (it renders the prompts and parses the output; sglang's own pin,
# which setup.sh's `pip install --no-deps sglang` leaves out).
#   setup_tools.sh [DIR]   (after setup.sh; DIR defaults to .dsv4ops/sglang-cpu; ~10 s)
# Idempotent: it upgrades an env built before tiny-cpu served this model (`make real-sglang` runs
# it while DIR/.ready-tools is missing) and does nothing twice. SGLANG_CPU_RETRAIN=1 trains the
# model again from the seeded script instead of copying the committed weights (README.md: ~50 min
# on 2 shared cores; a model of the same kind, not the same bits).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DIR=${1:-.dsv4ops/sglang-cpu}
DIR=$(cd "$DIR" && pwd)
PY="$DIR/venv/bin/python"
if ! "$PY" -c 'import importlib.metadata as m, sys; sys.exit(m.version("deepseek-recipe") != "0.2.0")' 2>/dev/null; then
  "$DIR/venv/bin/pip" install -q --no-deps "deepseek-recipe==0.2.0"
fi
if [ "${SGLANG_CPU_RETRAIN:-0}" = 1 ]; then
  T="$DIR/tool-model.stages"; rm -rf "$T"; mkdir -p "$T"
  M=("$PY" "$HERE/make_tool_model.py")
  "${M[@]}" "$T/1" --one-kind --batch-tokens 2000 --stop-after 1201 --final-n 0
  "${M[@]}" "$T/2" --resume "$T/1" --steps 500 --lr 1e-3 --warmup 20 --stop-after 251 --final-n 0
  "${M[@]}" "$T/3" --resume "$T/2" --steps 160 --lr 4e-4 --warmup 5 --final-n 0
  rm -rf "$DIR/tool-model.new"
  "${M[@]}" "$DIR/tool-model.new" --resume "$T/3" --steps 400 --lr 3e-4 --warmup 10
  rm -rf "$T" "$DIR/tool-model"; mv "$DIR/tool-model.new" "$DIR/tool-model"
elif ! diff -rq "$HERE/tool-model" "$DIR/tool-model" >/dev/null 2>&1; then
  # the committed weights, copied whole then renamed: a copy cut short is never served
  rm -rf "$DIR/tool-model.new"; cp -r "$HERE/tool-model" "$DIR/tool-model.new"
  rm -rf "$DIR/tool-model"; mv "$DIR/tool-model.new" "$DIR/tool-model"
fi
"$PY" -c "import deepseek_recipe"
touch "$DIR/.ready-tools"
echo "tools ready: $DIR/tool-model, deepseek-recipe 0.2.0 (profile tiny-cpu)"
