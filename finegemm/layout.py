"""Scale-factor layouts and alignment helpers (DESIGN.md §3).

The kernels read scales in one *required layout* per granularity:

==============  ================================  =========================================
granularity     logical shape                     required storage
==============  ================================  =========================================
1 x 128 (fp32)  ``[(G,) MN, ceil(K/128)]``        MN-major, MN stride padded to a multiple of 4
                                                  (``get_tma_aligned_size(MN, 4)``): strides
                                                  ``(SFK * A, 1, A)`` / ``(1, A)`` with ``A``
                                                  the aligned MN
1 x 128 (UE8M0) ``[(G,) MN, ceil(ceil(K/128)/4)]`` int32, four exponents per word along K,
                                                  MN-major with the same aligned MN stride
128 x 128       ``[(G,) ceil(MN/128), ceil(K/128)]`` row-major contiguous (fp32, or int32 packed
                                                  along K)
==============  ================================  =========================================

Path A: pass plain FP32 scales in any layout and :func:`transform_sf_into_required_layout` builds
the required tensor (one copy per call). Path B: pass a tensor already in the required layout and
it is returned as is — validated, never copied.
"""

from __future__ import annotations

import torch

from .api.checks import as_bool, as_int, check_tensor
from .jit.device import get_num_sms, set_num_sms
from .quant import pack_ue8m0

__all__ = [
    "get_tma_aligned_size",
    "get_mn_major_tma_aligned_tensor",
    "get_mn_major_tma_aligned_packed_ue8m0_tensor",
    "get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor",
    "transform_sf_into_required_layout",
    "get_mk_alignment_for_contiguous_layout",
    "set_mk_alignment_for_contiguous_layout",
    "get_theoretical_mk_alignment_for_contiguous_layout",
    "get_k_alignment_for_k_grouped",
    "is_required_sf_layout",
    "set_num_sms",
    "get_num_sms",
    "SF_BLOCK_K",
]

SF_BLOCK_K = 128
# TMA needs every non-innermost stride to be a multiple of 16 bytes.
TMA_ALIGNMENT_BYTES = 16
# Default row alignment of each expert segment in the m-grouped contiguous layout: one BLOCK_M of the
# largest M tile the grouped kernels use, so no M tile straddles two experts.
MK_ALIGNMENT_FOR_CONTIGUOUS_LAYOUT = 128
# What set_mk_alignment_for_contiguous_layout takes: the portable kernels tile down to 16 rows; the sm90
# kernels need 64 (one WGMMA's rows) and run smaller alignments on the portable kernels.
MK_ALIGNMENTS = (16, 32, 64, 128, 256, 512)
# Below this many expected rows an expert, get_theoretical_mk_alignment_for_contiguous_layout answers 64: a
# prediction (commit 1f0b162), not measured yet. Padding to 128 costs ~64 rows an expert on average,
# to 64 ~32; if 64-row tiles run at 0.8x the 128-row ones' rate (assumed, to be measured), 64 wins while
# (m + 32) / 0.8 < m + 64, i.e. m < 96.
SMALL_EXPERT_ROWS = 96
_mk_alignment = MK_ALIGNMENT_FOR_CONTIGUOUS_LAYOUT


def _ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


def get_tma_aligned_size(x: int, element_size: int) -> int:
    """Round ``x`` elements of ``element_size`` bytes up so that they span a multiple of 16 bytes."""
    x = as_int("get_tma_aligned_size: x", x, 0)
    element_size = as_int("get_tma_aligned_size: element_size", element_size)
    if element_size <= 0 or TMA_ALIGNMENT_BYTES % element_size != 0:
        raise ValueError(f"get_tma_aligned_size: element_size must divide 16, got {element_size}")
    alignment = TMA_ALIGNMENT_BYTES // element_size
    return _ceil_div(x, alignment) * alignment


