"""Sort compute-sanitizer racecheck's hazards by where their accesses sit: a kernel's body, or code the compiler
generated with no line of the body to name.

racecheck names each access ``<kernel>+0x<offset> in <file>:<line>``. An access of a finegemm buffer carries the
line of the load, store or copy in the kernel's body. Code that Triton generates around the body, such as
``gl.warp_specialize``'s hand-off (the default warps store each worker's partition index and the exit code in
shared memory, the workers read theirs after a named barrier), carries the line of the kernel's ``def``.
tools/ws_control.py, a warp-specialized kernel with none of finegemm's code, gets a hazard between exactly those
instructions (its exit-code store and a worker's index load) once its default partition runs a barrier of its own
warps (``bar.sync 0, 128``), as every finegemm GEMM's does; without that barrier it gets none.

    python tools/racecheck_sites.py LOG [--root DIR]

Prints one line per access site and a summary; exit status 0 when every hazard's accesses sit on kernel ``def``
lines (Triton's generated code), 1 when any sits in a kernel body or cannot be placed, 2 when the log has no hazard.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SITE = re.compile(r"(Read|Write) access at (\w+)\+0x([0-9a-f]+)(?: in ([\w./-]+):(\d+))?")


def _def_line(root: Path, kernel: str, file_name: str, line: int) -> bool:
    """True when ``file_name:line`` is the ``def`` of ``kernel`` in some source file under ``root``."""
    for path in root.rglob(file_name):
        if any(part.startswith(".") or part in ("build", "__pycache__") for part in path.relative_to(root).parts):
            continue
        lines = path.read_text(errors="replace").splitlines()
        if 0 < line <= len(lines) and re.match(rf"\s*def {re.escape(kernel)}\(", lines[line - 1]):
            return True
    return False


def classify(log_text: str, root: Path = ROOT) -> tuple[list[tuple[str, str, bool]], int]:
    """[(kernel+offset, file:line, on a def line)] for every access site named, and the number of hazards."""
    sites = {}
    for _access, kernel, offset, file_name, line in SITE.findall(log_text):
        key = (f"{kernel}+0x{offset}", f"{file_name}:{line}" if file_name else "no source line")
        if key not in sites:  # an access racecheck cannot put on a source line is not placed
            sites[key] = bool(file_name) and _def_line(root, kernel, Path(file_name).name, int(line))
    hazards = sum(int(n) for n in re.findall(r"\[(\d+) hazards?\]", log_text))
    return [(k, s, d) for (k, s), d in sites.items()], hazards


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path, help="a compute-sanitizer --tool racecheck log")
    parser.add_argument("--root", type=Path, default=ROOT, help="where the kernels' sources are")
    args = parser.parse_args(argv)
    sites, hazards = classify(args.log.read_text(errors="replace"), args.root)
    if not sites:
        print("racecheck_sites: no hazard in the log")
        return 2
    for name, where, on_def in sites:
        print(f"{name:32s} {where:28s} {'generated (kernel def line)' if on_def else 'KERNEL BODY'}")
    body = [s for s in sites if not s[2]]
    print(f"racecheck_sites: {hazards} hazards over {len(sites)} access sites, "
          + ("all on Triton's generated code (kernel def lines)" if not body
             else f"{len(body)} sites in kernel bodies"))
    return 1 if body else 0


if __name__ == "__main__":
    sys.exit(main())
