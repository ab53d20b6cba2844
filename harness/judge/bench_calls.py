"""A version's bench case timed in a worker (its calls' output checked again) and the reference's timed by the
judge: the calls the benchmark rung, the race against the best and the confirmation in a fresh worker share."""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from harness.containment import watch as containment
from harness.contract.messages import BenchReply, BenchRequest, Failure
from harness.judge import clocks
from harness.judge.clocks import ClockSampler
from harness.judge.device import MATMULS
from harness.judge.outputs import clone_inputs, judge_outputs, returned
from harness.problem.load import Problem, case_label
from harness.wire import frames as wire
from harness.wire import shared_block
from harness.workers.process import WorkerFailure, WorkerProcess

if TYPE_CHECKING:
    from harness.gpu import timing
    from harness.judge.context import JudgeContext, VersionRun

# Time until the whole device is idle (less a synchronize's latency) may exceed the time on the caller's
# stream by this much before the version is taken to leave work on a stream nobody waits for.
UNAWAITED_RATIO, UNAWAITED_US = 1.05, 5.0
REFERENCE_TTL_S = 600.0


@dataclass
class BenchInputs:
    """One bench case's inputs, and the reference's answer on them once the first outputs on them came back:
    computed once, not again for every round timed on the same inputs (a reference may take seconds)."""

    case: dict[str, Any]
    values: tuple[Any, ...]
    answer: Any = None

    @classmethod
    def fresh(cls, judge: JudgeContext, problem: Problem, case: dict[str, Any]) -> BenchInputs:
        """Inputs of a fresh secret seed."""
        return cls(case, problem.inputs_for(case, secrets.randbelow(2**31), judge.device))

    @property
    def label(self) -> str:
        return case_label(self.case)

    def expected(self, problem: Problem) -> Any:
        if self.answer is None:
            self.answer = problem.reference(*self.values)
        return self.answer


def bench_inputs(judge: JudgeContext, problem: Problem, maker: ThreadPoolExecutor) -> Iterator[BenchInputs]:
    """Each bench case's inputs (fresh seeds), the next made in `maker` while the one before is timed: a case's
    inputs take make_inputs ~0.5 s (a CPU generator for 67M values), the next verdict's wait. Not where two
    sets would take more than a quarter of the device's free memory."""
    cases = problem.bench_cases
    upcoming: Future[BenchInputs] | None = maker.submit(BenchInputs.fresh, judge, problem, cases[0])
    for index, case in enumerate(cases):
        bench = upcoming.result() if upcoming is not None else BenchInputs.fresh(judge, problem, case)
        upcoming = None
        if index + 1 < len(cases) and _room_for_another(bench.values, judge.device):
            upcoming = maker.submit(BenchInputs.fresh, judge, problem, cases[index + 1])
        yield bench


def _room_for_another(inputs: tuple[Any, ...], device: torch.device) -> bool:
    size = sum(t.numel() * t.element_size() for t in inputs if isinstance(t, torch.Tensor))
    return device.type != "cuda" or shared_block.fits("cuda", 2 * size)


