"""Backend choice: sm90 Gluon kernels on Hopper where supported, portable Triton elsewhere."""

from __future__ import annotations

import functools
import warnings
from typing import Any

import torch

from ..jit import env, releases
from ..jit.cache import report_config
from ..jit.device import DeviceFacts, device_facts
from ..jit.heuristics import GemmDesc, get_portable_config
from ..jit.interpret import interpreting


class BackendError(RuntimeError):
    """The requested backend cannot run this problem on this device."""


@functools.cache
def _sm90_module() -> Any | None:
    """kernels/sm90/dispatch.py, or None where it cannot be imported (resolved once: run_sm90 is per call)."""
    try:
        from ..kernels.sm90 import dispatch as sm90_dispatch
    except ImportError:
        return None
    return sm90_dispatch


def _sm90_bf16_module() -> Any | None:
    try:
        from ..kernels.sm90 import dispatch_bf16
    except ImportError:
        return None
    return dispatch_bf16


@functools.cache
def _sm90_grouped_module() -> Any | None:
    """kernels/sm90/dispatch_grouped.py (the m-grouped FP8 kernels), or None where it cannot be imported."""
    try:
        from ..kernels.sm90 import dispatch_grouped
    except ImportError:
        return None
    return dispatch_grouped


@functools.cache
def _sm90_bf16_grouped_module() -> Any | None:
    """kernels/sm90/dispatch_bf16_grouped.py (the m-grouped BF16 kernels), or None where it cannot be imported."""
    try:
        from ..kernels.sm90 import dispatch_bf16_grouped
    except ImportError:
        return None
    return dispatch_bf16_grouped


@functools.cache
def sm90_mqa_module() -> Any | None:
    """kernels/sm90/mqa_logits.py (the Gluon MQA-logits kernel), or None where it cannot be imported."""
    try:
        from ..kernels.sm90 import mqa_logits
    except ImportError:
        return None
    return mqa_logits if hopper_path_reason() is None else None


@functools.cache
def sm90_paged_mqa_module() -> Any | None:
    """kernels/sm90/paged_mqa_logits.py (the Gluon paged MQA-logits kernel), or None where it cannot be imported."""
    try:
        from ..kernels.sm90 import paged_mqa_logits
    except ImportError:
        return None
    return paged_mqa_logits if hopper_path_reason() is None else None


@functools.cache
def _sm90_k_grouped_module() -> Any | None:
    """kernels/sm90/dispatch_k_grouped.py (k-grouped FP8 and BF16), or None where it cannot be imported."""
    try:
        from ..kernels.sm90 import dispatch_k_grouped
    except ImportError:
        return None
    return dispatch_k_grouped


def _sm90_rules(desc: GemmDesc) -> Any | None:
    """The sm90 host module whose ``unsupported_reason``/``get_config`` own ``desc``'s kind and layout."""
    if desc.layout in ("m_grouped_contiguous", "m_grouped_masked"):
        return _sm90_bf16_grouped_module() if desc.kind == "bf16" else _sm90_grouped_module()
    if desc.layout == "k_grouped":
        return _sm90_k_grouped_module()
    return _sm90_bf16_module() if desc.kind == "bf16" else _sm90_module()


# The Hopper path on a Triton release CI does not test (jit/releases.py): tried, and given up for the process, with
# one warning, when its probe compile fails. (The reason, once known; None: not probed yet.)
_untested_release_reason: list[str | None] = []

# The probe: the dense FP8 kernel, whose Gluon surface (TMA, WGMMA, mbarriers, warp specialization) the other sm90
# kernels share, compiled for sm_90 at a DeepSeek-V3 shape (CPU-side; no GPU needed).
PROBE_DESC = GemmDesc("fp8_1d2d", 4096, 7168, 2048)


def _probe_compile() -> None:
    """Compile the probe kernel for sm_90 with the installed Triton; raises what the compiler raises."""
    from ..jit.device import H200
    from ..kernels.sm90 import compile_check
    from ..kernels.sm90.dispatch import get_config

    compile_check.compile_variant(PROBE_DESC, get_config(PROBE_DESC, H200))


