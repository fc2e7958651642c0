"""How fast can TMA stream a weight matrix from HBM into shared memory, by box shape, ring depth and grid?

The memory-bound GEMMs (dense M <= 128, masked decode with a few rows an expert) read B [N, K] (e4m3, K-major)
once, through [rows, 128]-byte TMA boxes, one box a ring slot: a slot holds 128 bytes of each of ``rows`` rows
2-16 KB apart. This probe times that read alone, without WGMMAs: a persistent grid, each CTA walking its row
tiles over K through a ring of ``stages`` slots of ``nbox`` adjacent [rows, 128] boxes (nbox 2: 256 contiguous
bytes of each row a slot), waiting for slot i - stages before reusing it. Whatever limits it here also limits
the GEMMs, so it bounds what a different box or ring can buy them.

Timing: the harness's CUDA-event timer (1 GiB L2 flush before each call), 3 warm-up calls, median of 20; fresh
random bytes.
Reports GB/s of B read and the ratio to torch's copy rate (read + write of a same-size tensor).

Usage (GPU): PYTHONPATH=. python3 scripts/tma_stream_probe.py   (writes $OUT/tma_stream_probe.json)
       (CPU) PYTHONPATH=. python3 scripts/tma_stream_probe.py --compile-only
"""

from __future__ import annotations

import json
import os
import sys

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from finegemm.bench.timer import L2Flush, time_cuda

# (label, N, K): the weight of dense 64x7168x16384, of 64x2112x7168, and 16 experts of (7168, 2048) (masked decode)
SHAPES = [("7168x16384", 7168, 16384), ("2112x7168", 2112, 7168), ("16x7168x2048", 16 * 7168, 2048)]
# PROBE_LAYOUTS=1: the 117 MB weight with its rows 128 bytes further apart (row stride 16512: no power of two),
# and the same bytes as [57344, 2048] (a 2 KB row stride): stride against size
# (label, N, K, row stride, A_DIV): A_DIV > 0 also loads, with every B box, the [rows, 128] box of a small
# L2-resident A (rows (tile // A_DIV) * rows): masked 16 x 64 x (7168, 2048) at 64x64 tiles reads each group's 64 A
# rows with each of its 112 B tiles (NOTES v18: does that L2 -> SM traffic cost B's HBM rate?)
LAYOUT_SHAPES = [("7168x16384 stride 16512", 7168, 16384, 16512, 0), ("57344x2048", 57344, 2048, 2048, 0),
                 ("7168x16384", 7168, 16384, 16384, 0), ("4x4096x7168", 4 * 4096, 7168, 7168, 0),
                 ("16x7168x2048", 16 * 7168, 2048, 2048, 0), ("16x7168x2048 + A", 16 * 7168, 2048, 2048, 112)]
# PROBE_LAYOUTS=1 also times the masked 4 x 256 x (4096, 7168) GEMM's B read at 256x128 tiles (NOTES v12: 165 us,
# 0.7 TB/s, against 49 us for 1 x 1024): 128-row boxes, 3 slots (the GEMM's ring), one panel a CTA
LAYOUT_CONFIGS = [(64, 1, 8, 132, 0), (16, 4, 8, 132, 0), (128, 1, 3, 132, 0), (128, 1, 8, 132, 0)]
# (rows, nbox, stages, grid, skew): bytes in flight a CTA = rows * 128 * nbox * stages
CONFIGS = [(64, 1, 8, 132, 0), (64, 2, 8, 132, 0), (16, 4, 8, 132, 0), (64, 1, 8, 132, 1), (64, 1, 8, 132, 7),
           (64, 1, 8, 132, 37), (64, 2, 8, 132, 5), (16, 4, 8, 132, 3), (16, 4, 8, 132, 13), (32, 1, 16, 132, 11)]


