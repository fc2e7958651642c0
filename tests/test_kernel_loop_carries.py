"""No Gluon kernel bounds an inner ``range`` loop by a value an outer ``range`` loop carries.

Triton 3.6's Gluon pipeline (its SCCP pass) folds such a carry to its initial value: the masked kernels'
``range(_first_local_unit(g_start), ...)`` started every group's walk at CTA 0, so those GEMMs ran on one
group's worth of CTAs with right results (commit 384d2de). A ``while`` loop, or a use in the loop body
only, keeps the carry. This is a source check (``ast``) of every ``@gluon.jit`` function of the package; the
compiled IR of the masked kernels is checked in tests/test_sm90_grouped_compile.py.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "finegemm"


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _targets(stmt: ast.stmt) -> set[str]:
    """Names a statement (or any statement nested in it) assigns."""
    out: set[str] = set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                out |= _names(t)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            out |= _names(node.target)
    return out


def _is_range_for(stmt: ast.stmt) -> bool:
    return (isinstance(stmt, ast.For) and isinstance(stmt.iter, ast.Call)
            and isinstance(stmt.iter.func, ast.Name) and stmt.iter.func.id == "range")


def _inner_bounds(body: list[ast.stmt], tainted: set[str], hits: list[tuple[int, list[str]]]) -> None:
    """Walk ``body`` in order, spreading ``tainted`` through assignments; record every inner ``range`` loop whose
    arguments read a tainted name."""
    for stmt in body:
        if isinstance(stmt, (ast.Assign, ast.AugAssign)) and _names(stmt.value) & tainted:
            tainted |= _targets(stmt)
        if _is_range_for(stmt):
            bad = set().union(*(_names(a) for a in stmt.iter.args)) & tainted
            if bad:
                hits.append((stmt.lineno, sorted(bad)))
        for field in ("body", "orelse"):
            sub = getattr(stmt, field, None)
            if isinstance(sub, list) and not isinstance(stmt, ast.FunctionDef):
                _inner_bounds(sub, tainted, hits)


def carried_bounds(fn: ast.FunctionDef) -> list[tuple[int, list[str]]]:
    """(line, names) of the inner ``range`` loops of ``fn`` bounded by a value some outer ``range`` loop carries
    (assigned before the loop and again in its body, or computed in the body from such a value)."""
    hits: list[tuple[int, list[str]]] = []

    def block(stmts: list[ast.stmt], seen: set[str]) -> None:
        seen = set(seen)
        for stmt in stmts:
            if _is_range_for(stmt):
                carried = set().union(*(_targets(s) for s in stmt.body)) & seen
                _inner_bounds(stmt.body, set(carried), hits)
            for field in ("body", "orelse"):
                sub = getattr(stmt, field, None)
                if isinstance(sub, list) and not isinstance(stmt, ast.FunctionDef):
                    block(sub, seen | _names(getattr(stmt, "target", ast.Pass())))
            seen |= _targets(stmt)

    block(fn.body, {a.arg for a in fn.args.args})
    return hits


def _gluon_functions(source: str) -> list[ast.FunctionDef]:
    def is_gluon(fn: ast.AST) -> bool:
        decorators = getattr(fn, "decorator_list", [])
        return isinstance(fn, ast.FunctionDef) and any(ast.unparse(d).startswith("gluon.jit") for d in decorators)

    return [n for n in ast.walk(ast.parse(source)) if is_gluon(n)]


KERNEL_FILES = sorted(p for p in PACKAGE.rglob("*.py") if "gluon.jit" in p.read_text())


def test_there_are_gluon_kernels_to_check():
    assert len(KERNEL_FILES) >= 4 and sum(len(_gluon_functions(p.read_text())) for p in KERNEL_FILES) > 50


@pytest.mark.parametrize("path", KERNEL_FILES, ids=[p.name for p in KERNEL_FILES])
def test_no_inner_loop_bounded_by_an_outer_carry(path):
    found = [(fn.name, line, names) for fn in _gluon_functions(path.read_text()) for line, names in carried_bounds(fn)]
    assert not found, f"{path.name}: inner range() bounded by an outer loop's carry (use a while loop): {found}"


BAD = '''
@gluon.jit
def walk(lay_ptr, NG: gl.constexpr):
    it = 0
    g_start = 0
    for g in range(NG):
        tiles = gl.load(lay_ptr + g)
        first = (gl.program_id(0) + g_start) % gl.num_programs(0)
        for local in range(first, tiles, gl.num_programs(0)):
            it += 1
        g_start += tiles
'''


def test_the_check_finds_the_masked_walk_as_it_was():
    (fn,) = _gluon_functions(BAD)
    assert carried_bounds(fn) == [(9, ["first"])]


def test_the_check_takes_the_while_form_and_per_iteration_bounds():
    good = BAD.replace("        for local in range(first, tiles, gl.num_programs(0)):\n            it += 1\n",
                       "        local = first\n        while local < tiles:\n            it += 1\n"
                       "            local += gl.num_programs(0)\n")
    per_iteration = BAD.replace("first = (gl.program_id(0) + g_start)", "first = (gl.program_id(0) + tiles)")
    for src in (good, per_iteration):
        (fn,) = _gluon_functions(src)
        assert carried_bounds(fn) == []