def hopper_path_reason() -> str | None:
    """Why this process does not take the sm90 kernels whatever the device (None: it takes them where they fit).

    On a tested Triton release: None. On another: the sm90 kernels are tried once, by compiling a probe kernel the
    first time they would be chosen; if it fails, a one-time warning names the Triton version and the portable
    kernels run every later call."""
    if releases.is_tested():
        return None
    if not _untested_release_reason:
        version = releases.triton_version()
        try:
            _probe_compile()
            reason = None
        except Exception as exc:  # noqa: BLE001 - any compiler failure means: not on this release
            summary = str(exc).strip().splitlines()
            reason = (f"Triton {version} is not among the tested releases ({', '.join(releases.TESTED)}) and the "
                      f"sm90 kernels do not compile with it ({type(exc).__name__}: {summary[-1] if summary else ''})")
            warnings.warn(f"finegemm: {reason}; using the portable Triton kernels instead", RuntimeWarning,
                          stacklevel=3)
        _untested_release_reason.append(reason)
    return _untested_release_reason[0]


def sm90_unsupported_reason(desc: GemmDesc, facts: DeviceFacts) -> str | None:
    """Why the sm90 path cannot run ``desc`` on ``facts`` (None: it can)."""
    if not facts.is_sm90:
        return f"device {facts.name} (compute capability {facts.capability}) is not sm_90"
    module = _sm90_rules(desc)
    if module is None:
        return "the sm90 Gluon kernels are not available with this Triton version"
    return module.unsupported_reason(desc, facts) or hopper_path_reason()


def check_device_usable(device: torch.device) -> None:
    if device.type == "cpu":
        if not interpreting():
            raise BackendError(
                "CPU tensors run only through Triton's interpreter: set TRITON_INTERPRET=1 before importing "
                "finegemm (it is set automatically on machines without a CUDA GPU)"
            )
    elif device.type != "cuda":
        raise BackendError(f"tensors on {device} are not supported: use CUDA tensors (or CPU with the interpreter)")


@functools.lru_cache(maxsize=4096)
def _choose(desc: GemmDesc, facts: DeviceFacts, requested: str) -> tuple[str, Any]:
    if requested in ("auto", "sm90"):
        reason = sm90_unsupported_reason(desc, facts)
        if reason is None:
            config = _sm90_rules(desc).get_config(desc, facts)
            report_config(desc, "sm90", config)
            return "sm90", config
        if requested == "sm90":
            raise BackendError(f"FINEGEMM_BACKEND=sm90 cannot run {desc}: {reason}")
        note = f"portable because {reason}" if facts.capability == (9, 0) else ""
    else:
        note = "forced by FINEGEMM_BACKEND=portable"
    config = get_portable_config(desc, facts)
    report_config(desc, "portable", config, note)
    return "portable", config


def choose_backend(desc: GemmDesc, device: torch.device) -> tuple[str, Any]:
    """(backend name, kernel config) for ``desc`` on ``device``; cached per (desc, device, switch)."""
    check_device_usable(device)
    return _choose(desc, device_facts(device), env.backend())


def portable_instead(desc: GemmDesc, device: torch.device, reason: str) -> tuple[str, Any]:
    """("portable", config) for a call the sm90 kernel declines for ``reason`` (a tensor layout the
    shape-only rules cannot see); BackendError when FINEGEMM_BACKEND=sm90 forces the fast path."""
    if env.backend() == "sm90":
        raise BackendError(f"FINEGEMM_BACKEND=sm90 cannot run {desc}: {reason}")
    config = get_portable_config(desc, device_facts(device))
    report_config(desc, "portable", config, f"portable because {reason}")
    return "portable", config


def run_sm90(name: str, *args: Any) -> None:
    """Call ``kernels/sm90/dispatch.<name>(*args)`` (``m_grouped_fp8_*``: ``dispatch_grouped``,
    ``m_grouped_bf16_*``: ``dispatch_bf16_grouped``, ``k_grouped_*``: ``dispatch_k_grouped``); modules
    are imported once, not per call."""
    if name.startswith("m_grouped_bf16"):
        module = _sm90_bf16_grouped_module()
    elif name.startswith("m_grouped_"):
        module = _sm90_grouped_module()
    elif name.startswith("k_grouped_"):
        module = _sm90_k_grouped_module()
    else:
        module = _sm90_module()
    getattr(module, name)(*args)


def debug_sync(device: torch.device) -> None:
    """With FINEGEMM_DEBUG=1, wait for the launch so its errors surface at the call that caused them."""
    if device.type == "cuda" and env.flag(env.DEBUG):
        torch.cuda.synchronize(device)
