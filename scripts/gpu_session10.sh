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
