"""The one-pass Triton FP8 cast (finegemm/kernels/portable/quant.py) against finegemm.quant's torch casts.

On the CPU (Triton's interpreter, whose FP32 -> E4M3 cast rounds wrongly, e.g. 124.3 to 64) the inputs are built
so that every quotient x / scale is an E4M3 value exactly: each group's largest magnitude is 448 * 2**k and the
others E4M3 values times 2**k, so both casts are exact and any difference is the kernel's indexing, masking,
reduction or scale arithmetic. NaN, Inf and all-zero groups, transposed views, partial groups, power-of-two
scales. The sm_90 compile shows the instructions the GPU results rest on (IEEE division, round-to-nearest
saturating E4M3 conversion); on the GPU (``gpu``) random data must match the torch casts bit for bit.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import finegemm
from finegemm.kernels.portable.quant import cast_to_fp8

E4M3_448 = 126  # the code of +448


def _exact_input(r, c, group_rows, seed=0, transposed=False, top=448.0):
    """x [r, c] whose every group (``group_rows`` x 128) quantizes exactly: E4M3 values below ``top`` times a
    per-group 2**k, the group's first element ``top`` * 2**k (``top`` 448, or a smaller E4M3 value for UE8M0
    scales, which then round up to exactly 2**k)."""
    gen = torch.Generator().manual_seed(seed)
    top_code = int(torch.tensor(top).to(torch.float8_e4m3fn).view(torch.uint8))
    codes = torch.randint(0, top_code, (r, c), generator=gen, dtype=torch.uint8)
    codes |= torch.randint(0, 2, (r, c), generator=gen, dtype=torch.uint8) << 7
    q = codes.view(torch.float8_e4m3fn).float()
    gr = group_rows
    q[::gr, ::128] = top
    k = torch.randint(-8, 8, (-(-r // gr), -(-c // 128)), generator=gen).float()
    scale = torch.pow(2.0, k).repeat_interleave(gr, 0)[:r].repeat_interleave(128, 1)[:, :c]
    x = q * scale
    if transposed:  # the same logical tensor as a transposed view of a row-major [c, r]
        x = x.t().contiguous().t()
    return x


def _torch_cast(x, group_rows, ue8m0):
    return (finegemm.per_token_cast_to_fp8 if group_rows == 1 else finegemm.per_block_cast_to_fp8)(x, ue8m0)


def _same(got, want):
    q, sf = got
    rq, rsf = want
    assert q.shape == rq.shape and sf.shape == rsf.shape and q.dtype == torch.float8_e4m3fn
    assert q.is_contiguous() and sf.is_contiguous()
    assert torch.equal(sf.view(torch.int32), rsf.view(torch.int32)), (sf, rsf)
    assert torch.equal(q.view(torch.uint8), rq.view(torch.uint8))


@pytest.mark.parametrize("group_rows", [1, 128])
@pytest.mark.parametrize("r,c", [(100, 300), (128, 128), (1, 7), (257, 640)])
@pytest.mark.parametrize("transposed", [False, True])
def test_matches_the_torch_cast(group_rows, r, c, transposed):
    x = _exact_input(r, c, group_rows, seed=r + c, transposed=transposed)
    for dtype in (torch.float32, torch.bfloat16):
        xi = x.to(dtype)  # E4M3 values times powers of two are exact in bf16 too
        _same(cast_to_fp8(xi, group_rows), _torch_cast(xi, group_rows, False))


@pytest.mark.parametrize("group_rows", [1, 128])
def test_power_of_two_scales(group_rows):
    """UE8M0: each group's amax is 320 * 2**k, so its scale 320 / 448 * 2**k rounds up to 2**k and every value
    stays exact; the scales are powers of two (no mantissa bits)."""
    x = _exact_input(130, 260, group_rows, seed=4, top=320.0)
    got = cast_to_fp8(x, group_rows, use_ue8m0=True)
    _same(got, _torch_cast(x, group_rows, True))
    bits = got[1].view(torch.int32)
    assert bool(((bits & 0x7FFFFF) == 0).all()), "a UE8M0 scale with mantissa bits"
    assert not torch.equal(got[1], _torch_cast(x, group_rows, False)[1])


def _special_rows(device):
    x = _exact_input(4, 256, 1, seed=9).to(device)
    x[0, 5] = float("nan")
    x[1, 7] = float("inf")
    x[2] = 0.0
    return x


def test_special_groups():
    """A NaN makes its row's scale NaN; an Inf gives an Inf scale and 0 for the finite values; an all-zero row
    gets the floor scale 1e-4 / 448 and zeros (as finegemm.quant documents); the other groups are untouched.
    (The NaN values themselves, the NaN row's and the Inf element's, are checked on the GPU,
    test_gpu_special_groups: the interpreter casts a NaN of either sign to arbitrary E4M3 values.)"""
    x = _special_rows("cpu")
    q, sf = cast_to_fp8(x, 1)
    rq, rsf = finegemm.per_token_cast_to_fp8(x)
    assert torch.isnan(sf[0, 0])
    assert torch.isinf(sf[1, 0]) and (q[1, :7].float() == 0).all() and (q[1, 8:128].float() == 0).all()
    assert sf[2, 0].item() == pytest.approx(1e-4 / 448) and (q[2].float() == 0).all()
    assert torch.equal(sf.view(torch.int32)[:, 1], rsf.view(torch.int32)[:, 1])
    assert torch.equal(q[:, 128:].view(torch.uint8), rq[:, 128:].view(torch.uint8))


@pytest.mark.gpu
def test_gpu_special_groups():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    x = _special_rows("cuda")
    q, sf = cast_to_fp8(x, 1)
    rq, rsf = finegemm.per_token_cast_to_fp8(x)
    assert torch.equal(torch.isnan(q.float()), torch.isnan(rq.float())) and torch.isnan(q[1, 7].float())
    assert torch.equal(torch.nan_to_num(q.float()), torch.nan_to_num(rq.float()))
    assert torch.equal(torch.isnan(sf), torch.isnan(rsf)) and torch.equal(sf.nan_to_num(), rsf.nan_to_num())


def test_empty_and_bad_input():
    q, sf = cast_to_fp8(torch.zeros(0, 300), 1)
    assert q.shape == (0, 300) and sf.shape == (0, 3)
    with pytest.raises(ValueError, match="2-D"):
        cast_to_fp8(torch.zeros(2, 3, 4), 1)
    with pytest.raises(ValueError, match="group_rows must be 1 or 128"):
        cast_to_fp8(torch.zeros(4, 4), 64)


COMPILE = textwrap.dedent('''
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from finegemm.kernels.portable.quant import _cast_kernel
    names = _cast_kernel.arg_names
    for group_rows, ue8m0, xdt in ((1, False, "*bf16"), (128, True, "*fp32")):
        const = dict(GROUP_R=group_rows, BLOCK_R=64 if group_rows == 1 else 128, UE8M0=ue8m0,
                     ROWS_CONTIGUOUS=group_rows == 1)
        types = dict(x_ptr=xdt, q_ptr="*fp8e4nv", sf_ptr="*fp32")
        sig = {n: ("constexpr" if n in const else types.get(n, "i32")) for n in names}
        k = triton.compile(ASTSource(fn=_cast_kernel, signature=sig,
                                     constexprs={(names.index(n),): v for n, v in const.items()}),
                           target=GPUTarget("cuda", 90, 32), options=dict(num_warps=4))
        ptx = k.asm["ptx"]
        assert "cvt.rn.satfinite.e4m3x2.f32" in ptx, "no round-to-nearest saturating E4M3 conversion"
        assert "div.rn.f32" in ptx, "no IEEE division"
        assert "div.full" not in ptx and "div.approx" not in ptx, "an approximate division"
    print("compiled")
''')


def test_compiles_for_sm90_with_exact_division_and_rounding():
    out = subprocess.run([sys.executable, "-c", COMPILE], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "TRITON_INTERPRET": "0"})
    assert out.returncode == 0 and "compiled" in out.stdout, out.stderr[-3000:]


@pytest.mark.gpu
@pytest.mark.parametrize("group_rows", [1, 128])
@pytest.mark.parametrize("ue8m0", [False, True])
@pytest.mark.parametrize("transposed", [False, True])
def test_gpu_random_data_matches_the_torch_cast(group_rows, ue8m0, transposed):
    """Random bf16 activations (DeepSeek-V3 sizes): bit for bit the torch cast's values and scales (UE8M0: the
    scales may differ where torch's float log2 rounded a scale just above a power of two down; none expected
    on this data, and every kernel scale is a power of two at least the exact amax / 448)."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    gen = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(4096, 7168, generator=gen, device="cuda").bfloat16()
    if transposed:
        x = x[:2048].t()
    got = cast_to_fp8(x, group_rows, ue8m0)
    _same(got, _torch_cast(x, group_rows, ue8m0))
