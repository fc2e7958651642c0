"""The Gluon calls whose names or forms differ between the Triton releases finegemm supports (3.6 to 3.9).

Each name below is resolved once, at import, by feature detection on the installed Gluon, and the kernels call
only these names, so one kernel source compiles on every release; a kernel body never tests a version.

- ``async_load``: ``tma.async_load`` (3.8+), ``tma.async_copy_global_to_shared`` (3.6, 3.7);
- ``async_store``: ``tma.async_store`` (3.8+), ``tma.async_copy_shared_to_global`` (3.6, 3.7);
- ``async_reduce_add``: ``tma.async_atomic_add`` (3.8+), the op builder's ``create_async_tma_reduce`` (3.6, 3.7);
- ``cp_async_load``: ``async_copy.async_load`` (3.8+), ``async_copy.async_copy_global_to_shared`` (3.6, 3.7);
- ``thread_barrier``: ``gl.thread_barrier()`` (3.6), ``gl.barrier()`` (3.7+);
- ``reinterpret(smem, ...)``: ``smem.reinterpret`` (3.9), ``smem._reinterpret`` (3.6 to 3.8);
- ``warp_uniform(flag)``: ``flag`` itself (3.6, 3.7), ``flag`` passed through a warp vote (3.8+), see below;
- ``per_iteration(smem_t, i)``: ``smem_t`` itself (3.6 to 3.8), the same view re-derived from the loop index (3.9+),
  see below.

All of them lower to the same ops on every release (the TMA copies to ``ttng.async_tma_copy_*``, the barrier to
``gpu.barrier``, the reinterpret to ``ttg.memdesc_reinterpret``), so the PTX of a kernel does not depend on which
spelling was found. :func:`ast_source` is the CPU compile entry of :mod:`.compile_check`: ``GluonASTSource`` with
every parameter the signature leaves out bound to its Python default as a constexpr (Triton 3.6 applied those
defaults itself; 3.9 fails on the missing parameter with "'NoneType' object has no attribute '_unflatten_ir'").
"""

from __future__ import annotations

import inspect

from triton._C.libtriton import ir
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource
from triton.experimental.gluon.language._core import builtin
from triton.experimental.gluon.language.nvidia.ampere import async_copy as _async_copy
from triton.experimental.gluon.language.nvidia.hopper import tma as _tma

from ...jit.releases import release_key, triton_release

__all__ = ["GluonASTSource", "ast_source", "async_load", "async_reduce_add", "async_store", "cp_async_load",
           "per_iteration", "reinterpret", "thread_barrier", "warp_uniform"]


def _first(owner, *names: str):
    """``owner``'s attribute under the first of ``names`` it has. Later releases keep a removed name as a stub
    that raises when traced, so the newer name is listed first."""
    for name in names:
        if hasattr(owner, name):
            return getattr(owner, name)
    raise ImportError(f"{owner.__name__} has none of {names}; this Triton release is not supported")


def ast_source(kernel, signature: dict, constexprs: dict) -> GluonASTSource:
    """``GluonASTSource(kernel, signature, constexprs)`` with each parameter of ``kernel`` (a ``gluon.jit``
    function) that ``signature`` does not name added as a constexpr holding its default (``signature`` and
    ``constexprs`` are extended in place)."""
    for name, param in inspect.signature(kernel.fn).parameters.items():
        if name not in signature and param.default is not inspect.Parameter.empty:
            constexprs[name] = param.default
            signature[name] = "constexpr"
    return GluonASTSource(kernel, signature, constexprs)


@builtin
def _reduce_add_by_builder(tensor_desc, coord, src, _semantic=None):
    """TMA reduce-add (``cp.reduce.async.bulk.tensor ... .add``) for releases whose Gluon does not expose it
    (3.6, 3.7): their op builder has it, and it compiles to the PTX instruction ``tma.async_atomic_add`` emits."""
    coord = _semantic._convert_to_ir_values(coord, require_i64=False)
    _semantic.builder.create_async_tma_reduce(ir.DESCRIPTOR_REDUCE_KIND.ADD, tensor_desc.handle, coord, src.handle)


_REINTERPRET_METHOD = _first(gl.shared_memory_descriptor, "reinterpret", "_reinterpret")


