"""kernels/sm90/launcher.py on the CPU: which replay mode a compiled kernel gets, what the raw mode hands
the C launcher, and every fallback to ``kernel[grid](...)``.

Triton's own objects are used where they can be without a GPU (``CompiledKernel``, ``CudaLauncher``
and ``wrap_handle_tensordesc`` of the installed release, 3.6 to 3.9), with the C launch function, the
tensor-map encoder and torch's device/stream queries replaced by recorders; what the raw mode hands the
C function is checked against the argument format in the release's own driver source. The GPU side
(bit-identical results, CUDA graphs, streams) is tests/test_sm90_launcher_gpu.py.
"""

from __future__ import annotations

import inspect
import os
import re
from types import SimpleNamespace

import pytest

triton = pytest.importorskip("triton")
nv_driver = pytest.importorskip("triton.backends.nvidia.driver")
from triton import knobs  # noqa: E402
from triton.compiler.compiler import CompiledKernel  # noqa: E402

from finegemm.kernels.sm90 import launcher  # noqa: E402

ABI = launcher.launch_abi()
pytestmark = pytest.mark.skipif(ABI is None, reason=f"Triton {triton.__version__}: no known launch ABI")

SIGNATURE = {"a_desc": "tensordesc<fp8e4nv[64, 128]>", "sfa_ptr": "*fp32", "c_ptr": "*bf16", "M": "i32",
             "N": "constexpr", "BLOCK": "constexpr"}
DESC_META = [{"swizzle": 3, "elem_size": 1, "elem_type": 0, "block_size": [64, 128], "fp4_padded": False}]


class FakeTensor:
    """What the launcher reads of a CUDA tensor: ``is_cuda`` and ``data_ptr()``."""

    is_cuda = True

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr

    def data_ptr(self) -> int:
        return self.ptr


class CLaunch:
    """Stands in for the generated ``__triton_launcher.launch``: records each call's arguments."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def __call__(self, *args):
        self.calls.append(args)


def _kernel_fn(a_desc, sfa_ptr, c_ptr, M, N, BLOCK):  # the fake kernel's Python signature
    pass


class FakeKernel:
    """A JITFunction as launcher.launch uses it: ``kernel[grid](*args, **kw)`` returns the CompiledKernel."""

    def __init__(self, compiled) -> None:
        self.compiled = compiled
        self.signature = inspect.signature(_kernel_fn)
        self.pre_run_hooks: list = []
        self.normal_launches: list[tuple] = []
        self.fn = _kernel_fn

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            self.normal_launches.append((grid, args, kwargs))
            return self.compiled
        return run


ANNOTATIONS = ["annotations"]
KERNEL_SIGNATURE = b"packed signature"


def _call(grid3, stream, kernel_args) -> tuple:
    """What the raw mode must hand the release's C launch function (see test_raw_call_matches_the_c_format)."""
    if ABI.shared_launcher:
        return (*grid3, stream, 0xF00, False, False, (4, 1, 1024), None, None, None, None, None,
                ANNOTATIONS, KERNEL_SIGNATURE, tuple(kernel_args))
    return (*grid3, stream, 0xF00, False, False, None, None, (4, 1, 1024), None, None, None, *kernel_args)


def _kernel_part(call: tuple) -> tuple:
    return call[15] if ABI.shared_launcher else call[13:]


def _compiled(signature=SIGNATURE, desc_meta=DESC_META, scratch=0, wrap=True):
    c_launch = CLaunch()
    run = object.__new__(nv_driver.CudaLauncher)
    run.launch = nv_driver.wrap_handle_tensordesc(c_launch, signature, desc_meta) if wrap else c_launch
    run.num_ctas = 1
    run.global_scratch_size = scratch
    run.global_scratch_align = 1
    run.profile_scratch_size = 0
    run.profile_scratch_align = 1
    run.launch_cooperative_grid = False
    run.launch_pdl = False
    run.arg_annotations = ANNOTATIONS  # 3.7+: built from the expanded signature by the C extension
    run.kernel_signature = KERNEL_SIGNATURE
    compiled = object.__new__(CompiledKernel)
    compiled.src = SimpleNamespace(signature=dict(signature))
    compiled.metadata = SimpleNamespace(tensordesc_meta=desc_meta)
    compiled.function = 0xF00
    compiled.packed_metadata = (4, 1, 1024)
    compiled.module = None  # nothing loaded: CompiledKernel.__del__ (3.8+) has nothing to unload
    compiled._run = run
    return compiled, c_launch


