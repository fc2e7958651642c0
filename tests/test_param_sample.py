"""``--param-sample N`` (tests/conftest.py), which CI's Triton 3.7.1 / 3.8.0 runs use: one in N parameter sets of
each parametrized test, the unparametrized ones and every known regression of the release kept."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILE = "tests/test_sm90_compile.py"


def _collected(*args: str) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args,
                          FILE], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if line.startswith(FILE + "::")]


def test_one_in_n_parameter_sets_and_every_known_regression():
    from release_regressions import KNOWN

    from finegemm.jit import releases

    every = _collected()
    sampled = _collected("--param-sample=4")
    assert set(sampled) < set(every)
    groups: dict[str, list[str]] = {}
    for node in every:
        groups.setdefault(node.split("[")[0], []).append(node)
    known = set(KNOWN.get(releases.triton_release(), {}))
    for name, nodes in groups.items():
        kept = [n for n in nodes if n in sampled]
        assert nodes[0] in kept, name  # the first parameter set (or the unparametrized test) always runs
        assert [n for n in nodes[::4]] == [n for n in kept if n in nodes[::4]], name
        assert set(kept) - set(nodes[::4]) <= known, name
        assert {n for n in nodes if n in known} <= set(kept), name
        assert len(kept) >= math.ceil(len(nodes) / 4)
