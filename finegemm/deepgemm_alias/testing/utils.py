"""``deep_gemm.testing.utils``: ``get_arch_major``, ``test_filter``, ``ignore_env``."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable

import torch


def get_arch_major() -> int:
    """The current CUDA device's compute-capability major (9 on Hopper)."""
    return torch.cuda.get_device_capability()[0]


def test_filter(condition: Callable[[], bool]) -> Callable:
    """Decorator: run the test function only when ``condition()`` holds, else print that it was filtered."""

    def decorate(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def run(*args, **kwargs):
            if condition():
                return fn(*args, **kwargs)
            print(f"{fn.__name__}: skipped, {condition} is false\n")
            return None

        return run

    return decorate


def ignore_env(name: str, condition: Callable[[], bool]) -> Callable:
    """Decorator: while ``condition()`` holds, run the function with the environment variable ``name`` unset
    (restored afterwards)."""

    def decorate(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def run(*args, **kwargs):
            if not condition():
                return fn(*args, **kwargs)
            saved = os.environ.pop(name, None)
            try:
                return fn(*args, **kwargs)
            finally:
                if saved is not None:
                    os.environ[name] = saved

        return run

    return decorate


test_filter.__test__ = False  # a decorator factory, not a pytest test

__all__ = ["get_arch_major", "test_filter", "ignore_env"]
