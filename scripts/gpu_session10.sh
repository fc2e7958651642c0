#!/usr/bin/env bash
# 10th session (2026-12-04), one H200 call: the grouped harness suite at the 256-row grouped picks, the k-grouped
# per-group config sweep under the PDL chain, then the GEMM GPU tests the session's changes touch.
# Logs and JSON in $OUT/session10.tgz. Here first: git rev-parse --short HEAD > .commit (and carry ".commit").
set -uo pipefail
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/finegemm-out}"
LOGS="$(mktemp -d)"
status=0
commit="$(cat .commit 2>/dev/null || echo unknown)"
pack() { tar -czf "$OUT/session10.tgz" -C "$LOGS" .; }
if [ "${1:-}" = bf16 ]; then  # second call: the BF16 recordings (host time, GPU tests, bf16 suite), grouped tests
    timeout 90 python3 scripts/host_overhead.py --kind bf16 --label bf16-recordings --commit "$commit" \
        --out "$LOGS/host-overhead-bf16.json" 2>&1 | tee "$LOGS/host-overhead-bf16.log" | cut -c1-120
    pack
    timeout 280 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_sm90_bf16_gpu.py tests/test_sm90_k_grouped_gpu.py \
        tests/test_sm90_grouped_gpu.py 2>&1 | tee "$LOGS/pytest-bf16-grouped.log" | tail -4
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
    pack
    timeout 150 python3 -m finegemm.bench --plain --no-progress --suite bf16 --peers finegemm-sm90,cublas-bf16 \
        --commit "$commit" --json "$LOGS/bench-bf16.json" > "$LOGS/bench-bf16.log" 2>&1 || status=1
    tail -3 "$LOGS/bench-bf16.log"; pack
    exit $status
fi
timeout 150 python3 -m finegemm.bench --plain --no-progress --suite grouped --peers finegemm-sm90 \
    --commit "$commit" --json "$LOGS/bench-grouped.json" > "$LOGS/bench-grouped.log" 2>&1 || status=1
tail -22 "$LOGS/bench-grouped.log"; pack
timeout 150 python3 scripts/k_grouped_bench.py --sweep --out "$LOGS" 2>&1 | tee "$LOGS/k_grouped_sweep.log" | cut -c1-120
pack
timeout 240 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_sm90_gpu.py tests/test_sm90_grouped_gpu.py \
    tests/test_sm90_k_grouped_gpu.py 2>&1 | tee "$LOGS/pytest.log" | tail -4
[ "${PIPESTATUS[0]}" = 0 ] || status=1
pack
exit $status
