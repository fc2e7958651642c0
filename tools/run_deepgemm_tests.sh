#!/usr/bin/env bash
# DeepGEMM 2.6.1's own SM90 test files, unmodified, against finegemm through the deep_gemm alias, on this
# machine's GPU: one process per test function, a PASS/FAIL line each; $OUT gets summary.txt and
# deepgemm-tests-logs.tar.gz (every test's log), two files whatever the number of tests.
#
#   tools/run_deepgemm_tests.sh [DeepGEMM source archive or tree] [-- runner options, e.g. --only test_bf16.py]
#
# Defaults: the archive /work/shared/anchors/deepgemm/deepgemm-2.6.1-src.tar.xz (or shared/anchors/... in the
# repository copy), OUT=./deepgemm-test-logs, DG_USE_NVIDIA_TOOLS=1, DG_MQA_NUM_CASES=16 (set them to override).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="${1:-}"
if [[ -z "$src" || "$src" == "--" ]]; then
  for cand in /work/shared/anchors/deepgemm/deepgemm-2.6.1-src.tar.xz "$here/shared/anchors/deepgemm/deepgemm-2.6.1-src.tar.xz"; do
    [[ -f "$cand" ]] && src="$cand" && break
  done
else
  shift
fi
[[ "${1:-}" == "--" ]] && shift
[[ -n "$src" ]] || { echo "no DeepGEMM source given or found" >&2; exit 2; }
if [[ -f "$src" ]]; then
  tree="$(mktemp -d)"
  tar -xf "$src" -C "$tree"
  src="$tree"
fi
tests="$(dirname "$(find "$src" -path '*/tests/test_bf16.py' -print -quit)")"
[[ -d "$tests" ]] || { echo "no tests/test_bf16.py under $src" >&2; exit 2; }
out="${OUT:-./deepgemm-test-logs}"
export DG_USE_NVIDIA_TOOLS="${DG_USE_NVIDIA_TOOLS:-1}" DG_MQA_NUM_CASES="${DG_MQA_NUM_CASES:-16}"
exec "${PYTHON:-python}" "$here/tools/run_deepgemm_tests.py" --tests "$tests" --out "$out" "$@"
