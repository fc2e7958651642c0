"""TMA reduce-add from shared memory into global memory (``cp.reduce.async.bulk.tensor ... .add``), for Gluon.

Triton 3.6's Gluon exposes the TMA load and store but not the reduction, though its op builder has it
(``create_async_tma_reduce``; Triton's own ``tensor_descriptor.atomic_add`` compiles to the same PTX instruction
for sm_90). The FP8 weight-gradient
epilogue uses it to add its FP32 tile into D in place when C is D: the read of C leaves the SM's critical path
(the L2 does the read-modify-write), and D's tile is written by one CTA only, so no two reductions race.
Completion is tracked like a TMA store's (``tma.store_wait``).
"""

from __future__ import annotations

from triton._C.libtriton import ir
from triton.experimental.gluon.language._core import builtin


@builtin
def async_reduce_add_shared_to_global(tensor_desc, coord, src, _semantic=None):
    """``tensor_desc``'s box at ``coord`` += the shared-memory tile ``src`` (element type of the descriptor)."""
    coord = _semantic._convert_to_ir_values(coord, require_i64=False)
    _semantic.builder.create_async_tma_reduce(ir.DESCRIPTOR_REDUCE_KIND.ADD, tensor_desc.handle, coord, src.handle)
