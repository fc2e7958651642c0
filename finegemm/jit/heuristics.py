"""Config heuristics: a frozen :class:`GemmDesc` plus :class:`DeviceFacts` in, a frozen config out.

Pure functions, no device access, unit-tested on the CPU. The sm90 fast path keeps its own
heuristic in :mod:`finegemm.jit.heuristics_sm90`; this module holds the shared descriptor and the
portable Triton kernels' configs.
"""

from __future__ import annotations

from dataclasses import dataclass

from .device import DeviceFacts

KINDS = ("fp8_1d2d", "fp8_1d1d", "bf16")
LAYOUTS = ("normal", "m_grouped_contiguous", "m_grouped_masked", "k_grouped")


@dataclass(frozen=True)
class GemmDesc:
    """One GEMM problem as the kernels see it (after the API normalized layouts).

    ``m`` is the total rows (for masked grouped GEMMs: ``max_m`` per group; for k-grouped: the
    sum of K lives in ``k`` and ``num_groups`` counts the groups). ``head_splits`` ``(left, mid, right)``
    (dense FP8 only, ``mid > 0``): D's columns skip ``mid`` inside each head of ``left + right`` GEMM
    columns (``fp8_gemm_nt_skip_head_mid``); None for an ordinary D. ``alignment`` (m-grouped contiguous
    only): the rows every expert segment starts on a multiple of
    (``get_mk_alignment_for_contiguous_layout()``); a tile must not straddle two segments. ``c_like_d``
    (``with_c`` only; the BF16 GEMM's rules read it): C has D's dtype and is row-major like D, so a kernel can
    stage it by TMA in D's shared-memory tile (its pointer's alignment is checked at launch).
    """

    kind: str
    m: int
    n: int
    k: int
    a_k_major: bool = True
    b_k_major: bool = True
    out_fp32: bool = False
    with_c: bool = False
    sf_packed: bool = False
    layout: str = "normal"
    num_groups: int = 1
    expected_m: int | None = None
    head_splits: tuple[int, int, int] | None = None
    alignment: int = 128
    c_like_d: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"GemmDesc.kind must be one of {KINDS}, got {self.kind!r}")
        if self.layout not in LAYOUTS:
            raise ValueError(f"GemmDesc.layout must be one of {LAYOUTS}, got {self.layout!r}")

    @property
    def is_fp8(self) -> bool:
        return self.kind != "bf16"

    @property
    def rows_hint(self) -> int:
        """Rows one problem really has, for choosing tiles (masked: ``expected_m``)."""
        return self.expected_m if self.expected_m is not None else self.m


@dataclass(frozen=True)
class PortableConfig:
    block_m: int
    block_n: int
    block_k: int
    num_warps: int
    num_stages: int
    group_m: int  # M tiles per swizzle group, for L2 reuse of B tiles


# FP8 promotion happens every 128 of K, so the FP8 kernels' BLOCK_K is pinned to the scale block.
FP8_BLOCK_K = 128
BF16_BLOCK_K = 64


def _stages_for(smem_bytes: int, stage_bytes: int, wanted: int) -> int:
    # Leave room for the epilogue's conversion scratch (one fp32 tile at most 64 KiB).
    budget = smem_bytes - 64 * 1024
    return max(2, min(wanted, budget // max(stage_bytes, 1)))


def get_portable_config(desc: GemmDesc, facts: DeviceFacts) -> PortableConfig:
    """Tiles for the portable Triton kernels.

    The interpreter executes every program serially with numpy, so there big tiles mean fewer
    Python-level steps; on a GPU the tiles follow Triton's usual Hopper/Ada sweet spots.
    """
    block_k = FP8_BLOCK_K if desc.is_fp8 else BF16_BLOCK_K
    if facts.interpreter:
        block_m = 16 if desc.rows_hint <= 16 else 32 if desc.rows_hint <= 32 else 64
        return PortableConfig(block_m, 64, block_k, 4, 1, 1)
    rows = desc.rows_hint
    if rows <= 64:
        block_m, block_n, num_warps = 64, 64, 4
    else:
        block_m, block_n, num_warps = 128, 128, 8
    elem = 1 if desc.is_fp8 else 2
    stage_bytes = (block_m + block_n) * block_k * elem
    stages = _stages_for(facts.smem_per_block, stage_bytes, 4)
    return PortableConfig(block_m, block_n, block_k, num_warps, stages, 8)
