"""What CUPTI's records over the timed calls say (harness.worker.kernel_watch) and what the judge makes of it
(harness.judge.timed_kernels), decided on timelines built like the profiler's: CUPTI itself needs a GPU (the GPU
tests judge versions that cheat this way)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from torch.autograd import DeviceType

from harness.judge import clocks
from harness.judge.nsight.timing import Outside, names_flag
from harness.judge.timed_kernels import TimedKernels
from harness.worker.kernel_watch import Records

MAIN, THEIRS = 1, 2


def nothing_allowed(op: str) -> bool:
    return False


PREFIX = {"call": "kerneltui.call.x.", "rest": "kerneltui.rest.x."}


SPIN = "at::cuda::(anonymous namespace)::spin_kernel(long)"
CALLER, SIDE = 7, 13  # streams


@dataclass
class Event:
    """One of the profiler's raw events, with the accessors harness.worker.kernel_watch reads."""

    _name: str
    _kind: str
    _device: Any
    _corr: int
    _linked: int
    _start: int
    _end: int
    _thread: int = MAIN
    _stream: int = CALLER

    def name(self) -> str:
        return self._name

    def activity_type(self) -> str:
        return self._kind

    def device_type(self) -> Any:
        return self._device

    def correlation_id(self) -> int:
        return self._corr

    def linked_correlation_id(self) -> int:
        return self._linked

    def start_ns(self) -> int:
        return self._start

    def end_ns(self) -> int:
        return self._end

    def start_thread_id(self) -> int:
        return self._thread

    def device_resource_id(self) -> int:
        return self._stream


@dataclass
class Timeline:
    """As CUPTI and torch's profiler give it on an H100: host time advances as blocks are opened; the device runs
    each launch on the caller's stream when the one before it ended; a kernel a torch op launched is linked to
    that op, one launched straight from a block (a DSL's, the spin) is linked to nothing; each block comes back
    as a GPU-side annotation too."""

    events: list[Event] = field(default_factory=list)
    host: int = 0
    device: int = 0
    corr: int = 0
    counts: dict[str, int] = field(default_factory=lambda: {"call": 0, "rest": 0})

    def _id(self) -> int:
        self.corr += 1
        return self.corr

    def block(self, kind: str, launches: list[tuple[str, str | None]]) -> int:
        """A call or rest block launching kernels: (kernel name, the torch op launching it or None)."""
        index = self.counts[kind]
        self.counts[kind] += 1
        start, block, on_device = self.host, self._id(), self.device
        for kernel, op in launches:
            self.launch(kernel, op)
        self.host += 10
        name = f"{PREFIX[kind]}{index}"
        self.events.append(Event(name, "user_annotation", DeviceType.CPU, block, 0, start, self.host))
        self.events.append(Event(name, "gpu_user_annotation", DeviceType.CUDA, self._id(), 0, on_device, self.device))
        return index

    def launch(
        self, kernel: str, op: str | None, thread: int = MAIN, run_at: int | None = None, stream: int = CALLER
    ) -> None:
        self.host += 1
        linked = 0
        if op is not None:
            linked = self._id()
            self.events.append(Event(op, "cpu_op", DeviceType.CPU, linked, 0, self.host, self.host + 1, thread))
        corr = self._id()
        start = max(self.device, self.host) if run_at is None else run_at
        self.events.append(Event(kernel, "kernel", DeviceType.CUDA, corr, linked, start, start + 5, thread, stream))
        if run_at is None:
            self.device = start + 5
        self.host += 1

    def rest(self) -> int:
        return self.block("rest", [(SPIN, None), ("reduce_kernel", "aten::sum")])

    def timed(self, calls: int, kernel: str = "softmax_kernel", op: str | None = None) -> None:
        self.block("call", [(kernel, op)])  # the warm-up's call
        for _ in range(calls):
            self.rest()
            self.block("call", [(kernel, op)])

    def report(self) -> dict[str, Any]:
        return Records(list(self.events), PREFIX).report(self.counts)


def test_honest_timed_calls_report_their_kernels_and_nothing_outside() -> None:
    line = Timeline()
    line.timed(5)
    seen = line.report()
    assert seen["timed_calls"] == 5
    assert seen["kernels"] == {"softmax_kernel": 5}
    assert seen["outside"] == [] and seen["ops"] == {}


