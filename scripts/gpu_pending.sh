#!/usr/bin/env bash
# What the next GPU session should rerun first (state at the end of the 7th session of 2026-12-03,
# benchmarks/NOTES.md v9), in H200 calls of under 10 minutes each:
#   bash scripts/gpu_pending.sh 1   the MQA GPU tests (prefill, paged, the API), the prefill probe (tensor-core head
#                                   sum at every CTA shape) and the paged probe (harness timer, host time per call)
#   bash scripts/gpu_pending.sh 2   the dense / weight-gradient harness, the harness mqa suite, the GEMM GPU tests,
#                                   then the k-grouped bench
#   bash scripts/gpu_pending.sh 3   the MQA GPU tests (prefill, paged, the API, the harness), the harness mqa suite
#                                   (DeepGEMM's 14 prefill anchor cases) with the Gluon, Triton and torch peers, then
#                                   the prefill schedule / CTA-shape probe, the compact-form probe and the paged probe
#                                   (first thing after session 7: its last prefill config, 679fc1a, ran in no test)
#   bash scripts/gpu_pending.sh 4   (after the 9th session, 2026-12-04) the prepared a_regs tile's GPU test and its
#                                   v16 sweep, the v15 sweep (BLOCK_M 192, FP32 out + C), the grouped and MQA harness
#                                   suites at the tree with PDL and BLOCK_M 192 (neither ran on it), then the k-grouped
#                                   bench against DeepGEMM's own cases
#   bash scripts/gpu_pending.sh 5   the grouped and MQA GPU tests at that tree
#   bash scripts/gpu_pending.sh 6   (after the 10th session) the launcher (per-stream split-K), grouped, k-grouped
#                                   and BF16 GPU suites at its final tree
#   bash scripts/gpu_pending.sh 7   the dense GPU suite, then the dense / weight-grad / bf16 harness (README table)
#   bash scripts/gpu_pending.sh 8   (after the 11th and 12th sessions) first the GPU tests of what main holds untested
#                                   (torch.compile, the FP8 training layers, the one-pass casts; session 13: the
#                                   head-split GEMM, einsum, the unaligned-d fallback), then the harness
#                                   suites never run on a GPU: paged-mqa (DeepGEMM's paged anchors and short
#                                   contexts) and k-grouped (DeepGEMM's total K), with --kernel-time
#   (That order, 8, 9, 11, 12, 10, 13, 14, ran in sessions 13-14; session 16's 28, the multicast probe, 25 and 22 ran
#   in session 17; 31 and 30 ran on an H100 in session 18; 33-37, 30, 32 and 29 in session 19.) After session 19: 38
#   FIRST (any card: a relative A/B), 39, then 21. Session 20 had no GPU; its order: 43 (1-2 min), 44, 38, 39, 40, 41, 42, then 21. Session 21 had none either; its order: 47 (48 in a window of minutes), 46, 39, 42, then 21. Session 22 got an H100 for minutes at its end (NOTES v24: the scale-first tiles measured slower and removed, v19, the rate probe, D_REDUCE); its order: 47 (or 45 without 48's parts), 39 (now off / all against the default rule), 42, the kernel-time mqa / paged-mqa suites, then 21. Session 18's order, kept for reference: 33 (36 in a short window:
#   ptxas 13.0 against Triton's 12.8, the FFMA yield interleave DeepGEMM's build has and ours lacks; NOTES v20), 34
#   and 35 (the same on grouped and bf16, on paged-mqa and mqa; if 13.0 wins, also the GPU tests under it before FINEGEMM_PTXAS=auto becomes the
#   default: TRITON_PTXAS_PATH=/usr/local/cuda/bin/ptxas bash scripts/gpu_pending.sh 7), then 30 (the masked BF16 sweep after the walk fix, then the grouped harness suite: issue 6's masked targets against
#   DeepGEMM's anchors at the new 256-row rule, and the k-grouped suite in the nt form), then 32 (the per-wave
#   timeline at M = 4096), then 29 (the FP8 masked sweep, so far on an H100 only), then 21.
#   bash scripts/gpu_pending.sh 9   (after the 12th session; from branch wip/multicast-dense, whose scripts and tests it
#                                   runs) the multicast probe, the cluster / multicast GPU tests (under a timeout and
#                                   verbose: a deadlocked cluster hangs, the log names the test), then
#                                   scripts/multicast_tile_probe.py on the first 3 M = 4096 shapes
#   bash scripts/gpu_pending.sh 10  (after the 12th session) the FP8 training layer's speed: scripts/train_linear_bench.py
#                                   (fp8_linear forward / forward + backward vs a BF16 linear, the one-pass casts vs
#                                   the torch ones) on the 3 largest M = 4096 shapes
#   bash scripts/gpu_pending.sh 11  (after the 12th session) the sm90 nn / tn / tt route (dispatch.MN_MAJOR_VIA_TRANSPOSE)
#                                   GPU tests, and L2 prefetch of B on the shapes whose B streams from HBM:
#                                   scripts/b_prefetch_probe.py (FP8 dense M = 64 / 128, masked decode, BF16 M = 1 /
#                                   128; distances 0-16)
#   bash scripts/gpu_pending.sh 15  (after session 14, first) the batched byte transpose's GPU tests (training layers,
#                                   k-grouped, the nn/tn/tt route) and the training step's speed and profile
#   bash scripts/gpu_pending.sh 20  (after session 15, FIRST, on an H200) the paged GPU tests, then the paged probe with
#                                   L2-resident keys and from HBM, both forms: confirms or reverts ws_wanted (128 rows)
#   bash scripts/gpu_pending.sh 17  (then) the harness paged-mqa suite with each form, against DeepGEMM's anchors
#   bash scripts/gpu_pending.sh 21  (then) the ws form's ring depth (3-6) and ncu of both forms at 64 rows
#   bash scripts/gpu_pending.sh 22  (then) ncu of the masked 4 x 256 decode case against 1 x 1024 (issue 6)
#   bash scripts/gpu_pending.sh 24  (session 16) the paged GPU tests, then part 17 (the harness paged-mqa suite with
#                                   each form against DeepGEMM's anchors): decides ws_wanted on DeepGEMM's own cases
#   bash scripts/gpu_pending.sh 28  (session 16) 27 then 24 in one call (one H200 start for both)
#   bash scripts/gpu_pending.sh 27  (session 16) scripts/clock_probe.py: sustained SM clock, power and % of the clock's
#                                   peak of finegemm and cuBLAS at M = 4096 (work per clock vs clock; NOTES v18)
#   bash scripts/gpu_pending.sh 25  (session 16) scripts/tma_stream_probe.py: TMA's HBM read rate by box shape and ring
#                                   (PROBE_LAYOUTS=1: the 117 MB weight with a padded row stride and as [57344, 2048])
#   bash scripts/gpu_pending.sh 23  (session 16) A/B of a kernel change against the tree in ab_base/ (copy the base
#                                   commit's finegemm/ there first): harness dense and grouped suites, alternating
#   bash scripts/gpu_pending.sh 29  (session 17) the masked group walk fix: masked GPU tests, masked config sweeps
#   bash scripts/gpu_pending.sh 33  (session 18) ptxas 12.8 (Triton's) against the image's 13.0 (FFMA yield
#                                   interleave): dense suite x2, weight-grad suite, alternating processes
#   bash scripts/gpu_pending.sh 34  (session 18) the same A/B on the grouped and bf16 suites
#   bash scripts/gpu_pending.sh 35  (session 18) the same A/B on the paged-mqa and mqa suites (kernel time)
#   bash scripts/gpu_pending.sh 36  (session 18) the quick form of 33 (the six M = 4096 shapes once, ~2 min) for a
#                                   short device window, e.g. an H100 at the end of a session
#   bash scripts/gpu_pending.sh 38  (session 19, FIRST) the in-place weight-gradient accumulate by TMA reduce-add
#                                   (FINEGEMM_PROBE_D_REDUCE): GPU tests, then scripts/d_reduce_probe.py
#   bash scripts/gpu_pending.sh 39  (session 19, after 38) the harness weight-grad and k-grouped suites without and
#                                   with that switch, alternating, kernel time
#   bash scripts/gpu_pending.sh 40  (session 20) C staged by TMA in the BF16 GEMM (FINEGEMM_PROBE_BF16_C_TMA): its GPU
#                                   tests, then the BF16 GPU suites with both session-20 switches on
#   bash scripts/gpu_pending.sh 41  (session 20) BF16 tiles whose width is not a power of two
#                                   (FINEGEMM_PROBE_BF16_SPLIT_N): GPU tests, the tile sweep against cuBLAS
#   bash scripts/gpu_pending.sh 42  (session 20) the harness bf16 suite without / with both switches, alternating
#   bash scripts/gpu_pending.sh 43  (session 20) scripts/wgmma_rate_probe.py: WGMMA rate by tile shape without the
#                                   promotion, with and without TMA writes (the shared-memory-bound question)
#   bash scripts/gpu_pending.sh 44  (session 20) FP8 tiles of two column blocks (128x192, 64x96, ...): GPU tests, then
#                                   scripts/sm90_dev.py v18 against the heuristic's pick
#   bash scripts/gpu_pending.sh 45  (session 21) 43, the tests of 40 and 41, the bf16 suite off / on once: one start
#   bash scripts/gpu_pending.sh 52  (session 24, H200 first) the bf16 suite with cuBLAS at the v26 rules, the 8 / 13
#                                   stage A/B and v26's moved picks on the H200, then the paged forms (one call)
#   bash scripts/gpu_pending.sh 53  (session 24, any card) the m-grouped BF16 deep-ring probe: its GPU tests, then the
#                                   masked sweep without / with FINEGEMM_PROBE_BF16_GROUPED_DEEP=1 (one call)
#   bash scripts/gpu_pending.sh 54  (session 24, any card) the FP8 decode picks' repeat probe (20 runs each), then BF16
#                                   D staged in halves (FINEGEMM_PROBE_BF16_D_HALVES=1): its GPU tests, the harness
#                                   M = 4096 cases off / on (~6 minutes)
#   bash scripts/gpu_pending.sh 59  (session 25, any card) FP32 out at widths that are not powers of two
#   bash scripts/gpu_pending.sh 62  (session 25, any card) BF16 D in halves on 4-stage tiles (192x128, 64x256)
#   bash scripts/gpu_pending.sh 63  (session 25, any card) the 64x256 picks moved by the short-K halves rule
#   bash scripts/gpu_pending.sh 70  (session 28; ran at de04c26 on an H100) the cp.async ring copies, the default
#                                   since session 29 (NOTES v31); FINEGEMM_PROBE_RING_STS=0 is the TMA form. Run again
#                                   (any card, ~4 minutes) it times the fused split-K tiles' form since v31 (cp.async
#                                   copies, fenced releases), untimed so far
#   bash scripts/gpu_pending.sh 68  (session 26, any card) fp8_linear's weight gradient without a zero-filled C
#                                   (FINEGEMM_PROBE_WGRAD_NO_C=1): GPU tests, then the training step off / on
#   bash scripts/gpu_pending.sh 67  (session 26; H200 FIRST) 60 and 61 in one call, then bench.targets over them
#                                   against DeepGEMM's anchors: every issue target at the tree, per shape
#   bash scripts/gpu_pending.sh 66  (session 26; H200 first) weight-grad / k-grouped at the v28 rule's 128-row tiles
#                                   and at 256 (FINEGEMM_PROBE_WGRAD_128=0), alternating, kernel time
#   bash scripts/gpu_pending.sh 60  (session 25, any card; the H200 for targets) dense / weight-grad / bf16 suites
#   bash scripts/gpu_pending.sh 61  (session 25, any card; the H200 for targets) grouped / k-grouped / mqa / paged
#   bash scripts/gpu_pending.sh 58  (session 25, any card) the fixed cost of a decode call: dense / bf16 at M = 64 /
#                                   128 with K from 128 up, against cuBLAS (events and kernel time)
#   bash scripts/gpu_pending.sh 57  (session 25, any card) FP32 out at 192 rows against the tiles they replaced
#   bash scripts/gpu_pending.sh 56  (session 25, any card) D in halves by the rule: the BF16 GPU suite, FP32 out at
#                                   M = 512 / 4096 against 128x128 / 192x128, the harness bf16 suite with cuBLAS
#   bash scripts/gpu_pending.sh 55  (session 24, any card) BF16 ring depth at M = 4096 (caps 2 / 3), FP32-out tiles
#                                   the rules leave out (192x128, 128x256) with and without D in halves, mid-M
#                                   64-row tiles of widths that are not powers of two (~5 minutes)
#   bash scripts/gpu_pending.sh 51  (session 23, H200 first) the GEMV tests and probe, the bf16 suite with cuBLAS; 50 next
#   bash scripts/gpu_pending.sh 50  (session 23) the BF16 rules' untimed new picks, the paged-mqa suite by ws form / stages
#   bash scripts/gpu_pending.sh 49  (session 23) one start: BF16 switch tests + bf16 A/B off/on/off, then 39 once
#   bash scripts/gpu_pending.sh 48  (session 21) the shortest: sm90_dev v19, then the WGMMA rate probe
#   bash scripts/gpu_pending.sh 47  (session 21) the short form: BF16 switch tests + A/B, sm90_dev v19, the probe
#   bash scripts/gpu_pending.sh 46  (session 21) 44, then 38's tests under the switch: one start
#   bash scripts/gpu_pending.sh 37  (session 19) the per-wave timeline of the weight-gradient kernel at 256 rows
#   bash scripts/gpu_pending.sh 32  (session 18) scripts/trace_probe.py --waves: per-wave SM-clock timeline of the
#                                   256-row tiles at M = 4096 (wave in flight share, K-block period, promotions)
#   bash scripts/gpu_pending.sh 31  (session 18) scripts/warp_release_probe.py: the per-warp slot release against
#                                   main's kernel (M = 4096 and one small shape; ran on an H100 in session 18)
#   bash scripts/gpu_pending.sh 30  (session 17) the masked BF16 sweep, the grouped harness suite (events, DeepGEMM's
#                                   grouped anchors, the new 256-row masked rule), the k-grouped suite (nt form)
#   bash scripts/gpu_pending.sh 16  (session 15) the warp-specialized paged MQA kernel: GPU tests, paged probe
#   bash scripts/gpu_pending.sh 18  (session 15) the paged probe with L2-resident keys, then as stored
#   bash scripts/gpu_pending.sh 19  (session 15) the paged GPU tests, then the probe with L2-resident keys
#   bash scripts/gpu_pending.sh 12  (after the 12th session; from branch wip/k-grouped-one-launch) the k-grouped
#                                   one-launch form: its GPU test,
#                                   then k_grouped_bench.py --sm90-only --kernel-time without and with --one-launch
#   bash scripts/gpu_pending.sh 13  (after the 13th session) einsum / fp8_einsum against torch.einsum on MLA's per-head
#                                   projections: scripts/einsum_bench.py
#   bash scripts/gpu_pending.sh 14  the mqa and grouped harness suites with --kernel-time (split from 8, which
#                                   would not fit one 10-minute call with them)
# Logs and JSON in $OUT/pending<part>.tgz (the device tool returns only a few files).
# Here first: git rev-parse --short HEAD > .commit (and carry ".commit").
set -uo pipefail
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/finegemm-out}"
PART="${1:-1}"
LOGS="$(mktemp -d)"
status=0
pack() { tar -czf "$OUT/pending$PART.tgz" -C "$LOGS" .; }  # after every step: a cut-off run keeps what it has
commit="$(cat .commit 2>/dev/null || echo unknown)"
pytest_gpu() {  # log name, then test paths
    local log="$1"; shift
    timeout "${PYTEST_TIMEOUT:-300}" python3 -m pytest -m gpu -q -p no:cacheprovider "$@" 2>&1 | tee "$LOGS/$log" | tail -4
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
    pack
}
harness_run() {  # one harness run in its own process: output stem, suites, then KEY=VALUE settings for it; extra
    # harness arguments in the array harness_args; prints the stem and the suites' case lines (case, peer, us, TFLOPS)
    local stem="$1" suites="$2"; shift 2
    env "$@" timeout "${HARNESS_TIMEOUT:-200}" python3 -W ignore -m finegemm.bench --plain --no-progress --suite "$suites" \
        --peers "${HARNESS_PEERS:-finegemm-sm90}" --commit "$commit" "${harness_args[@]}" --json "$LOGS/$stem.json" \
        > "$LOGS/$stem.log" 2>&1 || status=1
    echo "$stem"; grep -E '^(contig|masked|kgrp|paged|mqa|[0-9]+x)' "$LOGS/$stem.log" | awk '{print $1, $2, $3, $4}' \
        | tr '\n' ' '; echo
}
harness_args=()
ring_scales_ab() {  # part 70: FINEGEMM_PROBE_RING_STS=$1 (stem $2): the race check that found v5's missing fence
    # (repeat_probe's 1d1d ring-scale cases and the weight-grad rules' picks, 6 runs each, with the switch), then the
    # harness weight-grad and k-grouped suites off / on, alternating processes, two rounds (kernel time)
    local value="$1" stem="$2"
    FINEGEMM_PROBE_RING_STS=$value PROBE_CASES="128 sfb,128 sfb fresh,128 sfb noC,128 sfb g1,256 se sfb,1d1d rule" \
        OUT="$LOGS" timeout 120 python3 -W ignore scripts/repeat_probe.py > "$LOGS/repeat-probe-$stem.log" 2>&1 || status=1
    FINEGEMM_PROBE_RING_STS=$value PROBE_SET=wgrad_rules OUT="$LOGS" \
        timeout 120 python3 -W ignore scripts/repeat_probe.py >> "$LOGS/repeat-probe-$stem.log" 2>&1 || status=1
    mv "$LOGS/repeat_probe.json" "$LOGS/repeat-probe-$stem.json" 2>/dev/null
    python3 -c 'import json, sys
for line in open(sys.argv[1]):
    if line.startswith("{"):
        r = json.loads(line); print(r["shape"], r["name"], "fresh" if r["fresh"] else "", "differ:", r["differing_runs"])
    elif line.startswith("ERR"):
        print(line.strip()[:200])' "$LOGS/repeat-probe-$stem.log"
    pack
    for round in 1 2; do
        for on in 0 "$value"; do
            harness_args=(--kernel-time)
            harness_run "$stem-$on-$round" weight-grad,k-grouped FINEGEMM_PROBE_RING_STS=$on
        done
        pack
    done
    harness_args=()
}
targets_dense_bf16() {  # parts 60 / 67: the dense, weight-grad and bf16 suites with their live peers, kernel time
    harness_args=(--kernel-time)
    HARNESS_PEERS=finegemm-sm90,cublas-block,cublas-tensor HARNESS_TIMEOUT=200 harness_run targets-dense-wgrad \
        dense,weight-grad
    pack
    HARNESS_PEERS=finegemm-sm90,cublas-bf16 HARNESS_TIMEOUT=200 harness_run targets-bf16 bf16
    pack
    harness_args=()
}
targets_grouped_mqa() {  # parts 61 / 67: grouped with the cuBLAS loop, then k-grouped, mqa, paged-mqa, kernel time
    harness_args=(--kernel-time)
    HARNESS_PEERS=finegemm-sm90,cublas-block HARNESS_TIMEOUT=200 harness_run targets-grouped grouped
    pack
    # cublas-block: the k-grouped loop of cuBLAS calls (issue 6's 8-group target); torch-mqa: the straightforward
    # torch form (issue 7's >= 10x target); each peer refuses the other suites' kinds
    HARNESS_PEERS=finegemm-sm90,cublas-block,torch-mqa HARNESS_TIMEOUT=360 harness_run targets-kgrouped-mqa \
        k-grouped,mqa,paged-mqa
    pack
    harness_args=()
}
bf16_bench() {  # scripts/sm90_bf16_bench.py into $LOGS/<stem>.json: stem, seconds, lines of its table to show, then
    # its arguments (after --commit)
    local stem="$1" secs="$2" lines="$3"; shift 3
    OUT="$LOGS" timeout "$secs" python3 -W ignore scripts/sm90_bf16_bench.py --commit "$commit" "$@" 2>&1 \
        | tail -"$lines"
    mv "$LOGS/sm90_bf16_bench.json" "$LOGS/$stem.json"
    pack
}
paged_form_run() {  # the harness paged-mqa suite (kernel time) with the paged module's switches set first: output
    # stem, WARP_SPECIALIZED (None / True / False), WS_STAGES (0: the rule), seconds
    timeout "$4" python3 -c "import sys, runpy
import finegemm.kernels.sm90.paged_mqa_logits as m
m.WARP_SPECIALIZED = $2
m.WS_STAGES = $3
sys.argv = ['finegemm.bench'] + sys.argv[1:]
runpy.run_module('finegemm.bench', run_name='__main__')" --plain --no-progress --kernel-time --suite paged-mqa \
        --peers finegemm-sm90 --commit "$commit-ws$2-st$3" --json "$LOGS/$1.json" > "$LOGS/$1.log" 2>&1 || status=1
}
paged_forms() {  # paged_form_run for each "WARP_SPECIALIZED WS_STAGES" argument (150 s each), printing each run's
    # case lines (case, us, kernel us) on one line
    local form
    for form in "$@"; do
        set -- $form
        paged_form_run "paged-ws$1-st$2" "$1" "$2" 150
        echo "paged ws=$1 stages=$2"; grep -E '^paged' "$LOGS/paged-ws$1-st$2.log" | awk '{print $2, $3, $4, $5, $6, $8, $9}' \
            | tr '\n' ';'; echo; pack
    done
}
bf16_switch_ab() {  # the harness bf16 cases session 20's switches touch, one process per argument (0 off, 1 on)
    local on round=0
    harness_args=(--cases "4096x*,*x*x*+c")
    for on in "$@"; do
        HARNESS_TIMEOUT=130 harness_run "bf16-session20-$on-$((++round))" bf16 FINEGEMM_PROBE_BF16_C_TMA=$on \
            FINEGEMM_PROBE_BF16_SPLIT_N=$on
        pack
    done
    harness_args=()
}
dev_sweep() {  # scripts/sm90_dev.py: sweep name, its timing deadline (s), the process's limit (s)
    OUT="$LOGS" V4_DEADLINE_S="$2" timeout "$3" python3 scripts/sm90_dev.py "$1" 2>&1 | tee "$LOGS/sm90_$1.log" \
        | grep -E "^V4|^ +(large|small)" | cut -c1-200
    pack
}
clock_probe() {  # scripts/clock_probe.py (parts 27 and 28), seconds
    OUT="$LOGS" timeout "$1" python3 scripts/clock_probe.py 2>&1 | tee "$LOGS/clock_probe.log" | cut -c1-200
    pack
}
bench_suites() {  # seconds per suite, then suites: the finegemm-sm90 harness with --kernel-time, JSON per suite
    local limit="$1"; shift
    for suite in "$@"; do
        timeout "$limit" python3 -m finegemm.bench --plain --no-progress --kernel-time --suite "$suite" \
            --peers finegemm-sm90 --commit "$commit" --json "$LOGS/bench-$suite.json" > "$LOGS/bench-$suite.log" 2>&1 \
            || status=1
        tail -3 "$LOGS/bench-$suite.log"; pack
    done
}
if [ "$PART" = 1 ]; then
    pytest_gpu pytest-mqa.log tests/test_sm90_mqa.py tests/test_sm90_paged_mqa.py tests/test_mqa.py
    OUT="$LOGS" timeout 200 python3 scripts/mqa_sm90_probe.py 2>&1 | tee "$LOGS/mqa_probe.log" | cut -c1-240
    pack
    OUT="$LOGS" timeout 150 python3 scripts/paged_mqa_sm90_probe.py 2>&1 | tee "$LOGS/paged_probe.log" | cut -c1-240
    pack
