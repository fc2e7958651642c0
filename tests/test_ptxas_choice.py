"""FINEGEMM_PTXAS (finegemm/jit/ptxas.py): which ptxas the kernels are compiled with, chosen on the CPU."""

from __future__ import annotations

import os
import stat

import pytest

from finegemm.jit import ptxas


def _fake_ptxas(tmp_path, name: str, release: str) -> str:
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {release}, V{release}.1'\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


@pytest.fixture
def fakes(tmp_path):
    ptxas.ptxas_version.cache_clear()
    yield {r: _fake_ptxas(tmp_path, f"ptxas-{r}", r) for r in ("12.8", "12.9", "13.0")}
    ptxas.ptxas_version.cache_clear()


def test_versions_are_read_from_the_binary(fakes, tmp_path):
    assert ptxas.ptxas_version(fakes["12.9"]) == (12, 9)
    assert ptxas.ptxas_version(str(tmp_path / "missing")) is None


def test_auto_takes_the_newest_interleaving_ptxas_the_driver_supports(fakes):
    paths = list(fakes.values())
    assert ptxas.choose("auto", paths, None) == fakes["13.0"]
    assert ptxas.choose("auto", paths, (12, 9)) == fakes["12.9"]  # a 13.0 cubin may not load on a 12.9 driver
    assert ptxas.choose(" AUTO ", paths, (13, 0)) == fakes["13.0"]
    # 12.8 (Triton 3.6's own) does not interleave the FFMA yield bits: auto leaves Triton's choice alone
    assert ptxas.choose("auto", [fakes["12.8"]], None) is None
    assert ptxas.choose("auto", paths, (12, 8)) is None
    # never below what Triton bundles: a later Triton bundling 13.0 keeps its own
    assert ptxas.choose("auto", paths, None, bundled=(13, 0)) is None
    assert ptxas.choose("auto", paths, None, bundled=(12, 8)) == fakes["13.0"]


def test_empty_keeps_tritons_and_a_path_must_run(fakes, tmp_path):
    assert ptxas.choose("", list(fakes.values()), None) is None
    assert ptxas.choose(fakes["12.8"], [], None) == fakes["12.8"]  # an explicit path is taken as given
    with pytest.raises(ValueError, match="FINEGEMM_PTXAS"):
        ptxas.choose(str(tmp_path / "missing"), [], None)


def test_apply_leaves_a_user_set_triton_ptxas_path(fakes, monkeypatch):
    monkeypatch.setenv("TRITON_PTXAS_PATH", fakes["12.8"])
    assert ptxas.apply("auto") == fakes["12.8"]
    assert os.environ["TRITON_PTXAS_PATH"] == fakes["12.8"]
    monkeypatch.delenv("TRITON_PTXAS_PATH")
    monkeypatch.setattr(ptxas, "candidates", lambda: list(fakes.values()))
    monkeypatch.setattr(ptxas, "driver_cuda_version", lambda: (12, 9))
    monkeypatch.setattr(ptxas, "bundled_version", lambda: (12, 8))
    assert ptxas.apply("auto") == fakes["12.9"] == os.environ["TRITON_PTXAS_PATH"]
    monkeypatch.delenv("TRITON_PTXAS_PATH")
    assert ptxas.apply("") is None and "TRITON_PTXAS_PATH" not in os.environ
