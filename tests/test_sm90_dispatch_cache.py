"""kernels/sm90/dispatch.py fp8_gemm on the CPU: the recording cache (what is keyed, what is replayed).

The plan builder and the launches are replaced by recorders: these tests are about the host path.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

pytest.importorskip("triton.experimental.gluon")
from finegemm.jit.heuristics import GemmDesc  # noqa: E402
from finegemm.jit.heuristics_sm90 import Sm90Config  # noqa: E402
from finegemm.kernels.sm90 import dispatch  # noqa: E402


class Recorder:
    def __init__(self) -> None:
        self.plans = 0
        self.recorded: list[list[str]] = []  # kernel names per first (recorded) launch
        self.normal: list[list[str]] = []  # kernel names per fallback launch
        self.replays = 0
        self.replayable = True  # what recordings answer now (False: e.g. a launch hook is registered)
        self.recordable = True  # whether new recordings are replayable (launcher.Recording.replayable)

    def build_plan(self, desc, config, a, sfa, b, sfb, d, c):
        self.plans += 1
        reduce = ((a.shape[0], 1), ("ws", d), {"SPLIT_K": config.split_k}) if config.split_k > 1 else None
        return (7,), (a, b, d), {"N": desc.n}, reduce

    def record(self, launches):
        self.recorded.append([k.fn.__name__ for k, *_ in launches])
        return FakeRecording(self)

    def launch_normally(self, launches):
        self.normal.append([k.fn.__name__ for k, *_ in launches])


class FakeRecording:
    """launcher.Recording's interface: ``replayable``, and a call that replays (True) or declines (False)."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.replayable = recorder.recordable

    def __call__(self) -> bool:
        r = self.recorder
        if self.replayable and r.replayable:
            r.replays += 1
            return True
        return False


@pytest.fixture
def rec(monkeypatch):
    r = Recorder()
    monkeypatch.setattr(dispatch, "_build_plan", r.build_plan)
    monkeypatch.setattr(dispatch.launcher, "record", r.record)
    monkeypatch.setattr(dispatch.launcher, "launch_normally", r.launch_normally)
    dispatch._recordings.clear()
    yield r
    dispatch._recordings.clear()