elif [ "$PART" = 3 ]; then
    pytest_gpu pytest-mqa.log tests/test_sm90_mqa.py tests/test_sm90_paged_mqa.py tests/test_mqa.py tests/test_bench.py
    timeout 240 python3 -m finegemm.bench --plain --no-progress --suite mqa --peers finegemm-sm90,finegemm-portable,torch \
        --commit "$commit" --json "$LOGS/bench-mqa.json" > "$LOGS/bench-mqa.log" 2>&1 || status=1
    tail -22 "$LOGS/bench-mqa.log"; pack
    for probe in mqa_schedule_probe mqa_compact_probe paged_mqa_sm90_probe; do
        OUT="$LOGS" timeout 120 python3 "scripts/$probe.py" 2>&1 | tee "$LOGS/$probe.log" | cut -c1-240
        pack
    done
elif [ "$PART" = 4 ]; then
    pytest_gpu pytest-a-regs.log tests/test_sm90_gpu.py -k a_regs
    OUT="$LOGS" V4_DEADLINE_S=120 timeout 200 python3 scripts/sm90_dev.py v16 v15 2>&1 | grep -E "^V4" | cut -c1-150
    pack
    timeout 200 python3 -m finegemm.bench --plain --no-progress --suite grouped,mqa --peers finegemm-sm90 \
        --commit "$commit" --json "$LOGS/bench-grouped-mqa.json" > "$LOGS/bench-grouped-mqa.log" 2>&1 || status=1
    tail -3 "$LOGS/bench-grouped-mqa.log"; pack
    timeout 150 python3 scripts/k_grouped_bench.py --out "$LOGS" 2>&1 | tee "$LOGS/k_grouped_bench.log" | cut -c1-110
    pack
