"""Time inside a kernel: the regions a Triton version marks with proton's `pl.scope` (triton.profiler.language),
measured by proton's intra-kernel instrumentation on one call.

Nsight Compute sees a kernel whole; a kernel engineer tuning a pipelined loop wants to know how its cycles split
between loading, the MMA and the epilogue. Proton compiles a version's kernels again with a clock read at each
region's entry and exit (only where the kernel marks regions: without them there is nothing to record) and
writes a tree per kernel: its regions, nested as in the source, each with figures such as its cycles.

A version marks regions itself:

    import triton.profiler.language as pl
    pl.enable_semantic("triton")          # proton instruments Gluon by default; Triton kernels ask for it
    ...
        with pl.scope("load"):
            a = tl.load(...)

The worker runs the call and reads proton's file (its own claim, as every reply is); the judge keeps only
well-formed regions (regions_from), at most MAX_REGIONS, and shows them beside Nsight Compute's figures.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

MAX_REGIONS = 64
MAX_NAME = 120
MAX_FIGURES = 8
MARKS = re.compile(r"\b(?:pl|proton|language)\.(?:scope|enter_scope)\s*\(")


def marks_regions(source: str) -> bool:
    """Whether a version's source marks in-kernel regions for proton (cheap: read, not run)."""
    return "triton.profiler" in source and MARKS.search(source) is not None


def record(call: Callable[[], Any], synchronize: Callable[[], None], where: Path) -> list[dict[str, Any]]:
    """One call with proton's instrumentation on (the worker's side): its regions as proton's tree has them.
    The kernels are compiled again, instrumented: the worker is one of its own, never the timed one."""
    import triton.profiler as proton

    proton.start(str(where), backend="instrumentation")
    try:
        call()
        synchronize()
    finally:
        proton.finalize()
    written = where.with_suffix(".hatchet")
    if not written.is_file():
        raise RuntimeError(f"proton wrote no {written.name}")
    return regions_in(json.loads(written.read_text()))


def regions_in(trees: Any) -> list[dict[str, Any]]:
    """Proton's tree (a list of roots, each node {"frame": {"name"}, "metrics", "children"}) as flat regions:
    every node below a kernel, with its kernel, its path of region names, and its numeric figures."""
    found: list[dict[str, Any]] = []
    for root in trees if isinstance(trees, list) else [trees]:
        for kernel in _children(root):
            for child in _children(kernel):
                _walk(child, _name(kernel), [], found)
    return found[:MAX_REGIONS]


def _walk(node: Any, kernel: str, path: list[str], found: list[dict[str, Any]]) -> None:
    here = [*path, _name(node)]
    figures = _figures(node.get("metrics") if isinstance(node, dict) else None)
    if figures:
        found.append({"kernel": kernel, "region": "/".join(here), "figures": figures})
    for child in _children(node):
        _walk(child, kernel, here, found)


def _children(node: Any) -> list[Any]:
    children = node.get("children") if isinstance(node, dict) else None
    return [c for c in children if isinstance(c, dict)] if isinstance(children, list) else []


def _name(node: Any) -> str:
    frame = node.get("frame") if isinstance(node, dict) else None
    return str(frame.get("name") if isinstance(frame, dict) else "?")


def _figures(metrics: Any) -> dict[str, float]:
    if not isinstance(metrics, dict):
        return {}
    numeric = {str(k): float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return {k: v for k, v in numeric.items() if math.isfinite(v)}


def regions_from(claimed: Any) -> list[dict[str, Any]]:
    """The regions a worker's reply claims, kept only where well formed (the judge's side): short printable
    names, a few finite figures each, at most MAX_REGIONS."""
    from harness.contract.text import printable

    kept: list[dict[str, Any]] = []
    for item in claimed if isinstance(claimed, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("figures"), dict):
            continue
        figures = _figures(item["figures"])
        if not figures:
            continue
        kept.append(
            {
                "kernel": printable(str(item.get("kernel", "?")))[:MAX_NAME],
                "region": printable(str(item.get("region", "?")))[:MAX_NAME],
                "figures": dict(sorted(figures.items())[:MAX_FIGURES]),
            }
        )
        if len(kept) == MAX_REGIONS:
            break
    return kept
