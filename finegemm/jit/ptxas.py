"""Which ptxas turns the kernels' PTX into SASS (``FINEGEMM_PTXAS``).

Triton 3.6 bundles ptxas 12.8. From 12.9 on, ptxas interleaves the yield bits of a warp's runs of FFMA (every
other one yields, its operand-reuse bits cleared), which lets the warp scheduler issue the other math
warpgroup's instructions between the promotion's FFMAs. DeepGEMM relied on a cubin patch of exactly that
pattern until NVCC did it, and is built by the toolkit's own (newer) ptxas. The sm90 FP8 kernels at 192 and 256
rows get the pattern from ptxas 13.0 and not from the bundled 12.8 (CPU compile).

Measured (H100 and H200), the interleave alone changes nothing; together with ptxas
``--register-usage-level=10`` (DeepGEMM's JIT flag, :func:`fp8_gemm_options`) it takes 5-7 % off the largest
256-row M = 4096 shapes. So finegemm compiles with a newer ptxas when it finds one.

Which ptxas Triton runs for sm_90, and the variable that overrides it, depend on the release (each one's
``backends/nvidia/compiler.py``, ``get_ptxas``, and ``knobs.nvidia``): 3.6, 3.7 and 3.8 run ``bin/ptxas`` (12.8,
12.8, 12.9), overridden by ``TRITON_PTXAS_PATH``; 3.9 runs what it calls ``bin/ptxas-blackwell`` (13.4) for every
arch from sm_90 on, overridden by ``TRITON_PTXAS_BLACKWELL_PATH`` (:func:`sm90_variable`). Options reach ptxas the
same way on all four: the ``ptx_options`` compile option (default ``PTXAS_OPTIONS``), split on spaces and put
before ``--gpu-name`` (3.7+ also always pass ``--regAllocOptLevel=2``).

``FINEGEMM_PTXAS`` picks, once at import and only when that release's variable is unset (Triton reads it for every
compile of the process, so the choice holds for every Triton kernel the process compiles):

- ``auto`` (the default): the newest ptxas of at least :data:`MIN_VERSION` among ``$CUDA_HOME/bin``,
  ``$CUDA_PATH/bin``, ``/usr/local/cuda/bin``, the ``PATH`` and the ``nvidia-cuda-nvcc`` wheel, no newer than the
  CUDA driver (a cubin from a newer toolkit may not load) and newer than Triton's bundled one; none: Triton's;
- empty: Triton's own choice, the bundled ptxas;
- a path: that ptxas (an error if it does not run).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess

MIN_VERSION = (12, 9)
# the first release whose sm_90 compiles run bin/ptxas-blackwell (TRITON_PTXAS_BLACKWELL_PATH)
BLACKWELL_PTXAS_FROM = (3, 9)


def _triton_release() -> tuple[int, ...]:
    from . import releases

    return releases.release_key(releases.triton_release())


def sm90_variable() -> str:
    """The environment variable through which the installed Triton takes the ptxas it runs for sm_90."""
    return "TRITON_PTXAS_BLACKWELL_PATH" if _triton_release() >= BLACKWELL_PTXAS_FROM else "TRITON_PTXAS_PATH"


def _bundled_name() -> str:
    """The file name of the ptxas the installed Triton bundles for sm_90."""
    return "ptxas-blackwell" if _triton_release() >= BLACKWELL_PTXAS_FROM else "ptxas"


def in_use() -> str | None:
    """The ptxas the installed Triton runs for sm_90 by the user's or :func:`apply`'s choice; None: its bundled one."""
    return os.environ.get(sm90_variable()) or None


@functools.cache
def ptxas_version(path: str) -> tuple[int, int] | None:
    """(major, minor) that ``path --version`` reports, or None when it does not run."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"release (\d+)\.(\d+)", out)
    return (int(found.group(1)), int(found.group(2))) if found else None


def candidates() -> list[str]:
    """Places a CUDA toolkit's ptxas usually lives, in order, without duplicates."""
    paths = [os.path.join(os.environ[var], "bin", "ptxas") for var in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(var)]
    paths.append("/usr/local/cuda/bin/ptxas")
    on_path = shutil.which("ptxas")
    if on_path:
        paths.append(on_path)
    try:
        import nvidia.cuda_nvcc  # the nvidia-cuda-nvcc wheel (optional; a namespace package: no __file__)

        paths += [os.path.join(root, "bin", "ptxas") for root in getattr(nvidia.cuda_nvcc, "__path__", [])]
    except ImportError:
        pass
    unique: list[str] = []
    for p in paths:
        real = os.path.realpath(p)
        if os.path.isfile(real) and real not in unique:
            unique.append(real)
    return unique


