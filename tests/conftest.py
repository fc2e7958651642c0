import pytest
import torch

# finegemm first: it settles TRITON_INTERPRET (on for a machine without a GPU) and snapshots
# triton.language before any test module imports triton (triton.experimental.gluon imports
# triton.language, which would fix the interpreter choice and the snapshot too early).
import finegemm  # noqa: F401,E402


def pytest_collection_modifyitems(config, items):
    from release_regressions import KNOWN

    from finegemm.jit import releases

    release = releases.triton_release()
    known = KNOWN.get(release, {})
    for item in items:
        if item.nodeid in known:
            item.add_marker(pytest.mark.xfail(reason=f"Triton {release}: {known[item.nodeid]} (3.6 passes; "
                                                     "tests/release_regressions.py)", strict=True))
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run `pytest -m gpu` on the H200)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
