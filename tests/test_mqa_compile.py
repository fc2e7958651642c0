"""The MQA-logits kernels compile for sm_90 on the CPU with the configs dispatched on an H200, and their
dots lower to Hopper's asynchronous WGMMA (the tensor-core path the sm_90 dispatch relies on).

Runs the compiler in a subprocess with TRITON_INTERPRET=0: this process defined the kernels as
interpreted functions.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent('''
    import re, triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from finegemm.jit.device import H200
    from finegemm.kernels.portable.mqa_logits import _mqa_logits_kernel, get_mqa_logits_config
    from finegemm.kernels.portable.paged_mqa_logits import (SPLIT_KV, _paged_mqa_logits_kernel,
                                                           get_paged_mqa_logits_config)

    def compile_one(kernel, types, constexprs, num_warps, num_stages):
        names = kernel.arg_names
        sig = {n: ("constexpr" if n in constexprs else types.get(n, "i32")) for n in names}
        src = ASTSource(fn=kernel, signature=sig, constexprs={(names.index(k),): v for k, v in constexprs.items()})
        k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=dict(num_warps=num_warps,
                           num_stages=num_stages))
        ptx = k.asm["ptx"]
        assert re.search(r"wgmma.mma_async[.a-z0-9]*e4m3", ptx), f"{kernel.__name__} {constexprs}: no FP8 WGMMA"
        assert k.metadata.shared > 0

    ptrs = dict(q_ptr="*fp8e4nv", kv_ptr="*fp8e4nv", kv_sf_ptr="*fp32", w_ptr="*fp32", start_ptr="*i32",
                end_ptr="*i32", out_ptr="*fp32")
    for heads in (32, 64):
        for dim in (32, 64, 128):
            cfg = get_mqa_logits_config(2048, 8192, heads, dim, H200, hopper=True)
            compile_one(_mqa_logits_kernel, ptrs, dict(HEADS=heads, HEAD_DIM=dim, BLOCK_Q=cfg.block_q,
                        BLOCK_KV=cfg.block_kv, CLEAN=True, COMPRESSED=False), cfg.num_warps, cfg.num_stages)
    ptrs = dict(q_ptr="*fp8e4nv", kv_ptr="*fp8e4nv", sf_ptr="*fp32", w_ptr="*fp32", ctx_ptr="*i32",
                table_ptr="*i32", meta_ptr="*i32", out_ptr="*fp32")
    for next_n in (1, 2):
        for heads in (32, 64):
            cfg = get_paged_mqa_logits_config(next_n, heads, 128, H200, hopper=True)
            compile_one(_paged_mqa_logits_kernel, ptrs, dict(NEXT_N=next_n, NEXT_N_P2=next_n, HEADS=heads,
                        HEAD_DIM=128, PAGE=64, SPLIT=SPLIT_KV, BLOCK_N=cfg.block_n, SUBS=cfg.subs,
                        CTX_2D=next_n > 1), cfg.num_warps, cfg.num_stages)
    print("compiled")
''')


def test_mqa_kernels_compile_to_wgmma_for_sm90():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=900,
                         env={**os.environ, "TRITON_INTERPRET": "0"})
    assert out.returncode == 0 and "compiled" in out.stdout, out.stderr[-3000:]