def test_flushes_linked_now_and_then_to_another_op_still_leave_honest_calls_unflagged() -> None:
    """As an H100 gave it: a few of the flush's kernels linked to an op outside its rest."""
    line = Timeline()
    line.timed(12)
    stray = next(e for e in line.events if e.name() == "aten::sum")
    flushes = [e for e in line.events if e.name() == "reduce_kernel"]
    for flush in flushes[2:5]:
        flush._linked = stray.correlation_id() + 10_000  # no such op
    flushes[7]._linked = next(e for e in line.events if e.name().startswith(PREFIX["call"])).correlation_id()
    seen = line.report()
    assert seen["kernels"] == {"softmax_kernel": 12} and seen["outside_count"] == 0, seen


def test_a_torch_op_on_a_thread_of_its_own_between_calls_is_outside() -> None:
    line = Timeline()
    line.timed(3)
    line.host += 5  # between the calls: the judge's loop, not a call
    line.launch("precompute_kernel", "aten::mul_", thread=THEIRS, stream=SIDE)
    line.timed(2)
    seen = line.report()
    assert "torch's aten::mul_ ran on a thread of its own between the timed calls" in seen["outside"]


def test_a_kernel_on_a_stream_of_its_own_during_a_rest_is_outside() -> None:
    line = Timeline()
    line.timed(2)
    line.rest()
    spin = [e for e in line.events if e.name() == SPIN][-1]
    line.launch("warm_l2_kernel", None, thread=THEIRS, run_at=spin.start_ns() + 2, stream=SIDE)  # during the rest
    line.block("call", [("softmax_kernel", None)])
    seen = line.report()
    assert seen["outside"] == ["warm_l2_kernel ran on the device during the judge's rest, outside its calls"]


def test_a_thread_launching_a_sum_during_a_rest_is_not_taken_for_the_judges_flush() -> None:
    line = Timeline()
    line.timed(2)
    index = line.counts["rest"]
    start, block = line.host, line._id()
    line.launch(SPIN, None)
    line.launch("warm_l2_kernel", "aten::sum", thread=THEIRS, stream=SIDE)  # inside the rest's time, on its thread
    line.launch("reduce_kernel", "aten::sum")
    line.host += 10
    line.events.append(Event(f"{PREFIX['rest']}{index}", "user_annotation", DeviceType.CPU, block, 0, start, line.host))
    line.counts["rest"] += 1
    line.block("call", [("softmax_kernel", None)])
    seen = line.report()
    assert any(o.startswith("warm_l2_kernel ran on the device during") for o in seen["outside"]), seen
    assert "torch's aten::sum ran on a thread of its own between the timed calls" in seen["outside"]


def test_a_kernel_of_a_call_that_runs_during_the_next_rest_is_outside() -> None:
    line = Timeline()
    line.timed(2)
    line.block("call", [("softmax_kernel", None)])
    line.rest()
    spin = [e for e in line.events if e.name() == SPIN][-1]
    line.launch("late_kernel", None, run_at=spin.start_ns() + 3, stream=SIDE)  # the call's, run during the rest
    line.block("call", [("softmax_kernel", None)])
    seen = line.report()
    assert seen["outside"] == ["late_kernel ran on the device during the judge's rest, outside its calls"]


def test_the_spin_and_the_annotations_are_no_kernel_of_the_version() -> None:
    line = Timeline()
    line.timed(4)
    seen = line.report()
    assert seen["kernels"] == {"softmax_kernel": 4} and seen["outside_count"] == 0, seen


def test_a_rest_not_found_on_the_device_is_said_not_flagged() -> None:
    line = Timeline()
    line.timed(4)
    spin = next(e for e in line.events if e.name() == SPIN)
    line.events.remove(spin)
    seen = line.report()
    assert "note" in seen and "outside" not in seen, seen


def test_a_profiler_stopped_during_the_calls_is_said() -> None:
    line = Timeline()
    line.timed(3)
    line.counts["call"] += 1  # a block the profiler never saw closed
    assert "lost" in line.report()


def test_records_that_do_not_link_as_expected_are_said_not_flagged() -> None:
    line = Timeline()
    line.timed(4)
    for event in line.events:
        event._linked = 0  # a CUPTI or torch that links no kernel to its op, not even the flush's
    seen = line.report()
    assert "note" in seen and "outside" not in seen


def test_library_when_timed_is_flagged_against_the_recorded_call() -> None:
    line = Timeline()
    line.timed(4, kernel="sm90_xmma_gemm", op="aten::mm")
    seen = line.report()
    assert seen["kernels"] == {"sm90_xmma_gemm": 4} and seen["ops"] == {"aten::mm": 4}
    recorded = {
        "ops": {},
        "profiled": {"ops": {}, "kernels": {"matmul_kernel": 1}, "all_kernels": {"matmul_kernel": 1}},
    }
    timed = TimedKernels()
    timed.add(seen, "bench case 4096", recorded, nothing_allowed)
    flags = {f.name: f.reason for f in timed.flags()}
    assert "none of the recorded call's kernels ran in the timed calls (matmul_kernel)" in flags["timed-not-recorded"]