@pytest.fixture
def cuda(monkeypatch):
    """Fake device/stream queries and tensor-map encoder; ``state`` steers them."""
    state = SimpleNamespace(device=0, streams={0: 111, 1: 222}, encoded=[])
    monkeypatch.setattr(launcher, "_cuda_fns", lambda: (lambda: state.device, lambda i: state.streams[i]))
    monkeypatch.setattr(launcher, "_is_c_function", lambda fn: isinstance(fn, CLaunch))

    def encode(arg, meta, *base_args):  # 3.8+ pass the launch's base arguments too
        state.encoded.append(arg)
        return [("tensormap", arg.base.ptr), *arg.shape, *arg.strides]

    monkeypatch.setattr(nv_driver, "make_tensordesc_arg", encode)
    return state


def _args():
    desc = SimpleNamespace(base=FakeTensor(0x1000), shape=[64, 7168], strides=[7168, 1], padding="zero")
    return (desc, FakeTensor(0x2000), None, 64), {"N": 2112, "BLOCK": 128, "num_warps": 4}


def test_raw_mode_calls_the_c_launcher_with_prebuilt_arguments(cuda):
    compiled, c_launch = _compiled()
    kernel = FakeKernel(compiled)
    args, kwargs = _args()
    replay = launcher.launch(kernel, (17, 4), args, kwargs)
    assert replay.mode == "raw" and len(kernel.normal_launches) == 1 and not c_launch.calls
    replay()
    replay()
    assert len(kernel.normal_launches) == 1 and len(c_launch.calls) == 2
    assert len(cuda.encoded) == 1  # the tensor map was encoded once, not per call
    want = _call((17, 4, 1), 111, [("tensormap", 0x1000), 64, 7168, 7168, 1,  # descriptor: map, shape, strides
                                   0x2000, None, 64, 2112, 128])  # pointers as ints, None stays, scalar, constexprs
    assert c_launch.calls[0] == want


# The C format of each release's launch function, one unit per argument: 3.6 generates a module per kernel whose
# format starts with driver.py's _BASE_ARGS_FORMAT; 3.7-3.9 parse one fixed format in driver.c's launchKernel.
_UNIT = re.compile(r"\(i+\)|y\*|[iKpO]")


def _c_format() -> list[str]:
    if not ABI.shared_launcher:
        return _UNIT.findall(nv_driver._BASE_ARGS_FORMAT)
    source = open(os.path.join(os.path.dirname(nv_driver.__file__), "driver.c")).read()
    body = source[source.index("static PyObject *launchKernel("):]
    return _UNIT.findall(re.search(r'PyArg_ParseTuple\(args, "([^"]+)"', body).group(1))


def _fits(unit: str, value) -> bool:
    if unit in "iK":
        return isinstance(value, int) and not isinstance(value, bool)
    if unit == "p":
        return isinstance(value, bool)
    if unit == "y*":
        return isinstance(value, bytes)
    if unit.startswith("("):
        return isinstance(value, tuple) and len(value) == len(unit) - 2
    return True  # O: any object


