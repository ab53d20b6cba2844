"""Reads an Nsight Compute report with NVIDIA's ncu_report module; run as a script in its own process.

    python ncu_read.py REPORT EXTRAS_DIR METRIC [METRIC ...]

ncu_report loads a native library that crashed the judge (a segfault beside torch's CUDA libraries on the
H200), so it never runs in the judge: this file imports nothing of ours, and prints one JSON list, each
profiled kernel as {"name": ..., "metrics": {METRIC: [value, unit] or null}}.
"""

from __future__ import annotations

import json
import sys
from typing import Any

MAX_KERNELS = 4096  # the timing check reads several calls' kernels; the profile rung keeps the first 32


def read(report: str, metrics: list[str]) -> list[dict[str, Any]]:
    import ncu_report

    context = ncu_report.load_report(report)
    kernels: list[dict[str, Any]] = []
    for r in range(context.num_ranges()):
        profiled = context.range_by_idx(r)
        for a in range(profiled.num_actions()):
            action = profiled.action_by_idx(a)
            figures = {name: _figure(action, name) for name in metrics}
            kernels.append({"name": str(action.name())[:200], "metrics": figures})
            if len(kernels) >= MAX_KERNELS:
                return kernels
    return kernels


def _figure(action: Any, name: str) -> list[Any] | None:
    metric = action.metric_by_name(name)
    if metric is None:
        return None
    return [float(metric.as_double()), str(metric.unit())]


if __name__ == "__main__":
    sys.path.append(sys.argv[2])
    json.dump(read(sys.argv[1], sys.argv[3:]), sys.stdout)
