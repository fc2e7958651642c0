"""Replay a Triton/Gluon kernel launch whose arguments repeat, at the C launcher's cost (DESIGN.md §6).

``kernel[grid](*args, **meta)`` costs tens of microseconds of Python per call in Triton 3.6, most of
it spent redoing per call what a repeated launch does not need: binding the arguments and computing
the specialization key, building a ``LazyDict`` of launch metadata and calling two empty hook chains
from C, and, per host ``TensorDescriptor``, re-encoding a ``CUtensorMap`` (``cuTensorMapEncodeTiled``)
and, per pointer, ``data_ptr()`` plus ``cuPointerGetAttribute``.

:func:`launch` does the first launch the normal way, keeps the ``CompiledKernel`` it returns and
returns a :class:`Replay` of that exact launch. A replay is one of three modes, the fastest that the
compiled kernel's structure allows (anything unexpected picks a slower one, never a wrong one):

- ``"raw"``: Triton's C launch function is called with the argument tuple built once: tensor maps
  encoded once, pointers as plain ints, constexprs as they were. Its argument format is private and
  differs by release (:data:`LAUNCH_ABIS`, read from each release's ``backends/nvidia/driver.py`` and
  ``driver.c``): 3.6 generates one C module per kernel (``__triton_launcher.launch``) taking the
  kernel's arguments spread after 13 base ones; 3.7, 3.8 and 3.9 share one ``cuda_utils.launch`` taking
  16 arguments, the last three the argument annotations, the packed signature and the kernel's
  arguments as one sequence. Tensor descriptors are expanded by the release's own
  ``wrap_handle_tensordesc``. Needs a release listed there, the NVIDIA backend and no global/profile
  scratch or sanitizer instrumentation.
- ``"bound"``: ``CompiledKernel.run`` with the bound arguments (no binder, no key; the launcher still
  encodes tensor maps and allocates scratch itself).
- ``"normal"``: ``kernel[grid](*args, **meta)`` again (a Triton release not in :data:`LAUNCH_ABIS`, a
  callable grid, an object that is not a ``CompiledKernel``, ...): Triton's public launch, correct on
  any release, tens of microseconds slower per call. With ``FINEGEMM_PRINT_CONFIGS=1`` an unknown
  release says so once.

Every replay reads the current CUDA device and that device's current stream, so ``torch.cuda.stream``
contexts and CUDA-graph capture see the launch where the normal path would put it. A raw or bound
replay launches through ``kernel[grid]`` instead whenever the normal path could behave differently:
the current device is not the one of the first launch, a launch hook is registered (profilers such
as proton), a pre-run hook was added, or ``knobs.runtime.debug`` or a ``knobs.compilation`` setting of
the compile key (the instrumentation mode; 3.9's ``fpsan_homomorphic_casts``) changed.

The caller guarantees that the arguments are the same objects as at the first launch and that every
tensor still has the data pointer, shape and strides it had (a :class:`Replay` keeps them alive);
dispatch.py keys its cache of replays on exactly that. Tensor *contents* may change freely.
"""

from __future__ import annotations

import operator
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import triton

from ...jit import env, releases

__all__ = ["LAUNCH_ABIS", "LaunchAbi", "launch_abi", "Replay", "Recording", "launch", "launch_all", "record",
           "launch_normally", "current_stream", "capturing", "stream_scratch", "OnStream", "replay_cached",
           "replay_or_record"]


@dataclass(frozen=True)
class LaunchAbi:
    """How one Triton release's NVIDIA launcher takes a launch (its ``driver.py``, ``driver.c`` and ``jit.py``)."""

    release: str
    # False (3.6): a C module generated per kernel, ``launch(gridX, gridY, gridZ, stream, function, cooperative,
    # pdl, global scratch, profile scratch, packed metadata, launch metadata, enter hook, exit hook, *args)``.
    # True (3.7-3.9): one ``cuda_utils.launch(gridX, gridY, gridZ, stream, function, cooperative, pdl, packed
    # metadata, launch metadata, enter hook, exit hook, global scratch, profile scratch, arg annotations, packed
    # signature, args)`` for every kernel; ``args`` keeps the constexprs, which the annotations skip.
    shared_launcher: bool
    # the ``knobs.compilation`` settings JITFunction.run adds to its compile key: a change recompiles
    key_knobs: tuple[str, ...] = ("instrumentation_mode",)


