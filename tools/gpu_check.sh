#!/usr/bin/env bash
# One device call on a lent H100 / H200: GPU tests, harness suites, compute-sanitizer; a summary table printed last.
#
# Usage (from the repository root, on the card):  bash tools/gpu_check.sh [PART ...]
#   PART: tests     pytest -m gpu, its files sharded over parallel processes (compile-bound: JIT on the host's cores),
#                   then the tests marked gpu_memory (much of the card's memory) in one process alone
#         bench     python -m finegemm bench over $SUITES with DeepGEMM live when importable
#         sanitize  compute-sanitizer: memcheck over every kernel family at awkward sizes (tools/sanitize_cases.py),
#                   racecheck and synccheck over one case of each warp-specialized family (racecheck also over
#                   tools/ws_control.py: Triton's warp-specialize hand-off alone, no finegemm code; hazards whose
#                   accesses all sit on Triton's generated code, tools/racecheck_sites.py, do not fail the part)
#   (default: $PARTS, else "tests bench"). Every part runs once per Triton in $TRITONS.
# Before the call, here:  git rev-parse --short HEAD > .commit   (the card's copy has no .git; carry ".commit")
#   DeepGEMM live:  mkdir -p .anchor && cp <shared>/anchors/deepgemm/* .anchor/   (carry ".anchor"; a fresh build's
#                   _C*.so comes back in $OUT: copy it into .anchor/ and later calls skip the 2-3 minute build)
#   Triton 3.9:     mkdir -p .t39 && cp <shared>/toolchains/triton-3.9.0-slim.tar.xz .t39/   (carry ".t39")
#
# Environment (all optional):
#   TRITONS      "image" (the card's Triton), "3.9" (.t39's slim 3.9), or "image 3.9": both, one after the other on
#                the same card, then an A/B of the finegemm-sm90 times (tools/bench_compare.py)      [image]
#   SUITES       harness suites, comma-separated (dense, weight-grad, bf16, grouped, k-grouped, mqa, paged-mqa,
#                hc-prenorm, all)
#                                                                                                      [dense]
#   PEERS        harness peers                                                  [finegemm-sm90,deepgemm,cublas]
#   BENCH_ARGS   more harness options                                                          [--kernel-time]
#   DEEPGEMM     auto: make DeepGEMM importable when .anchor/setup_on_device.sh exists; 0: never     [auto]
#   TEST_SHARDS  ';'-separated groups of test files, one pytest process each; else the files that hold gpu tests,
#                dealt over JOBS processes by their number of tests [JOBS=4];  TEST_ARGS: more pytest arguments
#   SANITIZE_TOOLS  [memcheck racecheck synccheck];  SANITIZE_BACKEND  auto (dispatch's choice, as a user's call;
#                each case's log line names the backend that ran it), sm90 or portable  [auto]
#   T_TESTS T_BENCH T_SANITIZE T_DEEPGEMM  seconds each part may run (each under `timeout`)  [300 240 300 200]
#   BUDGET_S     the whole script's seconds: a part that would end past it gets only what is left, or is skipped
#                under 30 s, so the summary is printed inside the device's 10-minute limit                [570]
# $OUT gets at most 8 files (the device returns no more): summary.txt, logs.tar.gz (every log), bench-<triton>.json
# per Triton, bench-ab.txt with two Tritons, and a freshly built DeepGEMM _C*.so.
# Exit status: 0 when every part that ran passed, 1 otherwise, 2 for an unknown part or Triton.
set -uo pipefail

OUT="${OUT:-/tmp/finegemm-out}"
PARTS_LIST="${*:-${PARTS:-tests bench}}"
TRITONS="${TRITONS:-image}"
SUITES="${SUITES:-dense}"
PEERS="${PEERS:-finegemm-sm90,deepgemm,cublas}"
BENCH_ARGS="${BENCH_ARGS---kernel-time}"
JOBS="${JOBS:-4}"
SANITIZE_TOOLS="${SANITIZE_TOOLS:-memcheck racecheck synccheck}"
SANITIZE_BACKEND="${SANITIZE_BACKEND:-auto}"
BUDGET_S="${BUDGET_S:-570}"
SANITIZER="${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}"
PTXAS="${PTXAS:-/usr/local/cuda/bin/ptxas}"
T39="${T39_DIR:-/tmp/t39}"  # where .t39's archive is unpacked (once per machine)

