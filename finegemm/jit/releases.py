"""The Triton releases finegemm is tested with, kept in one place.

CI compiles every sm90 kernel and runs the interpreter-sensitive portable tests on each of them (.ci/run); the
launcher (kernels/sm90/launcher.py) knows each one's private launch ABI; dispatch (api/dispatch.py) takes the
Hopper path on each without a safety net; ``python -m finegemm info`` says whether the installed one is among
them. The torch release that pins each (its ``triton`` requirement on Linux x86-64) is what a user gets.
"""

from __future__ import annotations

import importlib.metadata
import sys

# Triton major.minor -> the torch release that pins it
TESTED: dict[str, str] = {
    "3.6": "torch 2.11",
    "3.7": "torch 2.12",
    "3.8": "torch 2.14.1",
    "3.9": "torch 2.15.0",
}


def release_of(version: str) -> str:
    """``major.minor`` of a Triton version string (``"3.9.0"``, ``"3.10.0+git1234"`` -> ``"3.9"``, ``"3.10"``)."""
    parts = version.split("+")[0].split(".")
    return ".".join(parts[:2])


def triton_version() -> str:
    """The installed Triton's version: ``triton.__version__`` once Triton is imported, else its package metadata
    (importing Triton fixes the interpreter choice, which finegemm makes first)."""
    triton = sys.modules.get("triton")
    if triton is not None:
        return triton.__version__
    try:
        return importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        return "0.0"


def triton_release() -> str:
    """``major.minor`` of the installed Triton."""
    return release_of(triton_version())


def is_tested(release: str | None = None) -> bool:
    """Whether ``release`` (default: the installed Triton's) is one CI tests."""
    return (release or triton_release()) in TESTED


def release_key(release: str) -> tuple[int, ...]:
    """``"3.10"`` -> ``(3, 10)``, for ordering releases (a part that is not a number counts as 0)."""
    return tuple(int(p) if p.isdigit() else 0 for p in release.split("."))
