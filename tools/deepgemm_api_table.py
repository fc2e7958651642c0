"""Generate tests/data/deepgemm_api.json: DeepGEMM's public Python signatures, read from its source tree.

The C++ entries come from the pybind11 ``m.def("name", ..., py::arg("x") = default, ...)`` lists in
``csrc/apis/*.hpp`` (plus the ``m.attr("alias") = m.attr("name")`` aliases there); an entry without
``py::arg`` takes positional-only arguments, counted from the lambda or function it binds. The Python
helpers come from ``deep_gemm/utils/{math,layout}.py`` and ``deep_gemm/testing/*.py`` through ``ast``.

    python tools/deepgemm_api_table.py /tmp/dg/DeepGEMM --commit <sha> [--out tests/data/deepgemm_api.json]

tests/test_deepgemm_compat.py compares ``inspect.signature`` of finegemm's functions with the table.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
from pathlib import Path

# entries DeepGEMM builds only for SM100 (the mega MoE kernels and their symmetric buffers)
SM100_ONLY_FILES = {"mega.hpp"}
PY_MODULES = {
    "deep_gemm.utils.math": "deep_gemm/utils/math.py",
    "deep_gemm.testing.bench": "deep_gemm/testing/bench.py",
    "deep_gemm.testing.numeric": "deep_gemm/testing/numeric.py",
    "deep_gemm.testing.utils": "deep_gemm/testing/utils.py",
}

_CPP_LITERALS = {"std::nullopt": "None", "true": "True", "false": "False", "torch::kFloat32": "torch.float32",
                 "torch::kFloat": "torch.float32", "torch::kBFloat16": "torch.bfloat16"}


def _balanced(text: str, start: int) -> str:
    """The text from ``start`` (an opening parenthesis) to its matching close, both excluded."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return text[start + 1:i]
    raise ValueError(f"unbalanced parentheses from offset {start}")


def _split_top(text: str) -> list[str]:
    """Split at commas outside parentheses, brackets, braces and string literals."""
    parts, depth, cur, quoted, prev = [], 0, [], False, ""
    for ch in text:
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch in "([{<":
            depth += 1
        elif not quoted and (ch in ")]}" or (ch == ">" and prev != "-")):  # not the ``->`` operator
            depth -= 1
        prev = ch
        if ch == "," and depth == 0 and not quoted:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def _cpp_default(value: str) -> str:
    """A C++ default argument as Python source."""
    value = value.strip()
    if value in _CPP_LITERALS:
        return _CPP_LITERALS[value]
    m = re.fullmatch(r"std::make_tuple\((.*)\)", value)
    if m:
        return "(" + ", ".join(v.strip() for v in m.group(1).split(",")) + ")"
    if re.fullmatch(r'"[^"]*"', value):
        return repr(value[1:-1])
    if re.fullmatch(r"-?\d+(\.\d+)?", value):
        return value
    raise ValueError(f"unknown C++ default {value!r}")


def _definition_params(sources: list[str], name: str) -> str:
    """The parameter list of the C++ function ``name`` where it is defined (``type name(...) {``)."""
    for text in sources:
        for m in re.finditer(r"[\w>&*]\s+" + re.escape(name) + r"\s*\(", text):
            params = _balanced(text, m.end() - 1)
            after = text[m.end() + len(params) + 1:].lstrip()
            if after.startswith("{"):
                return params
    raise ValueError(f"no definition of {name} found")


def _arity(sources: list[str], target: str) -> int:
    """Number of parameters of the lambda ``[&](...)`` or of the function ``&name`` bound by an m.def."""
    target = target.strip()
    if target.startswith("["):
        params = _balanced(target, target.index("("))
    else:
        params = _definition_params(sources, target.lstrip("&").split("::")[-1])
    return len(_split_top(params)) if params.strip() else 0


def cpp_entries(root: Path) -> dict:
    out = {}
    sources = [p.read_text() for p in sorted((root / "csrc").rglob("*.hpp"))]
    for path in sorted((root / "csrc" / "apis").glob("*.hpp")):
        text = path.read_text()
        reg = text.index("register_apis")
        for m in re.finditer(r"m\.def\(", text[reg:]):
            args = _split_top(_balanced(text, reg + m.end() - 1))
            name = args[0].strip('"')
            params = []
            for arg in args[2:]:
                pm = re.fullmatch(r'py::arg\("(\w+)"\)(?:\s*=\s*(.+))?', arg, re.S)
                if pm is None:
                    raise ValueError(f"{path.name}: {name}: cannot read {arg!r}")
                param = {"name": pm.group(1)}
                if pm.group(2) is not None:
                    param["default"] = _cpp_default(pm.group(2))
                params.append(param)
            entry = {"module": "deep_gemm", "source": f"csrc/apis/{path.name}",
                     "sm100_only": path.name in SM100_ONLY_FILES}
            if params:
                entry["params"] = params
            else:
                entry["positional_only"] = _arity(sources, args[1])
            out[name] = entry
        for m in re.finditer(r'm\.attr\("(\w+)"\)\s*=\s*m\.attr\("(\w+)"\)', text[reg:]):
            out[m.group(1)] = dict(out[m.group(2)], alias_of=m.group(2))
    return out


def py_entries(root: Path) -> dict:
    out = {}
    for module, rel in PY_MODULES.items():
        tree = ast.parse((root / rel).read_text())
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                args = node.args.args
                defaults = [None] * (len(args) - len(node.args.defaults)) + list(node.args.defaults)
                params = []
                for arg, default in zip(args, defaults):
                    param = {"name": arg.arg}
                    if default is not None:
                        param["default"] = ast.unparse(default)
                    params.append(param)
                if node.args.vararg is not None:
                    params.append({"name": node.args.vararg.arg, "kind": "VAR_POSITIONAL"})
                out[f"{module}.{node.name}"] = {"module": module, "source": rel, "sm100_only": False,
                                                "params": params}
            elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                out[f"{module}.{node.name}"] = {"module": module, "source": rel, "sm100_only": False,
                                                "kind": "class"}
    layout = (root / "deep_gemm/utils/layout.py").read_text()
    for alias, target in re.findall(r"^(\w+) = (\w+)$", layout, re.M):
        out[f"deep_gemm.utils.layout.{alias}"] = {"module": "deep_gemm.utils.layout",
                                                  "source": "deep_gemm/utils/layout.py", "sm100_only": False,
                                                  "alias_of": target}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="DeepGEMM's source tree (the directory holding csrc/, deep_gemm/)")
    parser.add_argument("--commit", required=True, help="the DeepGEMM commit the tree is")
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).resolve().parents[1] / "tests" / "data" / "deepgemm_api.json")
    args = parser.parse_args()
    version = re.search(r"__version__ = '([^']+)'", (args.root / "deep_gemm/__init__.py").read_text()).group(1)
    table = {"deepgemm_version": version, "deepgemm_commit": args.commit,
             "generator": "tools/deepgemm_api_table.py",
             "entries": dict(sorted({**cpp_entries(args.root), **py_entries(args.root)}.items()))}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(table, indent=1) + "\n")
    print(f"{len(table['entries'])} entries -> {args.out}")


if __name__ == "__main__":
    main()
