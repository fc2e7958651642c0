"""racecheck's control: the smallest warp-specialized Gluon kernel, none of finegemm's code in it.

``gl.warp_specialize`` starts its worker warps through a few bytes of shared memory that Triton writes and reads
itself: the default warps store each worker's partition index (and, at the end, an exit code), the workers read it
after a named barrier. A finegemm kernel's racecheck hazards that sit on those instructions are Triton's hand-off,
not a finegemm buffer; this kernel shows what racecheck reports for that hand-off alone.

The kernel: a one-warp worker partition doubles ``x`` (fp32, ``N`` elements) into a shared buffer and arrives on a
``full`` mbarrier; the default partition (4 warps) waits on it, stores the buffer to ``y`` and releases it on an
``empty`` mbarrier (one arrive for its 4 warps, which Triton precedes with a barrier of those warps, as in a GEMM's
ring), which the worker waits on before it ends. ``run`` checks ``y == 2x``.

Usage on a card: ``compute-sanitizer --tool racecheck python3 tools/ws_control.py``; ``--compile-only`` compiles it
for sm_90 on the CPU.
"""

from __future__ import annotations

import argparse
import sys

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier

N = 512


@gluon.jit
def _consumer(buf, full, empty, y_ptr, N: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    mbarrier.wait(full, 0)
    gl.store(y_ptr + gl.arange(0, N, layout), buf.load(layout))
    # one arrive for the 4 warps, as a GEMM's math warpgroup releases a ring slot (Triton syncs the warps first)
    mbarrier.arrive(empty, count=1)


@gluon.jit
def _producer(buf, full, empty, x_ptr, N: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0])
    buf.store(gl.load(x_ptr + gl.arange(0, N, layout)) * 2.0)
    mbarrier.arrive(full, count=1)
    mbarrier.wait(empty, 0)


@gluon.jit
def ws_control_kernel(x_ptr, y_ptr, N: gl.constexpr):
    buf = gl.allocate_shared_memory(gl.float32, [N], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    full = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(full, count=1)
    mbarrier.init(empty, count=1)
    gl.warp_specialize([(_consumer, (buf, full, empty, y_ptr, N)), (_producer, (buf, full, empty, x_ptr, N))], [1],
                       [48])


def compile_for_sm90():
    """The kernel compiled for ``GPUTarget("cuda", 90, 32)`` on the CPU (no GPU needed)."""
    import triton
    from triton.backends.compiler import GPUTarget

    sys.path.insert(0, ".")
    from finegemm.kernels.sm90.gluon_compat import ast_source

    src = ast_source(ws_control_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32"}, {"N": N})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})


def run() -> bool:
    """Launch once on the current CUDA device; whether ``y == 2 x`` exactly."""
    import torch

    x = torch.randn(N, device="cuda")
    y = torch.full_like(x, float("nan"))
    ws_control_kernel[(1,)](x, y, N, num_warps=4)
    torch.cuda.synchronize()
    return bool(torch.equal(y, 2 * x))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compile-only", action="store_true", help="compile for sm_90 on the CPU and exit")
    args = parser.parse_args(argv)
    if args.compile_only:
        ptx = compile_for_sm90().asm["ptx"]
        print(f"ws_control_kernel: compiled for sm_90, {len(ptx.splitlines())} PTX lines")
        return 0
    ok = run()
    print(f"ws_control: y == 2x {'pass' if ok else 'FAIL'}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
