#!/usr/bin/env bash
# What is still unmeasured (benchmarks/NOTES.md v7), in two H200 calls of under 10 minutes each:
#   bash scripts/gpu_pending.sh 1   timings, alone on the GPU: the grouped harness suite (the m-grouped masked
#                                   rule of d40e2b0: 64x128 / 128x128 pipelined at K >= 4096), the C-epilogue
#                                   probe (c_tma_late), the v7 sweep of BLOCK_N 16 at M <= 128, the MQA
#                                   variants (sf_after_sum in both kernels; Triton timed directly)
#   bash scripts/gpu_pending.sh 2   the k-grouped bench, then the GPU tests of everything above
# Logs and JSON in $OUT/pending<part>.tgz (the device tool returns only a few files).
# Here first: git rev-parse --short HEAD > .commit (and carry ".commit").
set -uo pipefail
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/finegemm-out}"
PART="${1:-1}"
LOGS="$(mktemp -d)"
status=0
pack() { tar -czf "$OUT/pending$PART.tgz" -C "$LOGS" .; }  # after every step: a cut-off run keeps what it has
commit="$(cat .commit 2>/dev/null || echo unknown)"
if [ "$PART" = 1 ]; then
    timeout 60 python3 -m finegemm.bench --plain --no-progress --suite grouped --peers finegemm-sm90 \
        --commit "$commit" --json "$LOGS/bench-grouped.json" > "$LOGS/bench-grouped.log" 2>&1 || status=1
    tail -22 "$LOGS/bench-grouped.log"; pack
    OUT="$LOGS" timeout 150 python3 scripts/c_epilogue_probe.py 2>&1 | tee "$LOGS/c_probe.log" | cut -c1-300; pack
    OUT="$LOGS" V4_DEADLINE_S=90 timeout 150 python3 scripts/sm90_dev.py v7 2>&1 | tail -5 | cut -c1-200; pack
    OUT="$LOGS" timeout 150 python3 scripts/mqa_sm90_probe.py 2>&1 | tee "$LOGS/mqa_probe.log" | cut -c1-300; pack
else
    timeout 150 python3 scripts/k_grouped_bench.py --out "$LOGS" 2>&1 | tee "$LOGS/k_grouped_bench.log" | cut -c1-150
    pack
    timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_sm90_grouped_gpu.py tests/test_sm90_mqa.py \
        tests/test_sm90_gpu.py 2>&1 \
        | tee "$LOGS/pytest.log" | tail -6; [ "${PIPESTATUS[0]}" = 0 ] || status=1; pack
fi
exit $status