LAUNCH_ABIS: dict[str, LaunchAbi] = {
    "3.6": LaunchAbi("3.6", shared_launcher=False),
    "3.7": LaunchAbi("3.7", shared_launcher=True),
    "3.8": LaunchAbi("3.8", shared_launcher=True),
    "3.9": LaunchAbi("3.9", shared_launcher=True, key_knobs=("instrumentation_mode", "fpsan_homomorphic_casts")),
}
assert set(LAUNCH_ABIS) == set(releases.TESTED), "every tested Triton release needs its launch ABI here"

# 3.6's C launcher's leading arguments (its driver.py's _BASE_ARGS_FORMAT); raw mode only while 3.6 still says so
_BASE_ARGS_FORMAT = "iiiKKppOOOOOO"
_BASE_ARGS_36 = len(_BASE_ARGS_FORMAT)

_unknown_release_noted: list[str] = []


def launch_abi() -> LaunchAbi | None:
    """The launch ABI of the installed Triton, or None for a release this module does not know: its launches then
    go through ``kernel[grid](...)`` (said once with ``FINEGEMM_PRINT_CONFIGS=1``)."""
    release = releases.release_of(triton.__version__)
    abi = LAUNCH_ABIS.get(release)
    if abi is None and release not in _unknown_release_noted:
        _unknown_release_noted.append(release)
        if env.flag(env.PRINT_CONFIGS):
            print(f"[finegemm] Triton {triton.__version__}: its launcher ABI is not known to finegemm "
                  f"(known: {', '.join(LAUNCH_ABIS)}); sm90 launches go through kernel[grid](...), which is "
                  "correct but costs more host time per call", file=sys.stderr, flush=True)
    return abi


def _cuda_fns() -> tuple[Callable[[], int], Callable[[int], int]]:
    """(current device index, raw current stream of a device): the cheapest forms torch offers."""
    import torch

    get_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
    get_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if get_stream is None:
        def get_stream(index: int) -> int:
            return torch.cuda.current_stream(index).cuda_stream
    return get_device, get_stream


_stream_fns: tuple[Callable[[], int], Callable[[int], int]] | None = None


def current_stream(device: Any) -> int:
    """Raw handle of ``device``'s current CUDA stream (what a replay launches on); 0 for a non-CUDA device (the
    launch plans the CPU tests build on CPU tensors)."""
    global _stream_fns
    if device.type != "cuda":
        return 0
    if _stream_fns is None:
        _stream_fns = _cuda_fns()
    get_device, get_stream = _stream_fns
    return get_stream(get_device() if device.index is None else device.index)


def stream_scratch(cache: dict, device: Any, numel: int, dtype: Any, zeroed: bool = False) -> Any:
    """A cached buffer of ``numel`` elements of ``dtype`` (zero-filled once with ``zeroed``) per (device, current
    stream, numel).

    For what a launch writes and reads back within itself or its next launch (split-K partials, arrival
    counters): launches enqueued on two streams at once never share one, provided the recording that bakes the
    pointer in is keyed with the stream too (:func:`current_stream`). Launches of one stream run in order, so
    they may share. Buffers are never freed (recordings keep their pointers): one set per stream that used them.

    While the current stream captures a CUDA graph, a missing buffer is allocated in the graph's memory pool and
    its zero fill becomes a node of that graph: it belongs to this graph alone and is not cached (a later graph
    captured on the same stream would otherwise use it without the fill, or replay concurrently into it), and
    :func:`replay_or_record` records no launch built while capturing.
    """
    import torch

    key = (device, current_stream(device), numel, dtype)
    buf = cache.get(key)
    if buf is None:
        if capturing(device):
            return (torch.zeros if zeroed else torch.empty)(numel, dtype=dtype, device=device)
        with STREAM_SCRATCH_LOCK:  # two threads of one stream: one buffer (a recording keeps only its pointer)
            buf = cache.get(key)
            if buf is None:
                buf = cache[key] = persistent_buffer(device, numel, dtype, zeroed)
    return buf


# Held while a thread allocates a stream_scratch buffer and while it enqueues launches that use one (replay_cached,
# replay_or_record with stream_of). Launches of one stream run in order, but two host threads may enqueue on the
# same stream (both on the default stream, say): without the lock thread B's transpose into the stream's copy could
# land between thread A's transpose and A's GEMM. Launches without stream scratch take no lock.
STREAM_SCRATCH_LOCK = threading.RLock()


