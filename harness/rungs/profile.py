"""Profile (asked for, never in the default ladder): the version's own kernels under Nsight Compute.

A fresh worker runs under `ncu` inside the same sandbox, as for harness.nsight: one call to compile and tune,
then one call inside an NVTX range the judge names, the only kernels profiled (Speed Of Light, memory
workload, occupancy, launch statistics, the roofline chart; clocks left as they are). The .ncu-rep report is
kept beside the dumps, where Nsight Compute's own UI opens it, and read with NVIDIA's ncu_report module
(shipped with Nsight Compute), not scraped from text. A missing tool or counters the user may not read are a
skip that says how to get them, never the version's failure.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness import nsight
from harness import scratch as scratch_mod
from harness.results import RungResult
from harness.rungs import rung
from harness.workers import Wrapper

if TYPE_CHECKING:
    from harness.ladder import Ladder, VersionRun

SECTIONS = ("SpeedOfLight", "MemoryWorkloadAnalysis", "Occupancy", "LaunchStats", "SpeedOfLight_RooflineChart")
# Our name -> (Nsight Compute's metric, the unit we keep it in)
METRICS: dict[str, tuple[str, str]] = {
    "time_us": ("gpu__time_duration.sum", "us"),
    "dram_bytes": ("dram__bytes.sum", "byte"),
    "dram_gbps": ("dram__bytes.sum.per_second", "GB/s"),
    "sm_pct": ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "%"),
    "memory_pct": ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "%"),
    "occupancy_pct": ("sm__warps_active.avg.pct_of_peak_sustained_active", "%"),
    "theoretical_occupancy_pct": ("sm__maximum_warps_per_active_cycle_pct", "%"),
    "registers": ("launch__registers_per_thread", ""),
    "block": ("launch__block_size", ""),
    "grid": ("launch__grid_size", ""),
    "smem_bytes": ("launch__shared_mem_per_block", "byte"),
}
MAX_REPORT_BYTES = 256 << 20
MAX_KERNELS = 32
NO_PERMISSION = (
    "GPU performance counters are not permitted for this user (ERR_NVGPUCTRPERM): run as root, or load the "
    "driver with NVreg_RestrictProfilingToAdminUsers=0 (https://developer.nvidia.com/ERR_NVGPUCTRPERM)"
)
SCALE = {  # a unit Nsight Compute may report in -> the factor to ours
    "nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6,
    "byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12,
    "byte/second": 1e-9, "Kbyte/second": 1e-6, "Mbyte/second": 1e-3, "Gbyte/second": 1.0, "Tbyte/second": 1e3,
}  # fmt: skip


@rung("profile", needs=("correctness",))
def profile(ladder: Ladder, run: VersionRun) -> RungResult:
    if not ladder.cuda:
        return RungResult.skip("profile", "no GPU: Nsight Compute profiles kernels as they run")
    ncu = nsight.ncu_path()
    if ncu is None:
        return RungResult.skip("profile", "Nsight Compute (ncu) not found: install it or set KERNELTUI_NCU")
    case = (run.problem.bench_cases or run.problem.cases)[0]
    report, why = _profile_into(ladder, run, ncu, case)
    if report is None:
        return RungResult.skip("profile", why or "Nsight Compute wrote no report")
    try:
        kernels = read_report(report, ncu)
    except Exception as exc:  # the report could not be read here: keep it, say so
        return RungResult.skip("profile", f"{report} could not be read: {type(exc).__name__}: {str(exc)[:200]}")
    if not kernels:
        return RungResult.skip("profile", "Nsight Compute profiled no kernel inside the judge's call")
    return RungResult(name="profile", ok=True, metrics=summarize(kernels, report, case))


def _profile_into(ladder: Ladder, run: VersionRun, ncu: str, case: dict[str, Any]) -> tuple[Path | None, str | None]:
    """Runs one call under Nsight Compute; the report copied out of the worker's folder next to the dumps."""
    worker, why = nsight.run_under_ncu(ladder, run, functools.partial(wrapper, ncu), case, 1, "profile", "profiling")
    if worker is None:
        return None, why
    try:
        data = scratch_mod.read_file(worker.out, "profile.ncu-rep", MAX_REPORT_BYTES)
    except scratch_mod.Untrusted as exc:
        log = worker.log_tail()
        return None, NO_PERMISSION if "ERR_NVGPUCTRPERM" in log else f"no report ({exc}); its log: {log[-300:]}"
    root = ladder.options.state_dir or run.path.parent.parent / ".kerneltui"
    dest = root / "dumps" / run.problem.name / run.path.stem / run.ev.hash[:12] / "profile.ncu-rep"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(data)
    return dest, None


def wrapper(ncu: str, range_name: str) -> Wrapper:
    real = Path(ncu).resolve()
    sections = [arg for name in SECTIONS for arg in ("--section", name)]
    metrics = ",".join(metric for metric, _ in METRICS.values())
    argv = (
        str(real), "--target-processes", "all", "--nvtx", "--nvtx-include", f"{range_name}/",
        *sections, "--metrics", metrics, "--clock-control", "none",
        "--export", "{out}/profile", "--force-overwrite",
    )  # fmt: skip
    return Wrapper(argv=argv, reads=(str(real.parent),))


def read_report(path: Path, ncu: str) -> list[dict[str, Any]]:
    """Each profiled kernel's figures, from the report through ncu_report (in Nsight Compute's extras/python)."""
    extras = Path(ncu).resolve().parent / "extras" / "python"
    if str(extras) not in sys.path:
        sys.path.append(str(extras))
    import ncu_report

    context = ncu_report.load_report(str(path))
    kernels: list[dict[str, Any]] = []
    for r in range(context.num_ranges()):
        profiled = context.range_by_idx(r)
        for a in range(profiled.num_actions()):
            action = profiled.action_by_idx(a)
            figures = {ours: _metric(action, name, unit) for ours, (name, unit) in METRICS.items()}
            kernels.append({"name": str(action.name())[:200], **figures})
    return kernels[:MAX_KERNELS]


def _metric(action: Any, name: str, unit: str) -> float | None:
    metric = action.metric_by_name(name)
    if metric is None:
        return None
    value = float(metric.as_double())
    if unit in ("", "%"):
        return value
    return value * SCALE.get(str(metric.unit()), 1.0)


def summarize(kernels: list[dict[str, Any]], report: Path, case: dict[str, Any]) -> dict[str, Any]:
    """Per kernel as read, and the call's whole: time and DRAM bytes summed, rates over that time, the
    percentages and occupancy of the kernel that took longest."""
    from harness.problem import case_label

    total_us = sum(k.get("time_us") or 0.0 for k in kernels)
    dram = sum(k.get("dram_bytes") or 0.0 for k in kernels)
    main = max(kernels, key=lambda k: k.get("time_us") or 0.0)
    whole = {
        "time_us": total_us,
        "dram_bytes": dram,
        "dram_gbps": dram / (total_us * 1e3) if total_us else None,
        **{k: main.get(k) for k in ("sm_pct", "memory_pct", "occupancy_pct", "theoretical_occupancy_pct")},
        "registers": main.get("registers"),
        "main_kernel": main["name"],
    }
    return {"case": case_label(case), "kernels": kernels, "whole": whole, "report": str(report)}
