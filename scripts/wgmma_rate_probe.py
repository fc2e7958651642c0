"""How fast does the FP8 GEMM's pipeline run on the tensor cores by tile shape, without the promotion?

The dense FP8 kernel at M = 4096 runs 256x128 tiles (two math warpgroups, two 64-row waves each a K block) at
1196-1248 SM clocks a 128-deep K block, DeepGEMM at ~1170, the tensor peak ~1110 (benchmarks/NOTES.md v21). One
reading of that gap is shared-memory bandwidth (NOTES v22): WGMMA reads A and B from shared memory per instruction,
so a K block of a 256x128 tile reads B once per 64-row wave (4 x 16 KB) and A once (32 KB), and TMA writes 48 KB;
~144 KB a block against ~128 bytes a clock. A 128x256 tile (one m64n256 wave a warpgroup) needs ~128 KB for the same
work, 128x192 (m64n128 + m64n64) ~139 KB a block's worth. The kernel cannot run 128x256 (a 64x256 partial and
accumulator are 256 registers), but without the promotion a probe can.

The probe is the kernel's pipeline without scales, promotion or epilogue: a persistent grid of one CTA an SM, a
1-warp TMA producer filling a ring of STAGES slots (A [BLOCK_M, 128] and B [BLOCK_N, 128] e4m3 boxes of a
4096 x 8192 A and an 8192 x 8192 B, each CTA on its own tile, walking K round and round), and two math warpgroups
that wait for a slot, issue their waves (``warpgroup_mma`` into accumulators kept across K blocks), wait for them
(per wave, as the kernel does) and release the slot. Shapes:

- ``256x128``: two m64n128 waves a warpgroup (the kernel's tile);
- ``128x256``: one m64n256 wave a warpgroup (what the kernel cannot hold);
- ``128x192``: m64n128 + m64n64 a warpgroup (two column blocks, DeepGEMM's 4096x2112 tile);
- ``128x128``: one m64n128 wave a warpgroup.

``tma=0`` loads the ring once and then only hands slots back and forth (no shared-memory writes): the WGMMA
issue rate alone. ``promote=1`` (with TMA; not 128x256, which has no registers for it) adds the kernel's promotion:
each wave into a fresh partial, added to the accumulator times a per-row scale (one FFMA an element), so that the
difference to ``promote=0`` is what the promotion and its scheduling cost at each tile.

Reports TFLOPS and, from ``%clock64`` and ``%globaltimer`` around math warpgroup 0's loop, the SM clock the loop ran
at and its SM clocks per 128-deep K block of 256x128's work (4.19 M MACs; the dense e4m3 peak, 4096 MACs a clock,
makes that 1024), so that the H200's power-limited clock does not blur the comparison.

Timing: the harness's CUDA-event timer (1 GiB L2 flush before each call) around a launch of ``ITERS`` K blocks a
CTA, 2 warm-ups, median of 10.
Usage (GPU): PYTHONPATH=. python3 scripts/wgmma_rate_probe.py   (writes $OUT/wgmma_rate_probe.json)
       (CPU) PYTHONPATH=. python3 scripts/wgmma_rate_probe.py --compile-only
"""

from __future__ import annotations

import json
import os
import sys

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from finegemm.bench.timer import L2Flush, time_cuda
from finegemm.jit.heuristics_sm90 import column_blocks
from finegemm.kernels.sm90.gemm_1d2d import mma_layout_for

# (label, BLOCK_M, BLOCK_N): see the module docstring
SHAPES = [("256x128", 256, 128), ("128x256", 128, 256), ("128x192", 128, 192), ("128x128", 128, 128)]
# (label, BLOCK_M, BLOCK_N, TMA writes, promotion): every shape with and without TMA, then with the promotion too
# (not 128x256: a 64x256 partial beside a 64x256 accumulator is the 256 registers the kernel cannot hold)
VARIANTS = ([(label, bm, bn, tma_on, False) for label, bm, bn in SHAPES for tma_on in (True, False)]
            + [(label, bm, bn, True, True) for label, bm, bn in SHAPES if bn != 256])
A_ROWS, B_ROWS, K_TOTAL = 4096, 8192, 8192
ITERS = 2048  # K blocks a CTA runs (32 passes over K = 8192)


