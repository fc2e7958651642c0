#!/usr/bin/env bash
# Nsight Compute profile of the sm90 kernels with an open gap (scripts/ncu_targets.py) on the H200:
# the full section set, clocks left alone, then the details page and the per-instruction SASS page as CSV.
# Usage: bash scripts/ncu_profile.sh [target ...]; writes $OUT/ncu.tgz. NCU_SCRIPT replaces the launching command
# (its arguments are still the targets), NCU_TIMEOUT the profiler's limit in seconds.
set -uo pipefail
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/finegemm-out}"
LOGS="$(mktemp -d)"
ncu --version | tail -1 > "$LOGS/ncu-version.txt" 2>&1
timeout "${NCU_TIMEOUT:-400}" ncu --clock-control none --set full --import-source no -f -o "$LOGS/prof" \
    -k regex:"${NCU_KERNELS:-fp8_gemm_kernel|mqa_logits_kernel}" ${NCU_SCRIPT:-python3 scripts/ncu_targets.py} "$@" > "$LOGS/ncu-run.log" 2>&1
echo "ncu rc $?" >> "$LOGS/ncu-run.log"
tail -5 "$LOGS/ncu-run.log"
ncu --import "$LOGS/prof.ncu-rep" --page details --csv > "$LOGS/details.csv" 2>&1
ncu --import "$LOGS/prof.ncu-rep" --page source --csv --print-source sass > "$LOGS/source.csv" 2>&1
# every collected metric (tensor-pipe activity and per-reason stall cycles are not on the details page)
ncu --import "$LOGS/prof.ncu-rep" --page raw --csv > "$LOGS/raw.csv" 2>&1
ls -la "$LOGS"
tar -czf "$OUT/ncu.tgz" -C "$LOGS" .
