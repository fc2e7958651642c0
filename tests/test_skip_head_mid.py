"""``fp8_gemm_nt_skip_head_mid``: a dense FP8 GEMM whose D skips ``mid`` columns inside every head.

CPU tests run the portable kernel through Triton's interpreter against the float64 reference: the written
columns (poisoned with NaN first) must be the product's, the gap columns (filled with a sentinel) untouched.
The sm90 part is compile-checked here and run on the H200 by the ``gpu``-marked tests at the end.
"""

from __future__ import annotations

import pytest
import torch
from generators import sm90_device

import finegemm
from finegemm import reference
from finegemm.jit.device import H200
from finegemm.jit.heuristics import GemmDesc
from finegemm.jit.heuristics_sm90 import get_sm90_config, head_split_config

SENTINEL = 3.25  # exactly representable in bf16 and fp32


def _operands(m: int, n: int, k: int, device="cpu", seed: int = 0):
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(m, k, generator=g).to(device)
    w = torch.randn(n, k, generator=g).to(device)
    return finegemm.per_token_cast_to_fp8(x), finegemm.per_block_cast_to_fp8(w)


def _output(m: int, n: int, splits, dtype, device="cpu") -> torch.Tensor:
    left, mid, right = splits
    d = torch.full((m, n // (left + right), left + mid + right), float("nan"), dtype=dtype, device=device)
    d[..., left:left + mid] = SENTINEL
    return d.flatten(1)


def _check(a, b, d, splits) -> None:
    left, mid, right = splits
    m = d.shape[0]
    ref = reference.fp8_gemm_nt(a, b).view(m, -1, left + right)
    heads = d.view(m, -1, left + mid + right)
    got = torch.cat([heads[..., :left], heads[..., left + mid:]], dim=-1)
    assert not torch.isnan(got).any(), "a written column was left unwritten"
    assert reference.calc_diff(got.double(), ref) < 1e-3
    assert bool((heads[..., left:left + mid] == SENTINEL).all()), "the gap columns were written"


@pytest.mark.parametrize("m,heads,splits,k,dtype", [
    (40, 3, (128, 64, 128), 256, torch.bfloat16),   # DeepSeek's k_nope / rope / v layout, 3 heads
    (17, 4, (32, 16, 64), 384, torch.float32),      # unequal parts, FP32 out
    (5, 2, (48, 8, 80), 200, torch.bfloat16),       # parts not multiples of 32 or the tile; K not of 128
])
def test_matches_the_reference_and_leaves_the_gap(m, heads, splits, k, dtype):
    n = heads * (splits[0] + splits[2])
    a, b = _operands(m, n, k)
    d = _output(m, n, splits, dtype)
    finegemm.fp8_gemm_nt_skip_head_mid(a, b, d, splits)
    _check(a, b, d, splits)


def test_zero_mid_is_the_plain_gemm():
    a, b = _operands(16, 256, 128, seed=1)
    d = torch.full((16, 256), float("nan"), dtype=torch.bfloat16)
    finegemm.fp8_gemm_nt_skip_head_mid(a, b, d, (64, 0, 64))
    plain = torch.empty_like(d)
    finegemm.fp8_gemm_nt(a, b, plain)
    assert torch.equal(d, plain)


def test_under_torch_compile_equals_eager():
    torch._dynamo.reset()
    splits = (64, 32, 64)
    a, b = _operands(8, 256, 128, seed=2)
    eager = _output(8, 256, splits, torch.bfloat16)
    finegemm.fp8_gemm_nt_skip_head_mid(a, b, eager, splits)

    def fn(d):
        finegemm.fp8_gemm_nt_skip_head_mid(a, b, d, splits)
        return d

    compiled = torch.compile(fn, backend="aot_eager", fullgraph=True)(_output(8, 256, splits, torch.bfloat16))
    torch._dynamo.reset()
    assert torch.equal(compiled, eager)


@pytest.mark.parametrize("splits,error,match", [
    ((128, 64), TypeError, "three ints"),
    ("abc", TypeError, "three ints"),
    ((128.0, 64, 128), TypeError, "three ints"),
    ((True, 64, 128), TypeError, "three ints"),
    ((0, 64, 128), ValueError, "left > 0"),
    ((128, -1, 128), ValueError, "mid >= 0"),
    ((96, 64, 96), ValueError, "whole number of heads"),
])
def test_bad_head_splits(splits, error, match):
    a, b = _operands(4, 256, 128)
    d = torch.zeros(4, 384, dtype=torch.bfloat16)
    with pytest.raises(error, match=match):
        finegemm.fp8_gemm_nt_skip_head_mid(a, b, d, splits)


def test_bad_output_and_recipe():
    a, b = _operands(4, 256, 128)
    with pytest.raises(ValueError, match=r"d must have shape \(4, 320\)"):
        finegemm.fp8_gemm_nt_skip_head_mid(a, b, torch.zeros(4, 256, dtype=torch.bfloat16), (128, 64, 128))
    with pytest.raises(TypeError, match="d must have dtype"):
        finegemm.fp8_gemm_nt_skip_head_mid(a, b, torch.zeros(4, 320, dtype=torch.float16), (128, 64, 128))
    per_channel = finegemm.per_token_cast_to_fp8(torch.randn(256, 128))
    with pytest.raises(ValueError, match="recipe"):
        finegemm.fp8_gemm_nt_skip_head_mid(a, per_channel, torch.zeros(4, 320), (128, 64, 128), recipe=(1, 1, 128))


# ------------------------------------------------------------------------------------------- sm90 rules
def test_sm90_config_tiles_land_inside_one_part():
    desc = GemmDesc("fp8_1d2d", 4096, 16 * 256, 512, head_splits=(128, 64, 128))
    cfg = head_split_config(desc, H200, get_sm90_config(desc, H200))
    assert 128 % cfg.block_n == 0 and cfg.split_k == 1
    small = GemmDesc("fp8_1d2d", 64, 2 * 128, 7168, head_splits=(32, 32, 96))  # the rules split K here
    assert get_sm90_config(small, H200).split_k > 1
    cfg = head_split_config(small, H200, get_sm90_config(small, H200))
    assert cfg.split_k == 1 and 32 % cfg.block_n == 0


def test_sm90_declines_parts_narrower_than_its_tiles():
    from finegemm.kernels.sm90 import dispatch

    ok = GemmDesc("fp8_1d2d", 128, 4 * 256, 512, head_splits=(128, 64, 128))
    assert dispatch.unsupported_reason(ok, H200) is None
    narrow = GemmDesc("fp8_1d2d", 128, 4 * 128, 512, head_splits=(48, 64, 80))
    assert "multiples of 32" in dispatch.unsupported_reason(narrow, H200)
    unaligned = GemmDesc("fp8_1d2d", 128, 4 * 256, 512, head_splits=(128, 3, 128))
    assert "16-byte" in dispatch.unsupported_reason(unaligned, H200)


@pytest.mark.parametrize("m", [64, 4096])
def test_sm90_head_split_kernel_compiles_without_spills(m):
    from finegemm.kernels.sm90 import compile_check, dispatch

    desc = GemmDesc("fp8_1d2d", m, 16 * 256, 512, head_splits=(128, 64, 128))
    kernel = compile_check.compile_variant(desc, dispatch.get_config(desc, H200))
    usage = compile_check.resource_usage(kernel)
    assert usage["STACK"] == 0 and usage["LOCAL"] == 0, usage
    assert "cp.async.bulk.tensor.2d.global.shared" in kernel.asm["ptx"]


# --------------------------------------------------------------------------------------------- H200
@pytest.mark.gpu
@pytest.mark.parametrize("m,heads,splits,k", [
    (1, 128, (128, 64, 128), 512),     # MLA's kv_b projection at decode
    (77, 16, (128, 64, 128), 512),
    (4096, 16, (128, 64, 128), 512),
    (333, 8, (64, 32, 96), 1024),
    (64, 4, (48, 16, 80), 256),        # parts not multiples of 32: the portable kernel
])
def test_gpu_matches_the_reference(m, heads, splits, k):
    dev = sm90_device()
    n = heads * (splits[0] + splits[2])
    a, b = _operands(m, n, k, dev, seed=m)
    d = _output(m, n, splits, torch.bfloat16, dev)
    finegemm.fp8_gemm_nt_skip_head_mid(a, b, d, splits)
    again = _output(m, n, splits, torch.bfloat16, dev)
    finegemm.fp8_gemm_nt_skip_head_mid(a, b, again, splits)
    torch.cuda.synchronize()
    _check(tuple(t.cpu() for t in a), tuple(t.cpu() for t in b), d.cpu(), splits)
    assert torch.equal(d.nan_to_num(), again.nan_to_num())


@pytest.mark.gpu
def test_gpu_dense_output_views_tma_cannot_address_run_portable():
    """A ``d`` view whose base is not 16-byte aligned (``out[:, 4:]``) cannot be a TMA target: the sm90 dispatch
    runs the portable kernel instead of failing in the descriptor's assertion."""
    dev = sm90_device()
    a, b = _operands(64, 256, 512, dev, seed=9)
    out = torch.full((64, 260), float("nan"), dtype=torch.bfloat16, device=dev)
    d = out[:, 4:]
    finegemm.fp8_gemm_nt(a, b, d)
    torch.cuda.synchronize()
    ref = reference.fp8_gemm_nt(tuple(t.cpu() for t in a), tuple(t.cpu() for t in b))
    assert reference.calc_diff(d.cpu().double(), ref) < 1e-3
    assert torch.isnan(out[:, :4]).all()
