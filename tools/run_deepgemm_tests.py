"""Run DeepGEMM 2.6.1's own SM90 test files, unmodified, against finegemm through the ``deep_gemm`` alias.

One fresh interpreter per test function (``test_*`` at the top level of each file, seeded as the files' own
``__main__`` blocks seed), with ``FINEGEMM_AS_DEEP_GEMM=1``; test_lazy_init.py runs as the script it is. Prints one
``PASS`` / ``FAIL`` / ``TIMEOUT`` line per test; ``<out>`` gets two files, rewritten after every test (a run cut
short keeps what finished): ``summary.txt`` (the lines) and ``deepgemm-tests-logs.tar.gz`` (each test's output as
``<file>.<test>.log``), since a device call returns at most 8 files. Exit status 1 when anything did not pass.

    python tools/run_deepgemm_tests.py --tests <DeepGEMM>/tests --out "$OUT" [--only test_bf16.py] [--timeout 900]
        [--jobs N]

Defaults set for the runs (each overridable from the environment): ``DG_USE_NVIDIA_TOOLS=1`` (bench_kineto skips
the profiler: the files' timing lines then print placeholders) and ``DG_MQA_NUM_CASES=16`` (test_attention.py's
MQA cases sampled).
"""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SM90_FILES = ("test_fp8_fp4.py", "test_bf16.py", "test_attention.py", "test_layout.py", "test_einsum.py",
              "test_hyperconnection.py", "test_lazy_init.py")
SCRIPT_FILES = {"test_lazy_init.py"}  # no test functions: its __main__ is the test
DEFAULT_ENV = {"DG_USE_NVIDIA_TOOLS": "1", "DG_MQA_NUM_CASES": "16"}
LOGS_ARCHIVE = "deepgemm-tests-logs.tar.gz"

# what each function runs in its interpreter: the alias from the hook module, then the test as __main__ would
CALL = """import random, sys, torch
import _finegemm_deep_gemm_hook
assert _finegemm_deep_gemm_hook.install()
sys.path.insert(0, {tests!r})
torch.manual_seed({seed}); random.seed({seed})
import deep_gemm, {module}
assert getattr(deep_gemm, '__finegemm_alias__', False), 'deep_gemm is not finegemm here'
{module}.{function}()
"""


def test_functions(path: Path) -> list[str]:
    """Names of the top-level ``test_*`` functions of a test file, in file order."""
    tree = ast.parse(path.read_text())
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]


def main_seed(path: Path) -> int:
    """The seed the file's ``__main__`` block passes to ``torch.manual_seed`` (0 when it passes none)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "manual_seed"
                and node.args and isinstance(node.args[0], ast.Constant)):
            return int(node.args[0].value)
    return 0


def run_one(cmd: list[str], env: dict, cwd: Path, log: Path, timeout: int) -> tuple[str, float]:
    start = time.monotonic()
    with log.open("w") as f:
        try:
            done = subprocess.run(cmd, env=env, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout)
            status = "PASS" if done.returncode == 0 else f"FAIL (exit {done.returncode})"
        except subprocess.TimeoutExpired:
            status = f"TIMEOUT ({timeout} s)"
    return status, time.monotonic() - start


def write_results(out: Path, lines: list[str], logs: Path) -> None:
    """``out/summary.txt`` and ``out/<LOGS_ARCHIVE>`` (every log under ``logs``), each replaced whole."""
    (out / "summary.txt").write_text("\n".join(lines) + "\n")
    partial = out / (LOGS_ARCHIVE + ".part")
    with tarfile.open(partial, "w:gz") as tar:
        for log in sorted(logs.glob("*.log")):
            tar.add(log, arcname=log.name)
    partial.replace(out / LOGS_ARCHIVE)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=Path, required=True, help="DeepGEMM's tests/ directory")
    parser.add_argument("--out", type=Path, required=True, help="where the logs and summary.txt go")
    parser.add_argument("--only", nargs="*", default=None, help="test files (or file::function) to run")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per test function")
    parser.add_argument("--jobs", type=int, default=1,
                        help="test functions run at once (one process each); several of DeepGEMM's tests hold up to "
                             "25 GB of the card, so an 80 GB card takes 2 (at 6, 10 of 23 ran out of memory)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    env = {**DEFAULT_ENV, **os.environ, "FINEGEMM_AS_DEEP_GEMM": "1"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    selected = args.only or list(SM90_FILES)
    logs = Path(tempfile.mkdtemp(prefix="deepgemm-tests-"))
    jobs: list[tuple[str, str, list[str]]] = []  # (file, function, command), in file order
    for file in SM90_FILES:
        path = args.tests / file
        wanted = [s.split("::", 1)[1] for s in selected if s.startswith(file + "::")]
        if file not in selected and not wanted:
            continue
        if file in SCRIPT_FILES:
            gpus = int(subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.device_count())"],
                                      capture_output=True, text=True).stdout.strip() or 1)
            code = ("import runpy, sys, _finegemm_deep_gemm_hook; assert _finegemm_deep_gemm_hook.install(); "
                    f"sys.argv = [{str(path)!r}, '--num-processes', '{max(gpus, 1)}']; "
                    f"sys.path.insert(0, {str(args.tests)!r}); runpy.run_path({str(path)!r}, run_name='__main__')")
            jobs.append((file, "main", [sys.executable, "-c", code]))
        else:
            seed = main_seed(path)
            jobs += [(file, name, [sys.executable, "-c", CALL.format(tests=str(args.tests), seed=seed,
                                                                     module=path.stem, function=name)])
                     for name in wanted or test_functions(path)]
    lines: list[str] = [""] * len(jobs)

    def run_job(i: int) -> None:
        file, name, cmd = jobs[i]
        status, seconds = run_one(cmd, env, args.tests, logs / f"{Path(file).stem}.{name}.log", args.timeout)
        word, _, detail = status.partition(" ")
        lines[i] = f"{word:7} {file}::{name}  {seconds:7.1f} s  {detail}".rstrip()
        print(lines[i], flush=True)
        with lock:
            write_results(args.out, [line for line in lines if line], logs)

    # the tests check results only (DG_USE_NVIDIA_TOOLS=1 times nothing), so functions may share the GPU; the
    # JIT compiles on the host's cores
    lock = threading.Lock()
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        list(pool.map(run_job, range(len(jobs))))
    lines = [line for line in lines if line]
    write_results(args.out, lines, logs)
    passed = sum(line.startswith("PASS") for line in lines)
    print(f"{passed} of {len(lines)} passed; summary.txt and the logs ({LOGS_ARCHIVE}) in {args.out}")
    return 0 if lines and passed == len(lines) else 1


if __name__ == "__main__":
    sys.exit(main())
