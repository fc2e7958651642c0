#!/usr/bin/env bash
# One H200 call: the C-epilogue probe (C by TMA vs global loads vs no C), then the k-grouped bench with
# runtime K by default, then the GPU tests touched since f591c04 (k-grouped, MQA through the API at
# 16/128 heads, C by TMA). Logs and JSON in $OUT/probe3.tgz.
set -uo pipefail
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/finegemm-out}"
LOGS="$(mktemp -d)"
pack() { tar -czf "$OUT/probe3.tgz" -C "$LOGS" .; }
OUT="$LOGS" timeout 170 python3 scripts/c_epilogue_probe.py 2>&1 | tee "$LOGS/c_probe.log" | cut -c1-300; pack
timeout 150 python3 scripts/k_grouped_bench.py --out "$LOGS" 2>&1 | tee "$LOGS/k_grouped_bench.log" | cut -c1-150; pack
timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_sm90_k_grouped_gpu.py \
    "tests/test_mqa.py::test_gpu_mqa_logits_realistic" 2>&1 | tee "$LOGS/pytest.log" | tail -6; pack
