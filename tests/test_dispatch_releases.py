"""api/dispatch.py across Triton releases: the sm90 path on every tested release (jit/releases.py), and on an
untested one the Hopper path tried once through a probe compile, falling back to portable with one warning that
names the Triton version when it fails."""

from __future__ import annotations

import warnings

import pytest

from finegemm.api import dispatch
from finegemm.jit import releases
from finegemm.jit.device import H200
from finegemm.jit.heuristics import GemmDesc

DESC = GemmDesc("fp8_1d2d", 128, 2112, 7168)


@pytest.fixture
def release(monkeypatch):
    """Set the Triton version the package sees; a fresh probe state and backend cache around each test."""
    import triton  # finegemm (imported above) has settled the interpreter choice

    def use(version: str, probe=None) -> None:
        monkeypatch.setattr(triton, "__version__", version)
        if probe is not None:
            monkeypatch.setattr(dispatch, "_probe_compile", probe)

    monkeypatch.setattr(dispatch, "_untested_release_reason", [])
    dispatch._choose.cache_clear()
    yield use
    dispatch._choose.cache_clear()


def _never() -> None:
    raise AssertionError("a tested release must not be probed")


def _fails() -> None:
    raise RuntimeError("at 10:10:\nAttributeError(\"'shared_memory_descriptor' object has no attribute 'x'\")")


@pytest.mark.parametrize("version", ["3.6.0", "3.7.1", "3.8.0", "3.9.0"])
def test_every_tested_release_takes_sm90_without_a_probe(release, version):
    release(version, _never)
    assert releases.is_tested()
    assert dispatch.hopper_path_reason() is None
    assert dispatch._choose(DESC, H200, "auto")[0] == "sm90"


def test_untested_release_falls_back_once_with_a_warning(release):
    calls = []

    def probe() -> None:
        calls.append(1)
        _fails()

    release("3.99.0", probe)
    with pytest.warns(RuntimeWarning, match=r"Triton 3\.99\.0 .*portable") as record:
        assert dispatch._choose(DESC, H200, "auto")[0] == "portable"
    assert len(record) == 1 and "shared_memory_descriptor" in str(record[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second warning, no second probe
        assert dispatch._choose(GemmDesc("fp8_1d2d", 4096, 7168, 2048), H200, "auto")[0] == "portable"
        assert dispatch.sm90_mqa_module.__wrapped__() is None  # the MQA kernels follow the same gate
    assert calls == [1]
    with pytest.raises(dispatch.BackendError, match="3.99.0"):
        dispatch._choose(DESC, H200, "sm90")  # forcing the fast path says why it cannot


def test_untested_release_keeps_sm90_when_the_probe_compiles(release):
    release("3.99.0", lambda: None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert dispatch._choose(DESC, H200, "auto")[0] == "sm90"


def test_untested_release_is_not_probed_off_hopper(release):
    import torch

    from finegemm.jit.device import device_facts

    release("3.99.0", _never)
    facts = device_facts(torch.device("cpu"))
    assert dispatch._choose(DESC, facts, "auto")[0] == "portable"


def test_release_strings():
    assert releases.release_of("3.9.0") == "3.9" and releases.release_of("3.10.0+git1a2b") == "3.10"
    assert releases.release_key("3.10") > releases.release_key("3.9")
    assert not releases.is_tested("3.10") and releases.is_tested("3.6")


def test_info_names_the_release_and_the_hopper_path(release, monkeypatch):
    from finegemm import cli_demo

    assert cli_demo._triton_line("3.8.0").startswith("3.8.0 (tested: 3.6, 3.7, 3.8, 3.9)")
    assert "NOT among the tested releases" in cli_demo._triton_line("3.10.0")
    release("3.99.0", _fails)
    with pytest.warns(RuntimeWarning):
        assert cli_demo._hopper_line(H200).startswith("off (Triton 3.99.0 is not among the tested releases")
    release("3.8.0")
    assert cli_demo._hopper_line(H200) == "on"
