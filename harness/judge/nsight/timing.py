"""A version's kernels timed from outside its process: Nsight Compute's gpu__time_duration.

The worker's own timings come from inside the version's process, where a version can reach any timer.
Before a version becomes the best on a GPU where `ncu` works, a fresh worker runs under Nsight Compute
(inside the same sandbox): one call to compile and tune, then a few calls inside an NVTX range named by the
judge, the only kernels profiled. Nsight Compute writes its report into a judge-owned folder the confined
version cannot write; the judge reads it as the profile rung does (harness.judge.nsight.report) and sums each
call's kernel durations. Clocks and caches are left as they are
(--clock-control none, --cache-control none) and each call follows the same L2 eviction as the timed calls,
so the figure is a floor an honest median sits above (the median also holds launch gaps). A median far below
it, or no kernel in the range, is `timing-mismatch`.
"""

from __future__ import annotations

import collections
import functools
import secrets
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from harness.contract.messages import MAX_PLACEMENTS, Failure, OutsideRequest
from harness.contract.results import Flag
from harness.judge.cuda_tools import cuda_tool, newest_first
from harness.judge.nsight.report import Metrics, read_report
from harness.problem.load import case_label
from harness.wire import frames as wire
from harness.wire import scratch as scratch_mod
from harness.workers.process import WorkerFailure, WorkerProcess, Wrapper

if TYPE_CHECKING:
    from harness.judge.context import JudgeContext, VersionRun

CALLS = MAX_PLACEMENTS  # a call on each place in memory the worker's timed calls rotate over
METRIC = "gpu__time_duration.sum"
# the SM clock while each kernel ran: with clocks left free, ncu's replay can find the GPU slower than the timed
# calls did, and its time longer by as much
CLOCK_METRIC = "sm__cycles_elapsed.avg.per_second"
METRICS: Metrics = {"time_us": (METRIC, "us"), "clock_mhz": (CLOCK_METRIC, "MHz")}
RATIO, SLACK_US = 0.75, 2.0  # an honest median sits above the kernels' own durations; this far below is not
MAX_REPORT_BYTES = 64 << 20
NCU_TIMEOUT_S = 240.0


def ncu_path() -> str | None:
    """KERNELTUI_NCU (a path, or "none" to turn this off), else `ncu` on PATH or in CUDA's usual places."""
    installed = [*newest_first("/opt/nvidia/nsight-compute/*/ncu"), Path("/usr/local/cuda/bin/ncu")]
    return cuda_tool("KERNELTUI_NCU", "ncu", installed)


def wrapper(ncu: str, range_name: str) -> Wrapper:
    real = Path(ncu).resolve()
    argv = (
        str(real), "--target-processes", "all", "--nvtx", "--nvtx-include", f"{range_name}/",
        "--metrics", f"{METRIC},{CLOCK_METRIC}", "--clock-control", "none", "--cache-control", "none",
        "--export", "{out}/nsight", "--force-overwrite",
    )  # fmt: skip
    return Wrapper(argv=argv, reads=(str(real.parent),))


@dataclass
class Outside:
    """What Nsight Compute saw: per-call kernel time (µs) and each kernel's launches per call."""

    per_call_us: float | None = None
    kernels: dict[str, float] = field(default_factory=dict)
    note: str | None = None  # why there is no figure
    clock_mhz: float | None = None  # the SM clock over its kernels, weighted by their time

    def to_json(self) -> dict[str, Any]:
        figures = {"nsight_us": self.per_call_us, "nsight_kernels": self.kernels, "nsight_note": self.note}
        return {**figures, "nsight_clock_mhz": self.clock_mhz}


def time_outside(judge: JudgeContext, run: VersionRun, case: dict[str, Any]) -> Outside:
    """Runs the version on `case` under Nsight Compute in a fresh worker. A failure of the tool is a note,
    never the version's failure (the version was judged already)."""
    ncu = ncu_path()
    if ncu is None:
        return Outside(note="Nsight Compute (ncu) not found: set KERNELTUI_NCU to its path")
    worker, why = run_under_ncu(judge, run, functools.partial(wrapper, ncu), case, CALLS, "nsight", "timing")
    if worker is None:
        return Outside(note=why)
    try:
        data = scratch_mod.read_file(worker.out, "nsight.ncu-rep", MAX_REPORT_BYTES)
    except scratch_mod.Untrusted as exc:
        return Outside(note=f"Nsight Compute wrote no report ({exc}); its log: {worker.log_tail()[-300:]}")
    with tempfile.TemporaryDirectory(prefix="kerneltui-nsight-") as folder:
        report = Path(folder) / "nsight.ncu-rep"
        report.write_bytes(data)
        try:
            kernels = read_report(report, ncu, METRICS)
        except Exception as exc:  # the tool's failure is a note, never the version's
            return Outside(note=f"its Nsight Compute report could not be read: {type(exc).__name__}: {str(exc)[:200]}")
    return per_call(kernels, CALLS, worker.log_tail())