def test_a_kernel_timed_but_never_recorded_is_flagged_and_honest_calls_are_not() -> None:
    recorded = {"ops": {}, "profiled": {"ops": {}, "kernels": {"softmax_kernel": 1}}}
    honest, other = Timeline(), Timeline()
    honest.timed(3)
    other.block("call", [("softmax_kernel", None)])
    for _ in range(3):
        other.rest()
        other.block("call", [("softmax_kernel", None), ("fast_softmax_kernel", None)])
    timed = TimedKernels()
    timed.add(honest.report(), "bench case a", recorded, nothing_allowed)
    assert timed.flags() == []
    timed.add(other.report(), "bench case b", recorded, nothing_allowed)
    assert [f.name for f in timed.flags()] == ["timed-not-recorded"]
    assert "ran kernels the recorded call did not: fast_softmax_kernel" in timed.flags()[0].reason


def test_a_race_round_is_compared_with_its_benchmarks_recorded_call() -> None:
    recorded = {"ops": {}, "profiled": {"ops": {}, "kernels": {"softmax_kernel": 1}}}
    line, cheat = Timeline(), Timeline()
    line.timed(3)
    cheat.timed(3, kernel="other_kernel")
    timed = TimedKernels()
    timed.add(line.report(), "bench case a", recorded, nothing_allowed)
    timed.add(cheat.report(), "bench case a", None, nothing_allowed)
    assert [f.name for f in timed.flags()] == ["timed-not-recorded"]


def test_a_missing_or_lost_report_is_tampering() -> None:
    timed = TimedKernels()
    timed.add(None, "bench case a", None, nothing_allowed)
    timed.add({"lost": "torch's profiler lost the timed calls' blocks"}, "bench case b", None, nothing_allowed)
    assert len(timed.tampered) == 2


def test_nsight_computes_range_must_run_a_recorded_kernel() -> None:
    case = {"n": 4096}
    library = Outside(per_call_us=10.0, kernels={"sm90_xmma_gemm_f32f32": 1.0})
    flag = names_flag(library, {"matmul_kernel"}, case)
    assert flag is not None and flag.name == "timed-not-recorded" and "sm90_xmma_gemm_f32f32" in flag.reason
    assert names_flag(Outside(per_call_us=10.0, kernels={"matmul_kernel": 1.0}), {"matmul_kernel"}, case) is None
    assert names_flag(Outside(note="ncu is missing"), {"matmul_kernel"}, case) is None


def test_nvml_samples_count_only_inside_the_window_past_its_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    """NVML stands in here (no GPU): samples at the window's start may still cover the work just before it."""
    start = 1_000_000_000
    samples = [
        SimpleNamespace(pid=11, smUtil=40, timeStamp=start + 10_000),  # the timed worker's tail: too early
        SimpleNamespace(pid=12, smUtil=30, timeStamp=start + clocks.GRACE_US + 50_000),  # inside
        SimpleNamespace(pid=13, smUtil=0, timeStamp=start + clocks.GRACE_US + 60_000),  # idle
        SimpleNamespace(pid=14, smUtil=20, timeStamp=start + 2_000_000),  # after the others went on
    ]
    nvml = SimpleNamespace(nvmlDeviceGetProcessUtilization=lambda handle, since: samples)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    assert clocks.busy_processes("handle", start, start + 1_000_000) == {12}
    assert clocks.busy_processes("handle", start, start + clocks.GRACE_US) == set()
    assert clocks.busy_processes(None, start, start + 1_000_000) == set()


def test_more_launches_a_timed_call_than_the_recorded_call_is_flagged() -> None:
    recorded = {"ops": {}, "profiled": {"ops": {}, "kernels": {"softmax_kernel": 1}}}
    line = Timeline()
    line.timed(3)
    doubled = line.report()
    doubled["kernels"] = {"softmax_kernel": 6}
    timed = TimedKernels()
    timed.add(doubled, "bench case a", recorded, nothing_allowed)
    assert "launched softmax_kernel 2 times a call, the recorded call 1" in timed.flags()[0].reason
    autotuned = {"ops": {}, "profiled": {"ops": {}, "kernels": {"softmax_kernel": 40}}}
    fewer = TimedKernels()
    fewer.add(line.report(), "bench case a", autotuned, nothing_allowed)
    assert fewer.flags() == []
