"""The GPU session scripts parse, and ``scripts/gpu_pending.sh`` runs only the parts its header lists: a script that
breaks on the device, or an unknown part that runs something else, costs device time, the scarcest thing a session
has (session 24 lost about five minutes to the second)."""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..")
SCRIPTS = sorted(glob.glob(os.path.join(ROOT, "scripts", "*.sh")))
PENDING = os.path.join(ROOT, "scripts", "gpu_pending.sh")
needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")


@needs_bash
@pytest.mark.parametrize("path", SCRIPTS, ids=os.path.basename)
def test_shell_scripts_parse(path):
    result = subprocess.run(["bash", "-n", path], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_every_part_the_header_lists_has_a_branch():
    with open(PENDING) as f:
        text = f.read()
    header = text[:text.index("set -uo pipefail")]
    listed = set(re.findall(r"gpu_pending\.sh (\d+) ", header))
    branches = set(re.findall(r'"\$PART" = (\d+)', text))
    assert len(listed) >= 40 and listed <= branches, sorted(listed - branches, key=int)


@needs_bash
def test_an_unknown_part_runs_nothing(tmp_path):
    env = dict(os.environ, OUT=str(tmp_path))
    result = subprocess.run(["bash", PENDING, "no-such-part"], capture_output=True, text=True, timeout=60, env=env,
                            cwd=ROOT)
    assert result.returncode == 2 and "no part 'no-such-part'" in result.stderr
    assert result.stdout == "" and list(tmp_path.iterdir()) == []
