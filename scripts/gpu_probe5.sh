#!/usr/bin/env bash
# One H200 call: the weight-gradient tile probe, then the MQA harness suite. Logs in $OUT/probe5.tgz.
set -uo pipefail
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/finegemm-out}"
LOGS="$(mktemp -d)"
pack() { tar -czf "$OUT/probe5.tgz" -C "$LOGS" .; }
OUT="$LOGS" timeout 200 python3 scripts/wgrad_tile_probe.py 2>&1 | tee "$LOGS/wgrad_probe.log" | cut -c1-200; pack
timeout 150 python3 -m finegemm.bench --plain --no-progress --suite mqa --peers finegemm-sm90 \
    --commit "$(cat .commit)" --json "$LOGS/bench-mqa.json" > "$LOGS/bench-mqa.log" 2>&1; tail -14 "$LOGS/bench-mqa.log"; pack
