"""Roofline: the benchmark's times against the device's measured copy bandwidth and matmul rates."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness import device as devices
from harness.problem import case_label
from harness.results import RungResult
from harness.rungs import rung

if TYPE_CHECKING:
    from harness.ladder import Ladder, VersionRun

# Honest kernels reach a little over the measured copy (a 2:1 read:write mix beats a 1:1 copy);
# a time this far past the ceiling is not a kernel doing the work.
IMPLAUSIBLE_ROOFLINE_PCT = 125.0


@rung("roofline", needs=("benchmark",), shares_skip=True)
def roofline(ladder: Ladder, run: VersionRun) -> RungResult:
    peaks = devices.peaks(ladder.device_info, ladder.options.state_dir)
    rows = [_row(timing_entry, run, peaks) for timing_entry in run.timings]
    metrics = {
        "cases": rows,
        "pct": rows[0]["pct"],
        "gbps": rows[0]["gbps"],
        "tflops": rows[0]["tflops"],
        "peaks": peaks,
    }
    impossible = [r for r in rows if r["pct"] > IMPLAUSIBLE_ROOFLINE_PCT]
    if impossible:
        r = impossible[0]
        return RungResult(
            name="roofline",
            ok=False,
            metrics=metrics,
            err=(
                f"{r['case']}: {r['pct']:.0f}% of the roofline is faster than the device can go: "
                "the timing is not credible (cached or skipped work?) or cost() undercounts"
            ),
        )
    return RungResult(name="roofline", ok=True, metrics=metrics)


def _row(timing_entry: dict[str, Any], run: VersionRun, peaks: dict[str, Any]) -> dict[str, Any]:
    """One bench case's achieved rates and the floor its cost sets on this device."""
    case = timing_entry["case"]
    cost = run.problem.cost_of(case)
    seconds = timing_entry["median_us"] * 1e-6
    flops_peak = peaks["bf16_tflops"] if timing_entry["low_precision"] else peaks["fp32_tflops"]
    floor_s = max(cost["bytes"] / (peaks["copy_gbps"] * 1e9), cost["flops"] / (flops_peak * 1e12))
    return {
        "case": case_label(case),
        "bytes": cost["bytes"],
        "flops": cost["flops"],
        "gbps": cost["bytes"] / seconds / 1e9,
        "tflops": cost["flops"] / seconds / 1e12,
        "floor_us": floor_s * 1e6,
        "pct": 100.0 * floor_s / seconds,
        "bound": "memory"
        if cost["bytes"] / (peaks["copy_gbps"] * 1e9) >= cost["flops"] / (flops_peak * 1e12)
        else "compute",
        "flops_peak_tflops": flops_peak,
    }