def persistent_buffer(device: Any, numel: int, dtype: Any, zeroed: bool = False) -> Any:
    """A buffer a cache keeps for the process, allocated outside any CUDA-graph memory pool this thread may be
    allocating into: torch.compile's CUDA-graph trees run their warm-up calls with the thread's allocations routed
    into the graph's private pool, and a buffer kept from there is a live allocation they refuse ("tensor(s) in
    the cudagraph pool not tracked as outputs"; H200, tests/test_torch_compile.py). So on CUDA it is allocated (and
    zero-filled) by a short-lived helper thread on the device's default stream, which the current stream then waits
    for; it is never freed, so where it was allocated never matters again."""
    import threading

    import torch

    make = torch.zeros if zeroed else torch.empty
    if device.type != "cuda":
        return make(numel, dtype=dtype, device=device)
    made: list = []

    def allocate() -> None:
        try:
            with torch.cuda.device(device):
                made.append(make(numel, dtype=dtype, device=device))
        except BaseException as error:  # noqa: BLE001 - re-raised in the caller's thread below
            made.append(error)

    worker = threading.Thread(target=allocate)
    worker.start()
    worker.join()
    if isinstance(made[0], BaseException):
        raise made[0]
    torch.cuda.current_stream(device).wait_stream(torch.cuda.default_stream(device))
    return made[0]


def capturing(device: Any) -> bool:
    """Whether ``device``'s current stream is capturing a CUDA graph."""
    import torch

    return device.type == "cuda" and torch.cuda.is_current_stream_capturing()


class OnStream:
    """A recording that replays only on the stream it was made for (its launches bake in that stream's
    :func:`stream_scratch` buffers); on another stream it declines (returns False) like a recording that cannot
    replay now, and the caller takes its normal path, which keys that stream's own recording."""

    __slots__ = ("recording", "device", "stream")

    def __init__(self, recording: Any, device: Any) -> None:
        self.recording, self.device, self.stream = recording, device, current_stream(device)

    def __call__(self) -> bool:
        if current_stream(self.device) != self.stream:
            return False
        with STREAM_SCRATCH_LOCK:  # its launches share the stream's scratch with other threads' (see the lock)
            return self.recording()

    @property
    def modes(self) -> tuple[str, ...]:
        return self.recording.modes

    @property
    def replayable(self) -> bool:
        return self.recording.replayable

    def __repr__(self) -> str:
        return f"OnStream({self.recording!r}, stream={self.stream:#x})"


