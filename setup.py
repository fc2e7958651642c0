"""Puts ``finegemm-deep-gemm.pth`` at the top of site-packages, for regular and editable installs alike.

Everything else is in pyproject.toml. The .pth costs one environment lookup at interpreter start and, only when
``FINEGEMM_AS_DEEP_GEMM=1``, installs the ``deep_gemm`` import alias (_finegemm_deep_gemm_hook.py). Editable
installs (PEP 660) do not run build_py into the wheel, so the .pth is added to the editable wheel beside the
strategy's own files (setuptools' editable_wheel strategy hook; checked by tests/test_deepgemm_alias.py).
"""

import os

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

PTH = "finegemm-deep-gemm.pth"
PTH_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), PTH)


class BuildPyWithPth(build_py):
    def run(self):
        super().run()
        self.copy_file(PTH_SOURCE, os.path.join(self.build_lib, PTH))

    def get_outputs(self, include_bytecode=True):
        return [*super().get_outputs(include_bytecode), os.path.join(self.build_lib, PTH)]


class _StrategyWithPth:
    def __init__(self, strategy):
        self.strategy = strategy

    def __call__(self, wheel, files, mapping):
        self.strategy(wheel, files, mapping)
        with open(PTH_SOURCE, "rb") as f:
            wheel.writestr(PTH, f.read())

    def __enter__(self):
        self.strategy.__enter__()
        return self

    def __exit__(self, *exc):
        return self.strategy.__exit__(*exc)


class EditableWheelWithPth(editable_wheel):
    def _select_strategy(self, name, tag, build_lib):
        return _StrategyWithPth(super()._select_strategy(name, tag, build_lib))


setup(cmdclass={"build_py": BuildPyWithPth, "editable_wheel": EditableWheelWithPth})