elif [ "$PART" = 5 ]; then
    pytest_gpu pytest-grouped-mqa.log tests/test_sm90_grouped_gpu.py tests/test_sm90_bf16_grouped_gpu.py \
        tests/test_sm90_mqa.py tests/test_sm90_paged_mqa.py
elif [ "$PART" = 6 ]; then
    # after the 10th session: the per-stream split-K test first (never run on a GPU), then the grouped, k-grouped
    # and BF16 suites at the final tree (only subsets ran after the a_regs removal and the review refactors)
    PYTEST_TIMEOUT=500 pytest_gpu pytest-launcher-grouped-bf16.log tests/test_sm90_launcher_gpu.py \
        tests/test_sm90_k_grouped_gpu.py tests/test_sm90_grouped_gpu.py tests/test_sm90_bf16_gpu.py
elif [ "$PART" = 7 ]; then
    # the dense suite at the final tree, then the dense / weight-grad / bf16 harness for the README table
    PYTEST_TIMEOUT=330 pytest_gpu pytest-dense.log tests/test_sm90_gpu.py
    timeout 200 python3 -m finegemm.bench --plain --no-progress --suite dense,weight-grad,bf16 \
        --peers finegemm-sm90,cublas-block,cublas-bf16 --commit "$commit" --json "$LOGS/bench.json" \
        > "$LOGS/bench.log" 2>&1 || status=1
    tail -3 "$LOGS/bench.log"; pack