@gluon.jit
def tma_stream_kernel(desc, out_ptr, num_tiles, K: gl.constexpr, STAGES: gl.constexpr, NBOX: gl.constexpr,
                      SKEW: gl.constexpr = 0, a_desc=None, A_DIV: gl.constexpr = 0):
    """Stream row tiles ``pid, pid + grid, ...`` of ``desc``'s tensor over all of K into a ring (no consumer).

    ``SKEW`` > 0: tile t walks K from step ``(t * SKEW) % steps`` (wrapping), so that concurrent tiles read
    different K offsets instead of 128 bytes at the same offset of rows a row stride apart. ``A_DIV`` > 0 (NBOX 1):
    each slot also gets ``a_desc``'s box at rows ``(tile // A_DIV) * ROWS``, the same K (a GEMM's A beside its B)."""
    ROWS: gl.constexpr = desc.block_type.shape[0]
    BK: gl.constexpr = desc.block_type.shape[1]
    KSTEPS: gl.constexpr = K // (BK * NBOX)
    bufs = gl.allocate_shared_memory(desc.dtype, [STAGES * NBOX, ROWS, BK], desc.layout)
    if A_DIV > 0:
        gl.static_assert(NBOX == 1, "A beside B: one B box a slot")
        a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape, a_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(bars.index(i), count=1)
    fence_async_shared()
    pid = gl.program_id(0)
    grid = gl.num_programs(0)
    total = (num_tiles - pid + grid - 1) // grid * KSTEPS
    for i in range(total):
        slot = i % STAGES
        if i >= STAGES:
            mbarrier.wait(bars.index(slot), ((i // STAGES) - 1) & 1)
        tile = pid + (i // KSTEPS) * grid
        row = tile * ROWS
        k0 = ((i + tile * SKEW) % KSTEPS) * (BK * NBOX)
        if A_DIV > 0:
            mbarrier.expect(bars.index(slot), desc.block_type.nbytes + a_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(a_desc, [(tile // A_DIV) * a_desc.block_type.shape[0], k0],
                                            bars.index(slot), a_bufs.index(slot))
        else:
            mbarrier.expect(bars.index(slot), NBOX * desc.block_type.nbytes)
        for j in gl.static_range(NBOX):
            tma.async_copy_global_to_shared(desc, [row, k0 + j * BK], bars.index(slot), bufs.index(slot * NBOX + j))
    for j in gl.static_range(STAGES):
        i = total - STAGES + j
        if i >= 0:
            mbarrier.wait(bars.index(i % STAGES), (i // STAGES) & 1)
    gl.store(out_ptr + pid, total)


def _descriptor(b: torch.Tensor, rows: int) -> TensorDescriptor:
    layout = gl.NVMMASharedLayout.get_default_for([rows, 128], gl.float8e4nv)
    return TensorDescriptor.from_tensor(b, [rows, 128], layout)


def _time(fn, flush: L2Flush) -> float:
    return time_cuda(fn, flush, warmup=3, repeats=20).median_us


def _launch(desc, out, num_tiles, k, stages, nbox, grid, skew=0, a_desc=None, a_div=0):
    tma_stream_kernel[(grid,)](desc, out, num_tiles, k, stages, nbox, skew, a_desc if a_div else desc, a_div,
                               num_warps=1)


def compile_only() -> None:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    # every config without A, and the masked 16 x 64 case's one with A beside B
    for rows, nbox, stages, skew, a_div in [(c[0], c[1], c[2], c[4], 0) for c in CONFIGS] + [(64, 1, 8, 0, 112)]:
        layout = gl.NVMMASharedLayout.get_default_for([rows, 128], gl.float8e4nv)
        box = f"tensordesc<fp8e4nv[{rows}, 128],{layout!r}>"
        sig = {"desc": box, "out_ptr": "*i32", "num_tiles": "i32", "K": "constexpr", "STAGES": "constexpr",
               "NBOX": "constexpr", "SKEW": "constexpr", "a_desc": box, "A_DIV": "constexpr"}
        src = GluonASTSource(tma_stream_kernel, sig, {"K": 2048, "STAGES": stages, "NBOX": nbox, "SKEW": skew,
                                                      "A_DIV": a_div})
        kern = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 1})
        ptx = kern.asm["ptx"]
        print(rows, nbox, stages, a_div, ptx.count("cp.async.bulk.tensor"), kern.metadata.shared, flush=True)


def main() -> None:
    if "--compile-only" in sys.argv:
        compile_only()
        return
    dev = torch.device("cuda")
    flush = L2Flush(dev)
    result = dict(device=torch.cuda.get_device_name(), torch=torch.__version__, rows=[])
    out_dir = os.environ.get("OUT", ".")
    layouts = os.environ.get("PROBE_LAYOUTS") == "1"
    configs = LAYOUT_CONFIGS if layouts else CONFIGS
    for label, n, k, stride, a_div in (LAYOUT_SHAPES if layouts else [(*shape, shape[2], 0) for shape in SHAPES]):
        b = torch.randint(0, 256, (n, stride), dtype=torch.uint8, device=dev)[:, :k].view(torch.float8_e4m3fn)
        # A: one box of rows per A_DIV tiles, n / rows / A_DIV boxes = n / A_DIV rows (the configs it runs with
        # divide n / rows by A_DIV)
        a = (torch.randint(0, 256, (n // a_div, k), dtype=torch.uint8, device=dev).view(torch.float8_e4m3fn)
             if a_div else None)
        copy_us = _time(lambda b=b: b.clone(), flush)  # a strided b copies into a dense tensor
        copy_gbps = 2 * n * k / copy_us / 1e3
        print(f"{label}: {n * k / 1e6:.1f} MB, torch copy {copy_us:.1f} us = {copy_gbps:.0f} GB/s (read + write)",
              flush=True)
        for rows, nbox, stages, grid, skew in configs:
            entry = dict(shape=label, N=n, K=k, row_stride=stride, rows=rows, nbox=nbox, stages=stages, grid=grid,
                         skew=skew, a_div=a_div, copy_GBps=copy_gbps)
            if a_div and (nbox != 1 or n // rows % a_div):
                continue
            try:
                desc = _descriptor(b, rows)
                a_desc = _descriptor(a, rows) if a_div else None
                out = torch.zeros(grid, dtype=torch.int32, device=dev)
                tiles = n // rows
                _launch(desc, out, tiles, k, stages, nbox, grid, skew, a_desc, a_div)
                torch.cuda.synchronize()
                assert int(out.sum()) == tiles * (k // (128 * nbox)), "not every slot was loaded"
                us = _time(lambda desc=desc, out=out, tiles=tiles, k=k, stages=stages, nbox=nbox, grid=grid,
                           skew=skew, a_desc=a_desc, a_div=a_div: _launch(desc, out, tiles, k, stages, nbox, grid,
                                                                          skew, a_desc, a_div), flush)
                entry.update(us=us, GBps=n * k / us / 1e3, x_copy=n * k / us / 1e3 / copy_gbps)
                print(f"  rows {rows:3d} nbox {nbox} stages {stages:2d} grid {grid:3d} skew {skew:2d}: {us:7.1f} us "
                      f"{entry['GBps']:6.0f} GB/s {entry['x_copy']:.2f}x copy", flush=True)
            except Exception as e:  # noqa: BLE001
                entry["error"] = repr(e)[:300]
                print("  error", rows, nbox, stages, grid, skew, entry["error"], flush=True)
            result["rows"].append(entry)
            json.dump(result, open(os.path.join(out_dir, "tma_stream_probe.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
