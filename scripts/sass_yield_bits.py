"""The yield bits of the promotion FFMAs in the dispatched sm90 FP8 configs, under the ptxas Triton compiles with
(CPU only; ``TRITON_PTXAS_PATH`` or ``FINEGEMM_PTXAS`` pick another one): benchmarks/NOTES.md v20's table.

Usage: ``PYTHONPATH=. python3 scripts/sass_yield_bits.py [M,N,K ...]``; prints per config the FFMA count, how many
carry each yield value and the first 64 bits in program order.
"""

from __future__ import annotations

import sys
from collections import Counter

import triton

from finegemm.jit.device import H200
from finegemm.jit.heuristics import GemmDesc
from finegemm.kernels.sm90 import compile_check
from finegemm.kernels.sm90.dispatch import get_config

SHAPES = [(4096, 7168, 16384), (4096, 2112, 7168), (128, 4096, 7168)]


def main() -> None:
    shapes = [tuple(int(x) for x in a.split(",")) for a in sys.argv[1:]] or SHAPES
    tool = triton.knobs.nvidia.ptxas
    print(f"ptxas {tool.version} ({tool.path})")
    for m, n, k in shapes:
        desc = GemmDesc("fp8_1d2d", m, n, k)
        config = get_config(desc, H200)
        bits = compile_check.yield_bits(compile_check.compile_variant(desc, config))
        counts = Counter(bits)
        print(f"{m}x{n}x{k} at {config.block_m}x{config.block_n}: {len(bits)} FFMA, yield 0: {counts[0]}, "
              f"1: {counts[1]}; {''.join(map(str, bits[:64]))}")


if __name__ == "__main__":
    main()