elif [ "$PART" = 8 ]; then
    # correctness of what main holds untested on a GPU first: torch.compile + inductor / reduce-overhead, the FP8
    # training layers and the one-pass casts they use on a GPU (session 12); then the harness suites (the multicast
    # probe moved to part 9)
    pytest_gpu pytest-compile.log tests/test_torch_compile.py tests/test_autograd.py tests/test_quant_kernel.py \
        tests/test_skip_head_mid.py tests/test_einsum.py tests/test_contiguous_alignment.py
    bench_suites 150 paged-mqa k-grouped  # mqa and grouped: part 14 (one call holds 10 minutes at most)
elif [ "$PART" = 9 ]; then
    timeout 60 python3 scripts/multicast_probe.py 2>&1 | tee "$LOGS/multicast_probe.log" | tail -4
    pack
    # -v: the log names the test that was running if one hangs (a deadlocked cluster) and the timeout kills it
    PYTEST_TIMEOUT=300 pytest_gpu pytest-multicast.log -v tests/test_sm90_gpu.py tests/test_sm90_grouped_gpu.py \
        -k "cluster or multicast" -x
    OUT="$LOGS" timeout 240 python3 scripts/multicast_tile_probe.py 3 2>&1 | tee "$LOGS/multicast_tile_probe.log" \
        | cut -c1-160
    pack
elif [ "$PART" = 10 ]; then
    OUT="$LOGS" timeout 400 python3 scripts/train_linear_bench.py 3 2>&1 | tee "$LOGS/train_linear_bench.log" \
        | cut -c1-240
    pack
elif [ "$PART" = 11 ]; then
    PYTEST_TIMEOUT=150 pytest_gpu pytest-prefetch.log tests/test_sm90_gpu.py tests/test_sm90_bf16_gpu.py \
        -k "prefetch or mn_major"
    OUT="$LOGS" timeout 420 python3 scripts/b_prefetch_probe.py 2>&1 | tee "$LOGS/b_prefetch_probe.log" | cut -c1-200
    pack
elif [ "$PART" = 12 ]; then
    PYTEST_TIMEOUT=200 pytest_gpu pytest-one-launch.log -v tests/test_sm90_k_grouped_gpu.py -k one_launch
    for flag in "" --one-launch ""; do
        timeout 150 python3 scripts/k_grouped_bench.py --out "$LOGS" --sm90-only --kernel-time $flag 2>&1 \
            | tee -a "$LOGS/k_grouped_one_launch_ab.log" | cut -c1-200
        pack
    done
elif [ "$PART" = 15 ]; then
    # session 14's GPU-unverified changes: the batched byte transpose (fp8_linear / fp8_grouped_linear backward,
    # the k-grouped tn path, the dense nn/tn/tt route), then the training step against its v16 numbers
    PYTEST_TIMEOUT=240 pytest_gpu pytest-transpose.log tests/test_autograd.py tests/test_sm90_k_grouped_gpu.py \
        tests/test_sm90_gpu.py -k "not test_sm90_gpu or mn_major"
    OUT="$LOGS" timeout 150 python3 scripts/train_linear_bench.py 3 2>&1 | tee "$LOGS/train_linear_bench.log" | cut -c1-240
    timeout 90 python3 scripts/train_step_profile.py > "$LOGS/train_step_profile.log" 2>&1
    pack
elif [ "$PART" = 16 ]; then
    # session 15: the warp-specialized paged MQA kernel: its GPU tests (both forms), then the paged probe
    # (the four-CTA form against the warp-specialized one and the Triton kernel on DeepGEMM's paged anchors)
    PYTEST_TIMEOUT=240 pytest_gpu pytest-paged.log tests/test_sm90_paged_mqa.py
    OUT="$LOGS" timeout 240 python3 scripts/paged_mqa_sm90_probe.py 2>&1 | tee "$LOGS/paged_probe.log" | cut -c1-300
    pack
elif [ "$PART" = 27 ]; then
    # the SM clock and power each M = 4096 GEMM runs at under sustained load (finegemm against the cuBLAS peers)
    clock_probe 200
elif [ "$PART" = 25 ]; then
    # how fast TMA streams B from HBM by box rows, adjacent boxes a slot, ring depth and grid (no WGMMA)
    OUT="$LOGS" timeout 200 python3 scripts/tma_stream_probe.py 2>&1 | tee "$LOGS/tma_stream_probe.log" | cut -c1-200
    pack
    mkdir -p "$LOGS/layouts"; PROBE_LAYOUTS=1 OUT="$LOGS/layouts" timeout 120 python3 scripts/tma_stream_probe.py 2>&1 | cut -c1-200
    pack
elif [ "$PART" = 23 ]; then
    # A/B of a kernel change: the tree before it copied to ab_base/ (untracked: it travels with the working tree)
    # against this tree, the harness dense then grouped suite (kernel time), trees alternating, two rounds
    for round in 1 2; do
        for tree in base new; do
            root="$PWD"; [ "$tree" = base ] && root="$PWD/ab_base"
            for suite in ${AB_SUITES:-dense grouped}; do
                # -P: `python3 -m` would put the working directory (the new tree) first on sys.path, and both
                # trees' runs would import it (session 16's early-release A/B did exactly that; NOTES v19)
                PYTHONPATH="$root" timeout "${AB_TIMEOUT:-120}" python3 -P -m finegemm.bench --plain --no-progress \
                    --kernel-time --suite "$suite" --peers finegemm-sm90 --commit "$commit-$tree" \
                    --json "$LOGS/ab-$suite-$tree-$round.json" > "$LOGS/ab-$suite-$tree-$round.log" 2>&1 || status=1
                echo "$suite $tree $round: $(tail -1 "$LOGS/ab-$suite-$tree-$round.log" | cut -c1-150)"; pack
            done
        done
    done
elif [ "$PART" = 29 ]; then
    # session 17 (NOTES v19): the masked kernels' group walk fixed (every group started at CTA 0): their GPU tests,
    # then the masked config sweep again (the rules were all swept under the bug)
    PYTEST_TIMEOUT=200 pytest_gpu pytest-masked.log tests/test_sm90_grouped_gpu.py tests/test_sm90_bf16_grouped_gpu.py \
        -k masked
    timeout 170 python3 scripts/grouped_sweep.py "$LOGS/masked-sweep-a.json" --commit "$commit" --budget-s 150 \
        --masked-shapes '4,256,4096,7168;2,512,4096,7168;4,256,7168,2048;2,512,7168,2048;1,1024,4096,7168' \
        --cfgs '64,128,1,1;128,128,1,0;128,128,1,1;256,128,1,0' > "$LOGS/masked-sweep-a.log" 2>&1 || status=1
    pack
    timeout 150 python3 scripts/grouped_sweep.py "$LOGS/masked-sweep-b.json" --commit "$commit" --budget-s 120 \
        --masked-shapes '16,64,7168,2048;16,64,4096,7168;32,64,7168,2048' --cfgs '64,64,1,1;64,128,1,1;64,32,1,1' \
        > "$LOGS/masked-sweep-b.log" 2>&1 || status=1
    pack
    python3 -c "import json, sys
for line in open(sys.argv[1]).read().splitlines() + open(sys.argv[2]).read().splitlines():
    if line.startswith('{'):
        r = json.loads(line)
        print(r['groups'], r['m_per_group'], r['N'], r['K'], f\"{r['block_m']}x{r['block_n']}\", 'pipe' * r['pipe_mma'],
              r['us'], 'H' * r['heuristic'], f\"{r['calc_diff']:.1e}\")" "$LOGS/masked-sweep-a.log" "$LOGS/masked-sweep-b.log"
elif [ "$PART" = 33 ] || [ "$PART" = 34 ] || [ "$PART" = 35 ] || [ "$PART" = 36 ]; then
    # session 18 (NOTES v20): ptxas 12.8 (Triton's) against the image's 13.0, which interleaves the promotion
    # FFMAs' yield bits at 192/256-row tiles as DeepGEMM's build does, and 13.0 with DeepGEMM's ptxas option
    # --register-usage-level=10 (its JIT compiler's flags; Triton passes none), in alternating processes, each
    # variant with its own compile cache. 33: the dense suite twice, then the weight-gradient suite; 34: the grouped
    # and bf16 suites; 35: the paged-mqa and mqa suites with kernel time (the paged ws kernel's FP ops interleave
    # under 13.0 too); 36: the quick form for a short device window (the six M = 4096 dense shapes once, ~2 min)
    bundled="$(python3 -c 'import os, triton; print(os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas"))')"
    system="${SYSTEM_PTXAS:-/usr/local/cuda/bin/ptxas}"
    "$system" --version | tail -1
    # RUNS / VARIANTS override the suites and the ptxas variants (session 19: bundled-rul10 = level 10 under 12.8; -rulN any level)
    runs="dense:1 dense:2 weight-grad:1"
    [ "$PART" = 34 ] && runs="grouped:1 bf16:1"
    kernel_time=()
    shapes=()
    if [ "$PART" = 35 ]; then runs="paged-mqa:1 mqa:1"; kernel_time=(--kernel-time); fi
    if [ "$PART" = 36 ]; then
        runs="dense:1"
        shapes=(--shapes "4096,2112,7168;4096,24576,1536;4096,32768,512;4096,7168,16384;4096,4096,7168;4096,7168,2048")
    fi
    for suite_round in ${RUNS:-$runs}; do
        suite="${suite_round%%:*}"; round="${suite_round##*:}"
        for name in ${VARIANTS:-bundled system system-rul10}; do
            path="$bundled"; [ "${name%%-*}" = system ] && path="$system"
            options=""; [ "${name#*-rul}" != "$name" ] && options="--register-usage-level=${name#*-rul}"
            harness_args=("${kernel_time[@]}" "${shapes[@]}")
            harness_run "ptxas-$suite-$name-$round" "$suite" PTXAS_OPTIONS="$options" TRITON_PTXAS_PATH="$path" \
                TRITON_CACHE_DIR="$LOGS/cache-$name"
        done
        pack
    done
    rm -rf "$LOGS"/cache-*; pack
