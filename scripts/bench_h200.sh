#!/usr/bin/env bash
# One device call on the H200, in separate processes so a crash in one step keeps the others' results:
#   1. dense + weight-grad with host overhead, every peer but the (young) sm90 backend;
#   2. a BF16 subset;
#   3. the sm90 backend alone against cuBLAS blockwise on the dense suite.
# Results land in $OUT (or ./bench-out); each JSON is rewritten after every case, so a cut-off run keeps data.
# Usage (from the repo root): bash scripts/bench_h200.sh [extra bench args]
# On a lent GPU whose copy has no .git, pass the commit: bash scripts/bench_h200.sh --commit <sha>
set -u
out="${OUT:-bench-out}"
mkdir -p "$out"
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$(pwd)" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.limit --format=csv || true
rc=0
bench() { python3 -m finegemm.bench --plain --no-progress "$@"; }
timeout "${T1:-170}" bash -c "$(declare -f bench); bench --suite dense,weight-grad --host-overhead \
  --peers finegemm-portable,deepgemm,cublas --json $out/dense.json --plot $out/dense.png $*" \
  2>"$out/dense.log" || rc=$?
tail -3 "$out/dense.log"
timeout "${T2:-50}" bash -c "$(declare -f bench); bench --suite bf16 --peers finegemm-portable,deepgemm,cublas \
  --shapes '128,2112,7168;4096,2112,7168;4096,7168,2048;4096,4096,7168' --json $out/bf16.json $*" \
  2>"$out/bf16.log" || rc=$?
tail -3 "$out/bf16.log"
timeout "${T3:-50}" bash -c "$(declare -f bench); bench --suite dense --peers finegemm-sm90,cublas-block \
  --json $out/sm90.json $*" 2>"$out/sm90.log" || rc=$?
tail -3 "$out/sm90.log"
exit $rc