@gluon.jit
def _producer(a_desc, b_desc, b1_desc, a_bufs, b_bufs, b1_bufs, full_bars, empty_bars, ITERS: gl.constexpr,
              STAGES: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N0: gl.constexpr, BLOCK_N1: gl.constexpr,
              TMA: gl.constexpr):
    """Fill slot ``it % STAGES`` with K block ``it`` of this CTA's tile once the math warpgroups released it; with
    ``TMA`` 0 only the first pass over the ring loads, later slots are handed back without a write."""
    pid = gl.program_id(0)
    off_m = (pid % (4096 // BLOCK_M)) * BLOCK_M
    off_n = (pid // (4096 // BLOCK_M)) * (BLOCK_N0 + BLOCK_N1)
    nbytes: gl.constexpr = (a_desc.block_type.nbytes + b_desc.block_type.nbytes
                            + (b1_desc.block_type.nbytes if BLOCK_N1 > 0 else 0))
    for it in range(ITERS):
        s = it % STAGES
        mbarrier.wait(empty_bars.index(s), ((it // STAGES) & 1) ^ 1)
        bar = full_bars.index(s)
        if TMA or it < STAGES:
            k = (it % (8192 // 128)) * 128
            mbarrier.expect(bar, nbytes)
            tma.async_copy_global_to_shared(a_desc, [off_m, k], bar, a_bufs.index(s))
            tma.async_copy_global_to_shared(b_desc, [off_n, k], bar, b_bufs.index(s))
            if BLOCK_N1 > 0:
                tma.async_copy_global_to_shared(b1_desc, [off_n + BLOCK_N0, k], bar, b1_bufs.index(s))
        else:
            mbarrier.arrive(bar, count=1)


@gluon.jit
def _clock_pair():
    """(%clock64, %globaltimer): SM clocks and ns, read together."""
    clk = gl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l", [], dtype=gl.int64, is_pure=False, pack=1)
    ns = gl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=gl.int64, is_pure=False, pack=1)
    return clk, ns


@gluon.jit
def _wave(a, b, acc, part, scale, PROMOTE: gl.constexpr):
    """One wave of one K block, waited for. ``PROMOTE``: as the kernel, into a fresh partial (threaded through, so
    that every wave writes one register block) added to ``acc`` times a per-row scale; else straight into ``acc``."""
    if PROMOTE:
        part = warpgroup_mma(a, b, part, use_acc=False, is_async=True)
        part = warpgroup_mma_wait(0, deps=(part,))
        acc = acc + part * scale[:, None]
    else:
        acc = warpgroup_mma(a, b, acc, is_async=True)
        acc = warpgroup_mma_wait(0, deps=(acc,))
    return acc, part


@gluon.jit
def _math(a_bufs, b_bufs, b1_bufs, full_bars, empty_bars, out_ptr, clk_ptr, ITERS: gl.constexpr,
          STAGES: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N0: gl.constexpr, BLOCK_N1: gl.constexpr,
          PROMOTE: gl.constexpr, WG: gl.constexpr):
    """Warpgroup ``WG``: per K block wait for the slot, issue its waves (one per 64 rows it owns; BLOCK_N1 > 0: a
    second WGMMA into the second column block, both waited together), wait for each, release the slot; with
    ``PROMOTE`` each wave's partial is promoted on the CUDA cores as the kernel does (one FFMA an element). Stores row
    sums at the end so that nothing is dead code, and (warpgroup 0) the SM clocks and ns its loop took at
    ``clk_ptr[program, 0:2]``."""
    clk0, ns0 = _clock_pair()
    WAVES: gl.constexpr = BLOCK_M // 128
    layout: gl.constexpr = mma_layout_for(64, BLOCK_N0, 4)
    row_layout: gl.constexpr = gl.SliceLayout(1, layout)
    acc0 = gl.zeros([64, BLOCK_N0], gl.float32, layout)
    acc1 = gl.zeros([64, BLOCK_N0], gl.float32, layout)
    part = gl.zeros([64, BLOCK_N0], gl.float32, layout)
    # a per-row scale the compiler cannot fold (a run-time value)
    scale = gl.load(out_ptr + gl.arange(0, 64, layout=row_layout)) + 1.0
    if BLOCK_N1 > 0:
        layout1: gl.constexpr = mma_layout_for(64, BLOCK_N1, 4)
        row_layout1: gl.constexpr = gl.SliceLayout(1, layout1)
        accs = gl.zeros([64, BLOCK_N1], gl.float32, layout1)
        parts = gl.zeros([64, BLOCK_N1], gl.float32, layout1)
        scale1 = gl.load(out_ptr + gl.arange(0, 64, layout=row_layout1)) + 1.0
    for it in range(ITERS):
        s = it % STAGES
        mbarrier.wait(full_bars.index(s), (it // STAGES) & 1)
        a_slot = a_bufs.index(s)
        b = b_bufs.index(s).permute((1, 0))
        if BLOCK_N1 > 0:
            a = a_slot.slice(WG * 64, 64, dim=0)
            b1 = b1_bufs.index(s).permute((1, 0))
            if PROMOTE:
                part = warpgroup_mma(a, b, part, use_acc=False, is_async=True)
                parts = warpgroup_mma(a, b1, parts, use_acc=False, is_async=True)
                part, parts = warpgroup_mma_wait(0, deps=(part, parts))
                acc0 = acc0 + part * scale[:, None]
                accs = accs + parts * scale1[:, None]
            else:
                acc0 = warpgroup_mma(a, b, acc0, is_async=True)
                accs = warpgroup_mma(a, b1, accs, is_async=True)
                acc0, accs = warpgroup_mma_wait(0, deps=(acc0, accs))
        else:
            acc0, part = _wave(a_slot.slice(WG * 64 * WAVES, 64, dim=0), b, acc0, part, scale, PROMOTE)
            if WAVES == 2:
                acc1, part = _wave(a_slot.slice(WG * 128 + 64, 64, dim=0), b, acc1, part, scale, PROMOTE)
        mbarrier.arrive(empty_bars.index(s), count=1)
    clk1, ns1 = _clock_pair()
    if WG == 0:
        gl.store(clk_ptr + gl.program_id(0) * 2, clk1 - clk0)
        gl.store(clk_ptr + gl.program_id(0) * 2 + 1, ns1 - ns0)
    total = gl.sum(acc0, axis=1) + gl.sum(acc1, axis=1)
    if BLOCK_N1 > 0:
        total += gl.convert_layout(gl.sum(accs, axis=1), total.type.layout)
    rows = gl.arange(0, 64, layout=total.type.layout)
    gl.store(out_ptr + (gl.program_id(0) * 2 + WG) * 64 + rows, total)


@gluon.jit
def wgmma_rate_kernel(a_desc, b_desc, b1_desc, out_ptr, clk_ptr, ITERS: gl.constexpr, STAGES: gl.constexpr,
                      BLOCK_M: gl.constexpr, BLOCK_N0: gl.constexpr, BLOCK_N1: gl.constexpr, TMA: gl.constexpr,
                      PROMOTE: gl.constexpr):
    """``a_desc`` boxes [BLOCK_M, 128]; ``b_desc`` [BLOCK_N0, 128]; ``b1_desc`` [BLOCK_N1, 128] (BLOCK_N1 > 0, else a
    stand-in); two math warpgroups (232 registers) and a 1-warp producer (40)."""
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape, b_desc.layout)
    if BLOCK_N1 > 0:
        b1_bufs = gl.allocate_shared_memory(b1_desc.dtype, [STAGES] + b1_desc.block_type.shape, b1_desc.layout)
    else:
        b1_bufs = b_bufs
    full_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(full_bars.index(i), count=1)
        mbarrier.init(empty_bars.index(i), count=2)
    fence_async_shared()
    gl.warp_specialize([
        (_math, (a_bufs, b_bufs, b1_bufs, full_bars, empty_bars, out_ptr, clk_ptr, ITERS, STAGES, BLOCK_M, BLOCK_N0,
                 BLOCK_N1, PROMOTE, 0)),
        (_math, (a_bufs, b_bufs, b1_bufs, full_bars, empty_bars, out_ptr, clk_ptr, ITERS, STAGES, BLOCK_M, BLOCK_N0,
                 BLOCK_N1, PROMOTE, 1)),
        (_producer, (a_desc, b_desc, b1_desc, a_bufs, b_bufs, b1_bufs, full_bars, empty_bars, ITERS, STAGES,
                     BLOCK_M, BLOCK_N0, BLOCK_N1, TMA)),
    ], [4, 1], [232, 40])


def _stages(bm: int, bn: int) -> int:
    """As many ring slots as fit beside nothing else (the kernel's 256x128 tile has 3 beside its D staging)."""
    return min(4, (227 * 1024 - 1024) // ((bm + bn) * 128))


def _sig(bm: int, bn: int, promote: bool = False) -> tuple[dict, dict]:
    bn0, bn1 = column_blocks(bn)

    def box(rows):
        layout = gl.NVMMASharedLayout.get_default_for([rows, 128], gl.float8e4nv)
        return f"tensordesc<fp8e4nv[{rows}, 128],{layout!r}>"

    sig = {"a_desc": box(bm), "b_desc": box(bn0), "b1_desc": box(bn1 or bn0), "out_ptr": "*fp32", "clk_ptr": "*i64"}
    constexprs = dict(ITERS=ITERS, STAGES=_stages(bm, bn), BLOCK_M=bm, BLOCK_N0=bn0, BLOCK_N1=bn1, TMA=True,
                      PROMOTE=promote)
    for name in constexprs:
        sig[name] = "constexpr"
    return sig, constexprs


def compile_only() -> None:
    import re

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    from finegemm.kernels.sm90.compile_check import resource_usage

    for label, bm, bn, tma_on, promote in VARIANTS:
        sig, constexprs = _sig(bm, bn, promote)
        constexprs["TMA"] = tma_on
        kern = triton.compile(GluonASTSource(wgmma_rate_kernel, sig, constexprs), target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": 4})
        ptx = kern.asm["ptx"]
        print(label, "tma", int(tma_on), "promote", int(promote), sorted(set(re.findall(r"m64n\d+k32", ptx))),
              "stages", constexprs["STAGES"], "smem", kern.metadata.shared, resource_usage(kern), flush=True)


def main() -> None:
    if "--compile-only" in sys.argv:
        compile_only()
        return
    dev = torch.device("cuda")
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    flush = L2Flush(dev)
    a = torch.randint(0, 256, (A_ROWS, K_TOTAL), dtype=torch.uint8, device=dev).view(torch.float8_e4m3fn)
    b = torch.randint(0, 256, (B_ROWS, K_TOTAL), dtype=torch.uint8, device=dev).view(torch.float8_e4m3fn)
    # keep the values finite and small (e4m3 bit patterns 0x00-0x3f and their negatives): NaN inputs are no test
    a = (a.view(torch.uint8) & 0xBF).view(torch.float8_e4m3fn)
    b = (b.view(torch.uint8) & 0xBF).view(torch.float8_e4m3fn)
    result = dict(device=torch.cuda.get_device_name(), torch=torch.__version__, sms=sms, iters=ITERS, rows=[])
    out_dir = os.environ.get("OUT", ".")
    for label, bm, bn, use_tma, promote in VARIANTS:
        bn0, bn1 = column_blocks(bn)
        stages = _stages(bm, bn)
        entry = dict(shape=label, block_m=bm, block_n=bn, tma=use_tma, promote=promote, stages=stages)
        try:
            descs = [TensorDescriptor.from_tensor(t, [rows, 128], gl.NVMMASharedLayout.get_default_for(
                [rows, 128], gl.float8e4nv)) for t, rows in ((a, bm), (b, bn0), (b, bn1 or bn0))]
            out = torch.zeros(sms * 2 * 64, device=dev)
            clk = torch.zeros(sms, 2, dtype=torch.int64, device=dev)

            def launch(descs=descs, out=out, clk=clk, bm=bm, bn0=bn0, bn1=bn1, stages=stages, use_tma=use_tma,
                       promote=promote):
                wgmma_rate_kernel[(sms,)](*descs, out, clk, ITERS=ITERS, STAGES=stages, BLOCK_M=bm, BLOCK_N0=bn0,
                                          BLOCK_N1=bn1, TMA=use_tma, PROMOTE=promote, num_warps=4)

            launch()
            torch.cuda.synchronize()
            assert torch.isfinite(out).all(), "non-finite sums"
            us = time_cuda(launch, flush, warmup=2, repeats=10).median_us
            macs = sms * ITERS * bm * bn * 128
            tflops = 2 * macs / us / 1e6
            # the last launch's loop, per CTA: SM clocks and the clock rate they ran at
            cycles, ns = clk[:, 0].double(), clk[:, 1].double()
            mhz = float((cycles / ns).median()) * 1e3
            # SM clocks per K block of 256x128's work (4.19 M MACs): the tensor peak is 1024 (4096 MACs a clock)
            per_block = float(cycles.median()) / (ITERS * bm * bn / (256 * 128))
            entry.update(us=us, TFLOPS=tflops, sm_mhz=mhz, clocks_per_256x128_block=per_block,
                         pct_tensor_peak=100 * 1024 / per_block)
            print(f"{label:8s} tma {int(use_tma)} promote {int(promote)} stages {stages}: {us:9.1f} us "
                  f"{tflops:7.0f} TFLOPS at {mhz:5.0f} MHz, {per_block:6.0f} clk / 256x128 K block "
                  f"({entry['pct_tensor_peak']:.0f} % of the tensor peak)", flush=True)
        except Exception as e:  # noqa: BLE001  a probe records and goes on
            entry["error"] = repr(e)[:300]
            print(label, "error", entry["error"], flush=True)
        result["rows"].append(entry)
        json.dump(result, open(os.path.join(out_dir, "wgmma_rate_probe.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