def driver_cuda_version() -> tuple[int, int] | None:
    """(major, minor) of the CUDA version the installed driver supports, or None without one."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        version = torch._C._cuda_getDriverVersion()
    except (ImportError, AttributeError, RuntimeError):
        return None
    return (version // 1000, version % 1000 // 10) if version else None


def choose(setting: str, paths: list[str], driver: tuple[int, int] | None,
           bundled: tuple[int, int] | None = None) -> str | None:
    """The ptxas ``setting`` (``FINEGEMM_PTXAS``) names among ``paths``, or None for Triton's own.

    ``auto``: the newest of ``paths`` at :data:`MIN_VERSION` or later and not newer than ``driver`` (when known),
    if it is newer than Triton's ``bundled`` one (a later Triton may bundle one that interleaves already).
    """
    setting = setting.strip()
    if not setting:
        return None
    if setting.lower() != "auto":
        if ptxas_version(setting) is None:
            raise ValueError(f"FINEGEMM_PTXAS={setting!r}: not a ptxas that runs (expected empty, 'auto' or a path)")
        return setting
    usable = []
    for p in paths:
        version = ptxas_version(p)
        if version is not None and version >= MIN_VERSION and (driver is None or version <= driver):
            usable.append((version, p))
    if not usable or (bundled is not None and max(usable)[0] <= bundled):
        return None
    return max(usable)[1]


def bundled_version() -> tuple[int, int] | None:
    """The version of the ptxas Triton bundles for sm_90 (what it compiles with when :func:`sm90_variable` is
    unset)."""
    import triton

    return ptxas_version(os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", _bundled_name()))


def version_at(path: str | None) -> tuple[int, int] | None:
    """The version of the ptxas at ``path``, or with None (:func:`sm90_variable` unset) of Triton's bundled one."""
    return ptxas_version(path) if path else bundled_version()


def apply(setting: str) -> str | None:
    """Set the variable the installed Triton reads for its sm_90 ptxas (:func:`sm90_variable`) from ``setting``
    unless the user set it; returns the ptxas in use by choice, or None for Triton's default."""
    variable = sm90_variable()
    if os.environ.get(variable):
        return os.environ[variable]
    chosen = choose(setting, candidates(), driver_cuda_version(), bundled_version()) if setting.strip() else None
    if chosen:
        os.environ[variable] = chosen
    return chosen


# DeepGEMM's JIT passes this to ptxas; Triton passes none (default level 5).
REGISTER_USAGE_LEVEL = "--register-usage-level=10"


@functools.cache
def _fp8_gemm_options(path: str | None, user: str | None) -> str | None:
    """:func:`fp8_gemm_options` for the ptxas at ``path`` (None: Triton's bundled one) and the user's options."""
    version = version_at(path)
    if version is None or version < MIN_VERSION or "register-usage-level" in (user or "") \
            or "regUsageLevel" in (user or ""):
        return user
    return f"{user} {REGISTER_USAGE_LEVEL}" if user else REGISTER_USAGE_LEVEL


def fp8_gemm_options(per_channel: bool = False) -> str | None:
    """ptxas options of the FP8 GEMM kernels (gemm_1d2d: dense, grouped, k-grouped), passed per launch as
    ``ptx_options``: the user's ``PTXAS_OPTIONS`` plus :data:`REGISTER_USAGE_LEVEL` when the ptxas in use is
    :data:`MIN_VERSION` or later and the kernel runs recipe (1, 128, 128). ``per_channel`` (recipe (1, 1, 128),
    the weight-gradient and k-grouped kernels): the user's options alone.

    H100 and H200, dense suite, two rounds each: ptxas 13.0 at level 10 takes 5-6 % off
    the two largest 256-row M = 4096 shapes, 2-4 % off the other M = 4096 ones and the contiguous grouped ones;
    13.0 alone, or level 10 under the bundled 12.8, does not (12.8 at level 10 is 4 % slower at 4096 x 2112 x
    7168). Level 10 hoists the scale loads of the next K block above the current block's WGMMAs; the other kernel
    families measured no gain, so they keep ptxas's default.

    Recipe (1, 1, 128) keeps the default level too: the weight-grad suite measured level 10 neutral (0.994x),
    and on the CPU, ptxas 13.0 at level 7 and above spills 40-56 bytes in the 128x64 pipelined tile the rules
    pick at K = 512 (32768x4096x512), which level 5 does not. Its per-channel scales
    come from the ring, so the weight-scale load that level 10 hoists does not exist there.
    """
    user = os.environ.get("PTXAS_OPTIONS") or None
    if per_channel:
        return user
    return _fp8_gemm_options(in_use(), user)
