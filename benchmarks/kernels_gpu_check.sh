#!/usr/bin/env bash
# The prepared GPU check for a lent device (an H200, sm_90: not the box's sm_120). First the
# paged decode attention against SGLang's own (benchmarks/flash_mla_gpu_check.py); then compiles and
# runs each kernel against its torch reference, and prints achieved DRAM bandwidth vs peak with
# the targets (sparse decode attention >= 80 %, MoE decode >= 70 % at M <= 16). Tuned configs go
# to $OUT/<device>/ with TUNED_ON.json saying they are not the box's. Never a test dependency.
#   bash benchmarks/kernels_gpu_check.sh            # needs torch + triton with CUDA
set -uo pipefail
OUT=${OUT:-/tmp/kernels-gpu}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,compute_cap,memory.total --format=csv | tee "$OUT/gpu.csv"
"$PY" -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee "$OUT/versions.txt"
# Our sparse decode attention against SGLang 0.5.23's torch path and Triton fallback on this GPU
# (the pinned wheel carried in .dsv4ops/wheels/): a pass/fail table, bandwidth side by side.
timeout 180 "$PY" benchmarks/flash_mla_gpu_check.py | tee "$OUT/flash_mla.txt"
attn_rc=${PIPESTATUS[0]}
timeout 400 "$PY" benchmarks/kernels_gpu.py --buckets 1,2,4,8,16,32,64,96 --json > "$OUT/bench.json"
rc=$?
"$PY" - "$OUT/bench.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print("device", r["device"], "correctness", r["correctness"])
for row in r["rows"]:
    t = "" if row["target_pct"] is None else f" target {row['target_pct']}% {'MET' if row['meets_target'] else 'MISSED'}"
    print(f"{row['kernel']:18s} M={row['bucket']:<3d} {row['pct_of_peak']}% of peak{t}")
PY
timeout 150 "$PY" benchmarks/kernels_gpu.py --buckets 1,8,16 --tune --out "$OUT/tuned" > "$OUT/tune.txt" 2>&1 || true
tail -3 "$OUT/tune.txt"
exit $(( rc != 0 ? rc : attn_rc ))
