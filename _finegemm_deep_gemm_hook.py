"""Opt-in import alias: ``deep_gemm`` and its submodules resolve to finegemm's DeepGEMM-compatible modules.

Standard library only, so that the ``finegemm-deep-gemm.pth`` file pip installs can load it at every
interpreter start for the price of one environment lookup: the .pth imports this module and calls :func:`install`
only when ``FINEGEMM_AS_DEEP_GEMM`` is set to 1 (the switch is documented in ``finegemm/jit/env.py``), and nothing
here imports finegemm (or torch) until ``deep_gemm`` is imported. ``finegemm.alias_as_deep_gemm()`` calls
:func:`install` from code.

The finder sits first on ``sys.meta_path`` but answers for ``deep_gemm`` only when no other finder can find a
real DeepGEMM: a user who installed DeepGEMM keeps it (with a warning that the alias was not used). Each
``deep_gemm.X`` module is a fresh module of that name holding the public names of ``finegemm.deepgemm_alias.X``
(the same function objects) and, for a package, an empty ``__path__``: its submodules come from here too.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

SWITCH = "FINEGEMM_AS_DEEP_GEMM"
ALIAS = "deep_gemm"
TARGET = "finegemm.deepgemm_alias"
MARKER = "__finegemm_alias__"  # set on every alias module


class _Loader(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec):
        return None  # the default: a fresh module named spec.name

    def exec_module(self, module) -> None:
        setattr(module, MARKER, True)  # first: the submodules imported below look for it on their parent
        source = importlib.import_module(self.target)
        names = getattr(source, "__all__", None)
        if names is None:
            names = [n for n in vars(source) if not n.startswith("_")]
        for name in names:
            value = getattr(source, name)
            sub = getattr(value, "__name__", "")
            if isinstance(value, type(sys)) and sub.startswith(TARGET + "."):
                value = importlib.import_module(ALIAS + sub[len(TARGET):])  # deep_gemm.X, not finegemm's module
            setattr(module, name, value)
        module.__all__ = list(names)
        module.__doc__ = source.__doc__
        for name in ("__version__", "__finegemm_version__"):
            if hasattr(source, name):
                setattr(module, name, getattr(source, name))


class DeepGemmAliasFinder(importlib.abc.MetaPathFinder):
    """Finds ``deep_gemm`` and ``deep_gemm.*`` in ``finegemm.deepgemm_alias`` unless a real DeepGEMM is importable."""

    warned = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname != ALIAS and not fullname.startswith(ALIAS + "."):
            return None
        if fullname == ALIAS:
            real = self._real_spec()
            if real is not None:
                if not DeepGemmAliasFinder.warned:
                    DeepGemmAliasFinder.warned = True
                    warnings.warn(f"finegemm's deep_gemm alias is switched on but a real DeepGEMM is importable "
                                  f"({real.origin}); it is used and the alias is not", stacklevel=2)
                return None
        elif not getattr(sys.modules.get(ALIAS), MARKER, False):
            return None  # a submodule of a real deep_gemm
        name = TARGET + fullname[len(ALIAS):]
        try:
            source = importlib.util.find_spec(name)
        except ModuleNotFoundError:
            return None
        if source is None:
            return None
        is_package = source.submodule_search_locations is not None
        spec = importlib.util.spec_from_loader(fullname, _Loader(name), is_package=is_package)
        return spec

    def _real_spec(self):
        for finder in sys.meta_path:
            if finder is self or isinstance(finder, DeepGemmAliasFinder):
                continue
            find = getattr(finder, "find_spec", None)
            spec = find(ALIAS, None) if find is not None else None
            if spec is not None:
                return spec
        return None


def installed() -> bool:
    return any(isinstance(f, DeepGemmAliasFinder) for f in sys.meta_path)


def install() -> bool:
    """Put the finder first on ``sys.meta_path`` (once). Returns False when ``deep_gemm`` was imported already
    (from a real DeepGEMM: it stays) and the finder could no longer take effect, True otherwise."""
    loaded = sys.modules.get(ALIAS)
    if loaded is not None and not getattr(loaded, MARKER, False):
        warnings.warn(f"deep_gemm is imported already ({getattr(loaded, '__file__', loaded)}); finegemm's alias "
                      "does not replace it", stacklevel=2)
        return False
    if not installed():
        sys.meta_path.insert(0, DeepGemmAliasFinder())
    return True

