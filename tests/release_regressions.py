"""Compile tests a tested Triton release fails while 3.6.0 passes them: the same kernel source, compiled for sm_90,
where that release's code generation spills or exceeds a register budget the test asserts. The kernels run
correctly on those releases (the GPU tests under 3.9.0 on an H100, benchmarks/results/triton-ab-h100-2026-12-07-
5734357.md); what these tests guard is their speed. Each listed test is expected to fail on its release (strict:
once a kernel change makes it pass there, the run says so and the entry must go). tests/conftest.py applies it.

Measured on the CPU with each release's own sm_90 ptxas choice (FINEGEMM_PTXAS=auto: CUDA 13.0's ptxas for
3.6-3.8, the bundled ptxas-blackwell 13.4 for 3.9); Triton's bundled ptxas gives the same result where tried.
"""

from __future__ import annotations

_C = "tests/test_sm90_compile.py::"
# The 256x128 small-epilogue tiles with C: Triton 3.7 / 3.8 spill at 168 registers (stack 8-208 bytes); 3.6 and
# 3.9 do not.
_SMALL_EPILOGUE_C = {
    _C + "test_c_by_tma_compiles[256x128-se]": "stack 8 (3.7) / 16 (3.8) bytes at 168 registers",
    _C + "test_c_by_tma_compiles[256x128-se-packed]": "stack 208 bytes at 168 registers",
    _C + "test_compiles_with_required_instructions[fp8_1d2d-n4096-k7168-256x128s1p0st3g8-tma-se-c]":
        "stack 80 (3.7) / 56 (3.8) bytes at 168 registers",
    _C + "test_compiles_with_required_instructions[fp8_1d2d-n7168-k2048-256x128s1p0st3g8-se-c]":
        "stack 64 bytes at 168 registers",
    _C + "test_compiles_with_required_instructions[fp8_1d1d-n4096-k7168-256x128s1p0st3g8-tma-sfb-se-c]":
        "stack 8 (3.7) / 16 (3.8) bytes at 168 registers",
    _C + "test_compiles_with_required_instructions[fp8_1d1d-n2112-k7168-256x128s1p0st3g8-sfb-se-packed-c]":
        "stack 208 bytes at 168 registers",
}

_P = "tests/test_sm90_paged_mqa.py::"
# Under 3.9's bundled ptxas-blackwell 13.4 only (CUDA 13.0's ptxas: no stack): five values of the prologue stored
# to the stack once, reloaded about four times in each partition.
_PAGED_WS = {_P + f"test_warp_specialized_compiles[{case}]": "16-24 bytes of stack at 96 registers"
             for case in ("fp32-False-2-64", "fp32-False-1-128", "bf16-True-2-64", "bf16-True-1-128")}

# release -> {test node id: what fails there}
KNOWN: dict[str, dict[str, str]] = {
    "3.7": dict(_SMALL_EPILOGUE_C),
    "3.8": {
        **_SMALL_EPILOGUE_C,
        _C + "test_b_prefetch_variant[128-128-1]": "stack 8 bytes",
    },
    "3.9": {
        _C + "test_fp32_out_picks_compile_without_spills[1d1d-split-tail-c]":
            "4096x2112x7168 fused split-K 4 with its split tail and C: 408 bytes of stack frame at 168 registers",
        **_PAGED_WS,
    },
}
