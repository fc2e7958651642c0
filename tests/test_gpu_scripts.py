"""tools/gpu_check.sh on the CPU: it parses, refuses unknown parts before running anything, and a dry run with stub
``python3`` / ``compute-sanitizer`` / ``nvidia-smi`` runs the parts asked for, under the Tritons asked for, with the
harness and sanitizer arguments they need, leaves at most 8 files in $OUT (what a device call returns) and prints the
summary table last. A script that breaks on the card costs device time that a CPU test does not."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tarfile

import pytest
from test_racecheck_sites import def_line

ROOT = os.path.join(os.path.dirname(__file__), "..")
pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")

STUB_PYTHON = """#!/usr/bin/env bash
echo "python3 $*" >> "$STUB_LOG"
case "$*" in
  *"--collect-only"*)  # one node id per test function of each file asked for
    for a in "$@"; do case "$a" in tests/*.py)
      for i in $(seq 1 "$(grep -c '^def test_' "$a")"); do echo "$a::test_$i"; done;; esac; done;;
  *"-m pytest"*) echo "3 passed, 1 skipped in 0.1s";;
  *"-m finegemm bench"*) while [ $# -gt 0 ]; do [ "$1" = --json ] && echo '{"cases": []}' > "$2"; shift; done;;
  *sanitize_cases.py*) echo "sanitize_cases: 19/19 passed (auto, cuda)";;
  *bench_compare.py*) echo "finegemm-sm90: B/A geometric mean 0.970 over 36 cases";;
  *racecheck_sites.py*) exec "$REAL_PYTHON" "$@";;
  *) echo "torch 2.11 triton stub";;
esac
"""
STUB_SANITIZER = """#!/usr/bin/env bash
echo "compute-sanitizer $*" >> "$STUB_LOG"
tool=$2  # --tool NAME ...
while [ $# -gt 0 ] && [ "$1" != python3 ]; do shift; done
"$@"
if [ "$tool" = racecheck ]; then  # racecheck ends with its own summary line
    [ -n "${STUB_SITE:-}" ] && printf '%s\n' "========= Error: Race reported between Write access at $STUB_SITE" \
        "=========     and Read access at $STUB_SITE [${STUB_ERRORS:-0} hazards]"
    echo "========= RACECHECK SUMMARY: ${STUB_ERRORS:-0} hazards displayed (${STUB_ERRORS:-0} errors, 0 warnings)"
else
    echo "========= ERROR SUMMARY: ${STUB_ERRORS:-0} errors"
fi
[ "${STUB_ERRORS:-0}" = 0 ] || exit 3
"""
STUB_SMI = "#!/usr/bin/env bash\nprintf 'name\\nNVIDIA H100 80GB HBM3\\n'\n"


def _run(tmp_path, *args, **env_extra):
    bin_dir, out = tmp_path / "bin", tmp_path / "out"
    bin_dir.mkdir(exist_ok=True)
    for name, text in (("python3", STUB_PYTHON), ("compute-sanitizer", STUB_SANITIZER), ("nvidia-smi", STUB_SMI)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    log = tmp_path / "calls.log"
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", OUT=str(out), STUB_LOG=str(log),
               REAL_PYTHON=sys.executable,
               T39_DIR=str(tmp_path / "t39"), **env_extra)
    env.pop("PARTS", None)
    env.pop("TRITONS", None)
    env.update(env_extra)
    # in a copy of tools/ and tests/ alone: a checkout's own .anchor/ or .t39/ (the card's extras) must not change it
    tree = tmp_path / "tree"
    if not tree.exists():
        for part in ("tools", "tests"):
            shutil.copytree(os.path.join(ROOT, part), tree / part, ignore=shutil.ignore_patterns("__pycache__"))
    result = subprocess.run(["bash", str(tree / "tools" / "gpu_check.sh"), *args], capture_output=True, text=True,
                            timeout=120, env=env, cwd=tree)
    calls = log.read_text().splitlines() if log.exists() else []
    return result, out, calls


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(ROOT, "tools", "*.sh"))), ids=os.path.basename)
def test_parses(path):
    result = subprocess.run(["bash", "-n", path], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("args,env,message", [
    (("tests", "no-such-part"), {}, "no part 'no-such-part'"),
    (("bench",), {"TRITONS": "3.7"}, "no Triton '3.7'"),
])
def test_unknown_part_or_triton_runs_nothing(tmp_path, args, env, message):
    result, out, calls = _run(tmp_path, *args, **env)
    assert result.returncode == 2 and message in result.stderr
    assert calls == [] and not out.exists()


def test_dry_run_every_part(tmp_path):
    result, out, calls = _run(tmp_path, "tests", "bench", "sanitize", SUITES="dense,grouped", JOBS="3")
    assert result.returncode == 0, result.stdout + result.stderr
    pytest_calls = [c for c in calls if "-m pytest -m gpu and not gpu_memory" in c and "--collect-only" not in c]
    assert len(pytest_calls) == 3  # JOBS shards, every file with gpu tests in exactly one
    sharded = sorted(f for c in pytest_calls for f in c.split() if f.startswith("tests/"))
    assert len(sharded) == len(set(sharded)) and "tests/test_sm90_gpu.py" in sharded
    # dealt by their number of tests: the file with the most starts a shard of its own
    counts = {f: sum(line.startswith("def test_") for line in open(os.path.join(ROOT, f))) for f in sharded}
    largest = max(counts, key=counts.get)
    assert any(c.split()[-1] == largest and sum(f.startswith("tests/") for f in c.split()) == 1
               for c in pytest_calls) or counts[largest] < sum(counts.values()) / 3
    # then the tests that need much of the card's memory, in one process after the shards
    (alone,) = [c for c in calls if "-m pytest -m gpu and gpu_memory" in c]
    assert calls.index(alone) > max(calls.index(c) for c in pytest_calls)
    assert "tests/test_sm90_grouped_gpu.py" in alone.split() and "tests/test_sm90_gpu.py" not in alone.split()
    (bench,) = [c for c in calls if "-m finegemm bench" in c]
    assert "--suite dense,grouped" in bench and "--kernel-time" in bench and f"--json {out}/bench-image.json" in bench
    sanitizer = [c for c in calls if c.startswith("compute-sanitizer")]
    assert [c.split()[2] for c in sanitizer] == ["memcheck", "racecheck", "racecheck", "synccheck"]
    cases_runs = [c for c in sanitizer if "sanitize_cases.py" in c]
    assert "--race-set" not in cases_runs[0] and all("--race-set" in c for c in cases_runs[1:])
    # racecheck prints every hazard, so that racecheck_sites places each one
    assert "--print-limit 100000" in sanitizer[1] and "--print-limit 20" in sanitizer[0]
    assert all("--backend auto" in c for c in cases_runs)  # each case as a user's call runs it
    # racecheck also runs Triton's warp-specialize hand-off alone, its summary beside the cases'
    assert sanitizer[2].endswith("python3 tools/ws_control.py")
    # only memcheck leaves out host API errors (Triton 3.9's loader probes an attribute Hopper refuses)
    assert "--report-api-errors no" in sanitizer[0] and not any("--report-api-errors" in c for c in sanitizer[1:])

    files = sorted(p.name for p in out.iterdir())
    assert files == ["bench-image.json", "logs.tar.gz", "summary.txt"]
    with tarfile.open(out / "logs.tar.gz") as tar:
        names = {os.path.basename(n) for n in tar.getnames()}
    assert {"pytest-image-0.log", "bench-image.log", "sanitize-memcheck-image.log"} <= names
    table = result.stdout.rstrip().splitlines()[-7:]  # printed last
    assert table[0].split()[:2] == ["part", "triton"]
    assert [r.split()[0] for r in table[1:]] == ["triton", "tests", "bench", "sanitize:memcheck",
                                                 "sanitize:racecheck", "sanitize:synccheck"]
    assert "12 passed" in table[2] and "4 skipped" in table[2]
    assert "0 errors; cases 19/19 passed" in table[4]
    assert ("0 hazards displayed (0 errors, 0 warnings); cases 19/19 passed; "
            "ws_control: RACECHECK SUMMARY: 0 hazards displayed") in table[5]


def test_sanitizer_errors_fail_the_run(tmp_path):
    result, _, calls = _run(tmp_path, "sanitize", SANITIZE_TOOLS="memcheck", STUB_ERRORS="3")
    assert result.returncode == 1 and "--error-exitcode" in calls[-2]
    assert "3 errors; cases 19/19 passed" in result.stdout.splitlines()[-1]


def test_two_tritons_bench_and_compare(tmp_path):
    (tmp_path / "t39" / "triton").mkdir(parents=True)  # as if .t39's archive were unpacked
    result, out, calls = _run(tmp_path, "bench", TRITONS="image 3.9")
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["bench-3.9.json", "bench-ab.txt", "bench-image.json",
                                                     "logs.tar.gz", "summary.txt"]
    assert any("bench_compare.py" in c and "bench-image.json" in c and "bench-3.9.json" in c for c in calls)
    assert "geometric mean 0.970" in result.stdout.splitlines()[-1]


def test_missing_triton_39_is_reported(tmp_path):
    result, out, calls = _run(tmp_path, "bench", TRITONS="3.9")
    assert result.returncode == 1
    assert not any("-m finegemm bench" in c for c in calls)
    assert "Triton 3.9 not here" in result.stdout.splitlines()[-1]


def test_budget_skips_parts_that_cannot_finish(tmp_path):
    result, _, calls = _run(tmp_path, "tests", "bench", BUDGET_S="10")
    assert not any("-m pytest" in c or "-m finegemm bench" in c for c in calls)
    assert result.stdout.count("skipped: budget spent") == 2


def test_deepgemm_test_runner_returns_two_files_whatever_the_number_of_tests(tmp_path):
    """tools/run_deepgemm_tests.py leaves summary.txt and one archive of every test's log in its --out (a device
    call returns at most 8 files): here three tests of two files, one failing, run at once through the deep_gemm
    alias; the summary keeps the files' order."""
    import sys

    tests, out = tmp_path / "tests", tmp_path / "out"
    tests.mkdir()
    (tests / "test_bf16.py").write_text("def test_ok():\n    print('ran ok')\n\n\ndef test_bad():\n"
                                        "    raise SystemExit(3)\n")
    (tests / "test_layout.py").write_text("import deep_gemm\n\n\ndef test_alias():\n"
                                          "    print('alias', deep_gemm.__finegemm_alias__)\n")
    result = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "run_deepgemm_tests.py"), "--tests",
                             str(tests), "--out", str(out), "--only", "test_bf16.py", "test_layout.py::test_alias",
                             "--jobs", "3"],
                            capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 1, result.stdout + result.stderr  # test_bad failed
    assert sorted(os.listdir(out)) == ["deepgemm-tests-logs.tar.gz", "summary.txt"]
    summary = (out / "summary.txt").read_text().splitlines()
    assert [line.split()[:2] for line in summary] == [["PASS", "test_bf16.py::test_ok"],
                                                      ["FAIL", "test_bf16.py::test_bad"],
                                                      ["PASS", "test_layout.py::test_alias"]]
    with tarfile.open(out / "deepgemm-tests-logs.tar.gz") as tar:
        logs = {m.name: tar.extractfile(m).read().decode() for m in tar.getmembers()}
    assert sorted(logs) == ["test_bf16.test_bad.log", "test_bf16.test_ok.log", "test_layout.test_alias.log"]
    assert "ran ok" in logs["test_bf16.test_ok.log"] and "alias True" in logs["test_layout.test_alias.log"]


def test_racecheck_hazards_fail_the_run_and_are_counted(tmp_path):
    result, _, _ = _run(tmp_path, "sanitize", SANITIZE_TOOLS="racecheck", STUB_ERRORS="6")
    assert result.returncode == 1
    assert "6 hazards displayed (6 errors, 0 warnings)" in result.stdout.splitlines()[-1]
    assert "cases 19/19 passed" in result.stdout.splitlines()[-1]


def test_racecheck_hazards_on_tritons_generated_code_pass_and_in_a_body_fail(tmp_path):
    line = def_line("tools/ws_control.py", "ws_control_kernel")
    generated = f"ws_control_kernel+0x490 in ws_control.py:{line}"
    result, _, _ = _run(tmp_path, "sanitize", SANITIZE_TOOLS="racecheck", STUB_ERRORS="4", STUB_SITE=generated)
    assert result.returncode == 0, result.stdout
    assert "4 hazards over 1 access sites, all on Triton's generated code" in result.stdout.splitlines()[-1]
    body = f"ws_control_kernel+0x490 in ws_control.py:{line + 1}"
    result, _, _ = _run(tmp_path, "sanitize", SANITIZE_TOOLS="racecheck", STUB_ERRORS="4", STUB_SITE=body)
    assert result.returncode == 1 and "1 sites in kernel bodies" in result.stdout.splitlines()[-1]
