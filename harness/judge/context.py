"""What a rung gets of the judge: the device, the options, the workers, the timing caches (JudgeContext), and the
evaluation it climbs (VersionRun). Built by the ladder, which imports no rung; a rung imports this, not the ladder,
so a rung's decisions can be tested with a context made by hand and no process."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from harness.contract.messages import Failure, LoadReply, LoadRequest
from harness.contract.options import Options
from harness.contract.results import Evaluation
from harness.judge.artifacts import Kernel, Listing
from harness.judge.timed_kernels import TimedKernels
from harness.judge.trust import Observed
from harness.problem.load import Problem

if TYPE_CHECKING:
    from harness.judge.clocks import ClockSampler
    from harness.workers.process import WorkerPool, WorkerProcess


@dataclass
class VersionRun:
    """Everything one evaluation accumulates while it climbs."""

    problem: Problem
    path: Path
    ev: Evaluation
    dsls: list[str]
    source: bytes = b""
    text: str = ""  # the source decoded, for what the load rung reads in it
    workers: dict[str, WorkerProcess] = field(default_factory=dict)
    observed: Observed = field(default_factory=Observed)
    timed: TimedKernels = field(default_factory=TimedKernels)
    kernels: list[Kernel] = field(default_factory=list)
    warmup_error: str | None = None
    timings: list[dict[str, Any]] = field(default_factory=list)
    # SASS listings begun while the benchmark times, by cubin path (harness.judge.artifacts.listings_ahead)
    sass_ahead: dict[str, Future[Listing]] = field(default_factory=dict)
    # The judge's own folder for copies of what the workers compiled; workers cannot write there.
    made_private: Path | None = None
    between_s: float = 0.0  # seconds spent on other versions' verdicts in its interludes (JudgeContext.between)

    @property
    def private(self) -> Path:
        """Made when first asked for (a run made for a check that compiles nothing leaves no folder behind)."""
        if self.made_private is None:
            self.made_private = Path(tempfile.mkdtemp(prefix="kerneltui-judge-"))
        return self.made_private

    def discard_private(self) -> None:
        if self.made_private is not None:
            shutil.rmtree(self.made_private, ignore_errors=True)
            self.made_private = None


@dataclass
class JudgeContext:
    """The judge as its rungs use it. `flush` and `clocks` are opened by the first rung that needs them."""

    options: Options
    pool: WorkerPool
    device: torch.device
    device_info: dict[str, Any]
    aot_arch: str  # sm_NN, what the compile rung builds for with no GPU
    flush: torch.Tensor | None = None  # the judge's own L2 flush buffer, for timing references
    clocks: ClockSampler | None = None  # NVML, opened by the first benchmark
    # (problem hash, bench case) -> (when, the reference's timing): see bench_calls.reference_timing
    reference_times: dict[tuple[str, str], tuple[float, Any]] = field(default_factory=dict)
    # disassembles a version's kernels while its benchmark times (harness.judge.artifacts.listings_ahead)
    tools: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=4, thread_name_prefix="kerneltui-tools")
    )
    # computes a case's reference while the version's worker computes its outputs (correctness.check_case)
    beside: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=1, thread_name_prefix="kerneltui-reference")
    )
    # what `between` does: harness.judge.serve gives the versions waiting by then their verdicts; else nothing
    interlude: Callable[[], None] = field(default=lambda: None)

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def between(self, run: VersionRun) -> None:
        """A point between two steps of `run` past its verdict (rungs, bench cases, race rounds, listings) where
        other versions may be judged to their verdicts, so that no version's benchmark keeps the next one's verdict
        waiting for seconds. Its options are its own again after; the time is not counted as its own."""
        options, began = self.options, time.perf_counter()
        try:
            self.interlude()
        finally:
            self.options = options
            run.between_s += time.perf_counter() - began

    def worker(self, run: VersionRun, mode: str) -> WorkerProcess:
        """The evaluation's worker for `mode`, taken from the pool the first time it is asked for."""
        if mode not in run.workers:
            run.workers[mode] = self.pool.take(mode)
        return run.workers[mode]

    def replace_worker(self, run: VersionRun, worker: WorkerProcess) -> LoadReply | Failure:
        """A fresh worker in `worker`'s place (dead, hung or spent), the version loaded into it: the load's reply."""
        self.pool.release(worker)
        del run.workers[worker.mode]
        return self.load_into(self.worker(run, worker.mode), run)

    def load_into(self, worker: WorkerProcess, run: VersionRun) -> LoadReply | Failure:
        reply = self.load_source(worker, run.source, run.path.name, run.dsls, run.problem)
        if isinstance(reply, LoadReply):
            run.observed.add_sources(worker.mode, reply.kernels)
        return reply

    def load_source(
        self, worker: WorkerProcess, data: bytes, name: str, dsls: list[str], problem: Problem | None = None
    ) -> LoadReply | Failure:
        """Imports a version's source (as read and hashed by the judge) in `worker`, the problem's
        version_files beside it; the worker's reply."""
        worker.wait_ready()
        for file_name, content in problem.version_file_bytes().items() if problem is not None else ():
            worker.copy_in(content, file_name)
        request = LoadRequest(
            path=str(worker.copy_in(data, name)),
            max_file_bytes=int(self.options.max_file_mb * (1 << 20)),
            dsls=tuple(dsls),
        )
        reply, _ = worker.ask(request, None, self.options.timeout, "while importing the version")
        return reply
