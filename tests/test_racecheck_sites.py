"""tools/racecheck_sites.py places racecheck's access sites: a kernel's def line (Triton's generated code) or a
line of its body (a finegemm access), for the real kernels' sources."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
import racecheck_sites  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..")


def def_line(path: str, name: str) -> int:
    """The line of ``def name(`` in the repository file ``path``."""
    with open(os.path.join(ROOT, path)) as f:
        return next(i for i, line in enumerate(f, 1) if line.startswith(f"def {name}("))


def test_def_lines_are_generated_code_and_body_lines_are_not():
    dense = def_line("finegemm/kernels/sm90/gemm_1d2d/kernel.py", "fp8_gemm_kernel")
    bf16 = def_line("finegemm/kernels/sm90/gemm_bf16.py", "bf16_gemm_kernel")
    log = (f"========= Error: Race reported between Read access at fp8_gemm_kernel+0x24f0 in kernel.py:{dense}\n"
           f"=========     and Write access at fp8_gemm_kernel+0x11f0 in kernel.py:{dense} [179 hazards]\n"
           f"========= Error: Race reported between Write access at bf16_gemm_kernel+0x2610 in gemm_bf16.py:{bf16}\n"
           f"=========     and Read access at bf16_gemm_kernel+0x26d0 in gemm_bf16.py:{bf16 + 20} [68 hazards]\n")
    sites, hazards = racecheck_sites.classify(log)
    assert hazards == 247
    assert [(name, on_def) for name, _, on_def in sites] == [
        ("fp8_gemm_kernel+0x24f0", True), ("fp8_gemm_kernel+0x11f0", True),
        ("bf16_gemm_kernel+0x2610", True), ("bf16_gemm_kernel+0x26d0", False)]


def test_a_kernel_name_that_does_not_match_its_def_line_is_not_placed():
    dense = def_line("finegemm/kernels/sm90/gemm_1d2d/kernel.py", "fp8_gemm_kernel")
    sites, _ = racecheck_sites.classify(
        f"Write access at some_other_kernel+0x10 in kernel.py:{dense} [1 hazards]")
    assert sites == [("some_other_kernel+0x10", f"kernel.py:{dense}", False)]
    sites, _ = racecheck_sites.classify("Write access at fp8_gemm_kernel+0x10 [1 hazards]")
    assert sites == [("fp8_gemm_kernel+0x10", "no source line", False)]


def test_exit_status(tmp_path):
    line = def_line("tools/ws_control.py", "ws_control_kernel")
    log = tmp_path / "race.log"
    log.write_text(f"Write access at ws_control_kernel+0x490 in ws_control.py:{line} [4 hazards]\n")
    assert racecheck_sites.main([str(log)]) == 0
    log.write_text(f"Write access at ws_control_kernel+0x490 in ws_control.py:{line + 2} [4 hazards]\n")
    assert racecheck_sites.main([str(log)]) == 1
    log.write_text("========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n")
    assert racecheck_sites.main([str(log)]) == 2
