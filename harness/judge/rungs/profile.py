"""Profile (asked for, never in the default judge): the version's own kernels under Nsight Compute.

A fresh worker runs under `ncu` inside the same sandbox, as for harness.judge.nsight.timing: one call to compile and
tune,
then one call inside an NVTX range the judge names, the only kernels profiled (the sections in SECTIONS: speed
of light, memory and compute workload, occupancy, launch statistics, warp states, scheduler, source counters, the
roofline chart; clocks left as they are). The .ncu-rep report is
kept beside the dumps, where Nsight Compute's own UI opens it, and read with NVIDIA's ncu_report module
(harness.judge.nsight.report), not scraped from text. A missing tool or counters the user may not read are a skip
that says how to get them, never the version's failure.
"""

from __future__ import annotations

import functools
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from harness.contract.messages import Failure, RegionsRequest
from harness.contract.results import RungResult
from harness.judge.nsight import timing as nsight
from harness.judge.nsight.findings import findings
from harness.judge.nsight.report import Metrics, read_report
from harness.problem.load import case_label
from harness.problem.rung import rung
from harness.wire import frames as wire
from harness.wire import scratch as scratch_mod
from harness.worker import regions as in_kernel
from harness.workers.process import WorkerFailure, Wrapper

if TYPE_CHECKING:
    from harness.judge.context import JudgeContext, VersionRun

SECTIONS = (
    "SpeedOfLight", "MemoryWorkloadAnalysis", "ComputeWorkloadAnalysis", "Occupancy", "LaunchStats",
    "WarpStateStats", "SchedulerStats", "SourceCounters", "SpeedOfLight_RooflineChart",
)  # fmt: skip
# Our name -> (Nsight Compute's metric, the unit we keep it in)
METRICS: Metrics = {
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
    "waves": ("launch__waves_per_multiprocessor", ""),
    "dram_pct": ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "%"),
    "l2_pct": ("lts__throughput.avg.pct_of_peak_sustained_elapsed", "%"),
    "l1_pct": ("l1tex__throughput.avg.pct_of_peak_sustained_active", "%"),
    "issue_pct": ("smsp__issue_active.avg.pct_of_peak_sustained_active", "%"),
    "limit_blocks": ("launch__occupancy_limit_blocks", ""),
    "limit_registers": ("launch__occupancy_limit_registers", ""),
    "limit_shared_mem": ("launch__occupancy_limit_shared_mem", ""),
    "limit_warps": ("launch__occupancy_limit_warps", ""),
}
# Our name -> a metric prefix: every stall reason, cycles per issued instruction (WarpStateStats), and the
# sampled warp states (SourceCounters) where those are missing
FAMILIES = {"stalls": "smsp__average_warps_issue_stalled_", "stall_samples": "smsp__pcsamp_warps_issue_stalled_"}
STALL_SUFFIX = "_per_issue_active.ratio"
TOP_STALLS = 6
KERNELS_WITH_FINDINGS = 4  # the longest; the rest keep their figures
MAX_REPORT_BYTES = 256 << 20
MAX_KERNELS = 32
NO_PERMISSION = (
    "GPU performance counters are not permitted for this user (ERR_NVGPUCTRPERM): run as root, or load the "
    "driver with NVreg_RestrictProfilingToAdminUsers=0 (https://developer.nvidia.com/ERR_NVGPUCTRPERM)"
)


@rung("profile", needs=("correctness",))
def profile(judge: JudgeContext, run: VersionRun) -> RungResult:
    if not judge.cuda:
        return RungResult.skip("profile", "no GPU: Nsight Compute profiles kernels as they run")
    case = (run.problem.bench_cases or run.problem.cases)[0]
    regions = _regions(judge, run, case)
    figures, why = _nsight_figures(judge, run, case)
    if figures is None and "regions" not in regions:
        return RungResult.skip("profile", why or "Nsight Compute wrote no report")
    return RungResult(
        name="profile", ok=True, metrics={**(figures or {"case": case_label(case), "ncu_note": why}), **regions}
    )


def _nsight_figures(
    judge: JudgeContext, run: VersionRun, case: dict[str, Any]
) -> tuple[dict[str, Any] | None, str | None]:
    ncu = nsight.ncu_path()
    if ncu is None:
        return None, "Nsight Compute (ncu) not found: install it or set KERNELTUI_NCU"
    report, why = _profile_into(judge, run, ncu, case)
    if report is None:
        return None, why or "Nsight Compute wrote no report"
    try:
        kernels = [digested(k) for k in read_report(report, ncu, METRICS, FAMILIES, rules=True)[:MAX_KERNELS]]
    except Exception as exc:  # the report could not be read here: keep it, say so
        return None, f"{report} could not be read: {type(exc).__name__}: {str(exc)[:200]}"
    if not kernels:
        return None, "Nsight Compute profiled no kernel inside the judge's call"
    return summarize(kernels, report, case), None