elif [ "$PART" = 38 ]; then
    # session 19 (NOTES v21): the in-place accumulate by TMA reduce-add (FINEGEMM_PROBE_D_REDUCE): its GPU tests,
    # the weight-gradient / k-grouped GPU tests under the switch, then scripts/d_reduce_probe.py (in place against a
    # separate C, bitwise, 7 weight-gradient shapes x 2 rounds)
    PYTEST_TIMEOUT=240 pytest_gpu pytest-d-reduce.log tests/test_sm90_gpu.py -k "in_place or c_by_tma or 1d1d"
    FINEGEMM_PROBE_D_REDUCE=1 PYTEST_TIMEOUT=200 pytest_gpu pytest-d-reduce-on.log tests/test_sm90_gpu.py \
        -k "1d1d or in_place or split"
    FINEGEMM_PROBE_D_REDUCE=1 PYTEST_TIMEOUT=200 pytest_gpu pytest-d-reduce-on-kgrouped.log \
        tests/test_sm90_k_grouped_gpu.py tests/test_autograd.py
    FINEGEMM_PROBE_D_REDUCE=1 OUT="$LOGS" timeout 200 python3 -W ignore scripts/d_reduce_probe.py --rounds 2 2>&1 \
        | tee "$LOGS/d_reduce_probe.log" | cut -c1-300
    pack
elif [ "$PART" = 39 ]; then
    # session 19 (session 22: D_REDUCE is on by default for one-wave 128-wide tiles outside k-grouped calls): the
    # harness weight-grad and k-grouped suites (both call with c = d) with FINEGEMM_PROBE_D_REDUCE=0 (off), unset
    # (the default rule) and 1 (wherever it can run), alternating processes, kernel time
    for round in 1 2; do
        for on in 0 rule 1; do
            harness_args=(--kernel-time)
            harness_run "d-reduce-$on-$round" weight-grad,k-grouped FINEGEMM_PROBE_D_REDUCE=${on/rule/}
        done
        pack
    done
elif [ "$PART" = 40 ]; then
    # session 20 (NOTES v22): C staged by TMA in the BF16 GEMM (FINEGEMM_PROBE_BF16_C_TMA): its GPU tests, then the
    # BF16 dense and k-grouped GPU tests with both session-20 switches on
    PYTEST_TIMEOUT=200 pytest_gpu pytest-bf16-c-tma.log tests/test_sm90_bf16_gpu.py -k "staged"
    FINEGEMM_PROBE_BF16_C_TMA=1 FINEGEMM_PROBE_BF16_SPLIT_N=1 PYTEST_TIMEOUT=300 pytest_gpu pytest-bf16-switches-on.log \
        tests/test_sm90_bf16_gpu.py tests/test_sm90_k_grouped_gpu.py -k "not fp8"
elif [ "$PART" = 41 ]; then
    # session 20 (NOTES v22): BF16 tiles whose width is not a power of two (BLOCK_N1): their GPU tests, then the tile
    # sweep against cuBLAS (the shapes they should fill better, and some where they should not matter)
    PYTEST_TIMEOUT=200 pytest_gpu pytest-bf16-split-n.log tests/test_sm90_bf16_gpu.py -k "split_n"
    OUT="$LOGS" timeout 300 python3 scripts/sm90_bf16_bench.py --commit "$commit" --alts 1 \
        --shapes "4096,576,7168;8192,576,7168;4096,2112,7168;4096,7168,2048;128,7168,16384;64,2112,7168" \
        --tiles "128x144,128x160,128x192,192x192,64x96,64x96s4" 2>&1 | tee "$LOGS/bf16-split-n-sweep.log" \
        | cut -c1-220
    pack
elif [ "$PART" = 42 ]; then
    # session 20 (NOTES v22): the harness bf16 suite without and with both session-20 switches, alternating processes
    # (events). The two touch almost disjoint cases: the split widths only 4096x576x7168 (with and without C; +c
    # gets both), C staging the other +c cases, so one "on" run tells them apart.
    for round in 1 2; do
        for on in 0 1; do
            HARNESS_TIMEOUT=240 harness_run "bf16-session20-$on-$round" bf16 FINEGEMM_PROBE_BF16_C_TMA=$on \
                FINEGEMM_PROBE_BF16_SPLIT_N=$on
        done
        pack
    done
elif [ "$PART" = 45 ]; then
    # session 21 (one device start, under 10 minutes): 43's probe, the GPU tests of 40 and 41 (the BF16 switches'
    # own tests), then the harness bf16 suite's 30 cases they touch without / with / without both switches (events)
    OUT="$LOGS" timeout 120 python3 scripts/wgmma_rate_probe.py 2>&1 | tee "$LOGS/wgmma_rate_probe.log" | cut -c1-200
    pack
    PYTEST_TIMEOUT=120 pytest_gpu pytest-bf16-c-tma.log tests/test_sm90_bf16_gpu.py -k "staged"
    PYTEST_TIMEOUT=120 pytest_gpu pytest-bf16-split-n.log tests/test_sm90_bf16_gpu.py -k "split_n"
    # the 30 cases the switches can touch or that control them (every +c case, every M = 4096 case), off / on / off
    bf16_switch_ab 0 1 0
elif [ "$PART" = 49 ]; then
    # session 23, one start under 10 minutes: the BF16 switches' own tests and the harness bf16 cases they touch
    # off / on / off (events), then one round of 39 (D_REDUCE off / default rule / everywhere, kernel time)
    PYTEST_TIMEOUT=100 pytest_gpu pytest-bf16-switches.log tests/test_sm90_bf16_gpu.py -k "staged or split_n"
    bf16_switch_ab 0 1 0
    for on in 0 rule 1; do
        harness_args=(--kernel-time)
        HARNESS_TIMEOUT=120 harness_run "d-reduce-$on-1" weight-grad,k-grouped FINEGEMM_PROBE_D_REDUCE=${on/rule/}
        pack
    done
    harness_args=()
elif [ "$PART" = 53 ]; then
    # (The probe switch was measured no faster in session 25 and removed, NOTES v27: both rounds now run 8 stages.)
    # session 24 (NOTES v26): the m-grouped BF16 tiles at up to 13 stages (FINEGEMM_PROBE_BF16_GROUPED_DEEP=1; the
    # dense whole-K tiles gained 5-15 % so): the grouped BF16 GPU tests under it, then the masked config sweep
    # (decode 16 x 64, 4 x 256, 2 x 512 rows at (4096, 7168) and (7168, 2048)) without and with it
    FINEGEMM_PROBE_BF16_GROUPED_DEEP=1 PYTEST_TIMEOUT=120 pytest_gpu pytest-bf16-grouped-deep.log \
        tests/test_sm90_bf16_grouped_gpu.py
    for deep in 0 1; do
        FINEGEMM_PROBE_BF16_GROUPED_DEEP=$deep OUT="$LOGS" timeout 190 python3 -W ignore scripts/bf16_grouped_sweep.py \
            --masked-only --budget-s 160 2>&1 | tee "$LOGS/bf16-grouped-deep$deep.log" | cut -c1-250
        mv "$LOGS/bf16_grouped_sweep.json" "$LOGS/bf16-grouped-deep$deep.json"
        pack
    done