def _tensors(m=64, n=256, k=512):
    a = torch.empty(m, k, dtype=torch.float8_e4m3fn)
    sfa = torch.empty(k // 128, m).t()
    b = torch.empty(n, k, dtype=torch.float8_e4m3fn)
    sfb = torch.empty(n // 128, k // 128)
    d = torch.empty(m, n, dtype=torch.bfloat16)
    return a, sfa, b, sfb, d


def _call(t, split=1, c=None):
    desc = GemmDesc("fp8_1d2d", t[0].shape[0], t[2].shape[0], t[0].shape[1], with_c=c is not None)
    return dispatch.fp8_gemm(desc, Sm90Config(64, 128, 4, split_k=split), *t[:4], t[4], c)


def test_returns_the_recording_it_replayed_or_made_and_none_otherwise(rec):
    """api/gemm.py keeps what fp8_gemm returns for its own hot path: only replayable recordings."""
    t = _tensors()
    first = _call(t)
    assert isinstance(first, FakeRecording) and _call(t) is first and rec.replays == 1
    rec.replayable = False
    assert _call(t) is None and rec.normal == [["fp8_gemm_kernel"]]
    rec.recordable = False  # e.g. a launch Triton's raw launcher cannot take
    assert _call(_tensors()) is None and len(rec.recorded) == 2


def test_first_call_records_then_replays(rec):
    t = _tensors()
    _call(t)
    assert rec.plans == 1 and rec.recorded == [["fp8_gemm_kernel"]] and rec.replays == 0
    _call(t)
    _call(t)
    assert rec.plans == 1 and len(rec.recorded) == 1 and rec.replays == 2 and not rec.normal


def test_split_k_records_gemm_then_reduce(rec):
    _call(_tensors(), split=4)
    assert rec.recorded == [["fp8_gemm_kernel", "_splitk_reduce_kernel"]]


def test_recording_that_cannot_replay_launches_normally(rec):
    t = _tensors()
    _call(t, split=4)
    rec.replayable = False  # e.g. a profiler registered a launch hook
    _call(t, split=4)
    assert rec.normal == [["fp8_gemm_kernel", "_splitk_reduce_kernel"]] and rec.plans == 2
    assert len(rec.recorded) == 1  # not re-recorded
    rec.replayable = True
    _call(t, split=4)
    assert rec.replays == 1 and rec.plans == 2


def test_new_pointer_stride_dtype_or_c_records_again(rec):
    t = _tensors()
    _call(t)
    a, sfa, b, sfb, d = t
    _call((a.clone(), sfa, b, sfb, d))  # new pointer
    wide = torch.empty(64, 512, dtype=torch.bfloat16)
    _call((a, sfa, b, sfb, wide[:, :256]))  # new d
    _call((a, sfa, b, sfb, torch.as_strided(wide, (64, 256), (384, 1))))  # same pointer, new strides
    _call((a.view(torch.float8_e5m2), sfa, b, sfb, d))  # same pointer, new dtype
    _call(t, c=torch.empty(64, 256))  # with C
    assert rec.plans == 6 and len(rec.recorded) == 6 and rec.replays == 0
    _call(t)
    assert rec.plans == 6 and rec.replays == 1


def test_same_addresses_again_replay_without_the_old_tensors(rec):
    """Recordings hold no tensor: new tensors at the recorded addresses (allocator reuse) replay."""
    t = _tensors()
    _call(t)
    a, sfa, b, sfb, d = t
    same_a = torch.as_strided(a, a.shape, a.stride())  # another tensor object, same storage and view
    _call((same_a, sfa, b, sfb, d))
    assert rec.plans == 1 and rec.replays == 1


def test_cache_is_bounded(rec, monkeypatch):
    monkeypatch.setattr(dispatch, "MAX_RECORDINGS", 4)
    keep = [_tensors() for _ in range(5)]
    for t in keep:
        _call(t)
    assert len(dispatch._recordings) == 1  # cleared when full, then the 5th added
    _call(keep[0])
    assert rec.plans == 6


def test_c_tma_only_where_the_kernel_can_stage_c():
    """``c_tma`` stays on only for FP32 row-major 16-byte-aligned C beside FP32 D, no split-K, and BLOCK_M
    256 only with the shared D staging; _build_plan turns it off (and launches the global-load epilogue)
    for everything else."""
    cfg = Sm90Config(128, 128, 4, c_tma=True)
    c = torch.zeros(64, 132)
    d = torch.zeros(64, 132)
    assert dispatch.c_tma_ok(cfg, c, d)
    assert not dispatch.c_tma_ok(cfg, None, d)
    assert not dispatch.c_tma_ok(cfg, c.bfloat16(), d)
    assert not dispatch.c_tma_ok(cfg, c, d.bfloat16())
    assert not dispatch.c_tma_ok(cfg, torch.zeros(132, 64).T, d)  # column-major C
    assert not dispatch.c_tma_ok(cfg, torch.zeros(64, 133)[:, :130], d[:, :130])  # rows of 133 words
    assert not dispatch.c_tma_ok(cfg, torch.zeros(64 * 132 + 1)[1:].view(64, 132), d)  # base off by 4 bytes
    assert not dispatch.c_tma_ok(cfg, torch.zeros(1, 132).expand(64, 132), d)  # a broadcast row: stride 0
    assert not dispatch.c_tma_ok(Sm90Config(128, 128, 4, split_k=2, c_tma=True), c, d)
    assert not dispatch.c_tma_ok(Sm90Config(256, 128, 3, c_tma=True), c, d)
    assert dispatch.c_tma_ok(Sm90Config(256, 128, 3, small_epi=True, c_tma=True), c, d)


def test_can_stage_c_follows_the_kernel_limits():
    assert Sm90Config(64, 128, 7).can_stage_c and Sm90Config(128, 128, 4, k_dynamic=True).can_stage_c
    assert Sm90Config(256, 128, 3, small_epi=True).can_stage_c
    assert not Sm90Config(256, 128, 3, small_epi=True, k_dynamic=True).can_stage_c  # spills (CPU compile)
    assert not Sm90Config(256, 128, 3).can_stage_c and not Sm90Config(64, 128, 7, split_k=4).can_stage_c


def _cpu_plan(m, n, k, cfg):
    """dispatch._build_plan on CPU tensors (descriptors are host objects): (grid, args, meta, reduce)."""
    import finegemm
    from finegemm.jit.heuristics import GemmDesc

    a = torch.zeros(m, k, dtype=torch.float8_e4m3fn)
    b = torch.zeros(n, k, dtype=torch.float8_e4m3fn)
    sfa = finegemm.get_mn_major_tma_aligned_tensor(torch.ones(m, k // 128))
    sfb = torch.ones((n + 127) // 128, k // 128)
    d = torch.zeros(m, n, dtype=torch.bfloat16)
    return dispatch._build_plan(GemmDesc("fp8_1d2d", m, n, k), cfg, a, sfa, b, sfb, d, None)


@pytest.mark.parametrize("value,pdl", [(None, True), ("0", False), ("1", True)])
def test_pdl_switch_reaches_the_gemm_and_the_reduction_launch(value, pdl, monkeypatch):
    """``FINEGEMM_PDL`` (default on): the GEMM is compiled with its griddepcontrol.wait and launched with programmatic
    dependent launch, and so is the split-K reduction; 0 turns both off."""
    from finegemm.jit.device import H200
    from finegemm.jit.heuristics import GemmDesc
    from finegemm.jit.heuristics_sm90 import make_config

    if value is None:
        monkeypatch.delenv("FINEGEMM_PDL", raising=False)
    else:
        monkeypatch.setenv("FINEGEMM_PDL", value)
    cfg = make_config(GemmDesc("fp8_1d2d", 64, 2112, 7168), H200, 64, 128, 4, sfa_tma=True)
    grid, _, meta, reduce = _cpu_plan(64, 2112, 7168, cfg)
    assert grid == (17 * 4,)
    assert meta["PDL"] is pdl and meta["launch_pdl"] is pdl
    assert reduce is not None and reduce[2]["launch_pdl"] is pdl


@pytest.mark.parametrize("pdl", [True, False])
def test_k_grouped_groups_launch_as_a_pdl_chain(pdl, monkeypatch):
    """The k-grouped FP8 launches (CPU tensors, nt form): with FINEGEMM_PDL every group's GEMM is PDL-launched, the
    first waits at its start (PDL_CHAIN 1), the later ones do not (PDL_CHAIN 2); without it no chain."""
    from finegemm.jit.device import H200
    from finegemm.jit.heuristics import GemmDesc
    from finegemm.kernels.sm90 import dispatch_k_grouped

    monkeypatch.setenv("FINEGEMM_PDL", "1" if pdl else "0")
    m, n, ks = 256, 512, [1024, 0, 2048, 512]
    desc = GemmDesc("fp8_1d1d", m, n, sum(ks), True, True, True, True, layout="k_grouped", num_groups=len(ks))
    config = dispatch_k_grouped.get_config(desc, H200)
    a = torch.zeros(sum(ks) * m, dtype=torch.float8_e4m3fn)
    b = torch.zeros(sum(ks) * n, dtype=torch.float8_e4m3fn)
    sfa = torch.ones(sum(ks) // 128, m).T
    sfb = torch.ones(sum(ks) // 128, n).T
    c = d = torch.zeros(len(ks), m, n)
    plan = dispatch_k_grouped._plan(desc, config, ks, sfa, sfb, flat_k_major=True)
    assert all(grp.config.split_k == 1 for grp in plan.groups)
    launches = dispatch_k_grouped._fp8_launches(plan, desc, config, a, sfa, b, sfb, c, d, a, a, True)
    metas = [meta for _, _, _, meta in launches]
    assert len(metas) == 3  # the empty group launches nothing
    if pdl:
        assert [(x["PDL_CHAIN"], x["PDL"], x["launch_pdl"]) for x in metas] == [(1, True, True), (2, False, True),
                                                                              (2, False, True)]
    else:
        assert [(x["PDL_CHAIN"], x["PDL"], x["launch_pdl"]) for x in metas] == [(0, False, False)] * 3


def test_block_m_192_plan_uses_64_row_boxes_and_152_registers():
    """BLOCK_M 192: descriptor blocks must be powers of two, so A (and its ring scales) go in 64-row boxes; three
    math warpgroups at 152 registers."""
    from finegemm.jit.device import H200
    from finegemm.jit.heuristics import GemmDesc
    from finegemm.jit.heuristics_sm90 import get_sm90_config

    cfg = get_sm90_config(GemmDesc("fp8_1d2d", 4096, 2112, 7168), H200)
    assert cfg.block_m == 192
    grid, args, meta, reduce = _cpu_plan(4096, 2112, 7168, cfg)
    a_desc, sfa_desc = args[0], args[-1]
    assert list(a_desc.block_shape) == [64, 128] and list(sfa_desc.block_shape) == [1, 64]
    assert meta["MATH_REGS"] == 152 and meta["BLOCK_M"] == 192 and reduce is None
    assert grid == (132,)  # 22 x 17 = 374 tiles over the persistent grid


@pytest.fixture
def rec_bf16(monkeypatch):
    from finegemm.kernels.sm90 import dispatch_bf16

    r = Recorder()

    def build_plan(desc, config, a, b, d, c):
        r.plans += 1
        reduce = ((a.shape[0], 1), ("ws", d), {"SPLIT_K": config.split_k}) if config.split_k > 1 else None
        return (7,), (a, b, d), {"BLOCK_M": config.block_m}, reduce

    monkeypatch.setattr(dispatch_bf16, "_build_plan", build_plan)
    monkeypatch.setattr(dispatch_bf16.launcher, "record", r.record)
    monkeypatch.setattr(dispatch_bf16.launcher, "launch_normally", r.launch_normally)
    dispatch_bf16._recordings.clear()
    yield r
    dispatch_bf16._recordings.clear()


def _bf16_call(a, b, d, split=1):
    from finegemm.jit.heuristics_sm90 import Sm90Bf16Config
    from finegemm.kernels.sm90 import dispatch_bf16

    desc = GemmDesc("bf16", a.shape[0], b.shape[0], a.shape[1])
    return dispatch_bf16.bf16_gemm(desc, Sm90Bf16Config(128, 128, 4, split_k=split), a, b, d, None)


def test_bf16_records_once_then_replays(rec_bf16):
    """The BF16 GEMM keeps a recording per pointers/strides (as the FP8 path): the plan is built and the launches
    recorded once (GEMM, then the split-K reduction), later calls replay; a new pointer records again."""
    a, b = torch.empty(64, 256, dtype=torch.bfloat16), torch.empty(128, 256, dtype=torch.bfloat16)
    d = torch.empty(64, 128, dtype=torch.bfloat16)
    first = _bf16_call(a, b, d, split=2)  # split-K: bound to the stream whose workspace it bakes in
    assert rec_bf16.recorded == [["bf16_gemm_kernel", "splitk_reduce_kernel"]] and rec_bf16.plans == 1
    again = _bf16_call(a, b, d, split=2)
    assert again.recording is first.recording and rec_bf16.replays == 1 and rec_bf16.plans == 1
    _bf16_call(a.clone(), b, d, split=2)
    assert rec_bf16.plans == 2 and len(rec_bf16.recorded) == 2
    rec_bf16.replayable = False  # e.g. a profiler's launch hook: launched normally with fresh arguments
    assert _bf16_call(a, b, d, split=2) is None and rec_bf16.normal == [["bf16_gemm_kernel", "splitk_reduce_kernel"]]


class _Streams:
    """Stands for the current CUDA stream (launcher.current_stream) on the CPU."""

    def __init__(self, monkeypatch) -> None:
        from finegemm.kernels.sm90 import launcher

        self.now = 0x10
        monkeypatch.setattr(launcher, "current_stream", lambda device: self.now)


def test_split_k_recordings_and_workspaces_are_per_stream(rec, monkeypatch):
    """A split-K launch bakes in its stream's workspace: on another stream it records its own (with that stream's
    workspace) instead of replaying the first one, and what it returns declines to replay on another stream, so
    that api/gemm.py's hot path falls back to this dispatch there. Unsplit launches replay on any stream."""
    from finegemm.kernels.sm90 import launcher

    streams = _Streams(monkeypatch)
    t = _tensors()
    first = _call(t, split=4)
    assert isinstance(first, launcher.OnStream) and first() and rec.replays == 1
    streams.now = 0x20
    assert not first()  # bound to stream 0x10
    second = _call(t, split=4)
    assert len(rec.recorded) == 2 and second.stream == 0x20
    streams.now = 0x10
    _call(t, split=4)
    assert len(rec.recorded) == 2 and rec.replays == 2  # stream 0x10's recording again
    whole = _call(t)
    streams.now = 0x20
    assert _call(t) is whole and len(rec.recorded) == 3  # unsplit: one recording for every stream
    ws = {}
    a = launcher.stream_scratch(ws, torch.device("cpu"), 8, torch.float32)
    streams.now = 0x10
    b = launcher.stream_scratch(ws, torch.device("cpu"), 8, torch.float32)
    assert a.data_ptr() != b.data_ptr() and launcher.stream_scratch(ws, torch.device("cpu"), 8, torch.float32) is b
    assert bool((launcher.stream_scratch({}, torch.device("cpu"), 4, torch.int32, zeroed=True) == 0).all())


def test_split_k_buffers_of_a_graph_capture_are_neither_cached_nor_recorded(rec, monkeypatch):
    """While the current stream captures a CUDA graph, launcher.stream_scratch allocates a fresh buffer (in the
    graph's pool, its zero fill a node of that graph) and caches none, and split-K launches built while capturing
    launch normally, unrecorded: a second graph captured on the same stream gets its own buffers. Outside a
    capture the buffer is cached and the launches recorded as before."""
    from finegemm.kernels.sm90 import launcher

    _Streams(monkeypatch)
    capturing = [True]
    monkeypatch.setattr(launcher, "capturing", lambda device: capturing[0])
    ws: dict = {}
    cpu = torch.device("cpu")
    one = launcher.stream_scratch(ws, cpu, 8, torch.int32, zeroed=True)
    assert launcher.stream_scratch(ws, cpu, 8, torch.int32, zeroed=True) is not one and not ws
    assert bool((one == 0).all())
    built = rec.build_plan

    def build_plan(*args):
        launcher.stream_scratch(ws, cpu, 8, torch.float32)
        return built(*args)

    monkeypatch.setattr(dispatch, "_build_plan", build_plan)
    t = _tensors()
    assert _call(t, split=4) is None and _call(t, split=4) is None
    assert rec.recorded == [] and rec.normal == [["fp8_gemm_kernel", "_splitk_reduce_kernel"]] * 2
    capturing[0] = False
    first = _call(t, split=4)
    assert isinstance(first, launcher.OnStream) and len(rec.recorded) == 1 and len(ws) == 1
    capturing[0] = True  # a capture on a stream whose buffers exist (made outside any capture) replays them
    assert _call(t, split=4).recording is first.recording and rec.replays == 1


def test_mn_major_operands_are_transposed_into_a_workspace_first(rec, monkeypatch):
    """``MN_MAJOR_VIA_TRANSPOSE``: an MN-major A or B (fp8_gemm_nn / tn / tt) takes the sm90 path, a transposing
    launch each into this stream's K-major workspace, then the nt GEMM on the workspace; without it the sm90 rule
    refuses the layout. A K-major operand is read in place."""
    from finegemm.jit.device import H200

    a, sfa, b, sfb, d = _tensors()
    a_mn = a.t().contiguous().t()  # [M, K] with stride (1, M)
    desc = GemmDesc("fp8_1d2d", 64, 256, 512, a_k_major=False)
    monkeypatch.setattr(dispatch, "MN_MAJOR_VIA_TRANSPOSE", False)
    assert "K-major" in dispatch.unsupported_reason(desc, H200)
    monkeypatch.setattr(dispatch, "MN_MAJOR_VIA_TRANSPOSE", True)
    assert dispatch.unsupported_reason(desc, H200) is None
    seen = []
    build = rec.build_plan
    monkeypatch.setattr(dispatch, "_build_plan", lambda *args: seen.append(args) or build(*args))
    dispatch.fp8_gemm(desc, Sm90Config(64, 128, 4), a_mn, sfa, b, sfb, d, None)
    assert rec.recorded == [["_transpose_kernel", "fp8_gemm_kernel"]]
    kdesc, _, a_k, _, b_k = seen[0][:5]
    assert kdesc.a_k_major and kdesc.b_k_major
    assert a_k.is_contiguous() and a_k.shape == a.shape and a_k.data_ptr() != a_mn.data_ptr()
    assert b_k is b


def test_the_transposing_launch_fills_the_workspace_with_the_operand():
    """The launches :func:`dispatch.fp8_launches` builds for an MN-major A and B, their transposes run through
    the interpreter: each workspace then holds its operand K-major, byte for byte."""
    torch.manual_seed(0)
    a = torch.randn(64, 512).to(torch.float8_e4m3fn)
    b = torch.randn(256, 512).to(torch.float8_e4m3fn)
    a_mn, b_mn = a.t().contiguous().t(), b.t().contiguous().t()
    desc = GemmDesc("fp8_1d2d", 64, 256, 512, a_k_major=False, b_k_major=False)
    a_k, b_k = dispatch._k_major_operands(desc, a_mn, b_mn)
    launches = dispatch.fp8_launches(desc, Sm90Config(64, 128, 4), a_mn, torch.ones(4, 64).t(), b_mn,
                                     torch.ones(2, 4), torch.empty(64, 256, dtype=torch.bfloat16), None, a_k, b_k)
    assert [k.fn.__name__ for k, *_ in launches] == ["_transpose_kernel", "_transpose_kernel", "fp8_gemm_kernel"]
    for kernel, grid, args, kwargs in launches[:2]:
        kernel[grid](*args, **kwargs)
    assert torch.equal(a_k.view(torch.uint8), a.view(torch.uint8))
    assert torch.equal(b_k.view(torch.uint8), b.view(torch.uint8))


@pytest.mark.parametrize("view", ["d", "a"])
def test_views_tma_cannot_address_run_the_portable_kernel(rec, view):
    """A ``d`` whose base is 8 bytes off (``out[:, 4:]``) or an ``a`` whose rows are 16 * k + 1 bytes apart cannot
    be TMA tensors: nothing is planned or recorded, the portable kernel computes the product (here through the
    interpreter) and the call returns no recording."""
    import finegemm
    from finegemm import reference

    m, n, k = 32, 256, 256
    x = finegemm.per_token_cast_to_fp8(torch.randn(m, k))
    y = finegemm.per_block_cast_to_fp8(torch.randn(n, k))
    a = x[0]
    if view == "a":
        a = torch.empty(m, k + 1, dtype=torch.float8_e4m3fn)[:, :k]
        a.copy_(x[0])
    out = torch.full((m, n + 8), float("nan"), dtype=torch.bfloat16)  # rows 16-byte aligned
    d = out[:, 4:4 + n] if view == "d" else out[:, :n]
    sfa = finegemm.get_mn_major_tma_aligned_tensor(x[1])
    assert _call((a, sfa, y[0], y[1], d)) is None
    assert rec.plans == 0 and not rec.recorded and not dispatch._recordings
    assert reference.calc_diff(d.double(), reference.fp8_gemm_nt(x, y)) < 1e-3


def test_d_reduce_only_where_c_is_d_in_fp32_whole_k_and_measured():
    """``D_REDUCE`` (d += a @ b by TMA reduce-add) needs C to be D itself (same storage, shape, strides, FP32), no
    split-K launch of its own (split-K summed in the kernel is fine: the last split adds the sum) and no head
    split; only on tiles of <= 128 rows and 128 columns, but on any tile of a k-grouped group (the measured
    gains, dispatch.d_reduce_ok)."""
    from finegemm.jit.device import H200
    from finegemm.jit.heuristics_sm90 import make_config

    desc = GemmDesc("fp8_1d1d", 64, 256, 512, out_fp32=True, with_c=True)
    d = torch.zeros(64, 256)
    tile = dataclasses.replace(make_config(desc, H200, 128, 128, sfa_tma=True, sfb_tma=True), pipe_mma=True)
    assert dispatch.d_reduce_ok(desc, tile, d, d)
    assert dispatch.d_reduce_ok(desc, make_config(desc, H200, 64, 128, sfa_tma=True, sfb_tma=True), d, d)
    wide_rows = make_config(desc, H200, 256, 128, small_epi=True, sfa_tma=True, sfb_tma=True)
    narrow = make_config(desc, H200, 128, 64, sfa_tma=True, sfb_tma=True)
    assert not dispatch.d_reduce_ok(desc, wide_rows, d, d)  # measured slower: 256 rows
    assert not dispatch.d_reduce_ok(desc, narrow, d, d)  # and 128x64 (at K = 512)
    assert dispatch.d_reduce_ok(desc, tile, d, d, k_group=True)  # k-grouped groups: any tile
    assert dispatch.d_reduce_ok(desc, wide_rows, d, d, k_group=True) and dispatch.d_reduce_ok(desc, narrow, d, d,
                                                                                                k_group=True)
    assert not dispatch.d_reduce_ok(desc, dataclasses.replace(tile, split_k=2), d, d, k_group=True)
    assert not dispatch.d_reduce_ok(desc, dataclasses.replace(tile, split_k=2), d, d)  # the reduction adds C
    fused = dataclasses.replace(tile, split_k=2, splitk_fused=True)
    assert dispatch.d_reduce_ok(desc, fused, d, d)  # the split that arrives last adds the sum into D
    assert dispatch.d_reduce_ok(desc, dataclasses.replace(fused, split_tail=True), d, d)
    assert not dispatch.d_reduce_ok(desc, tile, None, d)
    assert not dispatch.d_reduce_ok(desc, tile, d.clone(), d)  # same values, other storage
    assert not dispatch.d_reduce_ok(desc, tile, d[:32], d)
    wide = torch.zeros(64, 512)
    assert not dispatch.d_reduce_ok(desc, tile, wide[:, :256], wide[:, 256:])  # same strides, other columns
    bf16 = torch.zeros(64, 256, dtype=torch.bfloat16)
    assert not dispatch.d_reduce_ok(desc, tile, bf16, bf16)
    dense = dataclasses.replace(desc, kind="fp8_1d2d")  # recipe (1, 128, 128): reads C as before
    assert not dispatch.d_reduce_ok(dense, tile, d, d)
    assert not dispatch.d_reduce_ok(dataclasses.replace(desc, head_splits=(128, 64, 128)), tile, d, d)
