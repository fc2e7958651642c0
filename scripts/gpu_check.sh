#!/usr/bin/env bash
# One device call: GPU tests and the benchmark suites, logs and JSON under $OUT.
# Usage (on the H200): bash scripts/gpu_check.sh [pytest-args...]
# Here first: git rev-parse --short HEAD > .commit (and carry ".commit").
# Env: SUITES (default "dense"), SKIP_TESTS=1, SKIP_BENCH=1, BENCH_ARGS (extra harness args),
#      TEST_SHARDS ("files;files;..." run as parallel pytest processes), SHARD_TIMEOUT (seconds per shard, 0: none).
set -uo pipefail
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/finegemm-out}"
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
python3 -m finegemm info 2>&1 | tee "$OUT/info.txt"
# The device's copy of the tree has no .git: the caller writes the commit to .commit and carries it.
COMMIT_ARGS=""
[ -f .commit ] && COMMIT_ARGS="--commit $(cat .commit)"
status=0
if [ "${SKIP_TESTS:-0}" != 1 ]; then
    if [ -n "${TEST_SHARDS:-}" ]; then
        # ';'-separated groups of test files, one pytest process each, side by side: the GPU tests are
        # compile-bound (JIT on the host's cores), not timing-sensitive; the benchmark runs after them.
        IFS=';' read -ra shards <<< "$TEST_SHARDS"
        pids=()
        for i in "${!shards[@]}"; do
            # shellcheck disable=SC2086
            timeout "${SHARD_TIMEOUT:-0}" python3 -m pytest -m gpu -q -p no:cacheprovider ${shards[$i]} "$@" \
                > "$OUT/pytest-gpu-$i.log" 2>&1 &
            pids+=($!)
        done
        for i in "${!pids[@]}"; do
            wait "${pids[$i]}" || status=1
            echo "== shard $i: ${shards[$i]}"; tail -4 "$OUT/pytest-gpu-$i.log"
        done
    else
        python3 -m pytest -m gpu -q -x -p no:cacheprovider "$@" 2>&1 | tee "$OUT/pytest-gpu.log" | tail -25
        status=${PIPESTATUS[0]}
    fi
fi
if [ "${SKIP_BENCH:-0}" != 1 ]; then
    for suite in ${SUITES:-dense}; do
        python3 -m finegemm bench --suite "$suite" --json "$OUT/bench-$suite.json" --plot "$OUT/bench-$suite.png" \
            $COMMIT_ARGS ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench-$suite.log" | tail -40
        [ "${PIPESTATUS[0]}" = 0 ] || status=1
    done
fi
exit $status