def test_raw_call_matches_the_c_format(cuda):
    """Each argument the raw mode passes fits its unit of the release's own C format (a shifted argument would
    put the packed metadata where a pointer or a hook belongs)."""
    compiled, c_launch = _compiled()
    replay = launcher.launch(FakeKernel(compiled), (17, 4), *_args())
    replay()
    call, units = c_launch.calls[0], _c_format()
    fixed = call if ABI.shared_launcher else call[:len(units)]
    assert len(fixed) == len(units), (units, call)
    assert [u for u, v in zip(units, fixed) if not _fits(u, v)] == []
    metadata = units.index(next(u for u in units if u.startswith("(")), 3) if ABI.shared_launcher else 9
    assert call[metadata] == compiled.packed_metadata  # 3.6: 'O' at 9; 3.7+: '(iii)' at 7


def test_raw_order_matches_the_release_launcher():
    """CudaLauncher.__call__ of the installed release hands its C function the arguments in the order raw mode
    builds them (names read from its source)."""
    source = inspect.getsource(nv_driver.CudaLauncher.__call__)
    names = re.sub(r"\s+", "", re.search(r"self\.launch\(([^)]*)\)", source).group(1)).split(",")
    if ABI.shared_launcher:
        assert names == ["gridX", "gridY", "gridZ", "stream", "function", "self.launch_cooperative_grid",
                         "self.launch_pdl", "kernel_metadata", "launch_metadata", "launch_enter_hook",
                         "launch_exit_hook", "global_scratch", "profile_scratch", "self.arg_annotations",
                         "self.kernel_signature", names[-1]]
        assert names[-1] in ("args", "kernel_args")
    else:  # *args: CompiledKernel.run's (packed metadata, launch metadata, hooks, kernel arguments)
        assert names == ["gridX", "gridY", "gridZ", "stream", "function", "self.launch_cooperative_grid",
                         "self.launch_pdl", "global_scratch", "profile_scratch", "*args"]


def test_every_tested_release_has_a_launch_abi():
    from finegemm.jit import releases

    assert set(launcher.LAUNCH_ABIS) == set(releases.TESTED)
    assert launcher.launch_abi() is launcher.LAUNCH_ABIS.get(releases.release_of(triton.__version__))


def test_unknown_release_says_so_once(monkeypatch, capsys):
    monkeypatch.setattr(triton, "__version__", "3.99.0")
    monkeypatch.setenv("FINEGEMM_PRINT_CONFIGS", "1")
    monkeypatch.setattr(launcher, "_unknown_release_noted", [])
    assert launcher.launch_abi() is None and launcher.launch_abi() is None
    err = capsys.readouterr().err
    assert err.count("Triton 3.99.0") == 1 and "kernel[grid]" in err


def test_replay_follows_the_current_stream(cuda):
    compiled, c_launch = _compiled()
    args, kwargs = _args()
    replay = launcher.launch(FakeKernel(compiled), (1,), args, kwargs)
    cuda.streams[0] = 333  # e.g. inside torch.cuda.stream(s) or a graph capture
    replay()
    assert c_launch.calls[-1][:4] == (1, 1, 1, 333)


def test_kernel_without_descriptors_uses_the_launch_function_itself(cuda):
    sig = {"sfa_ptr": "*fp32", "c_ptr": "*bf16", "M": "i32", "N": "constexpr", "BLOCK": "constexpr"}

    def fn(sfa_ptr, c_ptr, M, N, BLOCK):
        pass

    compiled, c_launch = _compiled(sig, None, wrap=False)
    kernel = FakeKernel(compiled)
    kernel.signature = inspect.signature(fn)
    replay = launcher.launch(kernel, (2, 3, 4), (FakeTensor(8), FakeTensor(16), 5), {"N": 1, "BLOCK": 2})
    replay()
    assert replay.mode == "raw" and _kernel_part(c_launch.calls[0]) == (8, 16, 5, 1, 2)


