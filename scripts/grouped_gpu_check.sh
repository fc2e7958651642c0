#!/usr/bin/env bash
# One H200 session for the sm90 m-grouped FP8 kernels: a smoke pair of tests (stops here on failure or a
# hang), the rest of tests/test_sm90_grouped_gpu.py, then the bench grouped suite (finegemm-sm90 vs the
# cuBLAS blockwise per-group loop), with SWEEP=1 scripts/grouped_sweep.py too; everything under $OUT. Usage: scripts/grouped_gpu_check.sh COMMIT
set -u
export PYTHONPATH=.
OUT=${OUT:-/tmp/grouped_out}
mkdir -p "$OUT"
COMMIT=${1:-unknown}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1
python3 -c "import torch, triton; print(torch.__version__, torch.version.cuda, triton.__version__)" >> "$OUT/gpu.txt"
T=tests/test_sm90_grouped_gpu.py
timeout 120 python3 -m pytest -x -q -p no:cacheprovider "$T" -k "test_masked_decode_16x64 or test_contiguous_other_configs" \
    > "$OUT/smoke.txt" 2>&1
rc=$?
tail -25 "$OUT/smoke.txt"
if [ $rc -ne 0 ]; then echo "smoke failed rc=$rc"; exit $rc; fi
timeout 180 python3 -m pytest -q -p no:cacheprovider "$T" -k "not test_masked_decode_16x64 and not test_contiguous_other_configs" \
    > "$OUT/tests.txt" 2>&1
echo "tests rc=$?"; tail -30 "$OUT/tests.txt"
timeout 150 python3 -m finegemm bench --suite grouped --peers finegemm-sm90,cublas-block --plain --no-progress \
    --json "$OUT/grouped.json" --commit "$COMMIT" > "$OUT/bench.txt" 2>&1
echo "bench rc=$?"; tail -40 "$OUT/bench.txt"
if [ "${SWEEP:-0}" = 1 ]; then
    timeout 170 python3 scripts/grouped_sweep.py "$OUT/grouped_sweep.json" --commit "$COMMIT" --budget-s ${SWEEP_S:-75} \
        > "$OUT/sweep.txt" 2>&1
    echo "sweep rc=$?"; cut -c1-220 "$OUT/sweep.txt" | tail -45
fi
