#!/usr/bin/env bash
# One H200 call (session 2026-12-03 #4): timings first, alone on the GPU, then the grouped GPU tests.
# C-epilogue cost of the 1d1d kernel, MQA at 16/128 heads, k-grouped per-group sweep incl. k_dynamic,
# the grouped bench suite with the new masked decode rule; then the grouped and C-by-TMA GPU tests. Logs and JSON in $OUT/probe2.tgz.
set -uo pipefail
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/finegemm-out}"
LOGS="$(mktemp -d)"
pack() { tar -czf "$OUT/probe2.tgz" -C "$LOGS" .; }
OUT="$LOGS" timeout 140 python3 scripts/c_epilogue_probe.py 2>&1 | tee "$LOGS/c_probe.log"; pack
OUT="$LOGS" timeout 80 python3 scripts/mqa_sm90_probe.py 2>&1 | tee "$LOGS/mqa_probe.log" | cut -c1-400; pack
timeout 110 python3 scripts/k_grouped_bench.py --sweep --out "$LOGS" 2>&1 | tee "$LOGS/kg_sweep.log"; pack
timeout 50 python3 -m finegemm.bench --plain --no-progress --suite grouped --peers finegemm-sm90 \
    --commit "$(cat .commit)" --json "$LOGS/bench-grouped.json" 2>&1 | tail -25 | tee "$LOGS/bench-grouped.log"; pack
timeout 180 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_sm90_grouped_gpu.py \
    "tests/test_sm90_gpu.py::test_1d1d_c_by_tma" 2>&1 \
    | tee "$LOGS/pytest-grouped.log" | tail -6; pack
