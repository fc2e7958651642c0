"""Every global address the Gluon paged MQA-logits kernels (finegemm/kernels/sm90/paged_mqa_logits.py) form, on
the CPU: the kernels' own Python source run one program at a time with scalar values.

Gluon has no interpreter, so this runs each ``@gluon.jit`` function's source (``.fn``, rebound to the shim below)
with ``gl`` as 0-d / 1-d torch tensors: ``gl.load`` / ``gl.store`` check every unmasked element's offset against
the exact size of the tensor behind the pointer, TMA loads check their box against the descriptor, and shared
memory, barriers and WGMMAs are no-ops (a WGMMA returns its zero accumulator, a key scale reads as 1, so a written
logit is 0 inside its row's context and ``-inf`` past it). The arguments come from the real ``launch()`` (its
``build()``), so the host wiring of strides and descriptors is exercised too. A GPU run under compute-sanitizer
memcheck found block-table reads past the table of ``paged b3 n2 h32 ctx 100/70/130 fp32`` (tools/sanitize_cases.py):
the tile pages of tiles past a sequence's last key and of the item after a program's last were looked up
unmasked. These cases fail on that code.
"""

from __future__ import annotations

import types

import pytest
import torch

BKV = 64


class _Val(torch.Tensor):
    """A kernel value: ``x += 1`` rebinds (as on the device) instead of changing a tensor other names share."""

    def __iadd__(self, other):
        return self + other


def _val(x) -> _Val:
    return torch.as_tensor(x).as_subclass(_Val)


class _Ptr:
    """A pointer into ``tensor`` (contiguous, exact size) at element offset(s) ``off``."""

    def __init__(self, name: str, tensor: torch.Tensor, off=0):
        self.name, self.tensor, self.off = name, tensor, off
        self.dtype = types.SimpleNamespace(element_ty=tensor.dtype)

    def __add__(self, other):
        return _Ptr(self.name, self.tensor, self.off + other)

    __radd__ = __add__

    def checked(self, mask):
        """Flat offsets and mask, the offsets of masked-in elements asserted inside the tensor."""
        off = torch.as_tensor(self.off, dtype=torch.int64)
        keep = torch.ones_like(off, dtype=torch.bool) if mask is None else torch.as_tensor(mask)
        off, keep = torch.broadcast_tensors(off, keep)
        n = self.tensor.numel()
        bad = keep & ((off < 0) | (off >= n))
        assert not bool(bad.any()), f"{self.name}: offsets {off[bad].unique().tolist()} outside [0, {n})"
        return off.clamp(0, max(n - 1, 0)), keep


def _load(ptr, mask=None, other=None):
    off, keep = ptr.checked(mask)
    vals = ptr.tensor.reshape(-1)[off]
    return _val(torch.where(keep, vals, torch.as_tensor(0 if other is None else other, dtype=vals.dtype)))


def _store(ptr, value, mask=None):
    off, keep = ptr.checked(mask)
    value = torch.as_tensor(value).to(ptr.tensor.dtype).expand_as(off)
    ptr.tensor.view(-1)[off[keep]] = value[keep]


class _Desc:
    """A TMA descriptor: its global shape and box, for the bounds check of each load."""

    def __init__(self, name: str, desc):
        self.name, self.shape = name, list(desc.shape)
        box = list(desc.block_shape)
        self.block_type = types.SimpleNamespace(shape=box, nbytes=0)
        self.dtype, self.layout = None, None

    def check(self, coords):
        for c, box, size in zip(coords, self.block_type.shape, self.shape):
            c = int(c)
            assert 0 <= c and c + box <= size, f"{self.name}: box {self.block_type.shape} at {coords} past {self.shape}"


class _Smem:
    def index(self, i):
        return self

    def permute(self, order):
        return self


class _Bar:
    """An mbarrier of arrival count 1, phase by phase, as compute-sanitizer's synccheck checks it (the program runs
    alone here, so a TMA load lands at once and ``expect`` completes a phase like ``arrive``): a phase is completed
    only once the program's wait has observed the one before ("missing wait" otherwise), and a wait names the parity
    of the next phase the program has not observed, which must already be complete (else it would never return)."""

    def __init__(self, name: str):
        self.name, self.completed, self.observed = name, 0, 0

    def complete(self, how: str) -> None:
        assert self.observed == self.completed, (
            f"{self.name}: {how} completes phase {self.completed} while no wait observed phase {self.completed - 1} "
            "(synccheck: missing wait)")
        self.completed += 1

    def wait(self, parity) -> None:
        assert self.completed > self.observed, f"{self.name}: waits for phase {self.observed}, which nothing completes"
        assert int(parity) == self.observed & 1, (
            f"{self.name}: waits with parity {int(parity)} for phase {self.observed}")
        self.observed += 1


