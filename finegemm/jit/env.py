"""Every ``FINEGEMM_*`` environment switch, its default and what it does (the README's table comes from here)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

# ``os.environ.get`` costs about 1 us (key encoding, value decoding through a Mapping ABC); switches are
# read on every public call (DESIGN.md §6), so on POSIX they are read from the dict behind os.environ
# (bytes keys, updated by os.environ[...] = ..., putenv-backed and monkeypatch-safe), falling back to
# os.environ.get whenever that dict is not there.
_POSIX = os.name == "posix"


@dataclass(frozen=True)
class EnvSwitch:
    name: str
    default: str
    doc: str
    # a switch read when this one is unset (DeepGEMM's name for the same setting), or None
    fallback: EnvSwitch | None = field(default=None, repr=False)
    _key: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_key", os.fsencode(self.name))

    def raw(self) -> str | bytes | None:
        """The variable's value as stored (bytes on POSIX), None when unset (and its fallback unset): a cheap
        per-call read."""
        if _POSIX:
            data = getattr(os.environ, "_data", None)
            if data.__class__ is dict:
                value = data.get(self._key)
                if value is None and self.fallback is not None:
                    return self.fallback.raw()
                return value
        value = os.environ.get(self.name)
        if value is None and self.fallback is not None:
            return self.fallback.raw()
        return value

    def get(self) -> str:
        value = self.raw()
        if value is None:
            return self.default
        return value if isinstance(value, str) else os.fsdecode(value)


# DeepGEMM's switches with a meaning here: read when the finegemm switch of the same setting is unset
DG_PRINT_CONFIGS = EnvSwitch("DG_PRINT_CONFIGS", "0", "honoured: as `FINEGEMM_PRINT_CONFIGS` when that is unset")
DG_JIT_CACHE_DIR = EnvSwitch("DG_JIT_CACHE_DIR", "", "honoured: as `FINEGEMM_CACHE_DIR` when that is unset")

PRINT_CONFIGS = EnvSwitch(
    "FINEGEMM_PRINT_CONFIGS", "0", "1: print each chosen kernel config (and backend) once per shape (unset: "
    "`DG_PRINT_CONFIGS`)", fallback=DG_PRINT_CONFIGS,
)
BACKEND = EnvSwitch(
    "FINEGEMM_BACKEND",
    "auto",
    "auto: sm90 Gluon kernels on compute capability 9.0 where the shape is supported, portable Triton "
    "elsewhere; sm90 or portable forces one (sm90 on an unsupported shape or GPU is an error)",
)
CACHE_DIR = EnvSwitch(
    "FINEGEMM_CACHE_DIR",
    "",
    "where compiled kernels are cached on disk (sets TRITON_CACHE_DIR unless that is set); unset: "
    "`DG_JIT_CACHE_DIR`; empty: Triton's default ~/.triton/cache",
    fallback=DG_JIT_CACHE_DIR,
)
DEBUG = EnvSwitch(
    "FINEGEMM_DEBUG", "0", "1: synchronize after every launch, so an asynchronous kernel error surfaces at its call"
)

MQA_FP32_SUM = EnvSwitch(
    "FINEGEMM_MQA_FP32_SUM",
    "0",
    "1: on sm90, fp8_mqa_logits sums the heads in FP32 on the CUDA cores (DeepGEMM's arithmetic; the Gluon "
    "kernel at D=128 and 32-128 heads, Triton elsewhere) instead of on the tensor cores from ReLU'd scores "
    "rounded to bf16 (calc_diff ~3e-6 against float64, 10-35 % faster)",
)

PDL = EnvSwitch(
    "FINEGEMM_PDL",
    "1",
    "0: launch the sm90 split-K reductions without programmatic dependent launch (they then start only "
    "once the GEMM has finished, as ordinary stream order); read when a shape's launch plan is built",
)

PTXAS = EnvSwitch(
    "FINEGEMM_PTXAS",
    "auto",
    "which ptxas compiles the kernels, applied at import unless the variable the installed Triton reads for sm_90 "
    "is set (TRITON_PTXAS_PATH; from triton 3.9 TRITON_PTXAS_BLACKWELL_PATH; it then holds for every Triton kernel "
    "of the process): auto, the newest ptxas >= 12.9 found (a CUDA toolkit's, or pip's nvidia-cuda-nvcc-cu12) that "
    "the driver supports and newer than Triton's bundled one (12.8 with triton 3.6 and 3.7, 12.9 with 3.8, 13.4 "
    "with 3.9), else Triton's bundled one; empty, "
    "Triton's bundled one; or a path. Under ptxas >= 12.9 the FP8 GEMM kernels of recipe (1, 128, 128) also get "
    "ptxas --register-usage-level=10, as DeepGEMM's build does: 5-7 % at the largest M = 4096 shapes; recipe "
    "(1, 1, 128) keeps the default level (neutral there, and a spill at one tile; finegemm/jit/ptxas.py)",
)

AS_DEEP_GEMM = EnvSwitch(
    "FINEGEMM_AS_DEEP_GEMM",
    "0",
    "1: `import deep_gemm` (and `deep_gemm.utils`, `deep_gemm.utils.layout`, `deep_gemm.testing`) gives finegemm's "
    "DeepGEMM-compatible modules in every Python process of the environment finegemm is installed in (read at "
    "interpreter start by the `finegemm-deep-gemm.pth` that pip installs, so engines' worker processes see it "
    "too); a real DeepGEMM that is importable wins, with a warning. Same as calling `finegemm.alias_as_deep_gemm()`",
)

ALL_SWITCHES = (PRINT_CONFIGS, BACKEND, CACHE_DIR, DEBUG, MQA_FP32_SUM, PDL, PTXAS, AS_DEEP_GEMM)

_IGNORED = "ignored: "
# DeepGEMM's runtime switches that callers set, and what finegemm does with each
DG_SWITCHES = (
    DG_PRINT_CONFIGS,
    DG_JIT_CACHE_DIR,
    EnvSwitch("DG_USE_NVIDIA_TOOLS", "0", "honoured by `deep_gemm.testing.bench_kineto` under the alias: 1 skips "
              "the profiler and returns 1 for every kernel (for runs under Nsight or compute-sanitizer)"),
    EnvSwitch("DG_JIT_DEBUG", "0", _IGNORED + "finegemm's kernels are Triton's; `FINEGEMM_PRINT_CONFIGS=1` prints "
              "the configs, `FINEGEMM_DEBUG=1` synchronizes after each launch"),
    EnvSwitch("DG_JIT_USE_NVRTC", "0", _IGNORED + "Triton compiles the kernels (no NVCC or NVRTC)"),
    EnvSwitch("DG_JIT_NVCC_COMPILER", "", _IGNORED + "no NVCC; `FINEGEMM_PTXAS` picks the ptxas"),
    EnvSwitch("DG_JIT_CPP_STANDARD", "20", _IGNORED + "no C++ is compiled"),
    EnvSwitch("DG_JIT_WITH_LINEINFO", "0", _IGNORED + "Triton's own switches (e.g. `TRITON_DISABLE_LINE_INFO`) "
              "apply"),
    EnvSwitch("DG_JIT_PTXAS_VERBOSE", "0", _IGNORED),
    EnvSwitch("DG_JIT_PTXAS_CHECK", "0", _IGNORED),
    EnvSwitch("DG_JIT_PRINT_COMPILER_COMMAND", "0", _IGNORED),
    EnvSwitch("DG_JIT_PRINT_LOAD_TIME", "0", _IGNORED),
    EnvSwitch("DG_JIT_DUMP_ASM", "0", _IGNORED + "Triton's `MLIR_ENABLE_DUMP` / `TRITON_KERNEL_DUMP` dump its "
              "stages"),
    EnvSwitch("DG_JIT_DUMP_PTX", "0", _IGNORED + "as `DG_JIT_DUMP_ASM`"),
    EnvSwitch("DG_JIT_DUMP_SASS", "0", _IGNORED + "as `DG_JIT_DUMP_ASM`"),
    EnvSwitch("DG_JIT_USE_RUNTIME_API", "0", _IGNORED + "Triton loads the kernels"),
    EnvSwitch("DG_JIT_USE_LIBRARY_ENUM_KERNELS", "0", _IGNORED + "Triton loads the kernels"),
    EnvSwitch("DG_USE_PYTORCH_CUBLASLT_HANDLE", "0", _IGNORED + "the `cublaslt_gemm_*` peers run torch's GEMM, "
              "which uses torch's handle"),
    EnvSwitch("DG_USE_TEMP_CUBLASLT_WORKSPACE", "0", _IGNORED + "as `DG_USE_PYTORCH_CUBLASLT_HANDLE`"),
    EnvSwitch("DG_COMM_KERNEL_DEBUG", "0", _IGNORED + "the mega MoE kernels are SM100-only and not offered"),
)
BACKENDS = ("auto", "sm90", "portable")


def flag(switch: EnvSwitch) -> bool:
    value = switch.raw()
    if value is None:
        value = switch.default
    elif not isinstance(value, str):
        value = os.fsdecode(value)
    return value.strip().lower() in ("1", "true", "yes", "on")


def backend() -> str:
    value = BACKEND.get().strip().lower()
    if value not in BACKENDS:
        raise ValueError(f"FINEGEMM_BACKEND must be one of {BACKENDS}, got {value!r}")
    return value


def apply_cache_dir() -> str:
    """Point Triton's on-disk cache at ``FINEGEMM_CACHE_DIR`` when it is set; returns the directory in use."""
    chosen = CACHE_DIR.get().strip()
    if chosen:
        os.environ.setdefault("TRITON_CACHE_DIR", chosen)
    return os.environ.get("TRITON_CACHE_DIR", os.path.join(os.path.expanduser("~"), ".triton", "cache"))


def apply_ptxas() -> str | None:
    """Point Triton at the ptxas ``FINEGEMM_PTXAS`` names (:mod:`.ptxas`); returns it, or None for Triton's own."""
    from . import ptxas

    return ptxas.apply(PTXAS.get())


def markdown_table(switches: tuple[EnvSwitch, ...] = ALL_SWITCHES) -> str:
    rows = ["| variable | default | meaning |", "| --- | --- | --- |"]
    rows += [f"| `{s.name}` | `{s.default or '(unset)'}` | {s.doc} |" for s in switches]
    return "\n".join(rows)