def bench_case(
    judge: JudgeContext,
    run: VersionRun,
    worker: WorkerProcess,
    case: dict[str, Any],
    reference: bool = True,
    bench: BenchInputs | None = None,
) -> tuple[dict[str, Any], str | None]:
    """Times one bench case in `worker` (on `bench`, else on inputs of a fresh seed), checks the timed calls'
    output, times the reference (unless `reference` is False: a case timed again needs only the version's
    median)."""
    from harness.gpu import timing

    judge.between(run)  # before the clocks are sampled: another version's verdict may come first
    bench = bench or BenchInputs.fresh(judge, run.problem, case)
    inputs, label = bench.values, bench.label
    if judge.clocks is None:
        judge.clocks = ClockSampler.for_current_device()
    judge.clocks.start()
    try:
        reply, err = timed_calls(judge, run, worker, bench, judge.options.bench_budget_s)
    finally:
        clocks = judge.clocks.stop()
    if err is not None or reply is None:
        return {}, err
    run.observed.add(reply.recorded, "run", f"bench case {label}", profiled=worker.profiles_calls)
    run.timed.add(reply.timed_watch, f"bench case {label}", reply.recorded, run.problem.allows)
    kernel = timing.summarize(checked_samples(reply.samples_ms), reply.placement_of)
    settled_us, unawaited = _unawaited_work(kernel, reply)
    if unawaited:
        return {}, f"{label}: {unawaited}"
    device = {**device_figures(reply), "clocks": clocks}
    if not reference:
        return {"case": label, **kernel.to_json(), **device}, None
    ref_timing = reference_timing(judge, run.problem, label, inputs, run)
    entry = {
        "case": label,
        **kernel.to_json(),
        **device,
        "settled_us": settled_us,
        "ref_median_us": ref_timing.median_us,
        "speedup": ref_timing.median_us / kernel.median_us if kernel.median_us > 0 else None,
    }
    run.timings.append({**entry, "case": case, "precision": precision(run.problem, case, inputs)})
    return entry, None


def reference_timing(
    judge: JudgeContext, problem: Problem, label: str, inputs: tuple[Any, ...], run: VersionRun | None = None
) -> timing.Timing:
    """The reference's timing on a bench case: measured by the judge, and kept for REFERENCE_TTL_S (the same
    problem.py and case: a second of every evaluation spent on a figure that does not change)."""
    from harness.gpu import timing

    key = (problem.hash, label)
    kept = judge.reference_times.get(key)
    if kept is not None and time.monotonic() - kept[0] < REFERENCE_TTL_S:
        return kept[1]
    if judge.flush is None:
        judge.flush = timing.flush_buffer(judge.device)
    used: list[int] = []
    call = timing.rotating(problem.reference, timing.placed_copies(inputs), used)  # as the version's calls rotate
    with alone(judge, run, None, f"the reference on {label}"):
        samples = timing.time_calls(call, judge.flush, budget_s=judge.options.bench_budget_s)
    measured = timing.summarize(samples, used[-len(samples) :])
    judge.reference_times[key] = (time.monotonic(), measured)
    return measured


@contextlib.contextmanager
def alone(judge: JudgeContext, run: VersionRun | None, timed: WorkerProcess | None, what: str) -> Iterator[None]:
    """While `timed` (None: the judge itself) is timed, every other worker holding a version is stopped; on a GPU,
    NVML's per-process samples then tell whether a process of this version's other workers computed anyway (work
    it left running on the device as it was stopped)."""
    handle = judge.clocks.handle if judge.clocks is not None else None
    since = clocks.now_us()
    with judge.pool.quiet(timed):
        yield
        until = clocks.now_us()  # before the others go on
    busy = clocks.busy_processes(handle, since, until)
    if busy and run is not None:
        table = containment.processes()
        for worker in run.workers.values():
            if worker is not timed and busy & set(containment.tree(worker.proc.pid, table)):
                run.timed.intruded(what)


def timed_calls(
    judge: JudgeContext,
    run: VersionRun,
    worker: WorkerProcess,
    bench: BenchInputs,
    budget_s: float,
    sent: bool = False,
    race: bool = False,
) -> tuple[BenchReply | None, str | None]:
    """Calls timed in `worker` on `bench`'s inputs for about `budget_s`, their output checked against the reference:
    the worker's reply, or the error (with the reply where the calls were timed but their output is wrong).
    `sent`: the worker's last bench request had these inputs, which it kept (not sent again: a bench case of
    gigabytes takes seconds through the socket; whatever the version did to them in between shows in the output,
    checked against the reference of the judge's own copy). `race`: a round of a race, timed calls only (no
    recorded call, no time to an idle device: the benchmark had them)."""
    inputs, label = bench.values, bench.label
    tensors: list[torch.Tensor] = []
    if sent:
        request = BenchRequest(budget_s, race, same_inputs=True)
    else:
        request = BenchRequest(budget_s, race, inputs=wire.encode_tree(list(inputs), tensors))
    timeout = judge.options.timeout + 4 * budget_s
    with alone(judge, run, worker, f"the {'race round' if race else 'benchmark'} of {label}"):
        reply, got = worker.ask(request, tensors, timeout, f"benchmarking {label}")
    if isinstance(reply, Failure):
        return None, f"{label}: {reply.err}"
    outputs, _ = returned(run.problem, reply, got, inputs)
    pristine = clone_inputs(inputs) if run.problem.check else None  # the check gets the inputs as sent
    expected = bench.expected(run.problem)
    err, _ = judge_outputs(run, outputs, expected, list(reply.devices), inputs=pristine)
    if err:
        return reply, f"{label}: the timed calls' output is wrong: {err}"
    return reply, None


