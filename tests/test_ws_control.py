"""tools/ws_control.py, racecheck's control on the card, compiles for sm_90 on the CPU with the hand-off it is meant
to show: the default partition's own ``bar.sync 0, 128`` before its one-thread arrive, and Triton's partition
state in shared memory (store, ``barrier.sync 1``, per-warp byte load), as in the GEMMs.

Compiled in a subprocess with TRITON_INTERPRET=0 (this process may run Triton's interpreter).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = textwrap.dedent('''
    import sys
    sys.path.insert(0, "tools")
    import ws_control
    print(ws_control.compile_for_sm90().asm["ptx"])
''')


def test_control_compiles_with_the_gemms_hand_off():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600, cwd=ROOT,
                         env={**os.environ, "TRITON_INTERPRET": "0"})
    assert out.returncode == 0, out.stderr[-3000:]
    ptx = out.stdout
    assert "bar.sync \t0, 128;" in ptx  # the default partition's warps, before their one arrive on `empty`
    assert "barrier.sync \t1;" in ptx  # the partitions' hand-off barrier
    assert "ld.shared.b8" in ptx  # each worker warp reads its partition index
    assert ptx.count("mbarrier.arrive") >= 2 and "mbarrier.try_wait" in ptx
