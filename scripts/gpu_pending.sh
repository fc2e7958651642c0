#!/usr/bin/env bash
# One H200 call for what is still unmeasured (benchmarks/NOTES.md v6): the GPU tests of the code that
# changed since the last GPU run (BF16 m-grouped contiguous with the constant-trip K loop, the Gluon MQA
# kernel with its OVERLAP switch, the paired PIPE_MMA configs), the MQA variant probe, the v6 PIPE_MMA
# sweep and the BF16 grouped benchmark. Prints the summaries; the full logs and JSON go into one
# archive, $OUT/pending.tgz (the device tool returns only a few files). About 6-9 minutes warm.
# Here first: git rev-parse --short HEAD > .commit (and carry ".commit").
set -uo pipefail
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/finegemm-out}"
LOGS="$(mktemp -d)"
status=0
pack() { tar -czf "$OUT/pending.tgz" -C "$LOGS" .; }  # after every step: a cut-off run keeps what it has
TEST_SHARDS="tests/test_sm90_bf16_grouped_gpu.py;tests/test_sm90_mqa.py;tests/test_sm90_gpu.py -k pipe" \
    SHARD_TIMEOUT=150 SKIP_BENCH=1 OUT="$LOGS" bash scripts/gpu_check.sh > "$LOGS/gpu_check.log" 2>&1 || status=1
grep -A4 "== shard" "$LOGS/gpu_check.log" | grep -v "^\s*$"; pack
OUT="$LOGS" timeout 150 python3 scripts/mqa_sm90_probe.py 2>&1 | tee "$LOGS/mqa_sm90_probe.log" | tail -4 | cut -c1-700; pack
OUT="$LOGS" V4_DEADLINE_S="${V6_DEADLINE_S:-200}" timeout 330 python3 scripts/sm90_dev.py v6 2>&1 \
    | tee "$LOGS/sm90_dev_v6.log" | grep -v "^V4 " | tail -27; pack
OUT="$LOGS" timeout 120 python3 scripts/bf16_grouped_bench.py --reps 20 --skip-portable 2>&1 \
    | tee "$LOGS/bf16_grouped_bench.log" | tail -14 || status=1
pack
exit $status
