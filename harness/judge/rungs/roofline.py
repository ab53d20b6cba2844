"""Roofline: the benchmark's times against the device's measured copy bandwidth and matmul rates."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.contract.results import RungResult
from harness.judge import device as devices
from harness.problem.load import case_label
from harness.problem.rung import rung

if TYPE_CHECKING:
    from harness.judge.context import JudgeContext, VersionRun

# With no datasheet figure for the device, a time this far past the measured ceiling is not a kernel doing the work.
IMPLAUSIBLE_ROOFLINE_PCT = 125.0
# Past the datasheet by more than this (timer noise, a boost clock above the rated one) is not credible either.
DATASHEET_SLACK_PCT = 3.0


@rung("roofline", needs=("benchmark",), shares_skip=True)
def roofline(judge: JudgeContext, run: VersionRun) -> RungResult:
    peaks = devices.peaks(judge.device_info, judge.options.state_dir)
    rows = [_row(timing_entry, run, peaks) for timing_entry in run.timings]
    metrics = {
        "cases": rows,
        "pct": rows[0]["pct"],
        "gbps": rows[0]["gbps"],
        "tflops": rows[0]["tflops"],
        "peaks": peaks,
    }
    impossible = next((r for r in rows if _impossible(r)), None)
    if impossible:
        r = impossible
        past = (
            f"{r['datasheet_pct']:.0f}% of the datasheet's {r['datasheet_value']:g}"
            if r["datasheet_value"]
            else f"{r['pct']:.0f}% of the measured {r['ceiling']} ceiling"
        )
        return RungResult(
            name="roofline",
            ok=False,
            metrics=metrics,
            err=(
                f"{r['case']}: {past} is faster than the device can go: "
                "the timing is not credible (cached or skipped work?) or cost() undercounts"
            ),
        )
    return RungResult(name="roofline", ok=True, metrics=metrics)


def _impossible(row: dict[str, Any]) -> bool:
    if row["datasheet_value"]:
        return bool(row["datasheet_pct"] > 100.0 + DATASHEET_SLACK_PCT)
    return bool(row["pct"] > IMPLAUSIBLE_ROOFLINE_PCT)


def _row(timing_entry: dict[str, Any], run: VersionRun, peaks: dict[str, Any]) -> dict[str, Any]:
    """One bench case's achieved rates, the floor its cost sets on this device, and the ceiling that sets it."""
    case = timing_entry["case"]
    cost = run.problem.cost_of(case)
    seconds = timing_entry["median_us"] * 1e-6
    bandwidth_name, bandwidth = devices.bandwidth_ceiling(peaks)
    matmul_name, matmul = devices.matmul_ceiling(peaks, timing_entry.get("precision", "fp32"))
    memory_s, compute_s = cost["bytes"] / (bandwidth * 1e9), cost["flops"] / (matmul * 1e12)
    memory = memory_s >= compute_s
    sheet = peaks.get("datasheet") or {}
    sheet_value = sheet.get("bandwidth_gbps") if memory else sheet.get(f"{matmul_name}_tflops")
    achieved = cost["bytes"] / seconds / 1e9 if memory else cost["flops"] / seconds / 1e12
    return {
        "case": case_label(case),
        "bytes": cost["bytes"],
        "flops": cost["flops"],
        "gbps": cost["bytes"] / seconds / 1e9,
        "tflops": cost["flops"] / seconds / 1e12,
        "floor_us": max(memory_s, compute_s) * 1e6,
        "pct": 100.0 * max(memory_s, compute_s) / seconds,
        "bound": "memory" if memory else "compute",
        "ceiling": bandwidth_name if memory else f"{matmul_name} matmul",
        "ceiling_value": bandwidth if memory else matmul,
        "ceiling_by": peaks.get(f"{bandwidth_name}_by") if memory else None,  # the kernel that streamed fastest
        "flops_peak_tflops": matmul,
        "datasheet_value": sheet_value,
        "datasheet_pct": 100.0 * achieved / sheet_value if sheet_value else None,
    }