for part in $PARTS_LIST; do
    case "$part" in tests|bench|sanitize) ;; *) echo "gpu_check: no part '$part' (tests, bench, sanitize)" >&2; exit 2;; esac
done
for tag in $TRITONS; do
    case "$tag" in image|3.9) ;; *) echo "gpu_check: no Triton '$tag' (image, 3.9)" >&2; exit 2;; esac
done

mkdir -p "$OUT"
WORK="$(mktemp -d /tmp/gpu_check.XXXXXX)"
ROWS="$WORK/rows.txt"
START=$SECONDS
status=0
: > "$ROWS"
export PYTHONUNBUFFERED=1
COMMIT="$(cat .commit 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)"
BASE_PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

row() {  # part triton rc seconds result...
    local part="$1" tag="$2" rc="$3" secs="$4"; shift 4
    printf '%-20s %-6s %-4s %5s  %s\n' "$part" "$tag" "$rc" "$secs" "$*" >> "$ROWS"
    [ "$rc" = 0 ] || [ "$rc" = - ] || status=1
}

limit_for() {  # a part's limit, cut to what the budget leaves; prints 0 when under 30 s are left
    local want="$1" left=$((BUDGET_S - (SECONDS - START)))
    if [ "$left" -lt 30 ]; then echo 0; elif [ "$want" -gt "$left" ]; then echo "$left"; else echo "$want"; fi
}

finish() {
    {
        echo "finegemm gpu_check at $COMMIT; $(head -2 "$WORK/gpu.txt" 2>/dev/null | tail -1)"
        printf '%-20s %-6s %-4s %5s  %s\n' part triton rc secs result
        cat "$ROWS"
    } > "$OUT/summary.txt"
    tar czf "$OUT/logs.tar.gz" -C "$WORK" . 2>/dev/null
    echo
    cat "$OUT/summary.txt"
}
trap finish EXIT
trap 'exit 143' TERM INT

# ------------------------------------------------------------------------------------------------ environment
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,driver_version --format=csv > "$WORK/gpu.txt" 2>&1

use_triton() {  # set PYTHONPATH and ptxas for Triton $1; returns 1 when it is not here
    if [ "$1" = 3.9 ]; then
        if [ ! -d "$T39/triton" ]; then
            [ -f .t39/triton-3.9.0-slim.tar.xz ] || return 1
            mkdir -p "$T39" && tar xJf .t39/triton-3.9.0-slim.tar.xz -C "$T39" || return 1
        fi
        # Triton 3.9 compiles sm_90 with the tool it calls ptxas-blackwell: set both paths
        export PYTHONPATH="$T39:$BASE_PYTHONPATH" TRITON_PTXAS_PATH="$PTXAS" TRITON_PTXAS_BLACKWELL_PATH="$PTXAS"
    else
        export PYTHONPATH="$BASE_PYTHONPATH"
        unset TRITON_PTXAS_BLACKWELL_PATH
        if [ -n "${IMAGE_TRITON_PTXAS_PATH+x}" ]; then export TRITON_PTXAS_PATH="$IMAGE_TRITON_PTXAS_PATH"
        else unset TRITON_PTXAS_PATH; fi
    fi
    python3 -m finegemm info > "$WORK/info-$1.txt" 2>&1
    python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" \
        >> "$WORK/info-$1.txt" 2>&1
}
[ -n "${TRITON_PTXAS_PATH+x}" ] && IMAGE_TRITON_PTXAS_PATH="$TRITON_PTXAS_PATH"

deepgemm_live=no
if [[ " $PARTS_LIST " == *" bench "* ]] && [ "${DEEPGEMM:-auto}" != 0 ] && [ -f .anchor/setup_on_device.sh ]; then
    t=$(limit_for "${T_DEEPGEMM:-200}")
    t0=$SECONDS
    # the build (2-3 minutes, once per machine) under its limit in a child shell, then the cheap setup here
    if [ "$t" -gt 0 ] && timeout "$t" bash -c "source .anchor/setup_on_device.sh" > "$WORK/deepgemm.log" 2>&1 \
            && source .anchor/setup_on_device.sh >> "$WORK/deepgemm.log" 2>&1; then
        deepgemm_live=yes
        BASE_PYTHONPATH="$PYTHONPATH"  # DeepGEMM first, then the tree (the setup script's order)
        row deepgemm - 0 $((SECONDS - t0)) "$(tail -1 "$WORK/deepgemm.log")"
    else
        row deepgemm - - $((SECONDS - t0)) "not importable (log in logs.tar.gz); bench runs without it"
    fi
