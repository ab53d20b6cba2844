"""A stand-in for NVIDIA's ncu_report (the real module ships only with Nsight Compute): an install laid out as
Nsight Compute's whose module serves fixed figures, metric names and rule results for every profiled kernel, in
the shapes the real one gives; a report path holding "crash" aborts the reader, as the real native library did
inside the judge."""

from __future__ import annotations

from pathlib import Path
from typing import Any

MODULE = """
import os

# its enums as the real module's constants, with values of its own: the reader must name them from these
MsgType_NONE, MsgType_OK, MsgType_OPTIMIZATION, MsgType_WARNING, MsgType_ERR = 0, 1, 2, 3, 4
SpeedupType_UNKNOWN, SpeedupType_LOCAL, SpeedupType_GLOBAL = 9, 5, 7

FIGURES = {figures!r}
RULES = {rules!r}
NAME = {name!r}
KERNELS = {kernels!r}


class Metric:
    def __init__(self, figure):
        self.figure = figure

    def as_double(self):
        return self.figure[0]

    def unit(self):
        return self.figure[1]


class Action:
    def name(self):
        return NAME

    def metric_names(self):
        return tuple(FIGURES)

    def metric_by_name(self, name):
        return Metric(FIGURES[name]) if name in FIGURES else None

    def rule_results_as_dicts(self):
        return RULES


class Range:
    def num_actions(self):
        return KERNELS

    def action_by_idx(self, i):
        return Action()


class Context:
    def num_ranges(self):
        return 1

    def range_by_idx(self, i):
        return Range()


def load_report(path):
    if "crash" in path:
        os.abort()
    return Context()
"""


def fake_nsight_compute(
    root: Path,
    figures: dict[str, tuple[float, str]],
    rules: list[dict[str, Any]] | None = None,
    name: str = "add_kernel",
    kernels: int = 1,
) -> str:
    """The stand-in's `ncu` path: each of `kernels` profiled kernels named `name` has `figures` (metric ->
    (value, unit)) and `rules`."""
    install = root / "nsight-compute" / "2025.3.1"
    (install / "extras" / "python").mkdir(parents=True)
    module = MODULE.format(figures=figures, rules=rules or [], name=name, kernels=kernels)
    (install / "extras" / "python" / "ncu_report.py").write_text(module)
    (install / "ncu").write_text("")
    return str(install / "ncu")
