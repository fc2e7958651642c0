"""Every ``FINEGEMM_*`` environment switch, its default and what it does (the README's table comes from here)."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class EnvSwitch:
    name: str
    default: str
    doc: str

    def get(self) -> str:
        return os.environ.get(self.name, self.default)


PRINT_CONFIGS = EnvSwitch(
    "FINEGEMM_PRINT_CONFIGS", "0", "1: print each chosen kernel config (and backend) once per shape"
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
    "where compiled kernels are cached on disk (sets TRITON_CACHE_DIR unless that is set); "
    "empty: Triton's default ~/.triton/cache",
)
DEBUG = EnvSwitch(
    "FINEGEMM_DEBUG", "0", "1: synchronize after every launch, so an asynchronous kernel error surfaces at its call"
)

ALL_SWITCHES = (PRINT_CONFIGS, BACKEND, CACHE_DIR, DEBUG)
BACKENDS = ("auto", "sm90", "portable")


def flag(switch: EnvSwitch) -> bool:
    return switch.get().strip().lower() in ("1", "true", "yes", "on")


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


def markdown_table() -> str:
    rows = ["| variable | default | meaning |", "| --- | --- | --- |"]
    rows += [f"| `{s.name}` | `{s.default or '(unset)'}` | {s.doc} |" for s in ALL_SWITCHES]
    return "\n".join(rows)