elif [ "$PART" = 54 ]; then
    # session 24 (NOTES v26), any card, ~6 minutes. First correctness: the FP8 rules' decode picks (ring scales
    # released without a proxy fence, as the split-width tiles were until v26) 20 times each on the same inputs. Then
    # the prepared BF16 lever, D staged in halves (FINEGEMM_PROBE_BF16_D_HALVES=1: 128x256 at 4 stages instead of 3,
    # 192x128 at 5, FP32-out 128x128 at 6): its GPU tests, then the harness bf16 M = 4096 cases without / with it,
    # twice, alternating (events)
    PROBE_SET=defaults PROBE_REPEATS=20 OUT="$LOGS" timeout 150 python3 -W ignore scripts/repeat_probe.py 2>&1 \
        | grep -o '"shape": "[^"]*"\|"differing_runs": [0-9]*' | paste - - | tee "$LOGS/repeat-probe-defaults.log"
    pack
    PYTEST_TIMEOUT=100 pytest_gpu pytest-bf16-d-halves.log tests/test_sm90_bf16_gpu.py -k "d_halves"
    harness_args=(--cases "4096x*")
    for round in 1 2; do
        for on in 0 1; do
            HARNESS_TIMEOUT=100 harness_run "bf16-d-halves-$on-$round" bf16 FINEGEMM_PROBE_BF16_D_HALVES=$on
        done
        pack
    done
    harness_args=()
elif [ "$PART" = 59 ]; then
    # session 25 (NOTES v27), any card, ~3 minutes: FP32 out (no C) at widths that are not powers of two, which the
    # rules leave to BF16 out (CPU compile at 4096x576: 128x144 / 128x160 / 128x192 / 64x96 / 64x144 / 128x96 with
    # FP32 D, no stack), against the current picks on the shapes where allowing them would move the model's pick
    bf16_bench bf16-f32-out-split-widths 240 10 --out-fp32 --alts 0 \
        --shapes "4096,576,7168;8192,576,7168;4096,2112,7168;577,4096,7168;577,7168,2048;1024,2112,7168;333,4096,7168;192,7168,2048" \
        --tiles "128x144,128x160,128x192,64x144,64x192,192x128,128x128,64x128"
    # the other shapes whose FP32 pick the rule that followed moved (the pick there first, then the one before)
    bf16_bench bf16-f32-out-split-widths-2 200 8 --out-fp32 --alts 0 \
        --shapes "192,24576,1536;192,7168,16384;577,2112,7168;577,7168,16384;2048,2112,7168;2048,576,7168" \
        --tiles "64x128,64x144,64x192,128x128,128x144,128x64"
elif [ "$PART" = 62 ]; then
    # session 25 (NOTES v27), any card, ~2 minutes: D in halves on the BF16-out tiles the rule leaves whole because
    # they already have 4 stages (192x128 4 -> 5, 64x256 4 -> 5), where those tiles are picked or close (4096x2112
    # picks 128x192), without then with halves wherever they add a stage
    for halves in rule all; do
        bf16_bench "bf16-halves-$halves-4stage-tiles" 120 6 --alts 0 --d-halves $halves \
            --shapes "4096,2112,7168;8192,576,7168;333,24576,1536;333,7168,2048;1024,7168,2048;128,32768,512" \
            --tiles "192x128,64x256,128x192,128x256"
    done
elif [ "$PART" = 63 ]; then
    # session 25 (NOTES v27), any card, ~1 minute: the 64x256 picks the short-K halves rule moved (M = 64 / 192, K <=
    # 2048), whole D / halves (measured no faster at c3916cf: the rule then took M > 256 only)
    for halves in off rule; do
        bf16_bench "bf16-halves-$halves-64x256" 90 3 --alts 0 --d-halves $halves \
            --shapes "64,24576,1536;64,32768,512;192,32768,512" --tiles "64x256"
    done
elif [ "$PART" = 66 ]; then
    # session 26 (NOTES v28), ~6 minutes, on an H200 first (it ran on an H100 at badbb7e, where 128 rows won): the
    # weight-gradient rule's 128-row pipelined tiles (in place by D_REDUCE when C is D) against the 256-row tiles of
    # the rule before (K >= 4096, FINEGEMM_PROBE_WGRAD_128=0): the harness weight-grad and k-grouped suites (both
    # c = d), alternating, kernel time
    harness_args=(--kernel-time)
    for round in 1 2; do
        for rows in 256 128; do
            HARNESS_TIMEOUT=200 harness_run "wgrad-rows$rows-$round" weight-grad,k-grouped \
                FINEGEMM_PROBE_WGRAD_128=$([ $rows = 256 ] && echo 0 || echo 1)
        done
        pack
    done
    harness_args=()
elif [ "$PART" = 70 ]; then
    # session 28 (NOTES v30-v31), any card, ~3-5 minutes: the 1d1d ring's scales copied by cp.async completing on the
    # full barrier (the default since v31) against the TMA form (FINEGEMM_PROBE_RING_STS=0), then the 1d1d GPU tests
    ring_scales_ab 2 ring-cpa
    FINEGEMM_PROBE_RING_STS=2 PYTEST_TIMEOUT=150 pytest_gpu pytest-ring-cpa.log tests/test_sm90_gpu.py -k "1d1d"
elif [ "$PART" = 68 ]; then
    # sessions 26-27 (NOTES v28-v29), any card, ~6-8 minutes: the training layers' weight gradients into a fresh FP32
    # buffer without C (FINEGEMM_PROBE_WGRAD_NO_C=1: no zero fill of dW, no read of D in the kernels; fp8_linear's
    # dense and fp8_grouped_linear's k-grouped GEMM): their GPU tests (the no-C sm90 picks bitwise the zero-filled
    # in-place forms), then scripts/train_linear_bench.py on the 3 largest shapes and its grouped mode (8 experts)
    # with the switch off and on, alternating processes, two rounds (fp8_step_us / fp8_grouped_step_us)
    PYTEST_TIMEOUT=240 pytest_gpu pytest-wgrad-no-c.log tests/test_autograd.py -k "without_c or gpu_forward"
    for round in 1 2; do
        for on in 0 1; do
            FINEGEMM_PROBE_WGRAD_NO_C=$on OUT="$LOGS" timeout 120 python3 -W ignore scripts/train_linear_bench.py 3 \
                > "$LOGS/train-wgrad-no-c-$on-$round.log" 2>&1 || status=1
            mv "$LOGS/train_linear_bench.json" "$LOGS/train-wgrad-no-c-$on-$round.json" 2>/dev/null
            echo "no-C $on round $round"; grep -o '"fp8_step_us": [0-9.]*' "$LOGS/train-wgrad-no-c-$on-$round.json"
            FINEGEMM_PROBE_WGRAD_NO_C=$on OUT="$LOGS" timeout 90 python3 -W ignore scripts/train_linear_bench.py \
                grouped > "$LOGS/train-grouped-no-c-$on-$round.log" 2>&1 || status=1
            mv "$LOGS/train_grouped_linear_bench.json" "$LOGS/train-grouped-no-c-$on-$round.json" 2>/dev/null
            grep -o '"fp8_grouped_step_us": [0-9.]*' "$LOGS/train-grouped-no-c-$on-$round.json"
            pack
        done
    done
    # session 26's refactor of the in-place tests (_check_in_place), dry-run on the CPU only
    PYTEST_TIMEOUT=120 pytest_gpu pytest-in-place.log tests/test_sm90_gpu.py -k "in_place"
elif [ "$PART" = 60 ]; then
    # session 25, any card (on an H200: the issues' figures for bench.targets), ~2-5 minutes: the dense, weight-grad
    # and bf16 suites at the current tree with their live peers, kernel time beside events
    targets_dense_bf16
elif [ "$PART" = 61 ]; then
    # session 25, any card (60's second half), ~2-5 minutes: the grouped suite with the cuBLAS loop, then k-grouped,
    # mqa and paged-mqa (kernel time beside events)
    targets_grouped_mqa
elif [ "$PART" = 67 ]; then
    # session 26, for an H200 (~4-8 minutes): 60 and 61 in one call, then bench.targets over their runs against
    # DeepGEMM's anchors (targets.md beside the JSON): every issue target at the current tree, per shape
    targets_dense_bf16
    targets_grouped_mqa
    anchors=../shared/anchors/h200-2026-12-02.json
    if [ -f "$anchors" ]; then
        timeout 60 python3 -m finegemm.bench.targets "$anchors" "$LOGS"/targets-*.json > "$LOGS/targets.md" 2>&1 \
            || status=1
        head -16 "$LOGS/targets.md" | cut -c1-200
    else
        echo "no $anchors on this machine: run python -m finegemm.bench.targets on the fetched JSON"
    fi
    pack
elif [ "$PART" = 58 ]; then
    # session 25 (NOTES v27), any card, ~3 minutes: the fixed cost of a decode call. The dense and bf16 suites on
    # custom shapes whose K goes from one K block up (M = 64 / 128): time against K is a line whose intercept is what a
    # call costs besides streaming (launch, prologue, pipeline fill, epilogue), against cuBLAS's (events and
    # kernel time)
    harness_args=(--kernel-time --shapes "64,7168,128;64,7168,512;64,7168,1024;64,7168,2048;64,7168,4096;64,7168,8192;128,4096,128;128,4096,1024;128,4096,2048;128,4096,7168;64,2112,128;64,2112,2048;64,2112,7168")
    HARNESS_PEERS=finegemm-sm90,cublas-block,cublas-tensor HARNESS_TIMEOUT=150 harness_run fixed-cost-dense dense
    pack
    HARNESS_PEERS=finegemm-sm90,cublas-bf16 HARNESS_TIMEOUT=150 harness_run fixed-cost-bf16 bf16
    pack
    harness_args=()