fi

# ------------------------------------------------------------------------------------------------------ parts
pytest_counts() {  # "N passed, N failed, ..." summed over the pytest logs given
    cat "$@" 2>/dev/null | grep -Eo '[0-9]+ (passed|failed|skipped|deselected|errors?|xfailed|xpassed)' \
        | awk '{n[$2]+=$1} END {s=""; for (k in n) s=s (s?", ":"") n[k] " " k; print (s?s:"no pytest summary")}'
}

part_tests() {
    local tag="$1" t t0=$SECONDS shards=() files=() pids=() rc=0 i
    t=$(limit_for "${T_TESTS:-300}")
    [ "$t" -gt 0 ] || { row tests "$tag" - 0 "skipped: budget spent"; return; }
    if [ -n "${TEST_SHARDS:-}" ]; then
        IFS=';' read -ra shards <<< "$TEST_SHARDS"
    else
        # the files that hold gpu tests, dealt largest first to the shard with the fewest tests so far (by
        # pytest's count): dealt round-robin, the two largest files shared a shard that outran the part's time
        local line
        mapfile -t files < <(grep -l "mark.gpu" tests/test_*.py | sort)
        while read -r line; do
            shards[${line%% *}]+="${line#* } "
        done < <(python3 -m pytest --collect-only -q -p no:cacheprovider -m "gpu and not gpu_memory" "${files[@]}" \
                     2>/dev/null | grep -o '^tests/[^:]*' | sort | uniq -c | sort -rn \
                 | awk -v jobs="$JOBS" '{ best = 0; for (i = 1; i < jobs; i++) if (load[i] < load[best]) best = i;
                                          load[best] += $1; print best, $2 }')
        [ "${#shards[@]}" -gt 0 ] || shards=("${files[*]}")  # collection failed: one shard, pytest says why
    fi
    local heavy shard_t=$t
    # shellcheck disable=SC2086
    heavy=$(grep -l "mark.gpu_memory" ${shards[*]} ${files[*]:-} 2>/dev/null | sort -u | tr '\n' ' ')
    [ -n "$heavy" ] && shard_t=$((t - t / 4))  # a quarter of the part's time kept for them
    for i in "${!shards[@]}"; do
        # shellcheck disable=SC2086
        timeout "$shard_t" python3 -m pytest -m "gpu and not gpu_memory" -q -p no:cacheprovider ${shards[$i]} \
            ${TEST_ARGS:-} > "$WORK/pytest-$tag-$i.log" 2>&1 &
        pids+=($!)
    done
    for i in "${!pids[@]}"; do
        wait "${pids[$i]}" || rc=1
        echo "== tests [$tag] shard $i: ${shards[$i]}"
        tail -3 "$WORK/pytest-$tag-$i.log"
    done
    # the tests that need much of the card's memory: alone, once the shards are done (beside them they ran out)
    if [ -n "$heavy" ]; then
        t=$(limit_for $((${T_TESTS:-300} - (SECONDS - t0))))
        if [ "$t" -gt 0 ]; then
            # shellcheck disable=SC2086
            timeout "$t" python3 -m pytest -m "gpu and gpu_memory" -q -p no:cacheprovider $heavy ${TEST_ARGS:-} \
                > "$WORK/pytest-$tag-memory.log" 2>&1 || rc=1
            echo "== tests [$tag] alone (gpu_memory): $heavy"
            tail -3 "$WORK/pytest-$tag-memory.log"
        else
            echo "gpu_memory tests not run: budget spent" > "$WORK/pytest-$tag-memory.log"; rc=1
        fi
    fi
    row tests "$tag" "$rc" $((SECONDS - t0)) "$(pytest_counts "$WORK"/pytest-"$tag"-*.log)"
}

part_bench() {
    local tag="$1" t t0=$SECONDS rc json="$OUT/bench-$tag.json"
    t=$(limit_for "${T_BENCH:-240}")
    [ "$t" -gt 0 ] || { row bench "$tag" - 0 "skipped: budget spent"; return; }
    # shellcheck disable=SC2086
    timeout "$t" python3 -m finegemm bench --suite "$SUITES" --peers "$PEERS" --plain --no-progress \
        --commit "$COMMIT" --json "$json" $BENCH_ARGS > "$WORK/bench-$tag.log" 2>&1
    rc=$?
    tail -30 "$WORK/bench-$tag.log"
    row bench "$tag" "$rc" $((SECONDS - t0)) "$SUITES (deepgemm: $deepgemm_live) -> $(basename "$json")"
}

