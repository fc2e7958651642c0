"""L2 prefetch of TMA tiles (``cp.async.bulk.prefetch.tensor``), which Gluon 3.6 does not expose.

A producer whose operand streams from HBM (small-M GEMMs, masked MoE decode: every K block of B read once) can
only keep ``STAGES`` tiles in flight in shared memory; prefetching the tile some K blocks ahead into L2 keeps
more bytes in flight per SM without more shared memory, so the TMA load that later asks for it finds it in L2.

The tensor map is named by the kernel parameter Triton passes it as, ``<kernel>_param_<i>``: a 2-D host
descriptor argument expands to the tensor map plus two shape and two stride parameters, so a kernel whose first
two arguments are ``a_desc, b_desc`` has B's tensor map at parameter 5 (the compile tests check the lowered
argument order).
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl


def tensor_map_param(kernel_name: str, index: int) -> str:
    """The PTX symbol of a kernel's ``index``-th lowered parameter (a tensor map passed by value)."""
    return f"{kernel_name}_param_{index}"


@gluon.jit
def prefetch_tile_l2(inner, outer, TENSOR_MAP: gl.constexpr):
    """From the first thread of the calling warpgroup (``%tid.x % 128 == 0``; a 1-warp producer is the first warp
    of its padded warpgroup): prefetch the box at (``outer``, ``inner``) (innermost coordinate first, as in PTX) of
    the tensor map passed as kernel parameter ``TENSOR_MAP`` (:func:`tensor_map_param`) into L2. No shared memory,
    no barrier; a box out of bounds is ignored."""
    gl.inline_asm_elementwise(
        "{ .reg .pred p; .reg .b32 t; .reg .b64 tm;\n"
        "mov.u32 t, %tid.x; and.b32 t, t, 127; setp.eq.u32 p, t, 0;\n"
        "mov.u64 tm, " + TENSOR_MAP + "; cvta.param.u64 tm, tm;\n"
        "@p cp.async.bulk.prefetch.tensor.2d.L2.global.tile [tm, {$1, $2}];\n"
        "mov.u32 $0, 0; }",
        "=r,r,r", [inner, outer], dtype=gl.int32, is_pure=False, pack=1)
