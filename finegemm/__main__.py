"""Command line: ``python -m finegemm {info,demo,check,bench,warmup}``."""

from __future__ import annotations

import argparse
import sys


def _shape(text: str) -> tuple[int, int, int]:
    parts = [int(p) for p in text.split(",")]
    if len(parts) != 3 or min(parts) < 1:
        raise argparse.ArgumentTypeError(f"shape must be M,N,K with positive ints, got {text!r}")
    return parts[0], parts[1], parts[2]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m finegemm", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="versions, device, the backend that would be chosen, cache dir, switches")
    demo = sub.add_parser("demo", help="quantize random BF16, run the FP8/BF16 GEMMs, compare with float64")
    demo.add_argument("--shape", type=_shape, default=None, help="M,N,K (default: 4096,7168,2048 on a GPU)")
    sub.add_parser("check", help="self-test: every op family (dense FP8 in four layouts and both recipes, BF16, "
                                 "m-grouped, k-grouped, MQA logits, einsum, FP8 casts) on this device against the "
                                 "float64 reference; a PASS/FAIL line each, a summary, exit status 1 on any failure")
    from . import warmup_run

    warm = sub.add_parser("warmup", help="compile every kernel a model's GEMM calls need into the disk cache")
    warmup_run.add_arguments(warm)
    try:
        from .bench import cli as bench_cli
    except ImportError:
        bench_cli = None
    if bench_cli is not None:
        bench = sub.add_parser("bench", help="side-by-side benchmark against cuBLAS (and DeepGEMM if importable)")
        bench_cli.add_arguments(bench)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "warmup":
        from . import warmup_run

        return warmup_run.main(args)
    from . import cli_demo

    if args.command == "info":
        return cli_demo.info()
    if args.command == "demo":
        return cli_demo.demo(args.shape)
    if args.command == "check":
        from . import selftest

        return selftest.run()
    from .bench import cli as bench_cli

    return bench_cli.main(args)


if __name__ == "__main__":
    sys.exit(main())