@builtin
def reinterpret(smem, dtype, shape, layout, _semantic=None):
    """``smem`` (a shared memory descriptor) viewed as ``dtype`` elements of ``shape`` in ``layout``: no copy."""
    return _REINTERPRET_METHOD(smem, dtype, shape, layout, _semantic=_semantic)


# TMA box global -> shared: (tensor_desc, coord, barrier, dst_smem, pred=True), completion counted on ``barrier``
async_load = _first(_tma, "async_load", "async_copy_global_to_shared")
# TMA box shared -> global: (tensor_desc, coord, src_smem), completion by ``tma.store_wait``
async_store = _first(_tma, "async_store", "async_copy_shared_to_global")
# TMA box global += shared: (tensor_desc, coord, src_smem), completion by ``tma.store_wait``
async_reduce_add = getattr(_tma, "async_atomic_add", _reduce_add_by_builder)
# cp.async per-thread global -> shared: (dst_smem, pointers, mask=None)
cp_async_load = _first(_async_copy, "async_load", "async_copy_global_to_shared")
# bar.sync of the calling warps (one CTA): ``gl.barrier()`` defaults to the CTA scope where it exists
thread_barrier = _first(gl, "thread_barrier", "barrier")


# From 3.8 on, a reduction to a scalar ends with every lane reading the per-warp partials at its own shared-memory
# address and combining them by shuffles; 3.6 and 3.7 end with one read of a single address. ptxas cannot prove the
# newer result warp-uniform, so a branch on it counts as divergent: the code after it loses the uniform datapath
# (loop counters and WGMMA descriptors in vector registers, R2UR before each use, WARPSYNC and BSSY around barrier
# waits) and, at a register cap, spills.
REDUCE_ENDS_IN_SHUFFLES = release_key(triton_release()) >= (3, 8)
_VOTE_ANY = "{ .reg .pred p; setp.ne.s32 p, $1, 0; vote.sync.any.pred p, p, -1; selp.s32 $0, 1, 0, p; }"


@builtin
def warp_uniform(flag, _semantic=None):
    """``flag`` (a scalar int1 equal in every thread, e.g. a test of a full reduction) in a form ptxas knows to be
    warp-uniform, for a branch: through ``vote.sync.any`` where the reduction ends in shuffles
    (:data:`REDUCE_ENDS_IN_SHUFFLES`), unchanged (no instruction) otherwise."""
    if not REDUCE_ENDS_IN_SHUFFLES:
        return flag
    voted = gl.inline_asm_elementwise(_VOTE_ANY, "=r,r", [flag.to(gl.int32, _semantic=_semantic)], dtype=gl.int32,
                                      is_pure=True, pack=1, _semantic=_semantic)
    return voted.__ne__(0, _semantic=_semantic)


# From 3.9 on, the shared-memory descriptor of each K step of a WGMMA is built as its own 32-bit add, zero-extension
# and OR (3.6 to 3.8: one 64-bit base plus a constant per step). When the operand is loop-invariant LLVM hoists them
# all out of the loop; ptxas rematerializes the older form on the uniform datapath, but keeps the newer one live in
# vector registers (two per K step), which at a register cap spills in the loop.
WGMMA_DESC_PER_STEP = release_key(triton_release()) >= (3, 9)
_OPAQUE_ZERO = "mov.u32 $0, 0; // $1"


@builtin
def per_iteration(smem_t, i, _semantic=None):
    """``smem_t`` (the ``permute((1, 0))`` view of a 2-D shared memory allocation, a WGMMA's B operand) for loop
    iteration ``i`` (a scalar int32): the same memory, but where the WGMMA descriptors are built per K step
    (:data:`WGMMA_DESC_PER_STEP`) re-derived from ``i`` through an opaque zero, so LLVM builds them inside the
    loop and ptxas keeps them on the uniform datapath instead of in live vector registers; unchanged otherwise."""
    if not WGMMA_DESC_PER_STEP:
        return smem_t
    zero = gl.inline_asm_elementwise(_OPAQUE_ZERO, "=r,r", [i], dtype=gl.int32, is_pure=True, pack=1,
                                     _semantic=_semantic)
    smem = smem_t.permute((1, 0), _semantic=_semantic)
    rows = reinterpret(smem, smem.dtype, [1] + list(smem.shape), smem.layout, _semantic=_semantic)
    return rows.index(zero, _semantic=_semantic).permute((1, 0), _semantic=_semantic)