@pytest.mark.parametrize("change", ["device", "enter_hook", "exit_hook", "pre_run_hook", "debug"])
def test_replay_falls_back_to_a_normal_launch_when_state_changed(cuda, monkeypatch, change):
    compiled, c_launch = _compiled()
    kernel = FakeKernel(compiled)
    args, kwargs = _args()
    replay = launcher.launch(kernel, (1,), args, kwargs)
    hook = lambda metadata: None  # noqa: E731
    if change == "device":
        cuda.device = 1
    elif change == "enter_hook":
        knobs.runtime.launch_enter_hook.add(hook)
    elif change == "exit_hook":
        knobs.runtime.launch_exit_hook.add(hook)
    elif change == "pre_run_hook":
        kernel.pre_run_hooks.append(hook)
    else:
        monkeypatch.setattr(knobs.runtime, "debug", not knobs.runtime.debug)
    try:
        replay()
    finally:
        knobs.runtime.launch_enter_hook.remove(hook)
        knobs.runtime.launch_exit_hook.remove(hook)
    assert not c_launch.calls and len(kernel.normal_launches) == 2
    assert kernel.normal_launches[1] == kernel.normal_launches[0]  # same grid, args, meta
    monkeypatch.undo()
    kernel.pre_run_hooks.clear()
    cuda.device = 0
    replay()  # state restored: raw again
    assert len(c_launch.calls) == 1


def test_other_triton_version_replays_normally(cuda, monkeypatch):
    compiled, c_launch = _compiled()
    kernel = FakeKernel(compiled)
    args, kwargs = _args()
    monkeypatch.setattr(triton, "__version__", "3.99.0")
    replay = launcher.launch(kernel, (1,), args, kwargs)
    replay()
    assert replay.mode == "normal" and not c_launch.calls and len(kernel.normal_launches) == 2


@pytest.mark.parametrize("case", ["callable_grid", "not_compiled", "signature_mismatch"])
def test_unexpected_structure_replays_normally(cuda, case):
    compiled, c_launch = _compiled()
    kernel = FakeKernel(compiled)
    args, kwargs = _args()
    grid = (1,)
    if case == "callable_grid":
        grid = lambda meta: (1,)  # noqa: E731
    elif case == "not_compiled":
        kernel.compiled = SimpleNamespace()
    else:
        compiled.src.signature = {"x": "i32"}
    replay = launcher.launch(kernel, grid, args, kwargs)
    replay()
    assert replay.mode == "normal" and not c_launch.calls and len(kernel.normal_launches) == 2


def test_global_scratch_uses_bound_mode(cuda):
    compiled, c_launch = _compiled(scratch=64)
    calls = []
    compiled._run = lambda *a: calls.append(a)  # CompiledKernel.run: the CudaLauncher call
    kernel = FakeKernel(compiled)
    args, kwargs = _args()
    replay = launcher.launch(kernel, (5,), args, kwargs)
    replay()
    assert replay.mode == "bound" and len(kernel.normal_launches) == 1
    assert calls[0][:9] == (5, 1, 1, 111, 0xF00, (4, 1, 1024), None, None, None)
    assert calls[0][9:] == (*args, 2112, 128)  # every argument in signature order, descriptors unexpanded


def test_unknown_launch_wrapper_uses_bound_mode(cuda):
    compiled, c_launch = _compiled()
    compiled.run.launch = lambda *a: c_launch(*a)  # not 3.6's wrapper: the C function cannot be found
    replay = launcher.launch(FakeKernel(compiled), (1,), *_args())
    assert replay.mode == "bound"


def test_errors_while_building_a_replay_give_a_normal_one(cuda, monkeypatch):
    compiled, c_launch = _compiled()

    def broken(arg, meta, *base_args):
        raise RuntimeError("encoder changed")

    monkeypatch.setattr(nv_driver, "make_tensordesc_arg", broken)
    kernel = FakeKernel(compiled)
    replay = launcher.launch(kernel, (1,), *_args())
    replay()
    assert replay.mode == "normal" and len(kernel.normal_launches) == 2


def test_launch_all_runs_in_order():
    seen = []
    launcher.launch_all([lambda: seen.append(1), lambda: seen.append(2)])
    assert seen == [1, 2]


# ---------------------------------------------------------------------------------------------
# Recording: several raw launches replayed together, holding no argument
# ---------------------------------------------------------------------------------------------

