#!/usr/bin/env bash
# Train-short/test-long comparison of the position schemes on one GPU (claim AT20, issue 6).
#
# usage: benchmarks/gpu_extrapolate.sh [OUT_DIR]      (or OUT=DIR; default
#        benchmarks/results/extrapolation_gpu). TINY=1 runs a seconds-long CPU smoke test.
#
# Configuration (H200): 9 schemes, each a 6-layer, 8-head, d = 256 byte-level LM trained for
# TIME_S = 25 s (batch 64, context 128, lr 1e-3) on 16 MB of the Python standard library,
# then evaluated at 128 ... 8192 (64x) on max(2, 16384 // L) held-out windows, attention in
# 1024-query chunks. Budget: 9 x 25 s training + about 2 min of evaluation (PaTH's reference
# sweep is most of it) + start-up, under 8 minutes. Writes into OUT_DIR: store/ (the run
# store, one JSON per scheme and meta.json; rerunning resumes), table.json (rows {scheme,
# train_len, eval_len, ppl}), table.txt and extrapolation.png. PYTHON names the interpreter (default
# python) of an environment where posflow and a CUDA torch are installed.
set -euo pipefail
OUT="${1:-${OUT:-benchmarks/results/extrapolation_gpu}}"
PY="${PYTHON:-python}"
cd "$(dirname "$0")/.."
if [ "${TINY:-0}" = "1" ]; then
  args=(--device cpu --threads 1 --train-len 16 --max-factor 4 --steps 3 --n-layer 1
        --n-head 2 --d-model 16 --batch-size 2 --max-bytes 100000 --eval-tokens 64)
else
  args=(--device cuda --train-len 128 --max-factor 64 --time "${TIME_S:-25}" --n-layer 6
        --n-head 8 --d-model 256 --batch-size 64 --lr 1e-3 --max-bytes 16000000
        --eval-tokens 16384 --chunk 1024)
fi
mkdir -p "$OUT"
start=$(date +%s)
"$PY" -m posflow extrapolate "${args[@]}" --store "$OUT/store"
"$PY" -m posflow extrapolate --results --json --store "$OUT/store" > "$OUT/table.json"
"$PY" -m posflow extrapolate --results --store "$OUT/store" --plot "$OUT/extrapolation.png" \
  | tee "$OUT/table.txt"
echo "gpu_extrapolate: $(( $(date +%s) - start )) s; table in $OUT/table.json"
