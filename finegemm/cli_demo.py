"""``python -m finegemm info | demo``: environment report, a quick end-to-end run (``check``: finegemm/selftest.py)."""

from __future__ import annotations

import platform
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from . import reference
from .api.dispatch import choose_backend, sm90_unsupported_reason
from .bench.sysinfo import short_commit
from .jit import env
from .jit.device import device_facts
from .jit.heuristics import GemmDesc
from .quant import per_block_cast_to_fp8, per_token_cast_to_fp8


def _ptxas_line() -> str:
    """The ptxas kernels compile with, its version, and the FP8 GEMM kernels' extra options under it."""
    from .jit import ptxas

    path = ptxas.in_use()
    version = ptxas.version_at(path)
    where = f"{path} ({ptxas.sm90_variable()})" if path else "Triton's bundled"
    release = f"{version[0]}.{version[1]}" if version else "version unknown"
    return f"{where} ({release}); FP8 GEMM ptxas options: {ptxas.fp8_gemm_options() or '(none)'}"


def _triton_line(version: str) -> str:
    """The Triton version and whether CI tests it (jit/releases.py)."""
    from .jit import releases

    tested = ", ".join(releases.TESTED)
    if releases.is_tested(releases.release_of(version)):
        return f"{version} (tested: {tested})"
    return f"{version} (NOT among the tested releases: {tested})"


def _hopper_line(facts) -> str:
    """Whether this process takes the sm90 kernels: on only on an sm_90 device whose Triton compiles them."""
    from .api.dispatch import hopper_path_reason
    from .jit import releases

    if not facts.is_sm90:
        return f"off (device {facts.name} is not sm_90)"
    if releases.is_tested():
        return "on"
    reason = hopper_path_reason()
    return "on (untested Triton: the probe kernel compiled)" if reason is None else f"off ({reason})"


def default_device() -> torch.device:
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def info() -> int:
    import triton

    from . import __version__

    device = default_device()
    facts = device_facts(device)
    desc = GemmDesc("fp8_1d2d", 4096, 7168, 2048)
    lines = [
        ("finegemm", f"{__version__} (commit {short_commit(Path(__file__).resolve().parent)})"),
        ("python", platform.python_version()),
        ("torch", f"{torch.__version__} (CUDA {torch.version.cuda})"),
        ("triton", _triton_line(triton.__version__)),
        ("device", f"{facts.name}, {facts.num_sms} SMs, {facts.smem_per_block // 1024} KiB smem/block, "
                   f"capability {facts.capability}"),
    ]
    try:
        backend, config = choose_backend(desc, device)
        lines.append(("backend (4096x7168x2048 FP8)", f"{backend}: {config}"))
    except Exception as exc:  # info must report, not crash
        lines.append(("backend (4096x7168x2048 FP8)", f"unavailable: {exc}"))
    reason = sm90_unsupported_reason(desc, facts)
    lines.append(("sm90 fast path", "available" if reason is None else f"not used: {reason}"))
    lines.append(("Hopper path", _hopper_line(facts)))
    lines.append(("cache dir", env.apply_cache_dir()))
    lines.append(("ptxas", _ptxas_line()))
    for switch in env.ALL_SWITCHES:
        lines.append((switch.name, switch.get() or "(unset)"))
    width = max(len(k) for k, _ in lines)
    for key, value in lines:
        print(f"{key:<{width}}  {value}")
    return 0


@dataclass
class DemoRow:
    op: str
    shape: str
    backend: str
    diff: float
    us: float | None

    def tflops(self, flops: float) -> str:
        return f"{flops / self.us / 1e6:8.1f}" if self.us else "       -"


def _time_us(fn, device: torch.device) -> float | None:
    """Median µs of ``fn`` (CUDA events, L2 flushed before each call); None on a CPU."""
    if device.type != "cuda":
        return None
    from .bench.timer import L2Flush, time_cuda

    return time_cuda(fn, L2Flush(device), warmup=3, repeats=20).median_us


