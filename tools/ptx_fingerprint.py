"""Fingerprint the PTX of the sm90 GEMM kernels' specializations, to show that a refactor changes no code.

Compiles (CPU, sm_90) a fixed set of specializations that covers every partition path of
``gemm_1d2d.fp8_gemm_kernel`` (one, two and three math warpgroups, 1d1d with C by TMA, fused split-K with
its tail, two column blocks, PDL chains, D_REDUCE, contiguous / masked / psum / head-batched grouping) and of
``gemm_bf16`` (dense, split columns, grouped), and hashes each PTX's code: the text before the debug
sections, without ``.loc`` / ``.file`` lines and ``$L__tmp`` labels, which move with source lines only.

    python tools/ptx_fingerprint.py --save before.json     # before the change
    python tools/ptx_fingerprint.py --compare before.json  # after it: exit 1 if any hash differs
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import re
import sys
from concurrent.futures import ProcessPoolExecutor

from finegemm.jit.device import H200
from finegemm.jit.heuristics import GemmDesc
from finegemm.jit.heuristics_sm90 import get_sm90_bf16_config, get_sm90_config, make_bf16_config, make_config
from finegemm.jit.heuristics_sm90_bf16_grouped import get_sm90_bf16_grouped_config
from finegemm.jit.heuristics_sm90_grouped import get_sm90_grouped_config


def _variants() -> dict[str, tuple]:
    """name -> (compile function name, args, kwargs); names are stable across runs."""
    out: dict[str, tuple] = {}

    def dense(name, desc, cfg, **kw):
        out[name] = ("compile_variant", (desc, cfg), kw)

    for m in (64, 128, 4096):
        for n, k in ((2112, 7168), (7168, 16384), (4096, 7168)):
            d = GemmDesc("fp8_1d2d", m, n, k)
            dense(f"1d2d-{m}x{n}x{k}", d, get_sm90_config(d, H200), c_dtype="bf16")
    d = GemmDesc("fp8_1d2d", 4096, 7168, 2048)
    dense("1d2d-192rows", d, make_config(d, H200, 192, 128))
    dense("1d2d-64x16", GemmDesc("fp8_1d2d", 64, 2112, 7168),
          make_config(GemmDesc("fp8_1d2d", 64, 2112, 7168), H200, 64, 16, sfa_tma=True))
    dense("1d2d-chain2", d, get_sm90_config(d, H200), chain=2)
    for m, n, k in ((4096, 4096, 7168), (2112, 4096, 7168), (4096, 2112, 7168), (77, 576, 7168)):
        w = GemmDesc("fp8_1d1d", m, n, k, out_fp32=True, with_c=True)
        dense(f"1d1d-{m}x{n}x{k}", w, get_sm90_config(w, H200), c_dtype="fp32")
    w = GemmDesc("fp8_1d1d", 4096, 4096, 7168, out_fp32=True, with_c=True)
    dense("1d1d-d-reduce", w, get_sm90_config(w, H200), c_dtype="fp32", d_reduce=True)
    pipe = dataclasses.replace(make_config(w, H200, 128, 128, sfa_tma=True, sfb_tma=True), pipe_mma=True)
    dense("1d1d-c-tma-late", w, dataclasses.replace(pipe, c_tma=True, c_tma_late=True), c_dtype="fp32")
    split = GemmDesc("fp8_1d2d", 64, 7168, 16384)
    for bn in (96, 192):  # two column blocks (BLOCK_N1)
        dense(f"1d2d-split-width-{bn}", split, make_config(split, H200, 64, bn))
    for layout, m, groups in (("m_grouped_contiguous", 8192, 8), ("m_grouped_masked", 256, 4)):
        g = GemmDesc("fp8_1d2d", m, 4096, 7168, layout=layout, num_groups=groups, expected_m=m // groups)
        out[f"grouped-{layout}"] = ("compile_grouped_variant", (g, get_sm90_grouped_config(g, H200)), {})
    g = GemmDesc("fp8_1d2d", 8192, 4096, 7168, layout="m_grouped_contiguous", num_groups=8)
    out["grouped-psum"] = ("compile_grouped_variant", (g, get_sm90_grouped_config(g, H200)), {"use_psum": True})
    for m, n, k in ((4096, 2112, 7168), (128, 4096, 7168), (4096, 576, 7168)):
        b = GemmDesc("bf16", m, n, k)
        out[f"bf16-{m}x{n}x{k}"] = ("compile_bf16_variant", (b, get_sm90_bf16_config(b, H200)), {})
    b = GemmDesc("bf16", 4096, 576, 7168)
    out["bf16-split-width"] = ("compile_bf16_variant", (b, make_bf16_config(b, H200, 128, 144)), {})
    bc = GemmDesc("bf16", 4096, 2112, 7168, out_fp32=True, with_c=True, c_like_d=True)
    out["bf16-c"] = ("compile_bf16_variant", (bc, get_sm90_bf16_config(bc, H200)), {})
    for layout, m, groups in (("m_grouped_contiguous", 8192, 8), ("m_grouped_masked", 256, 4)):
        g = GemmDesc("bf16", m, 4096, 7168, layout=layout, num_groups=groups, expected_m=m // groups)
        out[f"bf16-grouped-{layout}"] = ("compile_bf16_grouped_variant", (g, get_sm90_bf16_grouped_config(g, H200)),
                                         {})
    return out


def code_hash(ptx: str) -> str:
    code = ptx.split(".section\t.debug")[0]
    lines = [ln for ln in code.splitlines()
             if not ln.lstrip().startswith((".loc", ".file")) and "$L__tmp" not in ln]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def _one(item):
    name, (fn, args, kwargs) = item
    from finegemm.kernels.sm90 import compile_check
    try:
        return name, code_hash(getattr(compile_check, fn)(*args, **kwargs).asm["ptx"])
    except Exception as e:  # noqa: BLE001 - a variant that no longer compiles is reported, not fatal
        return name, f"error: {type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--save", help="write {name: hash} here")
    p.add_argument("--compare", help="compare with a file --save wrote; exit 1 on any difference")
    p.add_argument("--jobs", type=int, default=8)
    p.add_argument("--only", default="", help="comma-separated substrings of the variant names to compile")
    a = p.parse_args()
    items = sorted(_variants().items())
    if a.only:
        items = [it for it in items if any(s in it[0] for s in a.only.split(","))]
    with ProcessPoolExecutor(a.jobs) as pool:
        hashes = dict(pool.map(_one, items))
    for name, h in hashes.items():
        print(f"{h}  {name}")
    if a.save:
        with open(a.save, "w") as f:
            json.dump(hashes, f, indent=1)
    if a.compare:
        with open(a.compare) as f:
            before = json.load(f)
        diff = [n for n in hashes if before.get(n) != hashes[n]]
        errors = [n for n in hashes if hashes[n].startswith("error")]
        print(f"{len(hashes) - len(diff)} of {len(hashes)} unchanged; differ: {diff}" if diff else
              f"all {len(hashes)} unchanged")
        return 1 if diff or errors else 0
    return 1 if any(re.match("error", h) for h in hashes.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