elif [ "$PART" = 57 ]; then
    # session 25 (NOTES v27), any card, ~1 minute: FP32 out at 192 rows (D in halves, 4 stages) on the shapes the
    # rules now give it, against 128x128 / 64x128 / 128x256. (At a7697cb this part also ran the
    # FINEGEMM_PROBE_SCALES_AHEAD A/B: measured neutral, the probe removed, its steps with it.)
    PYTEST_TIMEOUT=60 pytest_gpu pytest-bf16-d-halves.log tests/test_sm90_bf16_gpu.py -k d_halves
    bf16_bench bf16-f32-out-192 150 8 --out-fp32 --alts 0 \
        --shapes "4096,2112,7168;4096,576,7168;8192,2112,7168;8192,576,7168;333,24576,1536;333,7168,16384;333,7168,2048" \
        --tiles "128x128,192x128,64x128,128x256"
elif [ "$PART" = 56 ]; then
    # session 25 (NOTES v27), any card, ~6 minutes: D staged in halves by the rule (128x256 BF16 out at 4 stages,
    # FP32 out 128x256 at 3, picked over 128x128 wherever the model takes 128x256 for BF16): the BF16 GPU suite,
    # then FP32 out at M = 512 / 4096 on the six DeepSeek (N, K) against 128x128 / 192x128, then the harness bf16
    # suite with the live cuBLAS peer
    PYTEST_TIMEOUT=240 pytest_gpu pytest-bf16.log tests/test_sm90_bf16_gpu.py
    bf16_bench bf16-f32-out-picks 150 14 --out-fp32 --alts 1 --ms 512,4096 --tiles "128x128,192x128"
    HARNESS_PEERS=finegemm-sm90,cublas-bf16 HARNESS_TIMEOUT=200 harness_run bf16-cublas-v27 bf16
    pack
elif [ "$PART" = 55 ]; then
    # session 24 (NOTES v26), any card, ~4 minutes: how much the BF16 ring depth matters at M = 4096 (128x256 /
    # 128x192 / 128x128 with the cap at 2 and 3 stages), then FP32 out (the LM head at prefill, 0.93x cuBLAS on the
    # H100): the tiles the rules leave out there (192x128 and 128x256 with FP32 D compile without spills on the CPU)
    # against the 128x128 pick, without and with D in halves
    for ms in 2 3; do
        bf16_bench "bf16-m4096-stages$ms" 100 6 --ms 4096 --alts 0 --max-stages $ms --tiles "128x256,128x192,128x128"
    done
    for halves in off all; do
        bf16_bench "bf16-f32-out-halves-$halves" 100 3 --out-fp32 --d-halves $halves --alts 1 \
            --shapes "4096,129280,7168;4096,256,7168;577,129280,7168" --tiles "128x128,192x128,128x256"
    done
    # mid M with widths that are not powers of two on 64-row tiles, which the rules rate at their first block's
    # 64x64 figure below 1024 rows: 333x2112x7168 at 64x96 is 6 x 22 = 132 tiles, one full round (64x128, the pick:
    # 102 tiles, 33.6 us; cuBLAS 25.4 with 88-row tiles)
    bf16_bench bf16-midm-split-widths 100 5 --alts 1 \
        --shapes "333,2112,7168;256,2112,7168;333,7168,2048;577,4096,7168;192,24576,1536" \
        --tiles "64x96,64x144,64x160,64x192,128x96,128x144"
elif [ "$PART" = 52 ]; then
    # session 24 (NOTES v26), for an H200: the harness bf16 suite with the live cuBLAS peer (the v26 rules: deep
    # whole-K rings, split-K only to 128 rows or few tiles, 128x192 at 4096x2112), then the ring-depth A/B and the
    # moved picks against the tiles they replaced (H100 figures so far; the H200's 1.4x bandwidth may move the
    # split / whole-K balance), then the paged forms at 32 / 64 rows (v25 / v26: ws ahead on the H100)
    HARNESS_PEERS=finegemm-sm90,cublas-bf16 HARNESS_TIMEOUT=150 harness_run bf16-cublas-v26 bf16
    pack
    for ms in 8 16; do
        bf16_bench "bf16-stages$ms" 100 12 --ms 64,128 --alts 0 --max-stages $ms \
            --tiles "64x64,64x64s2,64x128,64x128s2,128x64s2,64x96"
    done
    bf16_bench bf16-v26-picks 150 6 --alts 1 \
        --shapes "192,2112,7168;256,7168,16384;333,4096,7168;333,7168,16384;512,4096,7168;4096,2112,7168" \
        --tiles "64x256s4,128x128s8,128x128s4,128x256s4,128x256s2,192x128"
    paged_forms "None 0" "True 3"
elif [ "$PART" = 51 ]; then
    # session 23 (NOTES v25), for an H200 first: the BF16 GEMV probe (one-row cases: cuBLAS / tensor-core pick /
    # GEMV variants), then the harness bf16 suite with the live cuBLAS peer (this session's GEMV, C by TMA and
    # split widths against the H200's cuBLAS: issue 5's BF16 target), then part 50. First the GEMV GPU tests: the
    # unaligned one-row calls (K = 7100, K = 5) and the tt case took the GEMV after the last GPU run (c08480e)
    PYTEST_TIMEOUT=120 pytest_gpu pytest-gemv.log tests/test_sm90_gemv_gpu.py
    OUT="$LOGS" timeout 120 python3 -W ignore scripts/gemv_probe.py --commit "$commit" 2>&1 \
        | tee "$LOGS/gemv_probe.log" | cut -c1-220
    pack
    HARNESS_PEERS=finegemm-sm90,cublas-bf16 HARNESS_TIMEOUT=240 harness_run bf16-cublas bf16
    pack
    # part 50 alone takes ~8 minutes: the next call (under one 10-minute command)
elif [ "$PART" = 50 ]; then
    # session 23 (NOTES v25): the BF16 rules' new picks that no run has timed (192x192 at 8192x576x7168, 128x144 at
    # 577x7168x16384, 128x192 split 4 at 333x2112x7168) against the tiles they displaced, then the harness paged-mqa
    # suite (kernel time) with the default forms, the ws form everywhere at 3 key-tile slots (the H100 probe's best,
    # part 21), and the default forms with ws at 3 slots
    OUT="$LOGS" timeout 150 python3 scripts/sm90_bf16_bench.py --commit "$commit" --alts 2 \
        --shapes "8192,576,7168;577,7168,16384;333,2112,7168;4096,576,7168" \
        --tiles "192x128,128x144,128x192,192x192,64x128,128x128s7" 2>&1 | tee "$LOGS/bf16-session23-picks.log" \
        | cut -c1-220
    pack
    paged_forms "None 0" "True 3" "None 3"
elif [ "$PART" = 48 ]; then
    # session 21, under 4 minutes: sm90_dev v19 (today's FP32-out rule change against the spilling tiles), then
    # the WGMMA rate probe
    dev_sweep v19 60 100
    OUT="$LOGS" timeout 90 python3 scripts/wgmma_rate_probe.py 2>&1 | tee "$LOGS/wgmma_rate_probe.log" | cut -c1-200
    pack
elif [ "$PART" = 47 ]; then
    # session 21, for a short device window: the BF16 switches' own tests, the harness bf16 cases they touch off /
    # on, the v19 sweep (FP32-out picks moved off spilling tiles, NOTES v23), then 43's probe; each packed at once
    PYTEST_TIMEOUT=100 pytest_gpu pytest-bf16-switches.log tests/test_sm90_bf16_gpu.py -k "staged or split_n"
    bf16_switch_ab 0 1
    dev_sweep v19 80 120
    OUT="$LOGS" timeout 90 python3 scripts/wgmma_rate_probe.py 2>&1 | tee "$LOGS/wgmma_rate_probe.log" | cut -c1-200
    pack
elif [ "$PART" = 46 ]; then
    # session 21: 44 (FP8 split-width tests and the v18 sweep) then 38's first test set (D_REDUCE), one start
    PYTEST_TIMEOUT=120 pytest_gpu pytest-fp8-split-n.log tests/test_sm90_gpu.py -k "split_n"
    dev_sweep v18 150 200
    FINEGEMM_PROBE_D_REDUCE=1 PYTEST_TIMEOUT=120 pytest_gpu pytest-d-reduce-on.log tests/test_sm90_gpu.py \
        -k "in_place or c_by_tma"
    FINEGEMM_PROBE_D_REDUCE=1 OUT="$LOGS" timeout 110 python3 -W ignore scripts/d_reduce_probe.py --rounds 1 2>&1 \
        | tee "$LOGS/d_reduce_probe.log" | cut -c1-300
    pack
