"""Per-shape config cache and ``FINEGEMM_PRINT_CONFIGS`` reporting."""

from __future__ import annotations

import sys
from typing import Any

from . import env

_printed: set[Any] = set()


def report_config(desc: Any, backend: str, config: Any, note: str = "") -> None:
    """Print ``desc -> backend, config`` once per distinct triple when FINEGEMM_PRINT_CONFIGS=1."""
    if not env.flag(env.PRINT_CONFIGS):
        return
    key = (desc, backend, config, note)
    if key in _printed:
        return
    _printed.add(key)
    suffix = f" ({note})" if note else ""
    print(f"[finegemm] {desc} -> {backend}: {config}{suffix}", file=sys.stderr, flush=True)
