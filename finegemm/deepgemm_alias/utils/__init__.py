"""``deep_gemm.utils``: DeepGEMM's layout and math helpers (``deep_gemm.utils.dist``, for its SM100 mega MoE
tests, is not offered)."""

from . import layout, math
from .layout import *  # noqa: F403
from .math import *  # noqa: F403

__all__ = ["layout", "math", *layout.__all__, *math.__all__]