def _regions(judge: JudgeContext, run: VersionRun, case: dict[str, Any]) -> dict[str, Any]:
    """{"regions": [...]} the version marks in its kernels, timed by proton in a fresh worker of their own (the
    kernels are compiled again, instrumented), or {"regions_note": why not}; {} where it marks none."""
    if "triton" not in run.dsls or not in_kernel.marks_regions(run.text):
        return {}
    worker = judge.pool.take("run")
    run.workers["regions"] = worker  # released with the others when the evaluation ends
    try:
        loaded = judge.load_into(worker, run)
        if isinstance(loaded, Failure):
            return {"regions_note": f"it did not load for proton: {loaded.err}"}
        tensors: list[torch.Tensor] = []
        tree = wire.encode_tree(list(run.problem.inputs_for(case, secrets.randbelow(2**31), judge.device)), tensors)
        reply, _ = worker.ask(RegionsRequest(tree), tensors, judge.options.timeout, "under proton")
    except WorkerFailure as exc:
        return {"regions_note": f"proton: {str(exc).splitlines()[0][:300]}"}
    if isinstance(reply, Failure):
        return {"regions_note": f"proton: {reply.err[:300]}"}
    regions = in_kernel.regions_from(reply.regions)
    return {"regions": regions} if regions else {"regions_note": "proton recorded no region in its kernels"}


def _profile_into(
    judge: JudgeContext, run: VersionRun, ncu: str, case: dict[str, Any]
) -> tuple[Path | None, str | None]:
    """Runs one call under Nsight Compute; the report copied out of the worker's folder next to the dumps."""
    worker, why = nsight.run_under_ncu(judge, run, functools.partial(wrapper, ncu), case, 1, "profile", "profiling")
    if worker is None:
        return None, why
    try:
        data = scratch_mod.read_file(worker.out, "profile.ncu-rep", MAX_REPORT_BYTES)
    except scratch_mod.Untrusted as exc:
        log = worker.log_tail()
        return None, NO_PERMISSION if "ERR_NVGPUCTRPERM" in log else f"no report ({exc}); its log: {log[-300:]}"
    root = judge.options.state_dir or run.path.parent.parent / ".kerneltui"
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


def digested(kernel: dict[str, Any]) -> dict[str, Any]:
    """A kernel as read, its stall reasons cut to the top few and its rule results made findings."""
    kernel = dict(kernel)
    ratios = kernel.pop("stalls", None) or {}
    stalls = {r.removesuffix(STALL_SUFFIX): v for r, v in ratios.items() if r.endswith(STALL_SUFFIX) and _a_stall(r)}
    sampled = kernel.pop("stall_samples", None) or {}
    samples = {r: v for r, v in sampled.items() if "." not in r and _a_stall(r)}
    kernel["stalls"] = _top(stalls)
    kernel["stall_samples"] = _top(samples) if not stalls else {}
    kernel["findings"] = findings(kernel.pop("rules", None) or [])
    return kernel


def _a_stall(reason: str) -> bool:
    """A reason warps wait, not issuing ("selected") nor the count of the same reason's unissued cycles."""
    return "not_issued" not in reason and not reason.startswith("selected")


def _top(figures: dict[str, float]) -> dict[str, float]:
    ranked = sorted(((k, v) for k, v in figures.items() if v > 0), key=lambda item: -item[1])
    return dict(ranked[:TOP_STALLS])


def summarize(kernels: list[dict[str, Any]], report: Path, case: dict[str, Any]) -> dict[str, Any]:
    """Per kernel as read, and the call's whole: time and DRAM bytes summed, rates over that time, the
    percentages and occupancy of the kernel that took longest. Findings are kept for the longest few kernels."""
    longest = sorted(kernels, key=lambda k: -(k.get("time_us") or 0.0))[:KERNELS_WITH_FINDINGS]
    kernels = [k if any(k is kept for kept in longest) else {**k, "findings": []} for k in kernels]
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
        "main_index": next(i for i, k in enumerate(kernels) if k is main),
    }
    return {"case": case_label(case), "kernels": kernels, "whole": whole, "report": str(report)}
