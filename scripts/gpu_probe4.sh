#!/usr/bin/env bash
# One H200 call after C-by-TMA became the default: the dense + weight-grad harness and the k-grouped bench
# (alone on the GPU), then the dense sm90 and k-grouped GPU tests in two shards. Logs in $OUT/probe4.tgz.
set -uo pipefail
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/finegemm-out}"
LOGS="$(mktemp -d)"
pack() { tar -czf "$OUT/probe4.tgz" -C "$LOGS" .; }
timeout 90 python3 -m finegemm.bench --plain --no-progress --suite dense,weight-grad --peers finegemm-sm90,cublas-block \
    --commit "$(cat .commit)" --json "$LOGS/bench.json" > "$LOGS/bench.log" 2>&1; tail -3 "$LOGS/bench.log"; pack
timeout 150 python3 scripts/k_grouped_bench.py --out "$LOGS" 2>&1 | tee "$LOGS/k_grouped_bench.log" | cut -c1-150; pack
TEST_SHARDS="tests/test_sm90_gpu.py;tests/test_sm90_k_grouped_gpu.py tests/test_sm90_grouped_gpu.py" SHARD_TIMEOUT=240 \
    SKIP_BENCH=1 OUT="$LOGS" bash scripts/gpu_check.sh > "$LOGS/gpu_check.log" 2>&1
grep -A4 "== shard" "$LOGS/gpu_check.log" | grep -v "^\s*$"; grep -h "FAILED\|Error" "$LOGS"/pytest-gpu-*.log | head -20; pack
