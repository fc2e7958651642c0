#!/usr/bin/env bash
# One H200 call for what is still unmeasured (benchmarks/NOTES.md v6): k-grouped with the v6 weight-
# gradient rules (GPU tests and timing), the grouped FP8 sweep with the pipelined configs of both
# forms (the masked rule "no PIPE_MMA" was measured while ptxas serialized that loop), and the Gluon
# MQA kernel at 16 and 128 heads through its GPU tests. Prints the summaries; the full logs and JSON go
# into one archive, $OUT/pending.tgz (the device tool returns only a few files). About 5 minutes warm.
# Here first: git rev-parse --short HEAD > .commit (and carry ".commit").
set -uo pipefail
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/finegemm-out}"
LOGS="$(mktemp -d)"
status=0
pack() { tar -czf "$OUT/pending.tgz" -C "$LOGS" .; }  # after every step: a cut-off run keeps what it has
commit="$(cat .commit 2>/dev/null || echo unknown)"
TEST_SHARDS="tests/test_sm90_k_grouped_gpu.py;tests/test_sm90_mqa.py" \
    SHARD_TIMEOUT=150 SKIP_BENCH=1 OUT="$LOGS" bash scripts/gpu_check.sh > "$LOGS/gpu_check.log" 2>&1 || status=1
grep -A4 "== shard" "$LOGS/gpu_check.log" | grep -v "^\s*$"; pack
timeout 150 python3 scripts/k_grouped_bench.py --out "$LOGS" 2>&1 | tee "$LOGS/k_grouped_bench.log" | cut -c1-120 \
    | tail -6; pack
timeout 200 python3 scripts/grouped_sweep.py "$LOGS/grouped_sweep.json" --commit "$commit" --budget-s 170 2>&1 \
    | tee "$LOGS/grouped_sweep.log" | tail -40 | cut -c1-220; pack
exit $status
