#!/usr/bin/env bash
# Last H200 call of a session: the dense + weight-grad harness alone, a masked sweep of the weakest grouped
# shapes, then the sm90 GPU tests in two shards. Logs and JSON in $OUT/final.tgz.
set -uo pipefail
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/finegemm-out}"
LOGS="$(mktemp -d)"
pack() { tar -czf "$OUT/final.tgz" -C "$LOGS" .; }
timeout 90 python3 -m finegemm.bench --plain --no-progress --suite dense,weight-grad --peers finegemm-sm90,cublas-block \
    --commit "$(cat .commit)" --json "$LOGS/bench.json" > "$LOGS/bench.log" 2>&1; tail -3 "$LOGS/bench.log"; pack
timeout 110 python3 scripts/grouped_sweep.py "$LOGS/grouped_sweep.json" --commit "$(cat .commit)" --budget-s 80 \
    --masked-shapes "4,256,4096,7168;2,512,4096,7168;1,1024,4096,7168;16,64,7168,2048" 2>&1 \
    | tee "$LOGS/grouped_sweep.log" | cut -c1-200 | tail -36; pack
TEST_SHARDS="tests/test_sm90_gpu.py;tests/test_sm90_k_grouped_gpu.py tests/test_sm90_grouped_gpu.py tests/test_mqa.py tests/test_sm90_mqa.py" \
    SHARD_TIMEOUT=200 SKIP_BENCH=1 OUT="$LOGS" bash scripts/gpu_check.sh > "$LOGS/gpu_check.log" 2>&1
grep -A4 "== shard" "$LOGS/gpu_check.log" | grep -v "^\s*$"; grep -h "FAILED\|Error" "$LOGS"/pytest-gpu-*.log | head -20; pack
