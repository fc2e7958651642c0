"""The sm90 config heuristic and its layout arithmetic: pure functions, CPU only."""

from __future__ import annotations

import dataclasses

import pytest

from finegemm.jit.device import H200, DeviceFacts
from finegemm.jit.heuristics import GemmDesc
from finegemm.jit.heuristics_sm90 import Sm90Config, get_sm90_config, make_config
from finegemm.kernels.sm90 import layouts
from finegemm.kernels.sm90.dispatch import unsupported_reason

NK = [(2112, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048)]
AWKWARD = [(m, n, k) for m in (1, 77, 333, 4095) for n in (2112, 576) for k in (128, 7168)]


def all_descs():
    for m in (64, 128, 4096):
        for n, k in NK:
            yield GemmDesc("fp8_1d2d", m, n, k)
    for m, n, k in AWKWARD:
        yield GemmDesc("fp8_1d2d", m, n, k)
        yield GemmDesc("fp8_1d1d", m, n, k, out_fp32=True, with_c=True)
        yield GemmDesc("fp8_1d2d", m, n, k, sf_packed=True)


@pytest.mark.parametrize("desc", list(all_descs()), ids=str)
def test_config_is_legal(desc):
    cfg = get_sm90_config(desc, H200)
    assert isinstance(cfg, Sm90Config)
    hash(cfg)  # frozen: usable as a cache key
    assert cfg.block_m in (64, 128) and cfg.block_n in (32, 64, 128)
    assert (desc.k // 128) % cfg.split_k == 0
    assert cfg.split_k == 1 or desc.m <= 256
    assert cfg.stages >= 3
    out_fp32 = desc.out_fp32 or cfg.split_k > 1
    smem = cfg.stages * layouts.stage_bytes(cfg.block_m, cfg.block_n) + layouts.epilogue_bytes(
        cfg.block_m, cfg.block_n, out_fp32)
    assert smem + layouts.SMEM_RESERVED <= H200.smem_per_block
    assert layouts.accumulator_regs(cfg.block_m, cfg.block_n, cfg.pipe_mma) <= 192


def test_config_is_deterministic_and_pure():
    desc = GemmDesc("fp8_1d2d", 64, 2112, 7168)
    assert get_sm90_config(desc, H200) == get_sm90_config(desc, H200)
    small = DeviceFacts("test", 66, 232448, (9, 0))
    # fewer SMs: fewer splits needed to fill them
    assert get_sm90_config(desc, small).split_k <= get_sm90_config(desc, H200).split_k


def test_measured_rules():
    # v2 sweep: split-K fills the SMs at small M, big M runs 128x128 without PIPE_MMA.
    assert get_sm90_config(GemmDesc("fp8_1d2d", 64, 2112, 7168), H200).split_k == 4
    assert get_sm90_config(GemmDesc("fp8_1d2d", 64, 7168, 2048), H200).split_k == 1
    big = get_sm90_config(GemmDesc("fp8_1d2d", 4096, 7168, 16384), H200)
    assert (big.block_m, big.block_n, big.split_k, big.pipe_mma) == (128, 128, 1, False)
    assert get_sm90_config(GemmDesc("fp8_1d2d", 64, 4096, 7168), H200).block_m == 64


def test_stages_fill_shared_memory():
    desc = GemmDesc("fp8_1d2d", 4096, 4096, 7168)
    cfg = make_config(desc, H200, 128, 128)
    assert cfg.stages == 6  # (232448 - 2048 - 32768) // 32768
    cfg32 = make_config(dataclasses.replace(desc, out_fp32=True), H200, 128, 128)
    assert cfg32.stages == 5


def test_barrier_arithmetic():
    assert layouts.full_barrier_arrivals() == 1
    assert layouts.empty_barrier_arrivals(64) == 1
    assert layouts.empty_barrier_arrivals(128) == 2
    assert layouts.stage_tx_bytes(128, 128) == 32768
    assert layouts.math_warpgroups(128) == 2


def test_unsupported_reasons():
    assert unsupported_reason(GemmDesc("fp8_1d2d", 64, 2112, 7168), H200) is None
    assert unsupported_reason(GemmDesc("fp8_1d1d", 64, 2112, 7168, out_fp32=True, with_c=True), H200) is None
    assert "bf16" in unsupported_reason(GemmDesc("bf16", 64, 2112, 7168), H200)
    assert "K-major" in unsupported_reason(GemmDesc("fp8_1d2d", 64, 2112, 7168, a_k_major=False), H200)
    assert "multiple of 128" in unsupported_reason(GemmDesc("fp8_1d2d", 64, 2112, 7000), H200)
    assert "16-byte" in unsupported_reason(GemmDesc("fp8_1d2d", 64, 2113, 7168), H200)
    assert unsupported_reason(GemmDesc("fp8_1d2d", 64, 2112, 7168, layout="m_grouped_masked"), H200)