elif [ "$PART" = 43 ]; then
    # session 20 (NOTES v22): scripts/wgmma_rate_probe.py: the FP8 pipeline without promotion by tile shape
    # (256x128, 128x256, 128x192, 128x128), with and without TMA writes: is the 256x128 tile shared-memory bound?
    OUT="$LOGS" timeout 300 python3 scripts/wgmma_rate_probe.py 2>&1 | tee "$LOGS/wgmma_rate_probe.log" | cut -c1-200
    pack
elif [ "$PART" = 44 ]; then
    # session 20 (NOTES v22): FP8 tiles of two column blocks (gemm_1d2d's BLOCK_N1): their GPU tests, then the v18
    # sweep (128x192 / 64x96 / ... against the heuristic's pick where DeepGEMM runs such widths)
    PYTEST_TIMEOUT=200 pytest_gpu pytest-fp8-split-n.log tests/test_sm90_gpu.py -k "split_n"
    dev_sweep v18 200 320
elif [ "$PART" = 37 ]; then
    # session 19 (NOTES v21): the same timeline for the weight-gradient kernel (1d1d, FP32 d = c + a @ b) at its
    # 256-row tiles beside the dense twin of one shape: K-block period, promotions (per-channel: two multiplies an
    # element), and the unit epilogue (C read, D written in FP32)
    OUT="$LOGS" timeout 300 python3 scripts/trace_probe.py --waves 4096x4096x7168 "4096x4096x7168 wgrad" \
        "7168x4096x16384 wgrad" 2>&1 | tee "$LOGS/trace_waves_wgrad.log" | cut -c1-400
    pack
elif [ "$PART" = 32 ]; then
    # session 18 (NOTES v20): the per-wave timeline of the 256-row tiles (TRACE 2): does the pair of math warpgroups
    # keep a wave in flight all the time, and where does a K block's period go (M = 4096, issue 5's gap)
    OUT="$LOGS" timeout 300 python3 scripts/trace_probe.py --waves 4096x7168x16384 4096x4096x7168 4096x7168x2048 \
        2>&1 | tee "$LOGS/trace_waves.log" | cut -c1-400
    pack
elif [ "$PART" = 31 ]; then
    # session 18 (NOTES v20): the per-warp slot release (FINEGEMM_PROBE_EMPTY_SMEM) against main's kernel in
    # alternating processes, bitwise checked
    OUT="$LOGS" timeout 560 python3 -P scripts/warp_release_probe.py --rounds 2 \
        --shapes "${PROBE_SHAPES:-4096,7168,16384;4096,4096,7168;4096,2112,7168;4096,24576,1536;128,4096,7168}" \
        2>&1 | tee "$LOGS/warp_release_probe.log" | cut -c1-300
    pack
elif [ "$PART" = 30 ]; then
    # session 17: the masked BF16 sweep again (its cost model's HBM rates were measured under the walk bug), the
    # grouped harness suite (events, DeepGEMM's grouped anchors) at the new 256-row masked rule, the k-grouped suite
    OUT="$LOGS" timeout 200 python3 scripts/bf16_grouped_sweep.py --masked-only --budget-s 170 2>&1 \
        | tee "$LOGS/bf16_grouped_sweep.log" | cut -c1-250
    pack
    timeout 120 python3 -m finegemm.bench --plain --no-progress --suite grouped --peers finegemm-sm90 --commit "$commit" \
        --json "$LOGS/bench-grouped.json" > "$LOGS/bench-grouped.log" 2>&1 || status=1
    tail -3 "$LOGS/bench-grouped.log"; pack
    # the k-grouped suite in the nt form (what DeepGEMM's anchors time), kernel time
    bench_suites 150 k-grouped
elif [ "$PART" = 22 ]; then
    # issue 6's masked 4 x 256 x (4096, 7168) gap (0.89x DeepGEMM): ncu of the pick (128x128, PIPE_MMA) beside the
    # same work as one group (1 x 1024) and the 256x128 tile, DRAM / L2 / tensor activity and stalls
    OUT="$LOGS" NCU_TIMEOUT=400 bash scripts/ncu_profile.sh masked4x256_128 masked1x1024_256 masked4x256_256 2>&1 \
        | tail -5
    pack
elif [ "$PART" = 21 ]; then
    # why the ws form streams HBM worse at 64 rows: the probe with 3-6 key-tile slots a warpgroup, then ncu of both
    # forms at b256 ctx 8192 n1 h64 (DRAM throughput, stall reasons)
    PAGED_WS_STAGES=3,4,5 OUT="$LOGS" timeout 240 python3 scripts/paged_mqa_sm90_probe.py 2>&1 \
        | tee "$LOGS/paged_probe_stages.log" | cut -c1-300
    pack
    OUT="$LOGS" NCU_TIMEOUT=300 NCU_KERNELS=mqa_logits bash scripts/ncu_profile.sh paged_n1h64_ws paged_n1h64_ctas 2>&1 | tail -5
    pack
elif [ "$PART" = 20 ]; then
    # parts 19 and 18 in one call: the paged GPU tests, the probe with L2-resident keys, then as stored
    PYTEST_TIMEOUT=240 pytest_gpu pytest-paged.log tests/test_sm90_paged_mqa.py
    for hot in 2048 0; do
        PAGED_HOT=$hot OUT="$LOGS" timeout 200 python3 scripts/paged_mqa_sm90_probe.py 2>&1 \
            | tee "$LOGS/paged_probe_hot$hot.log" | cut -c1-300
        pack
    done
elif [ "$PART" = 19 ]; then
    # the paged GPU tests (both forms), then the probe with L2-resident keys only
    PYTEST_TIMEOUT=240 pytest_gpu pytest-paged.log tests/test_sm90_paged_mqa.py
    PAGED_HOT=2048 OUT="$LOGS" timeout 200 python3 scripts/paged_mqa_sm90_probe.py 2>&1 | tee "$LOGS/paged_probe_hot.log" \
        | cut -c1-300
    pack
elif [ "$PART" = 18 ]; then
    # the paged probe with L2-resident keys (PAGED_HOT: 2048 pages), then as stored (HBM): the two paged forms
    PAGED_HOT=2048 OUT="$LOGS" timeout 200 python3 scripts/paged_mqa_sm90_probe.py 2>&1 | tee "$LOGS/paged_probe_hot.log" \
        | cut -c1-300
    pack
    OUT="$LOGS" timeout 200 python3 scripts/paged_mqa_sm90_probe.py 2>&1 | tee "$LOGS/paged_probe.log" | cut -c1-300
    pack
elif [ "$PART" = 17 ] || [ "$PART" = 24 ] || [ "$PART" = 28 ]; then
    # 28: the clock probe (part 27) first, then part 24
    if [ "$PART" = 28 ]; then clock_probe 150; fi
    # 24: the paged GPU tests (both forms) first
    if [ "$PART" != 17 ]; then PYTEST_TIMEOUT=200 pytest_gpu pytest-paged.log tests/test_sm90_paged_mqa.py; fi
    # the harness paged-mqa suite (DeepGEMM's paged anchors and the short cases), kernel time, with the
    # four-CTA form and with the warp-specialized one (the module switch set before the harness runs)
    for ws in False True; do
        paged_form_run "bench-paged-mqa-ws$ws" "$ws" 0 200
        tail -3 "$LOGS/bench-paged-mqa-ws$ws.log"; pack
    done
elif [ "$PART" = 14 ]; then
    bench_suites 250 mqa grouped
elif [ "$PART" = 13 ]; then
    OUT="$LOGS" timeout 300 python3 scripts/einsum_bench.py 2>&1 | tee "$LOGS/einsum_bench.log" | cut -c1-240
    pack
elif [ "$PART" = 2 ]; then
    timeout 60 python3 -m finegemm.bench --plain --no-progress --suite dense,weight-grad \
        --peers finegemm-sm90,cublas-block --commit "$commit" --json "$LOGS/bench.json" > "$LOGS/bench.log" 2>&1 \
        || status=1
    tail -3 "$LOGS/bench.log"; pack
    timeout 90 python3 -m finegemm.bench --plain --no-progress --suite mqa --peers finegemm-sm90 \
        --commit "$commit" --json "$LOGS/bench-mqa.json" > "$LOGS/bench-mqa.log" 2>&1 || status=1
    tail -3 "$LOGS/bench-mqa.log"; pack
    pytest_gpu pytest.log tests/test_sm90_gpu.py tests/test_sm90_k_grouped_gpu.py tests/test_sm90_grouped_gpu.py
    timeout 150 python3 scripts/k_grouped_bench.py --out "$LOGS" 2>&1 | tee "$LOGS/k_grouped_bench.log" | cut -c1-110
    pack
else
    # an unknown part runs nothing (session 24: `source gpu_pending.sh __lib` ran part 2's five minutes by mistake)
    echo "gpu_pending.sh: no part '$PART' (the header lists them)" >&2
    status=2
fi
exit $status