def time_case(judge: JudgeContext, run: VersionRun, worker: WorkerProcess, case: dict[str, Any]) -> dict[str, Any]:
    """One bench case timed again in another worker: its timings (µs), the device time's among them."""
    entry, err = bench_case(judge, run, worker, case, reference=False)
    if err is not None:
        raise WorkerFailure(f"timed again in a fresh worker: {err}")
    return entry


def _unawaited_work(kernel: timing.Timing, reply: BenchReply) -> tuple[float, str | None]:
    """Time until the device is idle, less the synchronize's latency (µs), and the error when the device stayed
    busy after the caller's stream was done (the tails, less the same latency) by more than a margin of the time on
    that stream. Minima: that latency only ever adds, and varies by microseconds."""
    settled_ms = min(checked_samples(reply.settled_ms)) - min(checked_samples(reply.idle_ms))
    settled_us = 1000 * settled_ms
    outlasted_us = 1000 * (min(checked_samples(reply.tail_ms)) - min(checked_samples(reply.idle_tail_ms)))
    if outlasted_us <= kernel.min_us * (UNAWAITED_RATIO - 1) + UNAWAITED_US:
        return settled_us, None
    return settled_us, (
        f"its work outlasts the call on the caller's stream: the device stayed busy {outlasted_us:.1f} µs after the "
        f"caller's stream was done ({kernel.min_us:.1f} µs timed on it; work on a stream the caller's stream never "
        "waits for)"
    )


def device_figures(reply: BenchReply) -> dict[str, Any]:
    """The calls' device time from CUPTI (the sum of their kernels' durations), beside the event timings."""
    from harness.gpu import timing

    samples = reply.device_ms
    if not samples:
        return {"device_note": (reply.device_note or "no device times")[:300]}
    device = timing.summarize([max(float(s), 1e-9) for s in samples], reply.device_placement_of)
    return {"device_median_us": device.median_us, "device_min_us": device.min_us, "device_n": device.n}


def checked_samples(samples: tuple[float, ...] | None) -> list[float]:
    """Timings to summarize: some, each above 0 (their types and bounds were checked as the reply was read)."""
    if not samples or not all(s > 0 for s in samples):
        raise WorkerFailure("the kernel's process sent no usable timings")
    return list(samples)


def precision(problem: Problem, case: dict[str, Any], inputs: tuple[Any, ...]) -> str:
    """fp8, bf16, fp16 or fp32: which matrix units' ceiling applies. cost() may say (`dtype`), else the inputs'
    lowest-precision floating type does."""
    declared = problem.cost(dict(case)).get("dtype")
    if isinstance(declared, str):
        name = declared.lower()
        if "fp8" in name or "float8" in name:
            return "fp8"
        return {"bfloat16": "bf16", "float16": "fp16", "half": "fp16"}.get(name, name if name in MATMULS else "fp32")
    dtypes = {t.dtype for t in inputs if isinstance(t, torch.Tensor)}
    if any(d.is_floating_point and d.itemsize == 1 for d in dtypes):
        return "fp8"
    for dtype, name in ((torch.bfloat16, "bf16"), (torch.float16, "fp16")):
        if dtype in dtypes:
            return name
    return "fp32"