def run_under_ncu(
    judge: JudgeContext,
    run: VersionRun,
    wrap: Callable[[str], Wrapper],
    case: dict[str, Any],
    calls: int,
    slot: str,
    doing: str,
) -> tuple[WorkerProcess | None, str | None]:
    """A fresh worker under Nsight Compute (`wrap(range_name)`) calls the version on `case`: once to compile and
    tune, then `calls` times inside an NVTX range the judge names; then it exits, as Nsight Compute writes its
    files when the process ends. (the worker, None) to read them from, or (None, why not): a failure of the
    tool is a note, never the version's failure."""
    range_name = f"kerneltui-{secrets.token_hex(8)}"
    worker = judge.pool.take_wrapped(wrap(range_name))
    run.workers[slot] = worker  # released with the others when the evaluation ends
    try:
        loaded = judge.load_into(worker, run)
        if isinstance(loaded, Failure):
            return None, f"it did not load under Nsight Compute: {loaded.err}"
        inputs = run.problem.inputs_for(case, secrets.randbelow(2**31), judge.device)
        tensors: list[torch.Tensor] = []
        tree = wire.encode_tree(list(inputs), tensors)
        request = OutsideRequest(tree, range_name, calls)
        with judge.pool.quiet(worker):
            reply, _ = worker.ask(request, tensors, NCU_TIMEOUT_S, f"{doing} under Nsight Compute")
        if isinstance(reply, Failure):
            return None, f"under Nsight Compute it failed: {reply.err}"
        if not worker.ask_to_exit(NCU_TIMEOUT_S / 2):
            return None, "Nsight Compute did not finish writing its files in time"
    except WorkerFailure as exc:
        return None, f"Nsight Compute: {str(exc)[:300]}"
    return worker, None


def per_call(kernels: list[dict[str, Any]], calls: int, log: str = "") -> Outside:
    """The kernels Nsight Compute profiled in the judge's range (over `calls` calls) as per-call figures. None
    profiled: no figure, and Nsight Compute's own error from its `log` as the note where it wrote one (no note: it
    ran and the kernels hid from it)."""
    timed = [k for k in kernels if k.get("time_us") is not None]
    if not timed:
        errors = [line for line in log.splitlines() if line.startswith("==ERROR==")]
        return Outside(note=errors[0][:300] if errors else None, kernels={})
    launches = collections.Counter(str(k.get("name", "?"))[:200] for k in timed)
    total_us = sum(float(k["time_us"]) for k in timed)
    clocked = [k for k in timed if k.get("clock_mhz")]
    clocked_us = sum(float(k["time_us"]) for k in clocked)
    clock = sum(float(k["clock_mhz"]) * float(k["time_us"]) for k in clocked) / clocked_us if clocked_us else None
    per_call = {name: n / calls for name, n in launches.most_common(16)}
    return Outside(per_call_us=total_us / calls, kernels=per_call, clock_mhz=round(clock, 1) if clock else None)


def outside_flag(median_us: float, outside: Outside, case: dict[str, Any]) -> Flag | None:
    label = case_label(case)
    if outside.per_call_us is None:
        if outside.note is None:  # the tool ran and profiled nothing in the range: the kernels hid from it
            return Flag(
                "timing-mismatch",
                f"{label}: Nsight Compute saw no kernel inside the judge's timed calls (an NVTX range the version "
                "can end or rename), so its timings could not be checked from outside",
            )
        return None
    if median_us >= RATIO * outside.per_call_us - SLACK_US:
        return None
    return Flag(
        "timing-mismatch",
        f"{label}: its own timings say {median_us:.1f} µs a call, but Nsight Compute timed its kernels at "
        f"{outside.per_call_us:.1f} µs a call (gpu__time_duration, from outside its process)",
    )


def names_flag(outside: Outside, recorded: set[str], case: dict[str, Any]) -> Flag | None:
    """Nsight Compute's range must run the kernels the recorded calls ran (CUDA kernels no torch op launched): a
    version can tell it is profiled and run a library there, whose time then matches its own timings."""
    if not outside.kernels or not recorded:
        return None
    if any(mine == name or mine in name for name in outside.kernels for mine in recorded):
        return None
    seen = ", ".join(sorted(outside.kernels)[:3])
    return Flag(
        "timed-not-recorded",
        f"{case_label(case)}: under Nsight Compute it ran none of the kernels its recorded calls ran "
        f"({', '.join(sorted(recorded)[:3])}), but {seen}",
    )
