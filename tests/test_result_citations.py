"""Every measured number the code, the tests and the docs cite points at a file in benchmarks/results/.

Rules in the heuristics and claims in README.md / PERF.md name their evidence as `results/<file>`, sometimes with
a `*` or a `{a,b}` alternative; a cited file that is missing turns a measured claim into an unmeasured one.
"""
from __future__ import annotations

import glob
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
CITING = ("finegemm/**/*.py", "tests/*.py", "tools/*.py", "README.md", "benchmarks/PERF.md",
          "benchmarks/results/*.md")
CITATION = re.compile(r"results/([A-Za-z0-9_{},.*\-]+)")


def _alternatives(name: str) -> list[str]:
    """`a-{x,y}-b` -> [`a-x-b`, `a-y-b`], nested left to right."""
    brace = re.search(r"\{([^{}]*)\}", name)
    if brace is None:
        return [name]
    return [full for alt in brace.group(1).split(",")
            for full in _alternatives(name[:brace.start()] + alt + name[brace.end():])]


def _citations() -> list[tuple[str, str]]:
    found = []
    for pattern in CITING:
        for path in sorted(ROOT.glob(pattern)):
            # a name broken over two comment lines ("...-h100-2026-12-06-\n#   76cb214.json") is one name
            text = re.sub(r"-\n\s*#\s*", "-", path.read_text())
            for match in CITATION.finditer(text):
                name = match.group(1).rstrip(".,`)")
                found += [(str(path.relative_to(ROOT)), alt) for alt in _alternatives(name)]
    return found


def test_the_citing_files_cite_results():
    assert len(_citations()) > 50  # the scan reads the files it should


def test_every_cited_result_file_exists():
    missing = sorted({(src, name) for src, name in _citations()
                      if not glob.glob(str(RESULTS / name)) and not glob.glob(str(RESULTS / name) + "*")})
    assert not missing, "cited but not in benchmarks/results/: " + "; ".join(f"{s}: {n}" for s, n in missing)


def test_brace_alternatives_expand():
    assert _alternatives("x-{0,1}-{a,b}.json") == ["x-0-a.json", "x-0-b.json", "x-1-a.json", "x-1-b.json"]