class _Bars:
    """A kernel's array of mbarriers (``alloc_ring``'s): ``index(i)`` is the same :class:`_Bar` each time."""

    def __init__(self):
        self.bars: dict[int, _Bar] = {}

    def index(self, i) -> _Bar:
        return self.bars.setdefault(int(i), _Bar(f"bars[{int(i)}]"))


def _on_bar(action):
    """An ``mbarrier`` function of the shim: modelled on a :class:`_Bar`, a no-op on other shared memory (the
    warp-specialized kernel's barriers, whose partitions run one after the other here)."""
    return lambda bar, *args, **kwargs: action(bar, *args) if isinstance(bar, _Bar) else None


class _Program:
    """Program ids of the program being run."""
    ids = (0, 0)


def _minmax(fn):
    return lambda a, b: _val(fn(torch.as_tensor(a), torch.as_tensor(b)))


def _reinterpret(smem, dtype, shape, layout):
    return types.SimpleNamespace(load=lambda layout: torch.ones(shape))


def _warp_specialize(partitions, warps, regs):
    for fn, args in partitions:
        fn(*args)


def _async_load(desc, coords, bar, dst):
    desc.check(coords)


_NOOP = lambda *a, **k: None  # noqa: E731

_GL = types.SimpleNamespace(
    constexpr=lambda v: v, static_assert=lambda c, msg="": None, static_range=range,
    program_id=lambda axis: _val(torch.tensor(_Program.ids[axis], dtype=torch.int32)),
    load=_load, store=_store, minimum=_minmax(torch.minimum), maximum=_minmax(torch.maximum),
    where=lambda c, a, b: _val(torch.where(torch.as_tensor(c), torch.as_tensor(a), torch.as_tensor(b))),
    cdiv=lambda a, b: _val(torch.div(torch.as_tensor(a) + b - 1, b, rounding_mode="trunc")),
    reduce=lambda x, axis, fn: x.sum(axis),
    arange=lambda lo, hi, layout=None: _val(torch.arange(lo, hi, dtype=torch.int32)),
    zeros=lambda shape, dtype, layout=None: _val(torch.zeros(shape, dtype=dtype)),
    allocate_shared_memory=lambda *a, **k: _Smem(), warp_specialize=_warp_specialize,
    SliceLayout=_NOOP, SwizzledSharedLayout=_NOOP,
    int32=torch.int32, int64=torch.int64, float32=torch.float32)

_SHIM = dict(
    gl=_GL, fence_async_shared=_NOOP,
    mbarrier=types.SimpleNamespace(expect=_on_bar(lambda bar, nbytes: bar.complete("expect")),
                                   arrive=_on_bar(lambda bar: bar.complete("arrive")),
                                   wait=_on_bar(lambda bar, parity: bar.wait(parity)), init=_NOOP,
                                   MBarrierLayout=_NOOP),
    warpgroup_mma=lambda a, b, acc, **k: acc, warpgroup_mma_wait=lambda n, deps: deps[0],
    gluon_compat=types.SimpleNamespace(async_load=_async_load, reinterpret=_reinterpret),
    _acc_layout=_NOOP, _add=None, alloc_ring=lambda q_desc, kv_desc, n: (_Smem(), _Smem(), _Bars()),
    weighted_relu=lambda acc, sf, w, after: (acc, sf))


def _rebound_module(module) -> dict:
    """The module's globals with every ``@gluon.jit`` function's source rebound to the shim."""
    g = dict(vars(module))
    for name, obj in vars(module).items():
        fn = getattr(obj, "fn", None)
        if isinstance(fn, types.FunctionType) and fn.__module__ == module.__name__:
            g[name] = types.FunctionType(fn.__code__, g, name, fn.__defaults__, fn.__closure__)
    g.update(_SHIM, _SPLIT=module.SPLIT_KV, _BKV=module.BLOCK_KV)
    return g


