"""Reads an Nsight Compute report with NVIDIA's ncu_report module; run as a script in its own process.

    python ncu_read.py REPORT EXTRAS_DIR [--rules] METRIC [METRIC ...]

A METRIC ending in "*" stands for every metric of the kernel whose name starts with what comes before it;
--rules adds each kernel's rule results.

ncu_report loads a native library that crashed the judge (a segfault beside torch's CUDA libraries on the
H200), so it never runs in the judge: this file imports nothing of ours, and prints one JSON list, each
profiled kernel as {"name": ..., "metrics": {METRIC: [value, unit] or null}, "rules": [...]}, the rules being
Nsight Compute's rule results as its module gives them (dicts, made JSON-safe and bounded here).
"""

from __future__ import annotations

import json
import sys
from typing import Any

MAX_KERNELS = 4096  # the timing check reads several calls' kernels; the profile rung keeps the first 32
MAX_RULES = 64
MAX_RULE_CHARS = 8000


def read(report: str, metrics: list[str], rules: bool) -> list[dict[str, Any]]:
    import ncu_report

    context = ncu_report.load_report(report)
    kernels: list[dict[str, Any]] = []
    for r in range(context.num_ranges()):
        profiled = context.range_by_idx(r)
        for a in range(profiled.num_actions()):
            action = profiled.action_by_idx(a)
            figures = {name: _figure(action, name) for name in _names(action, metrics)}
            kernel = {"name": str(action.name())[:200], "metrics": figures}
            kernels.append({**kernel, "rules": _rules(action)} if rules else kernel)
            if len(kernels) >= MAX_KERNELS:
                return kernels
    return kernels


def _names(action: Any, metrics: list[str]) -> list[str]:
    prefixes = [m[:-1] for m in metrics if m.endswith("*")]
    named = [m for m in metrics if not m.endswith("*")]
    if not prefixes:
        return named
    try:
        every = [str(n) for n in action.metric_names()]
    except Exception:  # a module without metric_names(): the named metrics alone
        return named
    return named + sorted(n for n in every if n.startswith(tuple(prefixes)))


def _figure(action: Any, name: str) -> list[Any] | None:
    metric = action.metric_by_name(name)
    if metric is None:
        return None
    return [float(metric.as_double()), str(metric.unit())]


def _rules(action: Any) -> list[Any]:
    """The rule results, each bounded in size; [] where this module has no rule results. A message's and a speedup
    estimate's "type" (the module's enums, as ints) gain a "type_name" from the module's own constants."""
    import ncu_report

    try:
        results = list(action.rule_results_as_dicts())[:MAX_RULES]
    except Exception:
        return []
    names = {
        "rule_message": _enum_names(ncu_report, "MsgType_"),
        "speedup_estimation": _enum_names(ncu_report, "SpeedupType_"),
    }
    kept = []
    for result in results:
        text = json.dumps(result, default=str)
        if len(text) <= MAX_RULE_CHARS:
            kept.append(_named(json.loads(text), names))
    return kept


def _enum_names(module: Any, prefix: str) -> dict[int, str]:
    """{value: name} of the module's constants named prefix + NAME (MsgType_OPTIMIZATION: "optimization")."""
    found = {}
    for attribute in dir(module):
        value = getattr(module, attribute, None)
        if attribute.startswith(prefix) and isinstance(value, int) and not isinstance(value, bool):
            found[value] = attribute.removeprefix(prefix).lower()
    return found


def _named(result: Any, names: dict[str, dict[int, str]]) -> Any:
    for field, known in names.items():
        part = result.get(field) if isinstance(result, dict) else None
        if isinstance(part, dict) and isinstance(part.get("type"), int) and part["type"] in known:
            part["type_name"] = known[part["type"]]
    return result


if __name__ == "__main__":
    sys.path.append(sys.argv[2])
    asked = sys.argv[3:]
    json.dump(read(sys.argv[1], [m for m in asked if m != "--rules"], "--rules" in asked), sys.stdout)