def _two_launches():
    c1, l1 = _compiled()
    sig = {"sfa_ptr": "*fp32", "c_ptr": "*bf16", "M": "i32", "N": "constexpr", "BLOCK": "constexpr"}

    def fn(sfa_ptr, c_ptr, M, N, BLOCK):
        pass

    c2, l2 = _compiled(sig, None, wrap=False)
    k1, k2 = FakeKernel(c1), FakeKernel(c2)
    k2.signature = inspect.signature(fn)
    args, kwargs = _args()
    launches = [(k1, (17,), args, kwargs), (k2, (64, 3), (FakeTensor(0x3000), FakeTensor(0x4000), 64),
                                            {"N": 2112, "BLOCK": 256})]
    return launches, (k1, k2), (l1, l2)


def test_recording_replays_all_launches_on_one_stream(cuda):
    launches, kernels, (l1, l2) = _two_launches()
    rec = launcher.record(launches)
    assert rec.modes == ("raw", "raw") and rec.replayable
    assert [len(k.normal_launches) for k in kernels] == [1, 1] and not l1.calls and not l2.calls
    cuda.streams[0] = 444
    assert rec() is True
    assert l1.calls[0][:4] == (17, 1, 1, 444) and l2.calls[0][:4] == (64, 3, 1, 444)
    assert _kernel_part(l2.calls[0]) == (0x3000, 0x4000, 64, 2112, 256)
    assert [len(k.normal_launches) for k in kernels] == [1, 1]


def test_recording_holds_no_argument(cuda):
    import gc
    import weakref

    launches, kernels, _ = _two_launches()
    refs = [weakref.ref(launches[0][2][0].base), weakref.ref(launches[0][2][1]), weakref.ref(launches[1][2][0])]
    rec = launcher.record(launches)
    del launches
    for k in kernels:
        k.normal_launches.clear()  # the fakes' own logs of the first launch
    cuda.encoded.clear()
    gc.collect()
    assert all(r() is None for r in refs) and rec.replayable


def test_recording_keeps_its_compiled_kernels_loaded(cuda):
    """The function handles a recording replays stay valid while it lives: it holds their CompiledKernels, which
    Triton 3.8+ unloads when collected (two threads compiling one kernel at once leave one of them to the GC)."""
    import gc
    import weakref

    launches, kernels, _ = _two_launches()
    compiled = [weakref.ref(k.compiled) for k in kernels]
    rec = launcher.record(launches)
    del launches, kernels
    gc.collect()
    assert rec.replayable and all(r() is not None for r in compiled)
    del rec
    gc.collect()
    assert all(r() is None for r in compiled)


@pytest.mark.parametrize("change", ["device", "enter_hook", "pre_run_hook"])
def test_recording_declines_when_state_changed(cuda, change):
    launches, kernels, (l1, l2) = _two_launches()
    rec = launcher.record(launches)
    hook = lambda metadata: None  # noqa: E731
    if change == "device":
        cuda.device = 1
    elif change == "enter_hook":
        knobs.runtime.launch_enter_hook.add(hook)
    else:
        kernels[1].pre_run_hooks.append(hook)
    try:
        assert rec() is False
    finally:
        knobs.runtime.launch_enter_hook.remove(hook)
    assert not l1.calls and not l2.calls  # nothing launched: the caller launches both normally


def test_recording_with_a_non_raw_launch_is_not_replayable(cuda):
    launches, kernels, (l1, l2) = _two_launches()
    kernels[1].compiled._run.global_scratch_size = 64  # -> bound mode, which needs the tensors
    rec = launcher.record(launches)
    assert rec.modes == ("raw", "bound") and not rec.replayable and rec() is False and not l1.calls


def test_launch_normally_uses_kernel_grid(cuda):
    launches, kernels, (l1, l2) = _two_launches()
    launcher.launch_normally(launches)
    assert [k.normal_launches[0][0] for k in kernels] == [(17,), (64, 3)] and not l1.calls
