#!/usr/bin/env bash
# Short H200 call: the grouped harness suite with the current masked rules, then the m-grouped GPU tests.
set -uo pipefail
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/finegemm-out}"
timeout 60 python3 -m finegemm.bench --plain --no-progress --suite grouped --peers finegemm-sm90 \
    --commit "$(cat .commit)" --json "$OUT/bench-grouped.json" > "$OUT/bench-grouped.log" 2>&1; tail -22 "$OUT/bench-grouped.log"
timeout 100 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_sm90_grouped_gpu.py 2>&1 | tee "$OUT/pytest-grouped.log" | tail -4