def _emulate(monkeypatch, q, cache, weights, ctx, table, meta, out, ws):
    """``launch()`` with its launches run by the shim, program by program."""
    from finegemm.kernels.sm90 import launcher
    from finegemm.kernels.sm90 import paged_mqa_logits as m

    g = _rebound_module(m)
    names = dict(zip(("weights", "context_lens", "block_table", "schedule_meta", "out"),
                     (weights, ctx, table, meta, out)))
    by_id = {id(t): n for n, t in names.items()}

    def run(cache_, key, build, max_entries, **kw):
        for kernel, grid, args, meta_ in build():
            fn = g[kernel.fn.__name__]
            wrapped, descs = [], iter(("q_desc", "kv_desc", "sf_desc"))
            for a in args:
                if isinstance(a, torch.Tensor):
                    wrapped.append(_Ptr(by_id[id(a)], a))
                elif hasattr(a, "block_shape"):
                    wrapped.append(_Desc(next(descs), a))
                else:
                    wrapped.append(int(a))
            consts = {k: v for k, v in meta_.items() if k not in ("num_warps", "maxnreg")}  # not the launch options
            for slot in range(grid[0]):
                for sub in range(grid[1] if len(grid) > 1 else 1):
                    _Program.ids = (slot, sub)
                    fn(*wrapped, **consts)

    monkeypatch.setattr(launcher, "replay_or_record", run)
    m.launch(q, cache, weights, ctx, table, meta, out, ws=ws)


def _inputs(lens, next_n, heads, page, ctx_2d, slots, out_dtype=torch.float32):
    """Exact-size inputs as tools/sanitize_cases.py builds them: a block table exactly as wide as the longest
    context's pages, pages shuffled over a pool with a few spare blocks."""
    import finegemm

    b = len(lens)
    pages = [-(-n // page) for n in lens]
    num_blocks = sum(pages) + 3
    gen = torch.Generator().manual_seed(sum(lens))
    cache = torch.zeros(num_blocks, page, 1, 132, dtype=torch.uint8)
    order = torch.randperm(num_blocks, generator=gen).to(torch.int32)
    table = torch.zeros(b, max(pages), dtype=torch.int32)
    used = 0
    for i, p in enumerate(pages):
        table[i, :p] = order[used:used + p]
        used += p
    q = torch.zeros(b, next_n, heads, 128, dtype=torch.float8_e4m3fn)
    weights = torch.ones(b * next_n, heads)
    if ctx_2d:  # token t sees lens - next_n + 1 + t keys (at least 0)
        ctx = (torch.tensor(lens)[:, None] - next_n + 1 + torch.arange(next_n)).clamp(min=0).to(torch.int32)
    else:
        ctx = torch.tensor(lens, dtype=torch.int32)
    meta = finegemm.get_paged_mqa_logits_metadata(ctx, page, slots)
    out = torch.full((b * next_n, max(lens)), float("nan"), dtype=out_dtype)
    return q, cache, weights, ctx, table, meta, out


def _row_contexts(ctx, next_n):
    if ctx.dim() == 2:
        return ctx.reshape(-1).tolist()
    return [max(int(c) - next_n + 1 + t, 0) for c in ctx.tolist() for t in range(next_n)]


CASES = [
    # lens, next_n, heads, page, ctx_2d, slots: the memcheck case on 132 SMs, then tails, idle slots, long runs
    ((100, 70, 130), 2, 32, 64, False, 132),
    ((1, 333, 64), 1, 64, 64, False, 132),
    ((100, 70, 130), 2, 32, 128, True, 132),
    ((700, 3, 513, 0, 256), 2, 64, 64, False, 4),
    ((700, 3, 513, 0, 256), 1, 128, 128, True, 7),
]


@pytest.mark.parametrize("ws", [False, True])
@pytest.mark.parametrize("lens,next_n,heads,page,ctx_2d,slots", CASES)
def test_addresses_inside_tensors(monkeypatch, lens, next_n, heads, page, ctx_2d, slots, ws):
    """Every load and store stays inside its exact-size tensor, every TMA box inside its descriptor, and every
    logit inside its row's context is written (0 here; ``-inf`` past the context where a tile stores)."""
    if ws and next_n * heads > 128:
        pytest.skip("the warp-specialized form takes up to 128 rows")
    q, cache, weights, ctx, table, meta, out = _inputs(lens, next_n, heads, page, ctx_2d, slots)
    _emulate(monkeypatch, q, cache, weights, ctx, table, meta, out, ws)
    for row, n in enumerate(_row_contexts(ctx, next_n)):
        assert bool((out[row, :n] == 0).all()), f"row {row}: a logit inside its {n}-key context is not written"
        written = out[row, n:][~torch.isnan(out[row, n:])]
        assert bool(torch.isneginf(written).all()), f"row {row}: a logit past its context is not -inf"
