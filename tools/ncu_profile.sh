#!/usr/bin/env bash
# Nsight Compute profile of finegemm kernels on a lent H100 / H200, launched by the bench harness: the full section
# set, clocks left alone, then the details page, the per-instruction SASS page and the raw metrics as CSV
# (tools/ncu_summary.py reads raw.csv).
# Usage: bash tools/ncu_profile.sh SUITE CASE_PATTERNS   e.g.  bash tools/ncu_profile.sh dense '4096x2112x7168'
#   (CASE_PATTERNS as the harness's --cases takes them). Writes $OUT/ncu.tgz.
# Env: NCU_KERNELS (kernel-name regex) [gemm_kernel|mqa_logits_kernel],
#      NCU_COUNT (launches profiled) [3], NCU_TIMEOUT (seconds) [400].
set -uo pipefail
[ $# -eq 2 ] || { echo "usage: bash tools/ncu_profile.sh SUITE CASE_PATTERNS" >&2; exit 2; }
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/finegemm-out}"
LOGS="$(mktemp -d)"
mkdir -p "$OUT"
ncu --version | tail -1 > "$LOGS/ncu-version.txt" 2>&1
# one warm-up (the compile) and a few timed calls of finegemm's sm90 path, no L2 flush kernel in between
timeout "${NCU_TIMEOUT:-400}" ncu --clock-control none --set full --import-source no -f -o "$LOGS/prof" \
    -k regex:"${NCU_KERNELS:-gemm_kernel|mqa_logits_kernel}" -c "${NCU_COUNT:-3}" \
    python3 -m finegemm bench --suite "$1" --cases "$2" --peers finegemm-sm90 --warmup 1 --repeats 2 --no-flush \
    --plain --no-progress > "$LOGS/ncu-run.log" 2>&1
echo "ncu rc $?" >> "$LOGS/ncu-run.log"
tail -5 "$LOGS/ncu-run.log"
ncu --import "$LOGS/prof.ncu-rep" --page details --csv > "$LOGS/details.csv" 2>&1
ncu --import "$LOGS/prof.ncu-rep" --page source --csv --print-source sass > "$LOGS/source.csv" 2>&1
# every collected metric (tensor-pipe activity and per-reason stall cycles are not on the details page)
ncu --import "$LOGS/prof.ncu-rep" --page raw --csv > "$LOGS/raw.csv" 2>&1
ls -la "$LOGS"
tar -czf "$OUT/ncu.tgz" -C "$LOGS" .
