"""DeepGEMM 2.8's Hopper API under ``import finegemm as deep_gemm``: names and the keyword arguments 2.8 added.

CPU, through Triton's interpreter: the new keywords give the results of the forms finegemm had (bitwise), and
the values finegemm cannot honour are rejected by name.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest
import torch
from deepgemm_api import API_TABLE, default_of
from generators import contiguous_row_groups

import finegemm as deep_gemm
from finegemm import reference

# DeepGEMM 2.8's public names that exist for SM90 (its SM100-only formats, mega MoE and hyper-connection kernels are
# not offered; README and commit 1f0b162 say why)
HOPPER_NAMES = (
    "set_num_sms", "get_num_sms", "set_pdl", "get_pdl", "use_deterministic_algorithms", "set_ignore_compile_dims",
    "fp8_gemm_nt", "fp8_gemm_nn", "fp8_gemm_tn", "fp8_gemm_tt", "fp8_gemm_nt_skip_head_mid",
    "m_grouped_fp8_gemm_nt_contiguous", "m_grouped_fp8_gemm_nn_contiguous", "m_grouped_fp8_gemm_nt_masked",
    "k_grouped_fp8_gemm_nt_contiguous", "k_grouped_fp8_gemm_tn_contiguous",
    "bf16_gemm_nt", "bf16_gemm_nn", "bf16_gemm_tn", "bf16_gemm_tt", "m_grouped_bf16_gemm_nt_contiguous",
    "m_grouped_bf16_gemm_nn_contiguous", "m_grouped_bf16_gemm_nt_masked", "k_grouped_bf16_gemm_tn_contiguous",
    "einsum", "fp8_einsum", "fp8_mqa_logits", "fp8_paged_mqa_logits", "fp8_fp4_mqa_logits", "fp8_fp4_paged_mqa_logits",
    "get_paged_mqa_logits_metadata", "transform_sf_into_required_layout", "get_tma_aligned_size",
    "get_mn_major_tma_aligned_tensor", "get_mn_major_tma_aligned_packed_ue8m0_tensor",
    "get_mk_alignment_for_contiguous_layout", "set_mk_alignment_for_contiguous_layout",
    "get_theoretical_mk_alignment_for_contiguous_layout", "ceil_div", "align", "ceil_to_ue8m0", "pack_ue8m0_to_int",
    "per_token_cast_to_fp8", "per_channel_cast_to_fp8", "per_block_cast_to_fp8", "per_custom_dims_cast_to_fp8",
    "calc_diff", "cublaslt_gemm_nt", "cublaslt_gemm_nn", "cublaslt_gemm_tn", "cublaslt_gemm_tt",
)


@pytest.mark.parametrize("name", HOPPER_NAMES)
def test_deepgemm_name_exists(name):
    assert callable(getattr(deep_gemm, name)), name
    assert name in deep_gemm.__all__


def _dense(m=16, n=256, k=256, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = deep_gemm.per_token_cast_to_fp8(torch.randn(m, k, generator=g))
    return a, torch.randn(n, k, generator=g)


def test_per_operand_recipes_are_the_recipe():
    a, w = _dense()
    b = deep_gemm.per_block_cast_to_fp8(w)
    want = torch.empty(16, 256, dtype=torch.bfloat16)
    deep_gemm.fp8_gemm_nt(a, b, want, recipe=(1, 128, 128))
    got = torch.empty_like(want)
    deep_gemm.fp8_gemm_nt(a, b, got, recipe_a=(1, 128), recipe_b=(128, 128), alpha=1.0)
    assert torch.equal(got, want)
    # per channel (1d1d) with c, through the tn form
    b1 = deep_gemm.per_token_cast_to_fp8(w)
    c = torch.randn(16, 256)
    d = torch.empty(16, 256)
    deep_gemm.fp8_gemm_tn((a[0].T, a[1].T), (b1[0].T, b1[1].T), d, c, recipe_a=(1, 128), recipe_b=(1, 128))
    assert reference.calc_diff(d, reference.fp8_gemm_nt(a, b1, c, (1, 1, 128))) < 1e-3


@pytest.mark.parametrize("kwargs,match", [
    (dict(recipe=(1, 128, 128), recipe_a=(1, 128), recipe_b=(128, 128)), "not both"),
    (dict(recipe_a=(1, 128)), r"recipe_b must be a pair"),
    (dict(recipe_a=(1, 128), recipe_b=(128, 64)), "share their K granularity"),
    (dict(recipe_a=(1, 64), recipe_b=(128, 64)), r"recipe must be \(1, 128, 128\)"),
    (dict(alpha=2.0), "alpha must be None or 1"),
    (dict(alpha=True), "alpha must be None or 1"),
])
def test_unsupported_keyword_values_are_rejected(kwargs, match):
    a, w = _dense()
    b = deep_gemm.per_block_cast_to_fp8(w)
    with pytest.raises(ValueError, match=match):
        deep_gemm.fp8_gemm_nt(a, b, torch.empty(16, 256, dtype=torch.bfloat16), **kwargs)


def test_bf16_alpha():
    x, y = torch.randn(8, 64).bfloat16(), torch.randn(32, 64).bfloat16()
    d, want = torch.empty(8, 32), torch.empty(8, 32)
    deep_gemm.bf16_gemm_nt(x, y, want)
    deep_gemm.bf16_gemm_tt(x.T, y, d, alpha=1)
    assert torch.equal(d, want)
    with pytest.raises(ValueError, match="alpha must be None or 1"):
        deep_gemm.bf16_gemm_nn(x, y.T, d, alpha=0.5)


def test_grouped_keywords():
    row_groups, _, m = contiguous_row_groups([100, 30], 128)
    g = torch.Generator().manual_seed(4)
    a = deep_gemm.per_token_cast_to_fp8(torch.randn(m, 256, generator=g))
    w = torch.randn(2, 128, 256, generator=g)
    casts = [deep_gemm.per_block_cast_to_fp8(w[i]) for i in range(2)]
    b = (torch.stack([q for q, _ in casts]), torch.stack([s for _, s in casts]))
    want = torch.full((m, 128), 7.0, dtype=torch.bfloat16)
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous(a, b, want, row_groups)
    got = torch.full_like(want, 7.0)
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous(a, b, got, row_groups, recipe_a=(1, 128), recipe_b=(128, 128),
                                               ensure_zero_padding=False)
    assert torch.equal(got, want) and bool((got[row_groups < 0] == 0).all())

    am = (a[0][:256].view(2, 128, 256), a[1][:256].view(2, 128, -1))
    masked_m = torch.tensor([100, 30], dtype=torch.int32)
    want = torch.zeros(2, 128, 128, dtype=torch.bfloat16)
    deep_gemm.m_grouped_fp8_gemm_nt_masked(am, b, want, masked_m, 64)
    got = torch.zeros_like(want)
    deep_gemm.m_grouped_fp8_gemm_nt_masked(am, b, got, masked_m, 64, recipe_a=(1, 128), recipe_b=(128, 128))
    assert torch.equal(got, want)

    ks = [128, 256]
    x = deep_gemm.per_token_cast_to_fp8(torch.randn(16, sum(ks)))
    y = deep_gemm.per_token_cast_to_fp8(torch.randn(32, sum(ks)))
    d = torch.zeros(2, 16, 32)
    with pytest.raises(ValueError, match="use_psum_layout must be False for the k-grouped GEMMs"):
        deep_gemm.k_grouped_fp8_gemm_nt_contiguous(x, y, d, ks, torch.tensor(ks, dtype=torch.int32), d,
                                                   use_psum_layout=True)


def test_transform_takes_the_one_operand_recipe():
    sf = torch.rand(77, 4)
    want = deep_gemm.transform_sf_into_required_layout(sf, 77, 512, (1, 128, 128), is_sfa=True)
    got = deep_gemm.transform_sf_into_required_layout(sf, 77, 512, (1, 128))
    assert torch.equal(got, want) and got.stride() == want.stride()
    with pytest.raises(ValueError, match="pass is_sfa=None"):
        deep_gemm.transform_sf_into_required_layout(sf, 77, 512, (1, 128), is_sfa=True)
    with pytest.raises(ValueError, match="psum_layout"):
        deep_gemm.transform_sf_into_required_layout(sf, 77, 512, (1, 128), psum_layout=torch.zeros(2))
    ue8m0 = deep_gemm.ceil_to_ue8m0(sf)
    assert torch.equal(deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(ue8m0, psum_layout=None),
                       deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(ue8m0))
    with pytest.raises(ValueError, match="psum_layout"):
        deep_gemm.get_mn_major_tma_aligned_packed_ue8m0_tensor(ue8m0, torch.zeros(2))


@pytest.mark.parametrize("layout", ["nt", "nn", "tn", "tt"])
@pytest.mark.parametrize("dtype,out_dtype", [(torch.bfloat16, torch.float32), (torch.bfloat16, torch.bfloat16),
                                             (torch.float32, torch.float32)])
def test_cublaslt_peers(layout, dtype, out_dtype):
    """DeepGEMM's cuBLASLt peers run torch's GEMM: d = c + a @ b^T against float64, c added in FP32."""
    g = torch.Generator().manual_seed(11)
    x, y = torch.randn(33, 70, generator=g).to(dtype), torch.randn(45, 70, generator=g).to(dtype)
    a = x if layout[0] == "n" else x.t().contiguous()
    b = y if layout[1] == "t" else y.t().contiguous()
    fn = getattr(deep_gemm, f"cublaslt_gemm_{layout}")
    d = torch.full((33, 45), float("nan"), dtype=out_dtype)
    fn(a, b, d)
    ref = x.double() @ y.double().t()
    assert reference.calc_diff(d, ref) < (1e-5 if out_dtype == torch.bfloat16 else 1e-10)
    c = torch.randn(33, 45, generator=g)
    d = torch.full((33, 45), float("nan"), dtype=out_dtype)
    fn(a, b, d, c)
    assert reference.calc_diff(d, ref + c.double()) < (1e-5 if out_dtype == torch.bfloat16 else 1e-10)


def test_cublaslt_peer_errors():
    x = torch.randn(4, 8).bfloat16()
    with pytest.raises(TypeError, match="a and b must have one dtype"):
        deep_gemm.cublaslt_gemm_nt(x, x.half(), torch.empty(4, 4))
    with pytest.raises(TypeError, match="d must have dtype torch.bfloat16, torch.float32"):
        deep_gemm.cublaslt_gemm_nt(x, x, torch.empty(4, 4, dtype=torch.float16))
    with pytest.raises(ValueError, match=r"b must be 2-D \[K, N\]"):
        deep_gemm.cublaslt_gemm_nn(x, x[None], torch.empty(4, 4))
    with pytest.raises(TypeError, match="a must have dtype"):
        deep_gemm.cublaslt_gemm_nt(x.to(torch.float8_e4m3fn), x, torch.empty(4, 4))


# ---------------------------------------------------------------------------------------------
# Signatures against DeepGEMM 2.6.1's definitions (tests/data/deepgemm_api.json, from tools/deepgemm_api_table.py)
# ---------------------------------------------------------------------------------------------

NOT_OFFERED = {"init": "DeepGEMM's C++ initializer, called by its own __init__"}
OFFERED = sorted(name for name, e in API_TABLE["entries"].items() if not e["sm100_only"] and name not in NOT_OFFERED)


def _finegemm_object(name: str, entry: dict):
    if entry["module"] == "deep_gemm":
        return getattr(deep_gemm, name)
    module = importlib.import_module(entry["module"].replace("deep_gemm", "finegemm.deepgemm_alias", 1))
    return getattr(module, name.rsplit(".", 1)[1])


def test_table_names_its_source():
    assert API_TABLE["deepgemm_version"] == "2.6.1"
    assert API_TABLE["deepgemm_commit"] == "54e22612409371d6364144b69086735beb54e98b"
    assert len(OFFERED) > 60


@pytest.mark.parametrize("name", OFFERED)
def test_signature_matches_deepgemm(name):
    """DeepGEMM's parameters by name, in its order, with its defaults; finegemm's extra ones come after, optional."""
    entry = API_TABLE["entries"][name]
    obj = _finegemm_object(name, entry)
    if "alias_of" in entry and entry["module"] != "deep_gemm":
        assert obj is getattr(deep_gemm, entry["alias_of"])
        return
    if entry.get("kind") == "class":
        assert inspect.isclass(obj)
        return
    params = list(inspect.signature(obj).parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if "positional_only" in entry:  # pybind11 without py::arg: arg0, arg1, ... by position
        n = entry["positional_only"]
        assert len(positional) >= n and sum(p.default is p.empty for p in positional) <= n, (name, params)
        return
    want = entry["params"]
    assert len(params) >= len(want), (name, params)
    for got, spec in zip(params, want):
        assert got.name == spec["name"], (name, [p.name for p in params], [w["name"] for w in want])
        if spec.get("kind") == "VAR_POSITIONAL":
            assert got.kind == got.VAR_POSITIONAL, (name, got)
            continue
        assert got.kind == got.POSITIONAL_OR_KEYWORD, (name, got)
        if "default" in spec:
            assert got.default == default_of(spec), (name, got, spec)
    for extra in params[len(want):]:
        assert extra.default is not extra.empty or extra.kind in (extra.VAR_KEYWORD, extra.VAR_POSITIONAL), (
            name, extra)


def test_fp4_operands_are_refused_by_name():
    a = (torch.zeros(16, 64, dtype=torch.int8), torch.ones(16, 1))
    b = deep_gemm.per_block_cast_to_fp8(torch.randn(128, 128))
    d = torch.empty(16, 128, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match=r"a\[0\] has dtype torch.int8 \(packed FP4 E2M1\)"):
        deep_gemm.fp8_fp4_gemm_nt(a, b, d)
    with pytest.raises(TypeError, match=r"b\[0\] has dtype torch.int8"):
        deep_gemm.m_grouped_fp8_fp4_gemm_nt_masked(b, (a[0][None], a[1][None]), d[None], torch.ones(1), 16)


def test_fp8_fp4_names_are_the_fp8_gemms():
    a, w = _dense()
    b = deep_gemm.per_block_cast_to_fp8(w)
    want = torch.empty(16, 256, dtype=torch.bfloat16)
    deep_gemm.fp8_gemm_nt(a, b, want)
    got = torch.empty_like(want)
    deep_gemm.fp8_fp4_gemm_nt(a, b, got, None, None, (1, 128), (128, 128))  # DeepGEMM's positional order
    assert torch.equal(got, want)


def test_runtime_knobs():
    assert deep_gemm.get_tc_util() == 100
    deep_gemm.set_tc_util(80)
    assert deep_gemm.get_tc_util() == 80
    deep_gemm.set_tc_util(0)
    assert deep_gemm.get_tc_util() == 100
    with pytest.raises(ValueError, match=r"new_tc_util must be an int in \[0, 100\]; got 101"):
        deep_gemm.set_tc_util(101)
    deep_gemm.set_block_size_multiple_of(1)
    with pytest.warns(UserWarning, match="do not take a block-size divisor"):
        deep_gemm.set_block_size_multiple_of((16, 32))
    with pytest.raises(ValueError, match="positive int or a pair"):
        deep_gemm.set_block_size_multiple_of((16, 0))
    deep_gemm.set_block_size_multiple_of(1)


@pytest.mark.parametrize("mn,k,groups", [(4097, 128, None), (4096, 128, 2), (77, 7296, None), (8, 256, 4)])
def test_mn_major_strides_as_deepgemm(mn, k, groups):
    """DeepGEMM's test_layout.py: strides (1, aligned MN) even for one scale column; the kernels' checks take it."""
    shape = (mn, k // 128) if groups is None else (groups, mn, k // 128)
    sf = torch.rand(shape)
    out = deep_gemm.get_mn_major_tma_aligned_tensor(sf)
    aligned = deep_gemm.get_tma_aligned_size(mn, 4)
    assert torch.equal(out, sf) and out.stride()[-2:] == (1, aligned)
    if groups is not None:
        assert out.stride(0) == aligned * (k // 128)
    assert deep_gemm.transform_sf_into_required_layout(out, mn, k, (1, 128), groups) is out  # path B: no copy


def test_mn_major_one_column_runs_the_gemm():
    a = deep_gemm.per_token_cast_to_fp8(torch.randn(13, 128))
    b = deep_gemm.per_block_cast_to_fp8(torch.randn(64, 128))
    sfa = deep_gemm.get_mn_major_tma_aligned_tensor(a[1])
    assert sfa.stride() == (1, 16)
    d = torch.empty(13, 64, dtype=torch.bfloat16)
    deep_gemm.fp8_gemm_nt((a[0], sfa), b, d)
    assert reference.calc_diff(d, reference.fp8_gemm_nt(a, b, None, (1, 128, 128))) < 1e-3


def test_k_grouped_packed_ue8m0():
    ks, mn = [256, 0, 640], 8
    g = torch.Generator().manual_seed(3)
    parts = [deep_gemm.per_channel_cast_to_fp8(torch.randn(k, mn, generator=g), use_ue8m0=True)[1] for k in ks if k]
    sf = torch.cat(parts)
    packed = deep_gemm.get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(
        sf, torch.tensor(ks, dtype=torch.int32), ks, 128, 128)
    assert packed.shape == (1 + 0 + 2, mn) and packed.is_contiguous()
    assert torch.equal(deep_gemm.unpack_ue8m0(packed[:1].T, 2).T, parts[0])
    assert torch.equal(deep_gemm.unpack_ue8m0(packed[1:].T, 5).T, parts[1])
    with pytest.raises(ValueError, match="gran_k must be 128"):
        deep_gemm.get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(sf, torch.tensor(ks, dtype=torch.int32),
                                                                        ks, 32, 128)


def test_fp4_host_casts_round_trip():
    g = torch.Generator().manual_seed(5)
    x = torch.randn(6, 256, generator=g)
    q, sf = deep_gemm.per_token_cast_to_fp4(x, use_ue8m0=False)
    assert q.dtype == torch.int8 and q.shape == (6, 128) and sf.shape == (6, 2)
    back = deep_gemm.cast_back_from_fp4(q, sf)
    assert reference.calc_diff(back, x) < 0.02  # 4-bit values: a few percent
    grid = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
    exact = torch.cat([grid, -grid]).repeat(1, 16).view(2, 128)  # amax 6: scale 1, every value representable
    q, sf = deep_gemm.per_token_cast_to_fp4(exact, use_ue8m0=True, use_packed_ue8m0=True)
    assert sf.dtype == torch.int32 and torch.equal(deep_gemm.cast_back_from_fp4(q, sf, use_packed_ue8m0=True), exact)
    qt = deep_gemm.transpose_packed_fp4(q)
    assert torch.equal(deep_gemm.cast_back_from_fp4(qt, torch.ones(128, 1)), exact.T)


def test_deepgemm_switches(monkeypatch, tmp_path):
    """DG_PRINT_CONFIGS / DG_JIT_CACHE_DIR stand in for the finegemm switches when those are unset."""
    from finegemm.jit import env

    for name in ("FINEGEMM_PRINT_CONFIGS", "FINEGEMM_CACHE_DIR", "TRITON_CACHE_DIR", "DG_PRINT_CONFIGS"):
        monkeypatch.delenv(name, raising=False)
    assert not env.flag(env.PRINT_CONFIGS)
    monkeypatch.setenv("DG_PRINT_CONFIGS", "1")
    assert env.flag(env.PRINT_CONFIGS)
    monkeypatch.setenv("FINEGEMM_PRINT_CONFIGS", "0")
    assert not env.flag(env.PRINT_CONFIGS)
    monkeypatch.setenv("DG_JIT_CACHE_DIR", str(tmp_path))
    assert env.apply_cache_dir() == str(tmp_path)
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert env.markdown_table(env.DG_SWITCHES) in readme


def test_ceil_div_and_align_take_integer_tensors_as_deepgemm_tests_pass_them():
    """DeepGEMM's test generators call ``align(psum_m[j - 1], alignment)`` (a 0-d int32 tensor) and ``ceil_div`` over
    context lengths (an int32 tensor): elementwise, dtype kept. Floats, bools and float tensors stay refused."""
    psum = torch.tensor([231, 0, 9884], dtype=torch.int32)
    out = deep_gemm.align(psum[0], 128)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.int32 and int(out) == 256
    lens = torch.tensor([1, 64, 65, 0, 10433], dtype=torch.int32)
    assert deep_gemm.ceil_div(lens, 64).tolist() == [1, 1, 2, 0, 164]
    assert deep_gemm.align(lens, 64).tolist() == [64, 64, 128, 0, 10496]
    assert deep_gemm.ceil_div(231, 128) == 2 and deep_gemm.align(231, 128) == 256
    for bad in (2.0, True, torch.tensor([1.5]), torch.tensor([True])):
        with pytest.raises(TypeError, match="x must be an int"):
            deep_gemm.ceil_div(bad, 128)
    with pytest.raises(ValueError, match="y must be an int >= 1"):
        deep_gemm.align(psum, 0)
