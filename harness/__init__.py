"""The verification ladder: judges one version of a kernel against its problem's reference.

Runs headless in the GPU box's Python and imports only torch, triton, numpy (and CuTeDSL or TileLang
in the worker of a version that uses it). Nothing here imports Textual, the agents or the history database.
Laid out by what runs where: contract (crosses processes), problem, judge, workers, containment, wire,
worker (the kernel's process), gpu (both).
"""

import importlib
import importlib.abc
import importlib.machinery
import sys
from pathlib import Path
from types import ModuleType

from harness.contract.results import Evaluation, RungResult

__all__ = ["Evaluation", "RungResult"]

PACKAGE_DIR = Path(__file__).resolve().parent  # harness/, wherever it is installed or shipped

# Paths problem files written before the harness had its folders import: `from harness.rungs import rung`,
# `from harness import kernelbench`. Each is the module that now lives elsewhere, not a copy of it.
PUBLIC_PATHS = {"harness.rungs": "harness.problem.rung", "harness.kernelbench": "harness.problem.kernelbench"}


class _PublicPath(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        return importlib.machinery.ModuleSpec(name, self) if name in PUBLIC_PATHS else None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(PUBLIC_PATHS[spec.name])

    def exec_module(self, module: ModuleType) -> None:
        """Already run, under its own name."""


def __getattr__(name: str) -> ModuleType:  # `from harness import kernelbench`, `harness.rungs` as an attribute
    if f"harness.{name}" in PUBLIC_PATHS:
        return importlib.import_module(f"harness.{name}")
    raise AttributeError(f"module 'harness' has no attribute {name!r}")


if not any(isinstance(finder, _PublicPath) for finder in sys.meta_path):
    sys.meta_path.insert(0, _PublicPath())
