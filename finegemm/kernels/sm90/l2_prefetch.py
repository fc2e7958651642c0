"""L2 prefetch of TMA tiles (``cp.async.bulk.prefetch.tensor``), which Gluon 3.6 does not expose.

A producer whose operand streams from HBM (small-M GEMMs, masked MoE decode: every K block of B read once) can
only keep ``STAGES`` tiles in flight in shared memory; prefetching the tile ``B_PREFETCH`` K blocks ahead into L2
keeps more bytes in flight per SM without more shared memory, so the TMA load that later asks for it finds it in
L2. The tensor map is the kernel parameter Triton passes it as: ``fp8_gemm_kernel``'s B descriptor is its sixth
parameter (``a_desc`` expands to the tensor map plus two shape and two stride parameters).
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.jit
def prefetch_b_tile(k_col, row):
    """From the first thread of the calling warpgroup (``%tid.x % 128 == 0``; the producer's single warp is the
    first of its padded warpgroup): prefetch the B box at (``row``, ``k_col``) of ``fp8_gemm_kernel``'s B tensor
    map into L2 (no shared memory, no barrier; out-of-bounds boxes are ignored)."""
    gl.inline_asm_elementwise(
        "{ .reg .pred p; .reg .b32 t; .reg .b64 tm;\n"
        "mov.u32 t, %tid.x; and.b32 t, t, 127; setp.eq.u32 p, t, 0;\n"
        "mov.u64 tm, fp8_gemm_kernel_param_5; cvta.param.u64 tm, tm;\n"
        "@p cp.async.bulk.prefetch.tensor.2d.L2.global.tile [tm, {$1, $2}];\n"
        "mov.u32 $0, 0; }",
        "=r,r,r", [k_col, row], dtype=gl.int32, is_pure=False, pack=1)