part_sanitize() {
    local tag="$1" tool t t0 rc errors cases
    for tool in $SANITIZE_TOOLS; do
        t0=$SECONDS
        t=$(limit_for "${T_SANITIZE:-300}")
        [ "$t" -gt 0 ] || { row "sanitize:$tool" "$tag" - 0 "skipped: budget spent"; continue; }
        local which=(--race-set) api=()
        # memcheck: kernels only. Triton 3.9's loadBinary first asks the driver for
        # CU_FUNC_ATTRIBUTE_SHARED_MEMORY_MODE, which Hopper refuses (CUDA_ERROR_INVALID_VALUE), and then takes its
        # legacy path by design; the tool would count that host-side probe once per kernel load.
        [ "$tool" = memcheck ] && which=() && api=(--report-api-errors no)
        # each allocation its own cudaMalloc, so an access past a tensor's end is past an allocation's end
        # racecheck prints every hazard: racecheck_sites below must see each one's sites
        local limit=20
        [ "$tool" = racecheck ] && limit=100000
        PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout "$t" "$SANITIZER" --tool "$tool" "${api[@]}" --print-limit "$limit" \
            --error-exitcode 3 python3 tools/sanitize_cases.py --backend "$SANITIZE_BACKEND" "${which[@]}" \
            > "$WORK/sanitize-$tool-$tag.log" 2>&1
        rc=$?
        # racecheck ends with its own summary ("RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)")
        errors=$(grep -Eo '(ERROR SUMMARY: [0-9]+ errors?|RACECHECK SUMMARY: .*)' "$WORK/sanitize-$tool-$tag.log" \
            | tail -1 | cut -d' ' -f3-)
        cases=$(grep -Eo '[0-9]+/[0-9]+ passed' "$WORK/sanitize-$tool-$tag.log" | tail -1)
        tail -4 "$WORK/sanitize-$tool-$tag.log"
        local control="" sites
        if [ "$tool" = racecheck ]; then
            if [ "$rc" = 3 ]; then
                # hazards whose accesses all sit on kernels' def lines are in Triton's generated warp-specialize
                # hand-off, not in a finegemm buffer access (tools/racecheck_sites.py says why); any other fails
                sites=$(python3 tools/racecheck_sites.py "$WORK/sanitize-$tool-$tag.log" | tail -1)
                [[ $sites == *"all on Triton's generated code"* ]] && ! grep -q " FAIL" "$WORK/sanitize-$tool-$tag.log" \
                    && grep -Eq 'sanitize_cases: ([0-9]+)/\1 passed' "$WORK/sanitize-$tool-$tag.log" && rc=0
                errors="$errors; ${sites#racecheck_sites: }"
            fi
            # Triton's own warp-specialize hand-off, no finegemm code: what racecheck reports for it alone
            timeout 60 "$SANITIZER" --tool racecheck --print-limit 20 python3 tools/ws_control.py \
                > "$WORK/sanitize-racecheck-control-$tag.log" 2>&1
            control="; ws_control: $(grep -Eo 'RACECHECK SUMMARY: .*|ERROR SUMMARY: .*' \
                "$WORK/sanitize-racecheck-control-$tag.log" | head -1)"
        fi
        row "sanitize:$tool" "$tag" "$rc" $((SECONDS - t0)) \
            "${errors:-no error summary}; cases ${cases:-unfinished}$control"
    done
}

for tag in $TRITONS; do
    if ! use_triton "$tag"; then
        row triton "$tag" 1 0 "Triton $tag not here (3.9: carry .t39/triton-3.9.0-slim.tar.xz)"
        continue
    fi
    row triton "$tag" - 0 "$(tail -1 "$WORK/info-$tag.txt")"
    for part in $PARTS_LIST; do
        echo "=== $part [$tag] at $((SECONDS - START)) s"
        "part_$part" "$tag"
    done
done

set -- $TRITONS
if [ $# -eq 2 ] && [ -f "$OUT/bench-$1.json" ] && [ -f "$OUT/bench-$2.json" ]; then
    PYTHONPATH="$BASE_PYTHONPATH" python3 tools/bench_compare.py "$OUT/bench-$1.json" "$OUT/bench-$2.json" \
        > "$OUT/bench-ab.txt" 2>&1
    row "bench A/B" "$1/$2" 0 0 "$(tail -1 "$OUT/bench-ab.txt")"
fi
exit $status
