"""Portable config heuristics (pure functions), env switches and FINEGEMM_PRINT_CONFIGS."""

from __future__ import annotations

import pytest
import torch

import finegemm
from finegemm.jit import env
from finegemm.jit.device import CPU_INTERPRETER, H200, DeviceFacts
from finegemm.jit.heuristics import FP8_BLOCK_K, GemmDesc, get_portable_config


@pytest.mark.parametrize("m", [1, 64, 128, 4096])
@pytest.mark.parametrize("kind", ["fp8_1d2d", "fp8_1d1d", "bf16"])
def test_portable_config_fits_shared_memory(m, kind):
    desc = GemmDesc(kind, m, 7168, 2048)
    cfg = get_portable_config(desc, H200)
    elem = 2 if kind == "bf16" else 1
    assert cfg.num_stages * (cfg.block_m + cfg.block_n) * cfg.block_k * elem <= H200.smem_per_block
    if kind != "bf16":
        assert cfg.block_k == FP8_BLOCK_K, "FP8 promotion needs BLOCK_K == the 128-wide scale block"


def test_small_m_gets_small_tiles():
    assert get_portable_config(GemmDesc("fp8_1d2d", 64, 4096, 7168), H200).block_m == 64
    assert get_portable_config(GemmDesc("fp8_1d2d", 4096, 4096, 7168), H200).block_m == 128


def test_stages_shrink_with_a_small_smem_budget():
    small = DeviceFacts("small", 80, 100 * 1024, (8, 9))
    cfg = get_portable_config(GemmDesc("fp8_1d2d", 4096, 4096, 7168), small)
    assert cfg.num_stages == 2


def test_interpreter_config_is_small():
    cfg = get_portable_config(GemmDesc("fp8_1d2d", 10, 64, 128), CPU_INTERPRETER)
    assert cfg.block_m == 16 and cfg.num_stages == 1


def test_desc_rejects_unknown_kind():
    with pytest.raises(ValueError, match="kind must be one of"):
        GemmDesc("fp4", 1, 1, 1)


def test_print_configs_once(monkeypatch, capsys):
    monkeypatch.setenv("FINEGEMM_PRINT_CONFIGS", "1")
    a = finegemm.per_token_cast_to_fp8(torch.randn(3, 128))
    b = finegemm.per_block_cast_to_fp8(torch.randn(19, 128))
    d = torch.empty(3, 19, dtype=torch.bfloat16)
    finegemm.fp8_gemm_nt(a, b, d)
    finegemm.fp8_gemm_nt(a, b, d)
    err = capsys.readouterr().err
    assert err.count("[finegemm] GemmDesc(kind='fp8_1d2d', m=3, n=19, k=128") == 1
    assert "-> portable" in err


def test_env_table_lists_every_switch():
    table = env.markdown_table()
    for switch in env.ALL_SWITCHES:
        assert f"`{switch.name}`" in table


def test_backend_switch_values(monkeypatch):
    monkeypatch.setenv("FINEGEMM_BACKEND", "Portable")
    assert env.backend() == "portable"
    monkeypatch.delenv("FINEGEMM_BACKEND")
    assert env.backend() == "auto"


def test_forced_portable_backend_runs(monkeypatch):
    monkeypatch.setenv("FINEGEMM_BACKEND", "portable")
    a = finegemm.per_token_cast_to_fp8(torch.randn(4, 128))
    b = finegemm.per_block_cast_to_fp8(torch.randn(8, 128))
    d = torch.full((4, 8), float("nan"), dtype=torch.bfloat16)
    finegemm.fp8_gemm_nt(a, b, d)
    assert not torch.isnan(d).any()


def test_cache_dir_switch(monkeypatch, tmp_path):
    monkeypatch.setenv("FINEGEMM_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    assert env.apply_cache_dir() == str(tmp_path)


def test_readme_env_table_is_current():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert env.markdown_table() in readme
