"""``deep_gemm.testing``: the timing, accuracy and filtering helpers DeepGEMM's test files import.

As in DeepGEMM, ``deep_gemm.testing.bench`` is the ``bench`` function once the star imports ran (the module stays
importable as ``deep_gemm.testing.bench`` through ``import``).
"""

from . import bench as _bench_module
from . import numeric, utils
from .bench import *  # noqa: F403
from .numeric import *  # noqa: F403
from .utils import *  # noqa: F403

__all__ = ["numeric", "utils", *_bench_module.__all__, *numeric.__all__, *utils.__all__]
