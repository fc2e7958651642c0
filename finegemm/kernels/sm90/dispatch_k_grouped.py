"""Host side of the sm90 k-grouped GEMMs (MoE weight gradients): support rule, config, per-group launches.

``d[g] = c[g] + A_g @ B_g^T`` in FP32 for every group ``g`` of ``ks`` (the K of each group; M and N
fixed), as api/grouped.py's ``_run_k_grouped`` hands the tensors over:

- ``k_grouped_fp8_gemm_nt_contiguous`` (``flat_k_major``): ``a`` a contiguous FP8 buffer whose group g is
  a row-major ``[M, ks[g]]`` block at element ``sum(ks[:g]) * M`` (``b`` alike with N); ``sfa`` fp32
  ``[M, sum(ks)/128]``, ``sfb`` fp32 ``[N, sum(ks)/128]``.
- ``k_grouped_fp8_gemm_tn_contiguous``: ``a`` FP8 ``[sum(ks), M]``, ``b`` ``[sum(ks), N]`` (MN-major as
  DeepGEMM passes them, or column-major = K-major); ``sfa`` fp32 ``[sum(ks)/128, M]``, ``sfb``
  ``[sum(ks)/128, N]``.
- ``k_grouped_bf16_gemm_tn_contiguous``: ``a`` bf16 ``[sum(ks), M]``, ``b`` bf16 ``[sum(ks), N]``, either
  major-ness.

``d`` and ``c`` are fp32 ``[G, M, N]`` (``c`` may be ``d``; FP8 only: ``c`` None, ``d[g] = A_g @ B_g^T``
with D not read, from api/grouped.py's ``k_grouped_fp8_gemm_tn_contiguous_no_c``).

Method: one launch of the *dense* sm90 kernel per non-empty group, from a host loop over ``ks`` (the
host list, so no device sync); an empty group gets ``d[g] = c[g]`` (a copy unless ``c`` is ``d``; 0 without C).

- FP8: the dense 1d1d kernel (:mod:`.gemm_1d2d`, launches built by :mod:`.dispatch`) with C and FP32
  out, its config from :func:`fp8_group_config` for ``(M, N, ks[g])``, K read at run time
  (``K_DYNAMIC_DEFAULT``). Group g's A is a K-major
  ``[M, ks[g]]`` view: in the nt form a slice of the flat buffer (row stride ``ks[g]`` bytes, a
  multiple of 128); in the tn form a column block of the ``[M, sum(ks)]`` K-major operand. FP8 WGMMA
  reads only K-major shared-memory operands, so an MN-major tn operand is first transposed into a
  cached workspace by one launch per operand for all groups (:mod:`.transpose`). Measured on the H200
  at the six anchor cases (benchmarks/results/k_grouped_h200_2026-12-03_run3.json): the two copies
  take 139-200 us and the tn call 150-330 us more than nt (1.3-3.4 ms in all), while the portable
  kernel takes 8.7-21.7 ms on the same tn operands (6-8x slower), so tn takes the copy; its result is
  bitwise the nt result. A column-major (K-major) tn operand is read in place.
- Scales: the dense kernel reads per-channel scales MN-major (``stride(0) == 1`` along M / N, one
  column per 128 of K): group g's are the column slice ``[:, sum(ks[:g])/128 ...]``. Scales already so
  (the nt generator's ``sf.T``, the tn form's row-major ``[sum(ks)/128, MN]`` seen transposed) with a
  K stride of a multiple of 4 words are used in place (path B); any other layout is re-laid out once per
  call with :func:`finegemm.layout.get_mn_major_tma_aligned_tensor` (path A, one small copy).
- BF16: the dense BF16 kernel (:mod:`.dispatch_bf16`'s descriptors, :mod:`.gemm_bf16`) reads the tn
  operands in place: group g is ``A = a[k0:k0+k].T`` and ``B = b[k0:k0+k].T`` (MN-major when ``a`` / ``b``
  are row-major), C and D fp32.

Host cost per repeated call: the per-group descs and configs are planned once per (desc, ks, scale
strides); a call whose pointers, strides and ks repeat replays one :class:`~.launcher.Recording` of all
its launches (FP8: the tn transposes, then every group's GEMM and split-K reduction, built with the dense
dispatch's ``_build_plan``; BF16: every group's GEMM), so a repeated call costs one key and one replay
of G launches. (Calling ``dispatch.fp8_gemm`` per group instead measured 55 us of host time per group on
the H200 host, more than the GPU time of small groups.)

Not covered (planned elsewhere): tensors TMA cannot address (:func:`layout_reason`, checked by the
planner, run the portable kernel); packed UE8M0 scales (rejected by the API); ``ks_tensor`` is not
read (the host ``ks`` drives the loop; the API checks they agree under ``FINEGEMM_DEBUG``). The
workspaces of the FP8 tn copy are cached per device and stream (calls on two streams at once do not
share one).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch

from ...jit.device import DeviceFacts
from ...jit.heuristics import FP8_BLOCK_K, GemmDesc
from ...jit.heuristics_sm90 import get_sm90_bf16_config, make_config
from ...layout import get_mn_major_tma_aligned_tensor
from . import dispatch, dispatch_bf16, gemm_1d2d, gemm_bf16, launcher
from .transpose import operand_workspace, transpose_launch

KINDS = ("fp8_1d1d", "bf16")
MAX_PLANS = 1024
MAX_BF16_RECORDINGS = 1024


@dataclass(frozen=True)
class KGroupedConfig:
    """What the k-grouped desc resolves to; the per-group dense configs are picked per group K.

    ``facts``: the device the dense heuristics plan for. ``transpose_a`` / ``transpose_b``: FP8 tn with
    an MN-major operand, copied K-major into a workspace before the GEMMs.
    """

    facts: DeviceFacts
    transpose_a: bool = False
    transpose_b: bool = False
    # FP8 only, for config sweeps and tests: ((name, value), ...) keywords of heuristics_sm90.make_config
    # (bm, bn, split, small_epi, sfa_tma, sfb_tma; "pipe_mma" is set on its result) for every group
    # instead of the dense heuristic per group K (None)
    group_overrides: tuple[tuple[str, Any], ...] | None = None
    # FP8: groups read K from their A descriptor at run time (``Sm90Config.k_dynamic``), so one compiled
    # kernel per tile config serves every group K instead of one compile (~1.3 s) per distinct K
    k_dynamic: bool = False


# What get_config sets k_dynamic to. On: one compiled kernel per tile config instead of one per distinct
# group K (~1.3 s each, paid again whenever expert loads produce a new K). H200, f591c04 GPU tests pass
# (test_fp8_nt_runtime_k); timing (results/k_grouped_sweep_h200_2026-12-03_kdyn_3253fb0.json) within
# -4 .. +7 % of the compile-time-K kernel: G=16 4096x7168 2943 vs 3174 us, 7168x2048 1620 vs 1556,
# G=4 4096x7168 1824 vs 1826.
K_DYNAMIC_DEFAULT = True


def unsupported_reason(desc: GemmDesc, facts: DeviceFacts) -> str | None:
    """None when the per-group sm90 launches run ``desc`` (a ``k_grouped`` desc: ``k`` is sum(ks)); else why not."""
    if desc.layout != "k_grouped":
        return f"layout {desc.layout} is not k-grouped"
    if desc.kind not in KINDS:
        return f"kind {desc.kind} has no sm90 k-grouped path (supported: {', '.join(KINDS)})"
    if (desc.n * 4) % 16:
        return f"N={desc.n}: rows of the fp32 D are not 16-byte aligned for the TMA store (N % 4 != 0)"
    if desc.kind == "bf16":
        # the dense BF16 rule for one group of K=128 (K-major rows of 128 bf16 are always aligned)
        return dispatch_bf16.unsupported_reason(_group_desc(desc, 128), facts)
    if desc.sf_packed:
        return "packed UE8M0 scales are not supported for k-grouped layouts"
    return dispatch.unsupported_reason(_group_desc(desc, FP8_BLOCK_K), facts)


def get_config(desc: GemmDesc, facts: DeviceFacts) -> KGroupedConfig:
    """The k-grouped config: the device facts, and which FP8 tn operands are transposed first."""
    fp8 = desc.kind != "bf16"
    return KGroupedConfig(facts, fp8 and not desc.a_k_major, fp8 and not desc.b_k_major,
                          k_dynamic=fp8 and K_DYNAMIC_DEFAULT)


def _group_desc(desc: GemmDesc, k: int) -> GemmDesc:
    """The dense desc of one group with K = ``k``: FP32 D with an FP32 C (a row-major ``[M, N]`` slice, as D; the
    launch checks it before staging it by TMA); FP8 operands are K-major views."""
    if desc.kind == "bf16":
        return GemmDesc("bf16", desc.m, desc.n, k, desc.a_k_major, desc.b_k_major, True, True, c_like_d=True)
    return GemmDesc("fp8_1d1d", desc.m, desc.n, k, True, True, True, desc.with_c)


def _tma_base_ok(t: torch.Tensor) -> bool:
    return t.data_ptr() % 16 == 0


def layout_reason(desc: GemmDesc, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None, d: torch.Tensor,
                  flat_k_major: bool) -> str | None:
    """Why these tensors (validated by api/grouped.py, shapes as in the module docstring) cannot take the
    sm90 launches, which :func:`unsupported_reason` cannot see from the desc; None when they can.

    TMA needs 16-byte aligned bases and row strides: D's rows and group stride, A's and B's (read in
    place: the nt buffers, K-major FP8 tn operands, both BF16 forms). The C epilogue needs C row-major.
    """
    g, m, n = d.shape
    if not _tma_base_ok(d) or (g > 1 and d.stride(0) % 4) or (m > 1 and d.stride(1) % 4):
        return f"d (stride {tuple(d.stride())}) is not 16-byte aligned for the TMA store"
    if c is not None and n > 1 and c.stride(2) != 1:
        return f"c (stride {tuple(c.stride())}) is not row-major: the sm90 epilogue reads rows of C"
    for name, x, mn in (("a", a, m), ("b", b, n)):
        if flat_k_major:
            if not _tma_base_ok(x):
                return f"{name} is not 16-byte aligned (data_ptr {x.data_ptr():#x})"
            continue
        k_major = desc.a_k_major if name == "a" else desc.b_k_major
        if desc.kind != "bf16" and not k_major:
            continue  # copied into the aligned workspace
        # the in-place view: [MN, K] K-major (row stride x.stride(1)) or [K, MN] MN-major (x.stride(0))
        stride = x.stride(1) if k_major else x.stride(0)
        if not _tma_base_ok(x) or (x.shape[0] > 1 and mn > 1 and (stride * x.element_size()) % 16):
            return f"{name} (stride {tuple(x.stride())}) is not 16-byte aligned for TMA"
    return None


# ---------------------------------------------------------------------------------------------
# Plans: per (desc, config, ks, scale strides); pointer-free, so one plan serves every call site.
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Group:
    g: int
    k: int
    k0: int  # first K of the group in the concatenation
    desc: GemmDesc
    config: Any


@dataclass(frozen=True)
class _Plan:
    groups: tuple[_Group, ...]  # non-empty groups
    empty: tuple[int, ...]  # groups with ks[g] == 0: d[g] = c[g]
    sfa_ready: bool = True  # FP8 scales MN-major already (path B); else re-laid out per call
    sfb_ready: bool = True


_plans: dict[tuple, _Plan] = {}
_group_configs: dict[tuple, Any] = {}


def _group_config(desc: GemmDesc, config: KGroupedConfig) -> Any:
    key = (desc, config)
    cfg = _group_configs.get(key)
    if cfg is None:
        if desc.kind == "bf16":
            cfg = get_sm90_bf16_config(desc, config.facts)  # tensor-core tiles (no GEMV)
        elif config.group_overrides is not None:
            kwargs = dict(config.group_overrides)
            pipe = kwargs.pop("pipe_mma", None)
            cfg = make_config(desc, config.facts, **kwargs)
            if pipe is not None:
                cfg = dataclasses.replace(cfg, pipe_mma=pipe)
        else:
            cfg = fp8_group_config(desc, config.facts)
        if config.k_dynamic and desc.kind != "bf16" and cfg.split_k == 1:
            cfg = dataclasses.replace(cfg, k_dynamic=True)
            cfg = dataclasses.replace(cfg, c_tma=cfg.c_tma and cfg.can_stage_c)
        _group_configs[key] = cfg
    return cfg


def fp8_group_config(desc: GemmDesc, facts: DeviceFacts) -> Any:
    """The dense 1d1d config of one group (FP32 D with C, K = ``desc.k``): the dense weight-gradient rule
    (``heuristics_sm90``; C staged by TMA; 64- or 128-row tiles, 128 rows also from K = 4096 since the in-place
    accumulate by TMA reduce-add made them faster there on the H100).

    History (H200, nt, c = d): before C was staged by TMA, 256-row tiles won from K > 1024 (results/
    k_grouped_sweep_h200_2026-12-03.json: G = 16 4096x7168, K 1536-2688, 3130 us against 3472 for 128
    rows pipelined), and this rule picked them there. C by TMA gains ~12 % on 128-row pipelined tiles at
    K = 2048 (4096x7168x2048 209.2 -> 183.4 us) and ~2 % on 256-row ones (first wave only), whose margin
    at K ~ 2048 was by then ~3 % the other way (f591c04 sweep: 3094 us 128 rows vs 3173), so below K = 4096
    the dense rule's 128-row tiles ran; from 4096 both rules took 256 rows then (G = 4 4096x7168, K 6272-7808:
    1804 vs 2312 us), before the in-place accumulate.
    """
    return dispatch.get_config(desc, facts)


def _mn_major_ready(sf: torch.Tensor) -> bool:
    """``[MN, SFK]`` scales the dense kernel reads as they are: MN-major, K stride a multiple of 4 words."""
    mn, sfk = sf.shape
    return (mn == 1 or sf.stride(0) == 1) and (sfk == 1 or sf.stride(1) % 4 == 0)


def _plan(desc: GemmDesc, config: KGroupedConfig, ks: list[int], sfa: torch.Tensor | None,
          sfb: torch.Tensor | None, flat_k_major: bool = False) -> _Plan:
    key = (desc, config, tuple(ks), flat_k_major, None if sfa is None else (sfa.shape, sfa.stride()),
           None if sfb is None else (sfb.shape, sfb.stride()))
    plan = _plans.get(key)
    if plan is not None:
        return plan
    groups, empty, k0 = [], [], 0
    for g, k in enumerate(ks):
        if k:
            gd = _group_desc(desc, k)
            groups.append(_Group(g, k, k0, gd, _group_config(gd, config)))
        else:
            empty.append(g)
        k0 += k
    ready = [True, True]
    if desc.kind != "bf16":
        ready = [_mn_major_ready(_mn_first(sf, flat_k_major)) for sf in (sfa, sfb)]
    plan = _Plan(tuple(groups), tuple(empty), *ready)
    if len(_plans) >= MAX_PLANS:
        _plans.clear()
    _plans[key] = plan
    return plan


def _mn_first(sf: torch.Tensor, flat_k_major: bool) -> torch.Tensor:
    """The scales as ``[MN, sum(ks)/128]``: as given in the nt form, transposed in the tn form."""
    return sf if flat_k_major else sf.T


def _copy_empty(plan: _Plan, c: torch.Tensor | None, d: torch.Tensor) -> None:
    """``d[g] = c[g]`` for the empty groups (0 without C)."""
    for g in plan.empty:
        if c is None:
            d[g].zero_()
        elif c[g].data_ptr() != d[g].data_ptr():
            d[g].copy_(c[g])


# ---------------------------------------------------------------------------------------------
# FP8 (recipe (1, 1, 128))
# ---------------------------------------------------------------------------------------------
# key (every pointer, stride and dtype the launches encode, ks, desc, config) -> Recording of the call's
# launches (transposes, then every group's GEMM); holds no tensor (launcher.py)
_fp8_recordings: dict[tuple, launcher.Recording] = launcher.new_recordings()
MAX_FP8_RECORDINGS = 1024


def _k_major(name: str, x: torch.Tensor, mn: int, sum_k: int, transpose: bool) -> torch.Tensor:
    """A tn operand ``[sum(ks), MN]`` as the K-major ``[MN, sum(ks)]`` the groups slice: a view of ``x``,
    or (``transpose``) the workspace that :func:`.transpose.transpose_launch` fills."""
    return operand_workspace(name, x, mn, sum_k) if transpose else x.T


def _scales(sf: torch.Tensor, flat_k_major: bool, ready: bool) -> torch.Tensor:
    """Per-channel scales ``[MN, sum(ks)/128]`` MN-major: in place (path B) or re-laid out (path A)."""
    sf = _mn_first(sf, flat_k_major)
    return sf if ready else get_mn_major_tma_aligned_tensor(sf)


def _fp8_group_launches(grp: _Group, a, sfa, b, sfb, d, c, chain: int = 0) -> list:
    """The dense dispatch's launches (GEMM, split-K reduction) of one group on its views; ``chain``: the GEMM's
    place in a chain of programmatic dependent launches (``PDL_CHAIN``: 0 none, 1 first, 2 later)."""
    grid, kernel_args, meta, reduce = dispatch._build_plan(grp.desc, grp.config, a, sfa, b, sfb, d, c, chain,
                                                           k_group=True)
    launches = [(gemm_1d2d.fp8_gemm_kernel, grid, kernel_args, meta)]
    if reduce is not None:
        launches.append((gemm_1d2d._splitk_reduce_kernel, *reduce))
    return launches


def _fp8_launches(plan: _Plan, desc: GemmDesc, config: KGroupedConfig, a, sfa_mn, b, sfb_mn, c, d, a_k, b_k,
                  flat_k_major: bool) -> list:
    m, n = desc.m, desc.n
    launches = []
    if not flat_k_major:
        if config.transpose_a:
            launches.append(transpose_launch(a, a_k))
        if config.transpose_b:
            launches.append(transpose_launch(b, b_k))
    a_flat = a.reshape(-1) if flat_k_major else None
    b_flat = b.reshape(-1) if flat_k_major else None
    # The groups' GEMMs are independent (each reads its own K slice and c[g], writes d[g]): chained by
    # programmatic dependent launch, the next group's CTAs start on the SMs the previous one's last tile
    # round leaves idle. Only without split-K (a reduction, or the fused one's shared workspace, would make
    # them dependent).
    chained = all(grp.config.split_k == 1 for grp in plan.groups)
    for i, grp in enumerate(plan.groups):
        k, k0, kb0 = grp.k, grp.k0, grp.k0 // FP8_BLOCK_K
        kb1 = kb0 + k // FP8_BLOCK_K
        if flat_k_major:
            a_g, b_g = a_flat[k0 * m:(k0 + k) * m].view(m, k), b_flat[k0 * n:(k0 + k) * n].view(n, k)
        else:
            a_g, b_g = a_k[:, k0:k0 + k], b_k[:, k0:k0 + k]
        launches += _fp8_group_launches(grp, a_g, sfa_mn[:, kb0:kb1], b_g, sfb_mn[:, kb0:kb1], d[grp.g],
                                        None if c is None else c[grp.g],
                                        (1 if i == 0 else 2) if chained else 0)
    return launches


def k_grouped_fp8_1d1d_gemm(desc: GemmDesc, config: KGroupedConfig, a: torch.Tensor, sfa: torch.Tensor,
                            b: torch.Tensor, sfb: torch.Tensor, c: torch.Tensor | None, d: torch.Tensor,
                            ks: list[int], ks_tensor: torch.Tensor, flat_k_major: bool) -> None:
    """FP8 ``d[g] = c[g] + a_g @ b_g^T`` on validated tensors (module docstring), one dense launch per group
    (``c`` None with ``desc.with_c`` False: ``d[g] = a_g @ b_g^T``, D not read).

    A repeated call (same pointers, strides, ks) replays one recording of all its launches.
    """
    del ks_tensor  # the host list drives the loop
    plan = _plan(desc, config, ks, sfa, sfb, flat_k_major)
    sfa_mn = _scales(sfa, flat_k_major, plan.sfa_ready)
    sfb_mn = _scales(sfb, flat_k_major, plan.sfb_ready)
    a_k = b_k = a
    if not flat_k_major:
        a_k = _k_major("a", a, desc.m, desc.k, config.transpose_a)
        b_k = _k_major("b", b, desc.n, desc.k, config.transpose_b)
    key = (desc, config, tuple(ks), flat_k_major, a.data_ptr(), b.data_ptr(), a_k.data_ptr(), b_k.data_ptr(),
           sfa_mn.data_ptr(), sfb_mn.data_ptr(), None if c is None else (c.data_ptr(), c.stride()), d.data_ptr(),
           a.stride(), b.stride(), sfa_mn.stride(), sfb_mn.stride(), d.stride(), a.dtype, b.dtype, a.device.index)
    launcher.replay_or_record(  # split groups bake in their stream's workspace
        _fp8_recordings, key,
        lambda: _fp8_launches(plan, desc, config, a, sfa_mn, b, sfb_mn, c, d, a_k, b_k, flat_k_major),
        MAX_FP8_RECORDINGS, stream_of=a.device)
    _copy_empty(plan, c, d)


# ---------------------------------------------------------------------------------------------
# BF16
# ---------------------------------------------------------------------------------------------
# key (every pointer, shape and stride, ks, desc, config) -> Recording of all groups' launches (holds no tensor)
_bf16_recordings: dict[tuple, launcher.Recording] = launcher.new_recordings()


def _bf16_launches(plan: _Plan, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, d: torch.Tensor) -> list:
    launches = []
    for grp in plan.groups:
        a_g, b_g = a[grp.k0:grp.k0 + grp.k].T, b[grp.k0:grp.k0 + grp.k].T
        grid, args, meta, reduce = dispatch_bf16._build_plan(grp.desc, grp.config, a_g, b_g, d[grp.g], c[grp.g])
        launches.append((gemm_bf16.bf16_gemm_kernel, grid, args, meta))
        if reduce is not None:
            launches.append((gemm_bf16.splitk_reduce_kernel, *reduce))
    return launches


def k_grouped_bf16_gemm(desc: GemmDesc, config: KGroupedConfig, a: torch.Tensor, sfa: None, b: torch.Tensor,
                        sfb: None, c: torch.Tensor, d: torch.Tensor, ks: list[int], ks_tensor: torch.Tensor,
                        flat_k_major: bool) -> None:
    """BF16 ``d[g] = c[g] + a_g^T @ b_g`` (tn form, module docstring), one dense BF16 launch per group."""
    del sfa, sfb, ks_tensor, flat_k_major
    key = (desc, config, tuple(ks), a.data_ptr(), b.data_ptr(), c.data_ptr(), d.data_ptr(), a.stride(), b.stride(),
           c.stride(), d.stride(), a.device.index)
    plan = _plan(desc, config, ks, None, None)
    launcher.replay_or_record(_bf16_recordings, key, lambda: _bf16_launches(plan, a, b, c, d), MAX_BF16_RECORDINGS,
                              stream_of=a.device)  # split groups bake in their stream's workspace
    _copy_empty(plan, c, d)
