"""Every kernel family once at awkward sizes, each result checked against the float64 reference: the program
tools/gpu_check.sh runs under ``compute-sanitizer`` (memcheck over all cases, racecheck / synccheck over
``--race-set``).

Sizes are the ones a kernel's edges meet: M = 1, 77, 333 (partial tiles, a single row); N not a multiple of 128;
masked groups with 0 and max_m rows; contiguous groups whose row counts leave padding rows (layout -1) between
segments; paged caches behind a shuffled block table; k-grouped lists with empty groups. Inputs and references come
from the bench harness (finegemm.bench.inputs: finegemm's casts, float64 products of the dequantized operands), the
calls from its finegemm peer (the public API under DeepGEMM's signatures), so a case here runs exactly what a user's
call runs.

Each case runs as a user's call does: ``--backend auto`` (the default) leaves the choice to dispatch, which takes
the sm90 kernels where they take the problem and the portable ones elsewhere (``sm90`` / ``portable`` force one, and
a forced sm90 refuses what it cannot run). Every sm90 launch goes through kernels/sm90/launcher.py, so the line of
each case says which backend ran it: ``sm90`` with the Gluon kernels launched, or ``portable``.
tests/test_sanitize_cases.py checks on the CPU, as if on an H200, that each sm90 family has a case reaching its
sm90 kernel.

Usage: ``python3 tools/sanitize_cases.py [--backend auto|sm90|portable] [--cases NAME,...] [--race-set] [--list]``.
Prints one line per case (name, backend that ran it, calc_diff, pass / FAIL) and exits 1 when any case fails its
bound or raises.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import traceback
from typing import Any, Callable, Iterator

import torch

import finegemm
from finegemm.bench.inputs import make_inputs
from finegemm.bench.peers import FinegemmPeer
from finegemm.bench.suites import Case

BLOCK = 128


def _contiguous(ms: tuple[int, ...], n: int, k: int) -> Case:
    align = finegemm.get_mk_alignment_for_contiguous_layout()
    total = sum(-(-m // align) * align for m in ms)
    return Case("grouped", "m_grouped_contiguous", total, n, k, groups=len(ms), ms=ms,
                label=f"contiguous {'+'.join(map(str, ms))}x{n}x{k}")


def _masked(max_m: int, ms: tuple[int, ...], n: int, k: int) -> Case:
    return Case("grouped", "m_grouped_masked", max_m, n, k, groups=len(ms), ms=ms,
                label=f"masked {max_m}:{'/'.join(map(str, ms))}x{n}x{k}")


def _k_grouped(m: int, n: int, ks: tuple[int, ...]) -> Case:
    return Case("k-grouped", "k_grouped", m, n, sum(ks), groups=len(ks), ks=ks, out="fp32", accumulate=True,
                label=f"k-grouped {m}x{n} ks {'/'.join(map(str, ks))}")


def _mqa(s: int, skv: int, h: int, d: int, ranges: str, out: str, compressed: bool) -> Case:
    return Case("mqa", "mqa_logits", s, skv, d, heads=h, ranges=ranges, out=out, compressed=compressed,
                label=f"mqa {s}x{skv} h{h}d{d} {ranges} {out}{' compact' if compressed else ''}")


def _paged(lens: tuple[int, ...], next_n: int, h: int, out: str) -> Case:
    avg = sum(lens) // len(lens)
    return Case("paged-mqa", "paged_mqa_logits", len(lens), avg, 128, ms=lens, heads=h, next_n=next_n, out=out,
                label=f"paged b{len(lens)} n{next_n} h{h} ctx {'/'.join(map(str, lens))} {out}")


def cases() -> list[Case]:
    """The awkward-size cases, one family after another (names unique; ``--cases`` selects by name)."""
    dense = [Case("dense", "fp8_gemm", m, n, k, label=f"fp8 {m}x{n}x{k}")
             for m, n, k in ((1, 200, 512), (77, 2112, 1024), (333, 4000, 768))]
    wgrad = [Case("weight-grad", "fp8_gemm_wgrad", m, n, k, out="fp32", accumulate=True, label=f"wgrad {m}x{n}x{k}")
             for m, n, k in ((77, 200, 512), (333, 2112, 1024))]
    bf16 = [Case("bf16", "bf16_gemm", 1, 200, 512, label="bf16 1x200x512"),
            Case("bf16", "bf16_gemm", 77, 2112, 1024, accumulate=True, label="bf16 77x2112x1024+c"),
            Case("bf16", "bf16_gemm", 333, 4000, 768, out="fp32", label="bf16 333x4000x768:f32")]
    grouped = [_contiguous((77, 130, 1), 200, 512), _contiguous((333, 128), 2112, 1024),
               _masked(128, (0, 128, 77, 1), 200, 512), _masked(64, (64, 0, 0, 33), 2112, 1024)]
    k_grouped = [_k_grouped(77, 200, (128, 0, 256)), _k_grouped(128, 333, (0, 384, 128, 0))]
    mqa = [_mqa(77, 333, 32, 64, "causal", "fp32", False), _mqa(77, 333, 64, 128, "cp", "bf16", True),
           _mqa(1, 200, 64, 128, "causal", "fp32", False)]
    paged = [_paged((100, 70, 130), 2, 32, "fp32"), _paged((1, 333, 64), 1, 64, "bf16")]
    return dense + wgrad + bf16 + grouped + k_grouped + mqa + paged


# One case of each warp-specialized family (dense 1d2d, weight-grad 1d1d, BF16, m-grouped contiguous and masked,
# k-grouped, MQA, paged MQA): racecheck and synccheck are slow, so they run these only.
RACE_SET = ("fp8 77x2112x1024", "wgrad 77x200x512", "bf16 77x2112x1024+c", "contiguous 77+130+1x200x512",
            "masked 128:0/128/77/1x200x512", "k-grouped 77x200 ks 128/0/256", "mqa 77x333 h32d64 causal fp32",
            "paged b3 n2 h32 ctx 100/70/130 fp32")


def _kernel_name(kernel: Any) -> str:
    return getattr(getattr(kernel, "fn", None), "__name__", None) or getattr(kernel, "__name__", type(kernel).__name__)


@contextlib.contextmanager
def sm90_launches(launch: bool = True) -> Iterator[list[str]]:
    """The sm90 kernels launched inside the block, by name in launch order (a replayed recording, whose launches
    are not rebuilt, as ``recorded launches``): kernels/sm90/launcher.py's two entries wrapped. ``launch`` False
    builds the launches and records them without launching (dispatch's choice on tensors no kernel could take)."""
    names: list[str] = []
    try:
        from finegemm.kernels.sm90 import launcher
    except ImportError:  # no Gluon here: nothing can run on sm90
        yield names
        return
    replay_or_record, launch_normally = launcher.replay_or_record, launcher.launch_normally

    def traced_replay(cache: dict, key: Any, build: Callable[[], Any], *args: Any, **kwargs: Any) -> Any:
        built: list[bool] = []

        def traced_build() -> Any:
            launches = build()
            built.append(True)
            names.extend(_kernel_name(kernel) for kernel, *_ in launches)
            return launches

        if not launch:
            traced_build()
            return None
        out = replay_or_record(cache, key, traced_build, *args, **kwargs)
        if not built:
            names.append("recorded launches")
        return out

    def traced_normally(launches: Any) -> None:
        launches = list(launches)
        names.extend(_kernel_name(kernel) for kernel, *_ in launches)
        if launch:
            launch_normally(launches)

    launcher.replay_or_record, launcher.launch_normally = traced_replay, traced_normally
    try:
        yield names
    finally:
        launcher.replay_or_record, launcher.launch_normally = replay_or_record, launch_normally


def run_case(case: Case, backend: str, device: torch.device, seed: int) -> tuple[float, str]:
    """Run ``case`` once through the public API: its calc_diff against the float64 reference, and the backend
    that ran it (``sm90 (kernels)`` or ``portable``)."""
    inp = make_inputs(case, device, seed)
    call = FinegemmPeer(backend).prepare(case, inp)
    call.reset()
    with call.context(), sm90_launches() as launched:
        call.fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    ran = f"sm90 ({','.join(dict.fromkeys(launched))})" if launched else "portable"
    return inp.check(call.output(), call.family, call.with_c), ran


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="auto", choices=["auto", "sm90", "portable"],
                        help="FINEGEMM_BACKEND for the calls (auto: dispatch's choice, as a user's call)")
    parser.add_argument("--cases", default=None, help="comma-separated case names (default: all)")
    parser.add_argument("--race-set", action="store_true", help="one case of each warp-specialized family")
    parser.add_argument("--list", action="store_true", help="print the case names and exit")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    by_name = {c.name: c for c in cases()}
    if args.list:
        print("\n".join(by_name))
        return 0
    names = list(RACE_SET) if args.race_set else list(by_name)
    if args.cases:
        names = [n.strip() for n in args.cases.split(",") if n.strip()]
    unknown = [n for n in names if n not in by_name]
    if unknown:
        parser.error(f"--cases: unknown case(s) {unknown}; --list prints the names")

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    failed = 0
    for i, name in enumerate(names):
        case = by_name[name]
        try:
            diff, ran = run_case(case, args.backend, device, args.seed + i)
            ok = diff == diff and diff < case.tolerance  # NaN fails
            print(f"{name:44s} calc_diff {diff:.2e}  {'pass' if ok else 'FAIL'}  {ran}", flush=True)
        except Exception:
            ok = False
            print(f"{name:44s} raised  FAIL", flush=True)
            traceback.print_exc()
        failed += not ok
    print(f"sanitize_cases: {len(names) - failed}/{len(names)} passed ({args.backend}, {device.type})", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
