#!/usr/bin/env bash
# One H200 call for what is still unmeasured (benchmarks/NOTES.md v7): the m-grouped masked rules of
# the session's last commit (64x128 / 128x128 pipelined at K >= 4096) through the grouped harness suite
# and the m-grouped GPU tests, then the k-grouped bench, then the MQA variants (sf_after_sum: kv_sf after
# the head sum, both kernels; the Triton kernel timed directly at 32 heads), the v7 sweep of BLOCK_N 16
# at M <= 128 (scripts/sm90_dev.py v7), and the GPU tests. Logs and
# JSON in $OUT/pending.tgz (the device tool returns only a few files). About 5 minutes warm.
# Here first: git rev-parse --short HEAD > .commit (and carry ".commit").
set -uo pipefail
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/finegemm-out}"
LOGS="$(mktemp -d)"
status=0
pack() { tar -czf "$OUT/pending.tgz" -C "$LOGS" .; }  # after every step: a cut-off run keeps what it has
commit="$(cat .commit 2>/dev/null || echo unknown)"
timeout 60 python3 -m finegemm.bench --plain --no-progress --suite grouped --peers finegemm-sm90 \
    --commit "$commit" --json "$LOGS/bench-grouped.json" > "$LOGS/bench-grouped.log" 2>&1 || status=1
tail -22 "$LOGS/bench-grouped.log"; pack
timeout 150 python3 scripts/k_grouped_bench.py --out "$LOGS" 2>&1 | tee "$LOGS/k_grouped_bench.log" | cut -c1-150; pack
OUT="$LOGS" V4_DEADLINE_S=90 timeout 150 python3 scripts/sm90_dev.py v7 2>&1 | tail -5 | cut -c1-200; pack
OUT="$LOGS" timeout 120 python3 scripts/mqa_sm90_probe.py 2>&1 | tee "$LOGS/mqa_probe.log" | cut -c1-300; pack
timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_sm90_grouped_gpu.py tests/test_sm90_mqa.py 2>&1 \
    | tee "$LOGS/pytest-grouped.log" | tail -4; [ "${PIPESTATUS[0]}" = 0 ] || status=1; pack
exit $status
