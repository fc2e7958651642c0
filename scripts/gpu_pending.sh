#!/usr/bin/env bash
# One H200 call for what the 2026-12-03 session left unmeasured (benchmarks/NOTES.md v5, k-grouped and
# BF16 grouped sections): the GPU tests of the code that changed after the last GPU run (k-grouped with
# the proxy fence and the K < 4096 weight-grad rule, BF16 m-grouped with its final rules, the
# experimental Gluon MQA kernel), the repeat probe, then the v5 sweep, the Gluon-vs-Triton MQA timing
# and the k-grouped (and, with WITH_BF16=1, BF16 grouped) benchmarks.
# Logs and JSON under $OUT; about 5-7 minutes warm.
# Here first: git rev-parse --short HEAD > .commit (and carry ".commit").
set -uo pipefail
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/finegemm-out}"
mkdir -p "$OUT"
status=0
# the GPU tests, one parallel pytest process per shard (scripts/gpu_check.sh), no benchmark there
TEST_SHARDS="tests/test_sm90_k_grouped_gpu.py;tests/test_sm90_bf16_grouped_gpu.py;tests/test_sm90_gpu.py;\
tests/test_sm90_grouped_gpu.py;tests/test_sm90_mqa.py" SHARD_TIMEOUT=270 SKIP_BENCH=1 OUT="$OUT" \
    bash scripts/gpu_check.sh || status=1
PROBE_FIRST=1 PROBE_CASES="128 sfb,1d2d 128 sfa" timeout 120 python3 scripts/repeat_probe.py \
    2>&1 | tee "$OUT/repeat_probe.log" | cut -c1-300 | tail -4
V4_DEADLINE_S=120 timeout 240 python3 scripts/sm90_dev.py v5 2>&1 | tee "$OUT/sm90_dev_v5.log" | grep -v "^V4 wgrad" | tail -10
timeout 120 python3 scripts/mqa_sm90_probe.py 2>&1 | tee "$OUT/mqa_sm90_probe.log" | tail -5
timeout 240 python3 scripts/k_grouped_bench.py --out "$OUT" 2>&1 | tee "$OUT/k_grouped_bench.log" | tail -12 || status=1
[ -n "${WITH_BF16:-}" ] && timeout 200 python3 scripts/bf16_grouped_bench.py --reps 20 2>&1 | tee "$OUT/bf16_grouped_bench.log" | tail -14 || status=1
exit $status