def get_mk_alignment_for_contiguous_layout() -> int:
    """Rows each expert segment of an m-grouped contiguous input starts on (128 unless
    :func:`set_mk_alignment_for_contiguous_layout` changed it); the K segments of the k-grouped GEMMs are
    multiples of :func:`get_k_alignment_for_k_grouped`."""
    return _mk_alignment


def set_mk_alignment_for_contiguous_layout(alignment: int) -> None:
    """Set the m-grouped contiguous layout's segment alignment (DeepGEMM's name), for this process.

    ``alignment``: one of 16, 32, 64, 128 (the default), 256, 512. Smaller alignments pad experts with few tokens
    less: the sm90 kernels take 64 (64-row tiles) and up; 16 and 32 run on the portable kernels. Plans and
    recorded launches made under the old value are dropped (their tiles were chosen for it).
    """
    if as_int("set_mk_alignment_for_contiguous_layout: alignment", alignment) not in MK_ALIGNMENTS:
        raise ValueError(f"set_mk_alignment_for_contiguous_layout: alignment must be one of {MK_ALIGNMENTS}, "
                         f"got {alignment!r}")
    global _mk_alignment
    _mk_alignment = int(alignment)
    from .runtime import forget_plans_and_launches

    forget_plans_and_launches()


def get_theoretical_mk_alignment_for_contiguous_layout(expected_m: int | None = None,
                                                         num_groups: int | None = None) -> int:
    """The alignment to set for experts of about ``expected_m`` rows (``expected_m`` tokens over ``num_groups``
    experts when ``num_groups`` is given, as vLLM passes them): 64 below :data:`SMALL_EXPERT_ROWS` rows an
    expert, where padding to 128 costs more than 64-row tiles lose, else 128. Without ``expected_m``: 128."""
    for name, value in (("expected_m", expected_m), ("num_groups", num_groups)):
        if value is not None:
            as_int(f"get_theoretical_mk_alignment_for_contiguous_layout: {name}", value, 0)
    if expected_m is None:
        return MK_ALIGNMENT_FOR_CONTIGUOUS_LAYOUT
    rows = _ceil_div(expected_m, num_groups) if num_groups else expected_m
    return 64 if rows < SMALL_EXPERT_ROWS else MK_ALIGNMENT_FOR_CONTIGUOUS_LAYOUT


def get_k_alignment_for_k_grouped() -> int:
    """What every group's K of the k-grouped GEMMs must be a multiple of: the contiguous alignment, and at least
    128 (the FP8 scale block, which the BF16 kernels share)."""
    return max(_mk_alignment, SF_BLOCK_K)


def _mn_major_strides(shape: tuple[int, ...], element_size: int) -> tuple[int, ...]:
    mn, cols = shape[-2], shape[-1]
    aligned = get_tma_aligned_size(mn, element_size)
    if len(shape) == 2:
        return (1, aligned)
    return (cols * aligned, 1, aligned)


def _has_strides(t: torch.Tensor, strides: tuple[int, ...]) -> bool:
    # Size-1 dims can carry any stride without changing the addressed elements.
    return all(size == 1 or st == want for size, st, want in zip(t.shape, t.stride(), strides))


