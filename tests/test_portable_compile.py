"""The portable kernels compile for sm_90 on the CPU (the interpreter alone misses compile-only errors).

Runs the compiler in a subprocess with TRITON_INTERPRET=0, since this process defined the kernels
as interpreted functions.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent('''
    import itertools, triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from finegemm.kernels.portable.gemm_fp8 import _fp8_gemm_kernel
    from finegemm.kernels.portable.gemm_bf16 import _bf16_gemm_kernel
    from finegemm.kernels.portable.hc_prenorm import TILE as HC_TILE, _hc_prenorm_kernel

    def compile_one(kernel, types, constexprs, num_warps=8, num_stages=3):
        names = kernel.arg_names
        sig = {n: ("constexpr" if n in constexprs else types.get(n, "i32")) for n in names}
        src = ASTSource(fn=kernel, signature=sig, constexprs={(names.index(k),): v for k, v in constexprs.items()})
        return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=dict(num_warps=num_warps,
                              num_stages=num_stages))

    for packed, per_block, (has_c, out) in itertools.product((False, True), (True, False),
                                                             ((False, "bf16"), (True, "fp32"))):
        sf = "*i32" if packed else "*fp32"
        types = dict(a_ptr="*fp8e4nv", b_ptr="*fp8e4nv", d_ptr="*" + out, c_ptr="*fp32", sfa_ptr=sf, sfb_ptr=sf)
        k = compile_one(_fp8_gemm_kernel, types, dict(SF_PACKED=packed, SFB_PER_BLOCK=per_block, HAS_C=has_c,
                        BLOCK_M=128, BLOCK_N=128, BLOCK_K=128, GROUP_M=8))
        assert "mma" in k.asm["ptx"], "no tensor-core instruction in the portable FP8 kernel"
    for has_c in (False, True):
        types = dict(a_ptr="*bf16", b_ptr="*bf16", d_ptr="*bf16", c_ptr="*fp32")
        k = compile_one(_bf16_gemm_kernel, types, dict(HAS_C=has_c, UPCAST=False, BLOCK_M=128, BLOCK_N=128,
                        BLOCK_K=64, GROUP_M=8))
        assert "mma" in k.asm["ptx"]
    # tf32_hc_prenorm_gemm at DeepGEMM's N = 24 (one 32-wide N tile), as launch_hc_prenorm launches it
    types = dict(a_ptr="*bf16", b_ptr="*fp32", d_ptr="*fp32", s_ptr="*fp32")
    k = compile_one(_hc_prenorm_kernel, types, dict(BLOCK_M=HC_TILE.block_m, BLOCK_N=32, BLOCK_K=64,
                    K_BLOCKS=HC_TILE.k_blocks, SUB=1, INPUT_PRECISION="tf32"), num_warps=HC_TILE.num_warps,
                    num_stages=HC_TILE.num_stages)
    assert ".tf32" in k.asm["ptx"], "the hc pre-norm GEMM's dot is not a TF32 tensor-core instruction"
    print("compiled")
''')


def test_portable_kernels_compile_for_sm90():
    """The portable FP8 and BF16 GEMMs and the hc pre-norm GEMM compile for sm_90 with tensor-core instructions."""
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "TRITON_INTERPRET": "0"})
    assert out.returncode == 0 and "compiled" in out.stdout, out.stderr[-3000:]