def _run_case(m: int, n: int, k: int, device: torch.device, kind: str, timed: bool) -> DemoRow:
    from . import bf16_gemm_nt, fp8_gemm_nt

    gen = torch.Generator(device="cpu").manual_seed(m * 31 + n * 7 + k)
    a_bf = torch.randn((m, k), generator=gen).to(device=device, dtype=torch.bfloat16)
    b_bf = torch.randn((n, k), generator=gen).to(device=device, dtype=torch.bfloat16)
    shape = f"{m}x{n}x{k}"
    if kind == "bf16":
        d = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=device)
        backend, _ = choose_backend(GemmDesc("bf16", m, n, k), device)
        bf16_gemm_nt(a_bf, b_bf, d)
        diff = reference.calc_diff(d, reference.bf16_gemm("nt", a_bf, b_bf))
        us = _time_us(lambda: bf16_gemm_nt(a_bf, b_bf, d), device) if timed else None
        return DemoRow("bf16_gemm_nt", shape, backend, diff, us)
    recipe = (1, 128, 128) if kind == "1d2d" else (1, 1, 128)
    a = per_token_cast_to_fp8(a_bf)
    b = per_block_cast_to_fp8(b_bf) if kind == "1d2d" else per_token_cast_to_fp8(b_bf)
    c = torch.randn((m, n), generator=gen).to(device) if kind == "1d1d" else None
    d = torch.full((m, n), float("nan"), dtype=torch.bfloat16 if c is None else torch.float32, device=device)
    backend, _ = choose_backend(GemmDesc(f"fp8_{kind}", m, n, k, out_fp32=c is not None, with_c=c is not None), device)
    fp8_gemm_nt(a, b, d, c=c, recipe=recipe)
    diff = reference.calc_diff(d, reference.fp8_gemm_nt(a, b, c, recipe))
    us = _time_us(lambda: fp8_gemm_nt(a, b, d, c=c, recipe=recipe), device) if timed else None
    return DemoRow(f"fp8_gemm_nt {recipe}", shape, backend, diff, us)


def _print_rows(rows: list[tuple[DemoRow, float, float]]) -> None:
    print(f"{'op':<26} {'shape':<16} {'backend':<9} {'calc_diff':>10} {'bound':>7} {'us':>9} {'TFLOPS':>8}  ok")
    for row, flops, bound in rows:
        us = f"{row.us:9.1f}" if row.us else "        -"
        ok = "yes" if row.diff < bound else "FAIL"
        print(f"{row.op:<26} {row.shape:<16} {row.backend:<9} {row.diff:10.2e} {bound:7.0e} {us} "
              f"{row.tflops(flops)}  {ok}")


def demo(shape: tuple[int, int, int] | None = None) -> int:
    """Quantize random BF16, run the GEMMs, compare with the float64 reference, print a table."""
    device = default_device()
    if shape is None:
        # GPU: a DeepSeek-V3 projection; CPU: small enough for the interpreter in well under a minute.
        shape = (4096, 7168, 2048) if device.type == "cuda" else (64, 256, 512)
    m, n, k = shape
    facts = device_facts(device)
    print(f"finegemm demo on {facts.name}: D = A @ B^T, M={m} N={n} K={k}, random N(0, 1) BF16 inputs quantized "
          "to FP8 E4M3 (1x128 activation scales; 128x128 or 1x128 weight scales)")
    started = time.perf_counter()
    rows = []
    for kind, bound in (("1d2d", 1e-3), ("1d1d", 1e-3), ("bf16", 1e-5)):
        row = _run_case(m, n, k, device, kind, timed=device.type == "cuda")
        rows.append((row, 2.0 * m * n * k, bound))
    _print_rows(rows)
    print(f"({time.perf_counter() - started:.1f} s in all{'' if device.type == 'cuda' else ', CPU interpreter'})")
    return 0 if all(r.diff < b for r, _, b in rows) else 1
