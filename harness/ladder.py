"""The judge: runs the rungs on one version and decides its verdict.

It draws inputs with fresh secret seeds, sends them to the version's worker, and only after the
outputs come back computes the reference and compares; the worker never holds an expected answer.
Rungs (harness.rungs): load, compile, correctness, the problem's own, benchmark, roofline, dumps.
A failed rung skips those that need it.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch

from harness import device as devices
from harness import dumps as dumps_mod
from harness import source
from harness.aot import parse_arch
from harness.clocks import ClockSampler
from harness.options import Options
from harness.problem import Problem, ProblemError, load_problem
from harness.results import RUNG_ORDER, Evaluation, Flag, RungResult
from harness.rungs import Rung, RungSet
from harness.sandbox import make_undumpable
from harness.source import read_version
from harness.text import printable, printable_tree
from harness.timed_kernels import TimedKernels
from harness.trust import Observed
from harness.workers import Spawn, WorkerFailure, WorkerPool, WorkerProcess, trace_judge


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
    kernels: list[dumps_mod.Kernel] = field(default_factory=list)
    warmup_error: str | None = None
    timings: list[dict[str, Any]] = field(default_factory=list)
    # The judge's own folder for copies of what the workers compiled; workers cannot write there.
    private: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="kerneltui-judge-")))


class Ladder:
    def __init__(self, options: Options, rungs: RungSet, pool: WorkerPool | None = None) -> None:
        make_undumpable()
        self.rungs = rungs  # harness.rungs.builtin.LADDER: passed in, so this module imports no rung
        trace_judge("start", 0.0)  # one judge: how many a run starts (the test suite counts them)
        self.options = options
        self.cuda = torch.cuda.is_available()
        self.device = torch.device("cuda" if self.cuda else "cpu")
        capability, _ = parse_arch(options.arch)
        self.aot_arch = f"sm_{capability}"
        self.pool = pool or WorkerPool(spawn_for(options))
        self.pool.prestart(options.rungs)
        # torch's device context imports its meta kernels (about a second) the first time: the compile rung makes
        # shape-only inputs under it, and the first version's verdict should not wait for that
        threading.Thread(target=_meta_device_ready, daemon=True, name="meta-warm").start()
        self.device_info = devices.describe()
        self.flush: torch.Tensor | None = None  # the judge's own L2 flush buffer, for timing references
        self.clocks: ClockSampler | None = None  # NVML, opened by the first benchmark
        # (problem hash, bench case) -> (when, the reference's timing): see benchmark.reference_timing
        self.reference_times: dict[tuple[str, str], tuple[float, Any]] = {}

    def close(self) -> None:
        self.pool.close()

    def evaluate(self, path: Path, on_rung: Callable[[RungResult], None] | None = None) -> Evaluation:
        """Judges one version file; a ProblemError escapes (a bad problem is not the version's fault)."""
        path = path.resolve()
        problem = load_problem(path.parent)
        data = read_version(path, self.options.max_version_bytes)  # once: what is hashed is what is judged
        text = data.decode(errors="replace")
        ev = Evaluation(
            problem=problem.name,
            version=path.stem,
            path=str(path),
            hash=hashlib.sha256(data).hexdigest(),
            device=self.device_info,
            started=datetime.now(UTC).isoformat(timespec="seconds"),
            problem_hash=problem.hash,
        )
        run = VersionRun(problem=problem, path=path, ev=ev, dsls=source.dsls(text), source=data, text=text)
        start = time.perf_counter()
        try:
            for rung in self.rungs_for(problem):
                result = self._climb(run, rung)
                ev.rungs.append(result)
                if on_rung:
                    on_rung(result)
        finally:
            released = time.perf_counter()
            for worker in run.workers.values():
                self.pool.release(worker)
            shutil.rmtree(run.private, ignore_errors=True)
            escaped = self.pool.sweep()
            trace_judge("release", time.perf_counter() - released)
            if escaped:
                ev.flags.append(
                    Flag("escaped-process", f"{escaped} process(es) it started left its worker (daemons): killed")
                )
        run.observed.tampered.update(run.timed.tampered)
        ev.flags += run.observed.flags(run.problem, _dumped_names(ev)) + run.timed.flags()
        ev.seconds = time.perf_counter() - start
        ev.finish()
        return ev

    def rungs_for(self, problem: Problem) -> Iterator[Rung]:
        """The rungs asked, in order; load always (every rung needs the version loaded), and the problem's own
        right after correctness, with it."""
        for name in RUNG_ORDER:
            if name != "load" and name not in self.options.rungs:
                continue
            yield self.rungs.builtin[name]
            if name == "correctness":
                yield from (self.rungs.problem_rung(r) for r in problem.rungs)

    def worker(self, run: VersionRun, mode: str) -> WorkerProcess:
        """The evaluation's worker for `mode`, taken from the pool the first time it is asked for."""
        if mode not in run.workers:
            run.workers[mode] = self.pool.take(mode)
        return run.workers[mode]

    def load_into(self, worker: WorkerProcess, run: VersionRun) -> dict[str, Any]:
        reply = self.load_source(worker, run.source, run.path.name, run.dsls, run.problem)
        if reply.get("ok"):
            run.observed.add_sources(worker.mode, reply.get("kernels"))
        return reply

    def load_source(
        self, worker: WorkerProcess, data: bytes, name: str, dsls: list[str], problem: Problem | None = None
    ) -> dict[str, Any]:
        """Imports a version's source (as read and hashed by the judge) in `worker`, the problem's
        version_files beside it; the worker's reply."""
        worker.wait_ready()
        for file_name, content in problem.version_file_bytes().items() if problem is not None else ():
            worker.copy_in(content, file_name)
        header = {
            "op": "load",
            "path": str(worker.copy_in(data, name)),
            "max_file_bytes": int(self.options.max_file_mb * (1 << 20)),
            "dsls": dsls,
        }
        reply, _ = worker.request(header, None, self.options.timeout, "while importing the version")
        return reply

    def _climb(self, run: VersionRun, rung: Rung) -> RungResult:
        blocked = self._blocked(run, rung)
        if blocked is not None:
            return RungResult.skip(rung.name, blocked)
        start = time.perf_counter()
        try:
            result: RungResult = rung.run(self, run)
        except WorkerFailure as exc:
            result = RungResult(name=rung.name, ok=False, err=str(exc).split("\n")[0], log=str(exc))
        except ProblemError:
            raise
        except Exception as exc:  # a bug here must not lose the evaluation
            if _problem_line(exc, run.problem.path) is not None and not _device_trouble(exc):
                # make_inputs, reference, cost or a problem's rung raised: the problem is broken, whatever
                # the version did
                raise ProblemError(_judge_error(exc, run.problem.path)) from exc
            result = RungResult(
                name=rung.name,
                ok=False,
                err=_judge_error(exc, run.problem.path),
                log="".join(traceback.format_exception(exc)),
            )
        result.seconds = round(time.perf_counter() - start, 3)
        return _shown_safely(result)

    def _blocked(self, run: VersionRun, rung: Rung) -> str | None:
        """Why `rung` is skipped, from what the rungs it needs (or comes after) did; None: it runs."""
        for name in rung.after:
            prior = run.ev.rung(name)
            if prior is None and name in self.rungs.builtin:  # not asked: what it comes after stands in for it
                blocked = self._blocked(run, self.rungs.builtin[name])
                if blocked is not None:
                    return blocked
            elif prior is not None and (failed := _failure(name, prior)):
                return failed
        for name in rung.needs:
            prior = run.ev.rung(name)
            if prior is None:
                return f"needs {name}"
            if failed := _failure(name, prior):
                return failed
            if prior.ok is not True:
                return (prior.skipped or f"needs {name}") if rung.shares_skip else f"{name} did not pass"
        return None


def _meta_device_ready() -> None:
    with torch.device("meta"):
        torch.empty(1).add_(1)


def _failure(name: str, prior: RungResult) -> str | None:
    """The skip a failed rung passes on: its failure, or the failure it was itself skipped for."""
    if prior.ok is False:
        return f"{name} failed"
    if prior.ok is None and (prior.skipped or "").endswith(" failed"):
        return prior.skipped  # compile skipped because load failed: so is what needs it
    return None


def spawn_for(options: Options) -> Spawn:
    """How a pool starts workers for these options."""
    from harness.containment import Limits

    _, cute_arch = parse_arch(options.arch)
    return Spawn(
        arch=options.arch,
        cute_arch=cute_arch,
        confine=options.confine,
        fork=options.fork,
        max_file_bytes=int(options.max_file_mb * (1 << 20)),
        limits=Limits.default(options.max_memory_mb, options.max_file_mb),
    )


def _dumped_names(ev: Evaluation) -> set[str] | None:
    """The kernels the dumps rung wrote (what the Asm pane shows), or None where it did not run (or with no GPU,
    where the interpreter runs the kernels and the compiling worker's record is compared instead)."""
    dumps = ev.rung("dumps")
    if dumps is None or dumps.ok is not True or ev.device.get("kind") == "cpu":
        return None
    return {str(f.get("kernel", "")).rsplit("-", 1)[0] for f in dumps.metrics.get("files", []) if isinstance(f, dict)}


def _shown_safely(result: RungResult) -> RungResult:
    """Text that came from the version (errors, traces, its notes) with control characters written out."""
    result.err = printable(result.err) if result.err else result.err
    result.log = printable(result.log) if result.log else result.log
    result.skipped = printable(result.skipped) if result.skipped else result.skipped
    result.metrics = printable_tree(result.metrics)  # type: ignore[assignment]
    return result


def _problem_line(exc: Exception, problem_path: Path) -> int | None:
    """The innermost line of problem.py the exception passed through, if it did."""
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == problem_path]
    return lines[-1] if lines else None


def _device_trouble(exc: Exception) -> bool:
    """Out of memory or a CUDA error: the device's state (a version can hog or break it), not the problem's code."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    text = str(exc)
    return bool(names & {"OutOfMemoryError", "AcceleratorError"}) or "CUDA error" in text or "out of memory" in text


def _judge_error(exc: Exception, problem_path: Path) -> str:
    """Says whose code raised: the problem's (make_inputs, reference, cost) or the judge's."""
    line = _problem_line(exc, problem_path)
    if line is not None:
        return f"{problem_path.parent.name}/problem.py:{line} raised {type(exc).__name__}: {exc}"
    frames = traceback.extract_tb(exc.__traceback__)
    where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"
    return f"the judge failed ({where}): {type(exc).__name__}: {exc}"


def clean_stale_scratch() -> None:
    """Scratch folders of workers killed with their judge are left in the temp folder; nothing else is."""
    import tempfile

    for folder in Path(tempfile.gettempdir()).glob("kerneltui-*-*"):
        try:
            if time.time() - folder.stat().st_mtime > 24 * 3600:
                shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            continue
