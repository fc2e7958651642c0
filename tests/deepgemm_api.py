"""DeepGEMM 2.6.1's Python API as tests/data/deepgemm_api.json records it (made by tools/deepgemm_api_table.py
from DeepGEMM's pybind11 definitions): the table, and each entry's parameters as an ``inspect.Signature``."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import torch

API_TABLE: dict = json.loads((Path(__file__).parent / "data" / "deepgemm_api.json").read_text())


def default_of(spec: dict):
    """A parameter's default as DeepGEMM writes it (a Python expression, e.g. ``torch.bfloat16``)."""
    return eval(spec["default"], {"torch": torch})


def signature_of(entry: dict) -> inspect.Signature:
    """The entry's parameters, names and defaults in DeepGEMM's order, each positional-or-keyword (pybind11's)."""
    return inspect.Signature([
        inspect.Parameter(spec["name"], inspect.Parameter.POSITIONAL_OR_KEYWORD,
                          default=default_of(spec) if "default" in spec else inspect.Parameter.empty)
        for spec in entry["params"]])
