#!/usr/bin/env bash
# The 11th session's GPU calls (2026-12-04). Logs and JSON under $OUT (the device tool returns them).
#   bash scripts/gpu_session11.sh tests   the k-grouped suite (with the graph-capture workspace test), then the
#                                         dense and m-grouped suites at the session's tree
#   bash scripts/gpu_session11.sh wgrad   scripts/wgrad_tile_probe.py (split-tail candidates included)
#   bash scripts/gpu_session11.sh kernel  the kernel-time timer's GPU test, then the harness with --kernel-time
#                                         (dense, weight-grad, bf16, mqa) and the k-grouped bench with it
#   bash scripts/gpu_session11.sh flush   dense (kernel time) and grouped suites with the read flush (clean L2
#                                         lines), and the grouped suite with the zero flush on the same machine
# Here first: echo <tag> > .commit (and carry ".commit").
set -uo pipefail
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/finegemm-out}"
mkdir -p "$OUT"
status=0
pytest_gpu() {  # seconds, log name, then test paths / options
    local limit="$1" log="$2"; shift 2
    timeout "$limit" python3 -m pytest -m gpu -q -p no:cacheprovider "$@" 2>&1 | tee "$OUT/$log" | tail -4
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
}
case "${1:-tests}" in
tests)
    pytest_gpu 120 pytest-k-grouped.log tests/test_sm90_k_grouped_gpu.py
    pytest_gpu 420 pytest-dense-grouped.log tests/test_sm90_gpu.py tests/test_sm90_grouped_gpu.py
    ;;
wgrad)
    timeout 560 python3 scripts/wgrad_tile_probe.py 2>&1 | tee "$OUT/wgrad_tile_probe.log" | cut -c1-160
    ;;
kernel)
    pytest_gpu 120 pytest-bench-gpu.log tests/test_bench_gpu.py
    commit="$(cat .commit 2>/dev/null || echo unknown)"
    timeout 260 python3 -m finegemm.bench --plain --no-progress --kernel-time --suite dense,weight-grad,bf16 \
        --peers finegemm-sm90,cublas-block,cublas-bf16 --commit "$commit" --json "$OUT/bench-kernel.json" \
        > "$OUT/bench-kernel.log" 2>&1 || status=1
    tail -4 "$OUT/bench-kernel.log"
    timeout 150 python3 -m finegemm.bench --plain --no-progress --kernel-time --suite mqa --peers finegemm-sm90 \
        --commit "$commit" --json "$OUT/bench-mqa-kernel.json" > "$OUT/bench-mqa-kernel.log" 2>&1 || status=1
    tail -3 "$OUT/bench-mqa-kernel.log"
    timeout 150 python3 scripts/k_grouped_bench.py --out "$OUT" --kernel-time --sm90-only 2>&1 \
        | tee "$OUT/k_grouped_bench.log" | cut -c1-160
    ;;
flush)
    commit="$(cat .commit 2>/dev/null || echo unknown)"
    timeout 200 python3 -m finegemm.bench --plain --no-progress --kernel-time --flush-mode read --suite dense \
        --peers finegemm-sm90,cublas-block --commit "$commit" --json "$OUT/bench-dense-read.json" \
        > "$OUT/bench-dense-read.log" 2>&1 || status=1
    tail -3 "$OUT/bench-dense-read.log"
    for mode in read zero; do
        timeout 150 python3 -m finegemm.bench --plain --no-progress --kernel-time --flush-mode $mode --suite grouped \
            --peers finegemm-sm90 --commit "$commit" --json "$OUT/bench-grouped-$mode.json" \
            > "$OUT/bench-grouped-$mode.log" 2>&1 || status=1
        tail -2 "$OUT/bench-grouped-$mode.log"
    done
    ;;
esac
exit $status
