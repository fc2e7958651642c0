#!/usr/bin/env bash
# One device call on the H200: dense + weight-grad (with host overhead), then a BF16 subset.
# Results land in $OUT (or ./bench-out); each JSON is rewritten after every case, so a cut-off run keeps data.
# Usage (from the repo root): bash scripts/bench_h200.sh [extra bench args]
set -u
out="${OUT:-bench-out}"
mkdir -p "$out"
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$(pwd)" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.limit --format=csv || true
rc=0
timeout 200 python3 -m finegemm.bench --suite dense,weight-grad --host-overhead --plain --no-progress \
  --json "$out/dense.json" --plot "$out/dense.png" "$@" 2>"$out/dense.log" || rc=$?
tail -5 "$out/dense.log"
timeout 70 python3 -m finegemm.bench --suite bf16 --plain --no-progress \
  --shapes "128,2112,7168;4096,2112,7168;4096,7168,2048;4096,4096,7168" \
  --json "$out/bf16.json" "$@" 2>"$out/bf16.log" || rc=$?
tail -5 "$out/bf16.log"
exit $rc
