#!/usr/bin/env bash
# A/B of one FINEGEMM_* switch through the harness, in separate processes, alternating the values so that
# drift during the call hits both alike. Usage (on the H200):
#   VAR=FINEGEMM_PDL VALUES="0 1" ROUNDS=2 SUITE=dense SHAPES='64,2112,7168;...' bash scripts/env_ab.sh
# Writes $OUT/ab-<suite>-<value>-<round>.json (harness JSON) and prints each run's table.
set -uo pipefail
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/finegemm-out}"
mkdir -p "$OUT"
commit="$(cat .commit 2>/dev/null || echo unknown)"
for round in $(seq 1 "${ROUNDS:-2}"); do
    for value in ${VALUES:-0 1}; do
        shape_args=()
        [ -n "${SHAPES:-}" ] && shape_args=(--shapes "$SHAPES")
        env "${VAR:?VAR names the switch}=$value" timeout "${RUN_TIMEOUT:-200}" python3 -m finegemm.bench --plain \
            --no-progress --suite "${SUITE:-dense}" "${shape_args[@]}" --peers "${PEERS:-finegemm-sm90}" \
            --commit "$commit" --json "$OUT/ab-${SUITE:-dense}-$value-$round.json" 2>&1 | tail -n 4
    done
done
