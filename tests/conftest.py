import pytest
import torch

# finegemm first: it settles TRITON_INTERPRET (on for a machine without a GPU) and snapshots
# triton.language before any test module imports triton (triton.experimental.gluon imports
# triton.language, which would fix the interpreter choice and the snapshot too early).
import finegemm  # noqa: F401,E402


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run `pytest -m gpu` on the H200)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