class Replay:
    """One kernel launch with every argument fixed; calling it launches it again on the current stream."""

    mode: str = "normal"

    def __init__(self, kernel: Any, grid: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        self._kernel = kernel
        self._grid = grid
        self._args = tuple(args)  # also keeps every tensor (and so every pointer) alive
        self._kwargs = dict(kwargs)

    def normal(self) -> Any:
        """Launch through ``kernel[grid](*args, **kwargs)``; returns what Triton returns (the CompiledKernel)."""
        return self._kernel[self._grid](*self._args, **self._kwargs)

    def __call__(self) -> None:
        self.normal()

    def __repr__(self) -> str:
        fn = getattr(self._kernel, "fn", self._kernel)
        return f"Replay({getattr(fn, '__name__', '?')}, grid={self._grid}, mode={self.mode})"


class _FastReplay(Replay):
    """Shared part of the raw and bound modes: what every call checks before skipping ``kernel[grid]``.

    The checks are inlined in each ``__call__`` (a method call per check would cost as much as the
    rest of the replay): same current device as the first launch, no launch hook registered (3.6-3.9
    keep them as ``HookChain`` objects, empty by default), no pre-run hook, same
    ``knobs.runtime.debug`` and ``knobs.compilation`` settings of the compile key (``abi.key_knobs``).
    """

    def __init__(self, kernel: Any, grid: tuple[int, ...], args: Sequence[Any], kwargs: Mapping[str, Any],
                 compiled: Any, device: int, abi: LaunchAbi) -> None:
        from triton import knobs

        super().__init__(kernel, grid, args, kwargs)  # the normal fallback keeps the caller's grid
        self._gx, self._gy, self._gz = _grid3(grid)
        self._device = device
        self._get_device, self._get_stream = _cuda_fns()
        self._rt = knobs.runtime
        self._comp = knobs.compilation
        self._enter = knobs.runtime.launch_enter_hook
        self._exit = knobs.runtime.launch_exit_hook
        self._enter_calls = getattr(self._enter, "calls", None)
        self._exit_calls = getattr(self._exit, "calls", None)
        if not isinstance(self._enter_calls, list) or not isinstance(self._exit_calls, list):
            raise TypeError("unexpected launch hook objects")  # launch() turns this into a normal replay
        self._debug = knobs.runtime.debug
        self._key_knobs = operator.attrgetter(*abi.key_knobs)  # one C call per replay, however many settings
        self._key_values = self._key_knobs(knobs.compilation)
        self._pre_run_hooks = getattr(kernel, "pre_run_hooks", [])
        self._compiled = compiled

    def unchanged(self, device: int) -> bool:
        """The checks of ``__call__`` as one predicate (tests and debugging)."""
        rt = self._rt
        return (device == self._device and not self._enter_calls and not self._exit_calls
                and rt.launch_enter_hook is self._enter and rt.launch_exit_hook is self._exit
                and rt.debug == self._debug and self._key_knobs(self._comp) == self._key_values
                and not self._pre_run_hooks)


class _RawReplay(_FastReplay):
    mode = "raw"

    def __init__(self, kernel: Any, grid: tuple[int, ...], args: Sequence[Any], kwargs: Mapping[str, Any],
                 compiled: Any, device: int, abi: LaunchAbi, c_launch: Callable[..., Any],
                 kernel_args: list[Any]) -> None:
        super().__init__(kernel, grid, args, kwargs, compiled, device, abi)
        self._c_launch = c_launch
        self._tail = _raw_tail(abi, compiled, kernel_args)

    def __call__(self) -> None:
        device = self._get_device()
        rt = self._rt
        if (device == self._device and not self._enter_calls and not self._exit_calls
                and rt.launch_enter_hook is self._enter and rt.launch_exit_hook is self._exit
                and rt.debug == self._debug and self._key_knobs(self._comp) == self._key_values
                and not self._pre_run_hooks):
            self._c_launch(self._gx, self._gy, self._gz, self._get_stream(device), *self._tail)
        else:
            self.normal()


class _BoundReplay(_FastReplay):
    mode = "bound"

    def __init__(self, kernel: Any, grid: tuple[int, ...], args: Sequence[Any], kwargs: Mapping[str, Any],
                 compiled: Any, device: int, abi: LaunchAbi, bound: list[Any]) -> None:
        super().__init__(kernel, grid, args, kwargs, compiled, device, abi)
        self._bound = tuple(bound)

    def __call__(self) -> None:
        device = self._get_device()
        if self.unchanged(device):
            c = self._compiled
            c.run(self._gx, self._gy, self._gz, self._get_stream(device), c.function, c.packed_metadata,
                  None, None, None, *self._bound)
        else:
            self.normal()


def _grid3(grid: Any) -> tuple[int, int, int] | None:
    if not isinstance(grid, tuple) or not 1 <= len(grid) <= 3 or not all(isinstance(g, int) for g in grid):
        return None
    return (grid + (1, 1))[:3]


def _bind(kernel: Any, compiled: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> list[Any] | None:
    """The kernel's arguments in signature order, as JITFunction.run passes them on; None if unsure."""
    signature = getattr(kernel, "signature", None)
    src_sig = getattr(getattr(compiled, "src", None), "signature", None)
    if signature is None or not isinstance(src_sig, dict):
        return None
    names = list(signature.parameters)
    if list(src_sig) != names:
        return None
    try:
        bound = signature.bind(*args, **{k: v for k, v in kwargs.items() if k in signature.parameters})
    except TypeError:
        return None
    bound.apply_defaults()
    return [bound.arguments[n] for n in names]


def _is_c_function(fn: Any) -> bool:
    """True for a function of a C extension (the generated ``__triton_launcher.launch``)."""
    return type(fn).__name__ == "builtin_function_or_method"


def _raw_launcher(run: Any) -> Callable[..., Any] | None:
    """The C launch function under ``CudaLauncher.launch``, or None.

    3.6-3.9 set ``launch`` to the C function itself (3.6: the kernel's generated ``__triton_launcher.launch``;
    3.7+: the shared ``cuda_utils.launch``), or, for kernels with tensor-descriptor arguments, to their
    ``wrap_handle_tensordesc``'s closure ``inner`` around it (its free variable ``launcher``).
    """
    fn = getattr(run, "launch", None)
    if fn is None:
        return None
    if _is_c_function(fn):
        return fn
    code = getattr(fn, "__code__", None)
    if code is None or code.co_name != "inner" or fn.__closure__ is None or "launcher" not in code.co_freevars:
        return None
    inner = fn.__closure__[code.co_freevars.index("launcher")].cell_contents
    return inner if _is_c_function(inner) else None


def _ptr(value: Any) -> Any:
    """A tensor's data pointer as an int (what the C launcher accepts without a call back into Python)."""
    if getattr(value, "is_cuda", False):
        return value.data_ptr()
    return value


def _kernel_args(abi: LaunchAbi, compiled: Any, bound: list[Any]) -> list[Any] | None:
    """The kernel's part of the C launcher's arguments: ``bound`` with every tensor descriptor expanded (tensor map
    encoded once) by the release's own ``wrap_handle_tensordesc``, and CUDA tensors as plain pointers."""
    from triton.backends.nvidia import driver as nv_driver

    signature = dict(compiled.src.signature)
    if any(isinstance(t, tuple) and "tensordesc" in repr(t) for t in signature.values()):
        return None  # descriptors inside tuples: 3.6's wrapper does not expand them (3.8's does), keep it simple
    seen: list[tuple] = []
    wrap = nv_driver.wrap_handle_tensordesc(lambda *a: seen.append(a), signature,
                                            getattr(compiled.metadata, "tensordesc_meta", None))
    if abi.shared_launcher:
        wrap(*[None] * 13, bound)  # (13 base arguments, the kernel's as one sequence)
        expanded = list(seen[0][-1])
    else:
        wrap(*[None] * _BASE_ARGS_36, *bound)  # (13 base arguments, then the kernel's one by one)
        expanded = list(seen[0][_BASE_ARGS_36:])
    return [_ptr(v) for v in expanded]


def _raw_tail(abi: LaunchAbi, compiled: Any, kernel_args: list[Any]) -> tuple:
    """The C launcher's arguments after (gridX, gridY, gridZ, stream): no scratch, no launch metadata, no hooks
    (``_FastReplay`` checks that the hooks are empty)."""
    run = compiled.run
    if abi.shared_launcher:
        return (compiled.function, run.launch_cooperative_grid, run.launch_pdl, compiled.packed_metadata,
                None, None, None, None, None, run.arg_annotations, run.kernel_signature, tuple(kernel_args))
    return (compiled.function, run.launch_cooperative_grid, run.launch_pdl, None, None,
            compiled.packed_metadata, None, None, None, *kernel_args)


def _raw_ok(abi: LaunchAbi, run: Any) -> bool:
    """Whether ``run`` (the CompiledKernel's ``CudaLauncher``) has the structure raw mode reads for ``abi``."""
    from triton.backends.nvidia import driver as nv_driver

    if (type(run).__name__ != "CudaLauncher" or getattr(run, "num_ctas", 0) < 1
            or getattr(run, "global_scratch_size", 1) or getattr(run, "profile_scratch_size", 1)
            or getattr(run, "gsan_enabled", False)):
        return False
    if abi.shared_launcher:
        return isinstance(getattr(run, "kernel_signature", None), bytes) and hasattr(run, "arg_annotations")
    return getattr(nv_driver, "_BASE_ARGS_FORMAT", None) == _BASE_ARGS_FORMAT


def _replay_for(kernel: Any, grid: Any, args: Sequence[Any], kwargs: Mapping[str, Any], compiled: Any,
                device: int) -> Replay:
    """The fastest replay that ``compiled``'s structure allows (see the module docstring)."""
    from triton.compiler.compiler import CompiledKernel

    abi = launch_abi()
    if abi is None or _grid3(grid) is None or not isinstance(compiled, CompiledKernel):
        return Replay(kernel, grid, args, kwargs)
    bound = _bind(kernel, compiled, args, kwargs)
    if bound is None:
        return Replay(kernel, grid, args, kwargs)
    run = compiled.run
    raw = _raw_launcher(run) if _raw_ok(abi, run) else None
    if raw is not None:
        kernel_args = _kernel_args(abi, compiled, bound)
        if kernel_args is not None:
            return _RawReplay(kernel, grid, args, kwargs, compiled, device, abi, raw, kernel_args)
    return _BoundReplay(kernel, grid, args, kwargs, compiled, device, abi, bound)


def launch(kernel: Any, grid: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Replay:
    """Launch ``kernel[grid](*args, **kwargs)`` now, the normal way, and return a :class:`Replay` of it.

    Replaying needs the same argument objects with unchanged pointers, shapes and strides (the caller's
    cache key); contents may change. Structure not understood yields a replay in ``"normal"`` mode.
    """
    device = _cuda_fns()[0]()  # what JITFunction.run reads (driver.active.get_current_device)
    compiled = kernel[grid](*args, **kwargs)
    try:
        return _replay_for(kernel, grid, args, kwargs, compiled, device)
    except Exception:  # noqa: BLE001 - anything unexpected in Triton's private structure: launch normally
        return Replay(kernel, grid, args, kwargs)


def launch_all(replays: Sequence[Replay]) -> None:
    """Replay several launches in order (e.g. a GEMM and its split-K reduction)."""
    for replay in replays:
        replay()


Launch = tuple[Any, Any, Sequence[Any], Mapping[str, Any]]  # (kernel, grid, args, kwargs)


class Recording:
    """Launches recorded in raw mode and replayed together, holding no reference to any argument.

    Built by :func:`record`. Calling it replays every launch on the current device's current stream
    and returns True, or launches nothing and returns False when the normal path could behave
    differently (the checks of a raw :class:`Replay`, done once for the whole sequence) or when some
    launch could not be recorded in raw mode (``modes`` says which); the caller then launches through
    ``kernel[grid]`` with the tensors it has (:func:`launch_normally`).

    Holding no tensor is what lets a pointer-keyed cache be large and lets the caching allocator hand
    the same addresses out again (eager decode loops with fresh activations): the caller's key must
    cover everything a launch argument encodes (pointer, shape, strides, dtype of each tensor; the
    scalars and constexprs), and the memory must be allocated whenever the key matches.

    It does hold the compiled kernels whose CUDA function handles it replays: from Triton 3.8 a
    ``CompiledKernel`` that is collected unloads its module, and one is collected when two threads compile the
    same kernel at once (the JIT cache keeps the later); the other thread's recording then launched a dead
    handle ("invalid resource handle", tests/test_threads.py on an H100 under 3.9).
    """

    def __init__(self, replays: Sequence[Replay]) -> None:
        self.modes = tuple(r.mode for r in replays)
        self._items: tuple[tuple, ...] | None = None
        raws = [r for r in replays if isinstance(r, _RawReplay)]
        if not raws or len(raws) != len(replays) or len({r._device for r in raws}) != 1:
            return
        self._compiled = tuple(r._compiled for r in raws)
        first = raws[0]
        self._device = first._device
        self._get_device, self._get_stream = first._get_device, first._get_stream
        self._rt, self._comp = first._rt, first._comp
        self._enter, self._exit = first._enter, first._exit
        self._enter_calls, self._exit_calls = first._enter_calls, first._exit_calls
        self._debug, self._key_knobs, self._key_values = first._debug, first._key_knobs, first._key_values
        self._pre_run_hooks = tuple(r._pre_run_hooks for r in raws)
        items = tuple((r._c_launch, r._gx, r._gy, r._gz, r._tail) for r in raws)
        if any(_holds_tensor(item[4]) for item in items):
            return
        self._items = items

    @property
    def replayable(self) -> bool:
        return self._items is not None

    def __call__(self) -> bool:
        items = self._items
        if items is None:
            return False
        device = self._get_device()
        rt = self._rt
        if not (device == self._device and not self._enter_calls and not self._exit_calls
                and rt.launch_enter_hook is self._enter and rt.launch_exit_hook is self._exit
                and rt.debug == self._debug and self._key_knobs(self._comp) == self._key_values
                and not any(self._pre_run_hooks)):
            return False
        stream = self._get_stream(device)
        for c_launch, gx, gy, gz, tail in items:
            c_launch(gx, gy, gz, stream, *tail)
        return True

    def __repr__(self) -> str:
        return f"Recording(modes={self.modes}, replayable={self.replayable})"


def _holds_tensor(values: Sequence[Any]) -> bool:
    """True when a tensor-like object (``data_ptr``) is among ``values`` (or in a tuple among them)."""
    for v in values:
        if hasattr(v, "data_ptr") or (isinstance(v, tuple) and _holds_tensor(v)):
            return True
    return False


def record(launches: Sequence[Launch]) -> Recording:
    """Launch each ``(kernel, grid, args, kwargs)`` now, in order, the normal way; return their :class:`Recording`."""
    return Recording([launch(kernel, grid, args, kwargs) for kernel, grid, args, kwargs in launches])


def launch_normally(launches: Sequence[Launch]) -> None:
    """``kernel[grid](*args, **kwargs)`` for each launch, in order (what a Recording falls back to)."""
    for kernel, grid, args, kwargs in launches:
        kernel[grid](*args, **kwargs)


def _scoped(key: Any, stream_of: Any) -> Any:
    """``key``, joined by ``stream_of``'s current stream when the launches use its :func:`stream_scratch` buffers."""
    return key if stream_of is None else (key, current_stream(stream_of))


def _bound(recording: Recording, stream_of: Any) -> Recording | OnStream:
    return recording if stream_of is None else OnStream(recording, stream_of)


_ALL_RECORDINGS: list[dict] = []


def new_recordings() -> dict:
    """An empty cache of recordings, registered so that :func:`clear_recordings` can empty it."""
    cache: dict = {}
    _ALL_RECORDINGS.append(cache)
    return cache


def clear_recordings() -> None:
    """Empty every recording cache: the next call of each key builds its launches again (after a process-wide
    switch that their arguments bake in changed, e.g. :func:`finegemm.set_pdl`)."""
    for cache in _ALL_RECORDINGS:
        cache.clear()


def replay_cached(cache: dict, key: Any, stream_of: Any = None) -> Recording | OnStream | None:
    """Replay the recording cached under ``key`` (and ``stream_of``'s current stream, see :func:`replay_or_record`)
    and return it; None when there is none or it cannot replay now (nothing launched)."""
    if stream_of is not None:
        with STREAM_SCRATCH_LOCK:
            return _replay_cached(cache, key, stream_of)
    return _replay_cached(cache, key, stream_of)


def _replay_cached(cache: dict, key: Any, stream_of: Any) -> Recording | OnStream | None:
    recording = cache.get(_scoped(key, stream_of))
    if recording is not None and recording():
        return _bound(recording, stream_of)
    return None


def replay_or_record(cache: dict, key: Any, build: Callable[[], Sequence[Launch]], max_entries: int,
                     cacheable: bool = True, stream_of: Any = None) -> Recording | OnStream | None:
    """The host path every sm90 entry shares: replay the recording cached under ``key``; else ``build()``
    the launches and launch them, recording them under ``key`` on its first call.

    A key whose recording cannot replay now (a launch hook, another current device, ...) launches
    normally with the freshly built arguments. ``cacheable`` False (launches that read a per-call copy,
    whose pointer a recording would keep after the copy is freed) launches normally every time. The
    cache is emptied when it reaches ``max_entries``. With ``stream_of``, launches built while its stream
    captures a CUDA graph are launched normally and not recorded (their :func:`stream_scratch` buffers may belong
    to that graph alone). Returns the recording when it can replay, else None.
    ``stream_of`` (a device; None: any stream): the launches use that device's current-stream
    :func:`stream_scratch` buffers (split-K partials), so the stream joins the key and the recording returned
    replays only on it (:class:`OnStream`); the launches are enqueued under :data:`STREAM_SCRATCH_LOCK`.
    """
    if stream_of is not None:
        with STREAM_SCRATCH_LOCK:
            return _replay_or_record(cache, key, build, max_entries, cacheable, stream_of)
    return _replay_or_record(cache, key, build, max_entries, cacheable, stream_of)


def _replay_or_record(cache: dict, key: Any, build: Callable[[], Sequence[Launch]], max_entries: int,
                      cacheable: bool, stream_of: Any) -> Recording | OnStream | None:
    key = _scoped(key, stream_of)
    recording = cache.get(key) if cacheable else None
    if recording is not None and recording():
        return _bound(recording, stream_of)
    launches = build()
    if recording is not None or not cacheable or (stream_of is not None and capturing(stream_of)):
        launch_normally(launches)
        return None
    if len(cache) >= max_entries:
        cache.clear()
    recording = cache[key] = record(launches)
    return _bound(recording, stream_of) if recording.replayable else None
