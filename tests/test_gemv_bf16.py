"""The BF16 GEMV kernel (kernels/sm90/gemv_bf16.py) under the interpreter and compiled for sm_90, and its rule."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from finegemm import reference
from finegemm.jit import heuristics_sm90
from finegemm.jit.device import H200
from finegemm.jit.heuristics import GemmDesc
from finegemm.jit.heuristics_sm90 import Sm90GemvConfig, gemv_fits, get_sm90_gemv_config, make_gemv_config


def _run(n, k, block_n, block_k, split, out_dtype=torch.float32, c_dtype=None, a_stride=1, c_col_stride=1, seed=0,
         times=1):
    from finegemm.kernels.sm90 import gemv_bf16

    g = torch.Generator().manual_seed(seed)
    a_store = torch.randn(1, k * a_stride, generator=g).bfloat16()
    a = a_store[:, ::a_stride]  # [1, K] with K stride a_stride
    b = torch.randn(n, k, generator=g).bfloat16()
    c = None
    if c_dtype is not None:
        c = torch.randn(1, n * c_col_stride, generator=g).to(c_dtype)[:, ::c_col_stride]
    cfg = make_gemv_config(GemmDesc("bf16", 1, n, k), H200, block_n, block_k, split)
    outs = []
    for _ in range(times):
        d = torch.full((1, n), float("nan"), dtype=out_dtype)
        plan = gemv_bf16.build_plan(cfg, a, b, d, c)
        for kernel, grid, args, meta in plan:
            kernel[grid](*args, **meta)
        outs.append(d)
    return outs, reference.bf16_gemm("nt", a, b, c), plan


@pytest.mark.parametrize("n,k,block_n,block_k,split", [
    (100, 256, 16, 64, 1),  # rows past N in the last block
    (64, 1024, 16, 128, 3),  # split-K: 8 slices in ranges of 3, 3, 2
    (33, 520, 8, 64, 2),  # K not a multiple of the slice (masked tail)
    (7, 64, 4, 64, 4),  # split asked beyond the slices: one range
    (40, 8, 8, 64, 1),  # K shorter than one slice
    (3, 5, 4, 64, 1),  # rows no vector load can align (K = 5)
])
@pytest.mark.parametrize("out_dtype,c_dtype", [(torch.float32, None), (torch.bfloat16, torch.bfloat16),
                                               (torch.float32, torch.float32)])
def test_gemv_matches_reference(n, k, block_n, block_k, split, out_dtype, c_dtype):
    (d,), ref, plan = _run(n, k, block_n, block_k, split, out_dtype, c_dtype)
    assert not torch.isnan(d).any()
    assert reference.calc_diff(d.double(), ref) < (1e-5 if out_dtype == torch.bfloat16 else 1e-9)
    (kernel, grid, args, meta), = plan
    assert grid == (-(-n // block_n), meta["SPLIT_K"]) and meta["SPLIT_K"] <= max(1, split)
    assert meta["EVEN_K"] == (k % block_k == 0)


def test_gemv_strided_operands_and_counters_left_zero():
    """A with a K stride, C with a column stride; the split-K arrival counters are 0 after each call, so a repeat
    gives the same bits."""
    outs, ref, plan = _run(96, 512, 16, 64, 4, torch.float32, torch.float32, a_stride=3, c_col_stride=2, times=2)
    assert reference.calc_diff(outs[0].double(), ref) < 1e-9
    assert torch.equal(outs[0], outs[1])
    (_, _, args, meta), = plan
    assert meta["SPLIT_K"] == 4 and not args[5].any()  # cnt_ptr


def test_gemv_rule():
    """The GEMV takes plain one-row BF16 GEMMs with a K-major B; 4x1024 blocks from
    K = 2048, 32x256 below; K split until 4 programs an SM, at most 16 ways and one slice a range."""
    assert gemv_fits(GemmDesc("bf16", 1, 4096, 7168))
    assert not gemv_fits(GemmDesc("bf16", 2, 4096, 7168))
    assert not gemv_fits(GemmDesc("bf16", 1, 4096, 7168, b_k_major=False))
    assert not gemv_fits(GemmDesc("fp8_1d2d", 1, 4096, 7168))
    long_k = make_gemv_config(GemmDesc("bf16", 1, 2112, 7168), H200, 4, 1024)
    assert (long_k.block_n, long_k.block_k, long_k.split_k) == (4, 1024, 1)  # 528 programs: 4 an SM
    assert make_gemv_config(GemmDesc("bf16", 1, 576, 7168), H200, 4, 1024).split_k == 4
    assert make_gemv_config(GemmDesc("bf16", 1, 256, 7168), H200, 4, 1024).split_k == 7  # 7 slices
    assert make_gemv_config(GemmDesc("bf16", 1, 64, 1 << 20), H200, 4, 1024).split_k == 16
    with pytest.raises(ValueError, match="powers of two"):
        make_gemv_config(GemmDesc("bf16", 1, 64, 64), H200, 12, 64)


def test_backend_choice_routes_one_row_bf16_to_the_gemv():
    """The public route (api/dispatch._choose on an sm_90's facts): one-row nt / tt calls take the GEMV at any
    alignment (an M-major A of one row, K % 8 != 0, N * 2 % 16 != 0: rows TMA could not address), an N-major B (nn /
    tn) and two rows the tensor-core tiles, FP8 never."""
    from finegemm.api.dispatch import _choose
    from finegemm.jit.heuristics_sm90 import Sm90Bf16Config

    for a_k_major in (True, False):
        backend, cfg = _choose(GemmDesc("bf16", 1, 4096, 7168, a_k_major, True), H200, "auto")
        assert backend == "sm90" and isinstance(cfg, Sm90GemvConfig)
    for n, k in ((4097, 7100), (3, 5)):
        assert isinstance(_choose(GemmDesc("bf16", 1, n, k), H200, "auto")[1], Sm90GemvConfig)
    assert _choose(GemmDesc("bf16", 2, 4096, 7100), H200, "auto")[0] == "portable"  # TMA rows unaligned
    assert isinstance(_choose(GemmDesc("bf16", 1, 4096, 7168, True, False), H200, "auto")[1], Sm90Bf16Config)
    assert isinstance(_choose(GemmDesc("bf16", 2, 4096, 7168), H200, "auto")[1], Sm90Bf16Config)
    assert not isinstance(_choose(GemmDesc("fp8_1d2d", 1, 4096, 7168), H200, "auto")[1], Sm90GemvConfig)


def test_gemv_rule_blocks():
    cfg = get_sm90_gemv_config(GemmDesc("bf16", 1, 7168, 2048), H200)
    assert isinstance(cfg, Sm90GemvConfig) and (cfg.block_n, cfg.block_k) == (4, 1024)
    assert (get_sm90_gemv_config(GemmDesc("bf16", 1, 7168, 1536), H200).block_k) == 256
    assert heuristics_sm90.gemv_blocks(2048) == (4, 1024) and heuristics_sm90.gemv_blocks(2047) == (32, 256)
    assert get_sm90_gemv_config(GemmDesc("bf16", 4, 7168, 2048), H200) is None


COMPILE = textwrap.dedent('''
    import re, triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from finegemm.kernels.sm90.compile_check import resource_usage
    from finegemm.kernels.sm90.gemv_bf16 import gemv_bf16_kernel as kern

    names = kern.arg_names
    for split, bn, bk, out, has_c in ((1, 4, 1024, "fp32", False), (4, 32, 256, "bf16", True)):
        types = dict(a_ptr="*bf16", b_ptr="*bf16", d_ptr="*" + out, c_ptr="*" + out, ws_ptr="*fp32",
                     cnt_ptr="*i32")
        cons = dict(HAS_C=has_c, SPLIT_K=split, BLOCK_N=bn, BLOCK_K=bk, EVEN_K=True, stride_ak=1)
        sig = {n: ("constexpr" if n in cons else types.get(n, "i32")) for n in names}
        aligned = [n for n in names if n in types or n in ("N", "K", "K_SPLIT", "stride_bn")]
        src = ASTSource(fn=kern, signature=sig, constexprs={(names.index(n),): v for n, v in cons.items()},
                        attrs={(names.index(n),): [["tt.divisibility", 16]] for n in aligned})
        k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=dict(num_warps=4))
        ptx = k.asm["ptx"]
        vectors = len(re.findall(r"ld\\.global(\\.\\w+)*\\.v4\\.b32", ptx))
        # B's slice a thread: bn * bk * 2 bytes / 128 threads in 16-byte vectors, twice (one slice loaded ahead)
        assert vectors >= 2 * bn * bk * 2 // 128 // 16, (split, vectors)
        usage = resource_usage(k)
        assert usage["LOCAL"] == 0 and usage["STACK"] == 0, usage
        if split > 1:
            assert re.search(r"atom\\.global\\.gpu\\.acq_rel\\.add", ptx), "no arrival atomic"
    print("compiled")
''')


def test_gemv_compiles_for_sm90_with_vector_loads_and_no_spills():
    out = subprocess.run([sys.executable, "-c", COMPILE], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "TRITON_INTERPRET": "0"})
    assert out.returncode == 0 and "compiled" in out.stdout, out.stderr[-3000:]
