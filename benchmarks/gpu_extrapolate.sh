#!/usr/bin/env bash
# AT20's multi-seed train-short/test-long comparison at [B]'s scale on one GPU, judged by the
# same statistics as the committed CPU store (claim AT20, issue 14).
#
# usage: benchmarks/gpu_extrapolate.sh [OUT_DIR]     (or OUT=DIR; default
#        benchmarks/results/extrapolation_gpu). TINY=1: a seconds-long CPU mode (run by the tests).
#
# Scale of [B] (digest §3.4): 16 layers, d_model 768 = 8 heads x d_head 96, base 10^4 (10 of 48
# blocks mix within 512 tokens), context 512, evaluation on nested prefixes up to 65536 (128x).
# Every scheme and seed trains exactly STEPS optimiser steps (default 2000; [B] trains 200K, so
# this is a budget-limited replication) with batch BATCH (default 32); SEEDS (default "0 1 2")
# seeds of 7 schemes; EVAL_WINDOWS (default 4) windows of 65537 tokens, 3 angle draws for random
# schemes. Runs resume from checkpoints; a second call continues a partial store. Writes into
# OUT_DIR: store/ (meta.json and one JSON per run), table.json, report.txt (the ratio table with
# intervals and the unigram ceiling, then AT20's sub-claim verdicts) and extrapolation.png.
# TINY=1 trains 3 schemes x 2 seeds of a 1-layer model for 3 steps (the judge then says
# INCONCLUSIVE: missing schemes and seeds); it checks the pipeline, not the claim.
# Then the device's limits, as benchmarks/limits.py gives them on one CPU core but measured on
# this device in one process (benchmarks/gpu_sweep.py --train-step): a STREAM triad
# a = b + s*c (GB/s, 24 bytes per float64 element) and float64 / float32 matmuls (GFLOP/s,
# 2 n^3 flops), best of 5 with CUDA events; and one optimiser step of the model above (RoPE,
# random token ids), its rate and its % of the float32 matmul. Flop model (train_flops in
# gpu_sweep.py): 3 forwards of 24 L D^2 + 4 L n D + 2 D V flops per token (projections and
# MLP; scores and value mix over the full n x n matrix; the tied head). Written to
# OUT_DIR/gpu_limits.md and .json. With no CUDA device the script stops at the first step
# with posflow's message (status 2), before anything is measured.
# Then AT20's synthetic tasks at the same scale (synthetic/, synthetic.txt: each sub-claim's
# comparisons and verdict).
# PYTHON names the interpreter (default python) of an environment with posflow and a CUDA torch.
set -euo pipefail
OUT="${1:-${OUT:-benchmarks/results/extrapolation_gpu}}"
PY="${PYTHON:-python}"
cd "$(dirname "$0")/.."
if [ "${TINY:-0}" = "1" ]; then
  args=(--device cpu --threads 1 --train-len 8 --max-factor 4 --steps 3 --batch-size 2
        --n-layer 1 --n-head 2 --d-head 8 --base 100 --vocab-size 300 --code-bytes 0
        --english-chars 20000 --eval-windows 2 --angle-draws 2 --seeds 0 1
        --schemes rope random_qk random_qk_alibi)
  # layers, heads, d_head, vocabulary, train_len, batch (as above), for the limits
  limits=(--device cpu --tiny --train-step 1 2 8 300 8 2)
  synth=(--device cpu --train-len 16 --steps 3 --batch-size 2 --n-layer 1 --n-head 2
         --d-model 32 --seeds 0 --schemes rope alibi)
else
  read -r -a seeds <<< "${SEEDS:-0 1 2}"
  args=(--device cuda --train-len 512 --max-factor 128 --steps "${STEPS:-2000}"
        --batch-size "${BATCH:-32}" --lr 6e-4 --warmup 200 --n-layer 16 --n-head 8 --d-head 96
        --base 10000 --vocab-size 8192 --code-bytes 30000000 --eval-windows "${EVAL_WINDOWS:-4}"
        --angle-draws 3 --chunk 2048 --checkpoint-every 250 --seeds "${seeds[@]}")
  limits=(--device cuda --train-step 16 8 96 8192 512 "${BATCH:-32}")
  read -r -a synth_seeds <<< "${SYNTH_SEEDS:-0 1 2 3 4}"
  synth=(--device cuda --train-len 512 --steps "${SYNTH_STEPS:-3000}" --batch-size "${BATCH:-32}"
         --lr 6e-4 --warmup 200 --n-layer 16 --n-head 8 --d-model 768 --seeds "${synth_seeds[@]}")
fi
mkdir -p "$OUT"
start=$(date +%s)
"$PY" -m posflow extrapolate "${args[@]}" --store "$OUT/store"
"$PY" -m posflow extrapolate --results --json --store "$OUT/store" > "$OUT/table.json"
"$PY" -m posflow extrapolate --results --judge --store "$OUT/store" \
  --plot "$OUT/extrapolation.png" > "$OUT/report.txt"
cat "$OUT/report.txt"
echo "gpu_extrapolate: $(( $(date +%s) - start )) s; table in $OUT/table.json"
# the synthetic tasks of AT20's first line (flip-flop, associative recall) at [B]'s scale:
# context 512 tested to 16x, 16 layers x 8 heads x 768, every scheme (PaTH included), seeds
# SYNTH_SEEDS (default 0-4), SYNTH_STEPS optimiser steps; judged by the same task judge
"$PY" -m posflow.simulate.models.synthetic_train --store "$OUT/synthetic" "${synth[@]}"
"$PY" -m posflow.proofs_checks.claims.at20_tasks "$OUT/synthetic" | tee "$OUT/synthetic.txt"
"$PY" benchmarks/gpu_sweep.py "$OUT" "${limits[@]}"
