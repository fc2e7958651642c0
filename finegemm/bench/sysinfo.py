"""What a result file must name: device, clocks, versions, finegemm's git commit, date."""

from __future__ import annotations

import datetime
import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

import torch

import finegemm


def _run(cmd: list[str], cwd: str | None = None) -> str | None:
    try:
        out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def git_info() -> dict[str, Any]:
    """Commit of the tree finegemm was imported from (None outside a git checkout), and whether it was dirty."""
    root = str(Path(finegemm.__file__).resolve().parent.parent)
    commit = _run(["git", "rev-parse", "HEAD"], cwd=root)
    status = _run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root)
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def tree_commit(root: str | Path = ".") -> str:
    """The commit of the tree at ``root``: its ``.commit`` file where one was written (a device's copy of the tree
    has no usable git), else ``git rev-parse --short HEAD``, else "unknown"."""
    mark = Path(root) / ".commit"
    if mark.exists():
        return mark.read_text().strip()
    return short_commit(root)


def short_commit(root: str | Path) -> str:
    """``git rev-parse --short HEAD`` in ``root``, or "unknown" outside a git checkout."""
    return _run(["git", "rev-parse", "--short", "HEAD"], cwd=str(root)) or "unknown"


def gpu_clocks() -> dict[str, Any] | None:
    """SM / memory clocks (current and max, MHz) and power limit read from nvidia-smi, when it answers."""
    if not shutil.which("nvidia-smi"):
        return None
    fields = "clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,power.limit,driver_version,temperature.gpu"
    out = _run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"])
    if not out:
        return None
    values = [v.strip() for v in out.splitlines()[0].split(",")]
    return dict(zip(fields.split(","), values))


def device_info(device: torch.device) -> dict[str, Any]:
    if device.type != "cuda":
        return {"type": "cpu", "name": platform.processor() or platform.machine(), "interpreter": True}
    props = torch.cuda.get_device_properties(device)
    return {
        "type": "cuda",
        "name": props.name,
        "sm_count": props.multi_processor_count,
        "capability": f"{props.major}.{props.minor}",
        "memory_GiB": round(props.total_memory / 2**30, 1),
        "l2_MB": round(getattr(props, "L2_cache_size", 0) / 1e6, 1),
        "clocks": gpu_clocks(),
    }


def versions() -> dict[str, Any]:
    out: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "finegemm": getattr(finegemm, "__version__", None),
    }
    try:
        import triton
        out["triton"] = triton.__version__
    except ImportError:
        out["triton"] = None
    try:
        import deep_gemm
        out["deep_gemm"] = getattr(deep_gemm, "__version__", "unknown")
    except Exception:  # not installed, or built against another torch
        out["deep_gemm"] = None
    return out


def collect(device: torch.device) -> dict[str, Any]:
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": device_info(device),
        "versions": versions(),
        "git": git_info(),
        "env": {k: v for k, v in os.environ.items() if k.startswith("FINEGEMM_") or k == "TRITON_INTERPRET"},
    }


def probe_record(what: str, device: torch.device, method: str) -> dict[str, Any]:
    """The head of a probe script's JSON (a measuring program's own JSON): what it measures, GPU, torch and
    triton versions, the commit (``.commit``, written before the run since the device has no git), UTC date,
    timing method, and an empty ``rows`` list the script fills."""
    import triton

    return dict(what=what, gpu=torch.cuda.get_device_name(device), torch=torch.__version__, triton=triton.__version__,
                commit=tree_commit(), date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                method=method, rows=[])