def _empty_mn_major(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    strides = _mn_major_strides(shape, torch.empty((), dtype=dtype).element_size())
    mn, cols = shape[-2], shape[-1]
    aligned = strides[-1]
    groups = shape[0] if len(shape) == 3 else 1
    storage = torch.empty((groups, cols, aligned), dtype=dtype, device=device)
    view = storage[:, :, :mn].transpose(1, 2)
    return view if len(shape) == 3 else view[0]


def get_mn_major_tma_aligned_tensor(sf: torch.Tensor) -> torch.Tensor:
    """Return ``sf`` (``[MN, SFK]`` or ``[G, MN, SFK]``) stored MN-major with a TMA-aligned MN stride.

    The result's strides are exactly ``(1, A)`` / ``(SFK * A, 1, A)`` with ``A = get_tma_aligned_size(MN, 4)``,
    size-1 dims included (one scale column, K <= 128, still gets stride ``A``: DeepGEMM's layout tests demand it).
    Returns ``sf`` itself when it has those strides already; otherwise a new tensor (same dtype).
    """
    if check_tensor("sf", sf).dim() not in (2, 3):
        raise ValueError(f"get_mn_major_tma_aligned_tensor: sf must be 2-D or 3-D, got shape {tuple(sf.shape)}")
    strides = _mn_major_strides(tuple(sf.shape), sf.element_size())
    if tuple(sf.stride()) == strides:
        return sf
    out = _empty_mn_major(tuple(sf.shape), sf.dtype, sf.device)
    out.copy_(sf)
    return out


def get_mn_major_tma_aligned_packed_ue8m0_tensor(sf: torch.Tensor,
                                                 psum_layout: torch.Tensor | None = None) -> torch.Tensor:
    """Pack power-of-two FP32 scales ``[(G,) MN, SFK]`` into int32 ``[(G,) MN, ceil(SFK/4)]``, MN-major, aligned.

    ``psum_layout``: DeepGEMM 2.8's per-group packing of contiguous-layout scales (an SM100 layout): None only.
    """
    if psum_layout is not None:
        raise ValueError("get_mn_major_tma_aligned_packed_ue8m0_tensor: psum_layout (SM100's per-group packing) must "
                         "be None here")
    if check_tensor("sf", sf).dtype != torch.float32:
        raise TypeError(f"get_mn_major_tma_aligned_packed_ue8m0_tensor: sf must be float32, got {sf.dtype}")
    return get_mn_major_tma_aligned_tensor(pack_ue8m0(sf))


def get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(sf: torch.Tensor, grouped_layout: torch.Tensor,
                                                           ks_cpu: list[int], gran_k: int, k_alignment: int,
                                                           use_psum_layout: bool = False) -> torch.Tensor:
    """Pack the per-channel power-of-two scales of a k-grouped operand into UE8M0 words, group by group.

    Args:
        sf: fp32 ``[sum(ceil(ks_cpu[g] / gran_k)), MN]`` row-major (MN contiguous, ``MN % 4 == 0``): group g's
            rows are its K blocks, one scale per channel each (``per_channel_cast_to_fp8`` of each group's
            ``[K_g, MN]`` slice, concatenated).
        grouped_layout: int32 ``[G]`` each group's K on the device (its length gives G; not read otherwise).
        ks_cpu: host list of each group's K.
        gran_k: K per scale: 128 (32 is SM100's FP4 granularity and is refused here).
        k_alignment: what DeepGEMM's kernels align each group's K to (a multiple of 32); only checked.
        use_psum_layout: SM100's cumulative form: False only.

    Returns:
        int32 ``[sum(ceil(ks_cpu[g] / (4 * gran_k))), MN]`` row-major: group g's block rows packed four to a word
        (little-endian, zero exponents past a group's last block), groups back to back.
    """
    if as_bool("use_psum_layout", use_psum_layout):
        raise ValueError(f"use_psum_layout (SM100's cumulative k-grouped layout) must be False; "
                         f"got {use_psum_layout!r}")
    if as_int("gran_k", gran_k) != SF_BLOCK_K:
        raise ValueError(f"gran_k must be {SF_BLOCK_K} (the FP8 scale block; 32 is SM100's FP4 granularity); "
                         f"got {gran_k!r}")
    if isinstance(k_alignment, bool) or not isinstance(k_alignment, int) or k_alignment <= 0 or k_alignment % 32:
        raise ValueError(f"k_alignment must be a positive multiple of 32; got {k_alignment!r}")
    if not isinstance(sf, torch.Tensor) or sf.dtype != torch.float32 or sf.dim() != 2 or not sf.is_contiguous():
        raise ValueError(f"sf must be a contiguous float32 [sum(K blocks), MN] tensor; got "
                         f"{_describe(sf) if isinstance(sf, torch.Tensor) else type(sf).__name__}")
    if sf.shape[1] % 4:
        raise ValueError(f"sf's MN = {sf.shape[1]} must be a multiple of 4")
    if not isinstance(grouped_layout, torch.Tensor) or grouped_layout.dtype != torch.int32:
        raise TypeError(f"grouped_layout must be an int32 tensor of each group's K; got {grouped_layout!r}")
    if isinstance(ks_cpu, torch.Tensor) or not isinstance(ks_cpu, (list, tuple)) \
            or any(isinstance(k, bool) or not isinstance(k, int) or k < 0 for k in ks_cpu):
        raise TypeError(f"ks_cpu must be a list of non-negative ints (each group's K); got {ks_cpu!r}")
    if len(ks_cpu) != grouped_layout.numel():
        raise ValueError(f"ks_cpu has {len(ks_cpu)} groups but grouped_layout has {grouped_layout.numel()}")
    blocks = [_ceil_div(k, gran_k) for k in ks_cpu]
    if sum(blocks) != sf.shape[0]:
        raise ValueError(f"sf has {sf.shape[0]} rows but ks_cpu {list(ks_cpu)} makes {sum(blocks)} K blocks of "
                         f"{gran_k}")
    packed = [pack_ue8m0(part.T).T for part in sf.split(blocks) if part.shape[0] > 0]
    if not packed:
        return torch.empty((0, sf.shape[1]), dtype=torch.int32, device=sf.device)
    return torch.cat(packed).contiguous()


def _expected_sf_shape(mn: int, k: int, gran_mn: int, gran_k: int, packed: bool) -> tuple[int, int]:
    rows = mn if gran_mn == 1 else _ceil_div(mn, gran_mn)
    cols = _ceil_div(k, gran_k)
    return rows, (_ceil_div(cols, 4) if packed else cols)


def _describe(t: torch.Tensor) -> str:
    return f"shape {tuple(t.shape)}, stride {tuple(t.stride())}, dtype {t.dtype}"


def _granularity(recipe: tuple[int, ...], is_sfa: bool | None) -> tuple[int, int]:
    """(gran_mn, gran_k) of one operand's scales from ``(gran_m, gran_n, gran_k)`` and ``is_sfa``, or from DeepGEMM
    2.8's one-operand form ``(gran_mn, gran_k)`` with ``is_sfa`` None."""
    if not isinstance(recipe, (tuple, list)):
        raise TypeError(f"recipe must be a tuple (gran_m, gran_n, gran_k) or (gran_mn, gran_k) of ints; got "
                        f"{type(recipe).__name__} {recipe!r}")
    recipe = tuple(as_int(f"recipe[{i}]", g) for i, g in enumerate(recipe))
    if len(recipe) == 2:
        if is_sfa is not None:
            raise ValueError(f"recipe {recipe} names one operand's (gran_mn, gran_k): pass is_sfa=None with it")
        gran_mn, gran_k = recipe
    elif len(recipe) == 3:
        if is_sfa is None:
            raise ValueError("transform_sf_into_required_layout: is_sfa must be True (LHS scales) or False (RHS) "
                             "with a 3-entry recipe")
        gran_mn = recipe[0] if is_sfa else recipe[1]
        gran_k = recipe[2]
    else:
        raise ValueError(f"recipe must be (gran_m, gran_n, gran_k) or (gran_mn, gran_k), got {recipe}")
    if gran_mn not in (1, 128) or gran_k != SF_BLOCK_K:
        raise ValueError(f"recipe {recipe}: supported granularities are 1 or 128 along MN and 128 along K")
    return gran_mn, gran_k


def required_sf_strides(shape: tuple[int, ...], gran_mn: int, element_size: int = 4) -> tuple[int, ...]:
    """Strides of the required layout for a scale tensor of ``shape`` and MN granularity ``gran_mn``."""
    if gran_mn == 1:
        return _mn_major_strides(shape, element_size)
    cols = shape[-1]
    return (cols, 1) if len(shape) == 2 else (shape[-2] * cols, cols, 1)


def is_required_sf_layout(sf: torch.Tensor, gran_mn: int) -> bool:
    """Whether ``sf`` already has the strides the kernels read (see the module table)."""
    return _has_strides(sf, required_sf_strides(tuple(sf.shape), gran_mn, sf.element_size()))


def transform_sf_into_required_layout(
    sf: torch.Tensor,
    mn: int,
    k: int,
    recipe: tuple[int, ...],
    num_groups: int | None = None,
    is_sfa: bool | None = None,
    disable_ue8m0_cast: bool = False,
    psum_layout: torch.Tensor | None = None,
    *,
    name: str = "sf",
) -> torch.Tensor:
    """Validate ``sf`` and return it in the layout the kernels read (see the module table).

    Args:
        sf: fp32 scales ``[(G,) MN/gran_mn, ceil(K/128)]`` in any layout (path A), or a tensor already
            in the required layout (path B, returned unchanged, no copy), or int32 packed UE8M0
            ``[(G,) MN/gran_mn, ceil(ceil(K/128)/4)]`` already in the required layout.
        mn, k: the operand's M (or N) and K.
        recipe: ``(gran_m, gran_n, gran_k)``; the LHS uses ``gran_m``, the RHS ``gran_n``. Or DeepGEMM 2.8's
            one-operand ``(gran_mn, gran_k)`` with ``is_sfa`` None.
        num_groups: leading group count for grouped GEMMs, or None for 2-D scales.
        is_sfa: True for the LHS scales, False for the RHS scales (None with a 2-entry recipe).
        disable_ue8m0_cast: accepted for DeepGEMM compatibility. On SM90 FP32 scales are read as FP32
            and never cast to UE8M0, so it changes nothing.
        psum_layout: DeepGEMM 2.8's packing of UE8M0 scales per PSUM group (an SM100 layout): None only.
        name: how error messages call the tensor.

    Raises:
        TypeError: ``sf`` is not a fp32 or int32 tensor; ``mn``, ``k``, ``num_groups`` not ints (numpy integers
            count); ``is_sfa`` not a bool or None; ``recipe`` not a tuple of ints.
        ValueError: wrong shape, or an int32 tensor not in the required layout (packed scales are
            never re-laid out: pack them with :func:`get_mn_major_tma_aligned_packed_ue8m0_tensor`).
    """
    check_tensor(name, sf)
    mn, k = as_int("mn", mn, 0), as_int("k", k, 0)
    if num_groups is not None:
        num_groups = as_int("num_groups", num_groups, 0)
    if is_sfa is not None:
        is_sfa = as_bool("is_sfa", is_sfa)
    as_bool("disable_ue8m0_cast", disable_ue8m0_cast)
    if psum_layout is not None:
        raise ValueError(f"{name}: psum_layout (SM100's per-group UE8M0 packing) must be None on this path")
    gran_mn, gran_k = _granularity(recipe, is_sfa)
    if sf.dtype not in (torch.float32, torch.int32):
        raise TypeError(f"{name} must be float32 scales or int32 packed UE8M0 scales, got {sf.dtype}")
    packed = sf.dtype == torch.int32
    rows, cols = _expected_sf_shape(mn, k, gran_mn, gran_k, packed)
    want = (rows, cols) if num_groups is None else (num_groups, rows, cols)
    if tuple(sf.shape) != want:
        kind = "int32 packed UE8M0" if packed else "float32"
        raise ValueError(
            f"{name}: expected {kind} scales of shape {want} for mn={mn}, k={k}, recipe={tuple(recipe)}"
            f"{'' if num_groups is None else f', num_groups={num_groups}'}; got {_describe(sf)}"
        )
    strides = required_sf_strides(want, gran_mn, sf.element_size())
    if _has_strides(sf, strides):
        return sf
    if packed:
        raise ValueError(
            f"{name}: int32 packed UE8M0 scales must already be in the required layout (strides {strides}); "
            f"got {_describe(sf)}. Build them with get_mn_major_tma_aligned_packed_ue8m0_tensor."
        )
    if gran_mn == 1:
        return get_mn_major_tma_aligned_tensor(sf)
    return sf.contiguous()
