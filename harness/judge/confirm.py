"""Checks of a version's timings that do not take its word for them.

The version's worker times its own calls, so a version can lie about them (its process is its own: in
the end it can reach any timer there). Two checks stand outside it:
- a bound from the judge's side: single calls, each followed by a device-wide synchronize and an answer,
  timed by the judge from request to reply, less a ping's round trip. A version whose reported median
  sits far below that bound reported times its calls cannot have had (flag `timing-mismatch`);
- before a version can become the best, it is judged again in a fresh worker, on fresh seeds and on
  variations of the bench case it has not seen (a memo keyed on the shape, a special case for the bench
  shape, fail there), its first bench case computed twice into differently poisoned memory (the same bytes,
  harness.judge.determinism), run under compute-sanitizer's tools on a GPU (harness.judge.sanitizer), and timed
  again there: a median far from the first one is flagged; on a GPU its kernels
  are also timed from outside its process by Nsight Compute where it works (harness.judge.nsight.timing).
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from harness.contract.messages import CallRequest, Failure, LaunchRequest, OnceRequest
from harness.contract.results import Flag
from harness.judge import determinism, sanitizer
from harness.judge.bench_calls import time_case
from harness.judge.nsight import timing as nsight
from harness.judge.outputs import clone_inputs, judge_outputs, returned
from harness.problem.load import Problem, case_label
from harness.wire import frames as wire
from harness.workers.process import WorkerFailure, WorkerProcess

if TYPE_CHECKING:
    from harness.judge.context import JudgeContext, VersionRun

OUTSIDE_BUDGET_S, OUTSIDE_MAX_REPS = 0.3, 30
# A version's median may sit below the judge-side bound by noise and synchronize latency, never by this much.
OUTSIDE_RATIO, OUTSIDE_SLACK_US = 0.75, 100.0
FRESH_RATIO = 1.15  # a fresh worker's median this far from the first: one of them was not the kernel's time


def outside_bound_us(worker: WorkerProcess, timeout: float, inputs: tuple[Any, ...] | None = None) -> float | None:
    """The fastest single call, synchronize and answer as the judge times it, less the fastest call answered
    before the device finishes (µs): GPU time the version's calls must have had, its host overhead (CuTeDSL's
    launch path takes ~170 µs) and the round trip left out. On the last bench inputs, or `inputs`.

    A version that launches its kernel early in a slow call shrinks the bound, never raises it: false flags
    are ruled out, not every fake; Nsight Compute (harness.judge.nsight.timing) times a would-be best from outside."""

    def fastest(kind: type[OnceRequest | LaunchRequest]) -> float:
        best, start, reps = float("inf"), time.perf_counter(), 0
        while reps < 3 or (reps < OUTSIDE_MAX_REPS and time.perf_counter() - start < OUTSIDE_BUDGET_S):
            tensors: list[torch.Tensor] = []
            request = kind() if inputs is None else kind(wire.encode_tree(list(inputs), tensors))
            sent = time.perf_counter()
            reply, _ = worker.ask(request, tensors, timeout, f"timing a call from outside ({kind.op})")
            elapsed = time.perf_counter() - sent
            if isinstance(reply, Failure):
                raise WorkerFailure(reply.err or f"{kind.op} failed")
            best, reps = min(best, elapsed), reps + 1
        return best

    host = fastest(LaunchRequest)
    return max(0.0, fastest(OnceRequest) - host) * 1e6


def outside_flag(median_us: float, bound_us: float | None, label: str) -> Flag | None:
    if bound_us is None or median_us >= OUTSIDE_RATIO * bound_us - OUTSIDE_SLACK_US:
        return None
    return Flag(
        "timing-mismatch",
        f"{label}: its own timings say {median_us:.1f} µs a call, but a call timed from the judge's side "
        f"(call, synchronize, answer) took at least {bound_us:.1f} µs",
    )


def vary(problem: Problem, case: dict[str, Any], seed: int) -> dict[str, Any]:
    """A case like `case` that the version has not seen: the problem's own vary(case, seed) where it has one,
    else each integer above 64 made a little smaller, keeping its alignment (up to 16)."""
    custom = getattr(problem.module, "vary", None)
    if callable(custom):
        return dict(custom(dict(case), seed))
    out = dict(case)
    for offset, (key, value) in enumerate(case.items()):
        if isinstance(value, int) and not isinstance(value, bool) and value > 64:
            unit = min(16, value & -value)
            out[key] = value - unit * (1 + (seed + offset) % 3)
    return out


@dataclass
class Confirmation:
    err: str | None = None
    flags: list[Flag] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)


def confirm(judge: JudgeContext, run: VersionRun, first: dict[str, Any]) -> Confirmation:
    """Judges the version again in a fresh worker: variations of every bench case, then the first bench case
    timed anew (`first`: its timing in the first worker). An error is the version's failure; a timing far from
    the first is a flag."""
    first_median_us = float(first["median_us"])

    worker = judge.pool.take("run")
    run.workers["confirm"] = worker  # released with the others when the evaluation ends
    loaded = judge.load_into(worker, run)
    if isinstance(loaded, Failure):
        return Confirmation(err=f"it did not load again in a fresh worker: {loaded.err}")
    problem, device = run.problem, judge.device
    result = Confirmation()
    for case in problem.bench_cases:
        seed = secrets.randbelow(2**31)
        varied = vary(problem, case, seed)
        inputs = problem.inputs_for(varied, seed, device)
        tensors: list[torch.Tensor] = []
        tree = wire.encode_tree(list(inputs), tensors)
        reply, got = worker.ask(CallRequest(tree), tensors, judge.options.timeout, "")
        if isinstance(reply, Failure):
            return Confirmation(err=f"on {case_label(varied)} (a variation of the bench case): {reply.err}")
        outputs, _ = returned(problem, reply, got, inputs)
        pristine = clone_inputs(inputs) if problem.check else None
        expected = problem.reference(*inputs)
        err, _ = judge_outputs(run, outputs, expected, [], inputs=pristine)
        if err:
            return Confirmation(err=f"wrong on {case_label(varied)}, a variation of the bench case: {err}")
        result.metrics.setdefault("variations", []).append(case_label(varied))
    seed = secrets.randbelow(2**31)
    differs = determinism.twice(problem, worker, problem.bench_cases[0], seed, device, judge.options.timeout)
    if differs is not None:
        return Confirmation(err=f"on the bench case: {differs}")
    if judge.cuda and judge.options.sanitize_best and "sanitize" not in judge.options.rungs:
        checked = sanitizer.check(judge, run)
        result.metrics["sanitizer"] = checked.to_json()
        if checked.failure():
            return Confirmation(err=checked.failure(), metrics=result.metrics)
    again = time_case(judge, run, worker, problem.bench_cases[0])
    result.metrics["fresh_median_us"] = again["median_us"]
    if again.get("device_median_us") is not None:
        result.metrics["fresh_device_median_us"] = again["device_median_us"]
    if judge.cuda:
        outside = nsight.time_outside(judge, run, problem.bench_cases[0])
        result.metrics.update(outside.to_json())
        flag = nsight.outside_flag(first_median_us, outside, problem.bench_cases[0])
        result.flags += [flag] if flag else []
        flag = nsight.names_flag(outside, set(run.observed.cuda_kernels), problem.bench_cases[0])
        result.flags += [flag] if flag else []
    flag = fresh_flag(first, again, case_label(problem.bench_cases[0]))
    result.flags += [flag] if flag else []
    return result


def fresh_flag(first: dict[str, Any], again: dict[str, Any], label: str) -> Flag | None:
    """`timing-mismatch` when the fresh worker's median is far from the first worker's. Not when only the event
    times differ and both workers' device times (CUPTI) agree: a slow host launch path puts the host's speed,
    which varies, into the event time, not a different kernel."""

    def apart(a: Any, b: Any) -> bool:
        return max(a, b) > FRESH_RATIO * min(a, b)

    if not apart(first["median_us"], again["median_us"]):
        return None
    devices = first.get("device_median_us"), again.get("device_median_us")
    if None not in devices and not apart(*devices):
        return None
    return Flag(
        "timing-mismatch",
        f"{first['median_us']:.1f} µs a call in its first worker but {again['median_us']:.1f} µs in a fresh one "
        f"({label})",
    )
