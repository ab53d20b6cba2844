"""The judge: runs the rungs on one version and decides its verdict.

It draws inputs with fresh secret seeds, sends them to the version's worker, and only after the
outputs come back computes the reference and compares; the worker never holds an expected answer.
Rungs (harness.problem.rung): load, compile, correctness, the problem's own, benchmark, roofline, dumps.
A failed rung skips those that need it.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Generator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch

from harness.containment.sandbox import make_undumpable
from harness.contract import source
from harness.contract.options import Options
from harness.contract.results import RUNG_ORDER, Evaluation, Flag, RungResult
from harness.contract.source import read_version
from harness.contract.text import printable, printable_tree
from harness.gpu.aot import parse_arch
from harness.judge import artifacts
from harness.judge import device as devices
from harness.judge.context import JudgeContext, VersionRun
from harness.judge.lacks import NOT_VERIFIED
from harness.problem.load import Problem, ProblemError, load_problem
from harness.problem.rung import Rung, RungSet
from harness.workers.process import Spawn, WorkerFailure, WorkerPool, trace_judge

# The built-in rungs after the verdict (correctness and the problem's own rungs): an evaluation may be set aside
# before each of them (Ladder.steps).
AFTER_VERDICT = frozenset(RUNG_ORDER[RUNG_ORDER.index("correctness") + 1 :])


class Ladder:
    def __init__(self, options: Options, rungs: RungSet, pool: WorkerPool | None = None) -> None:
        make_undumpable()
        self.rungs = rungs  # harness.judge.rungs.builtin.LADDER: passed in, so this module imports no rung
        trace_judge("start", 0.0)  # one judge: how many a run starts (the test suite counts them)
        cuda = torch.cuda.is_available()
        capability, _ = parse_arch(options.arch)
        pool = pool or WorkerPool(spawn_for(options))
        pool.prestart(options.rungs)
        # torch's device context imports its meta kernels (about a second) the first time: the compile rung makes
        # shape-only inputs under it, and the first version's verdict should not wait for that
        threading.Thread(target=_meta_device_ready, daemon=True, name="meta-warm").start()
        self.context = JudgeContext(
            options=options,
            pool=pool,
            device=torch.device("cuda" if cuda else "cpu"),
            device_info=devices.describe(),
            aot_arch=f"sm_{capability}",
        )

    @property
    def options(self) -> Options:
        return self.context.options

    @options.setter
    def options(self, options: Options) -> None:  # a serve request's own options, for the evaluations it asks
        self.context.options = options

    @property
    def pool(self) -> WorkerPool:
        return self.context.pool

    @property
    def cuda(self) -> bool:
        return self.context.cuda

    @property
    def device_info(self) -> dict[str, Any]:
        return self.context.device_info

    def close(self) -> None:
        self.pool.close()

    def evaluate(self, path: Path, on_rung: Callable[[RungResult], None] | None = None) -> Evaluation:
        """Judges one version file; a ProblemError escapes (a bad problem is not the version's fault)."""
        steps = self.steps(path, on_rung)
        while True:
            try:
                next(steps)
            except StopIteration as done:
                return done.value

    def steps(
        self, path: Path, on_rung: Callable[[RungResult], None] | None = None
    ) -> Generator[VersionRun, None, Evaluation]:
        """evaluate() in two steps: once the verdict is out (correctness and the problem's own rungs), it yields its
        run before the next rung, where its caller may set it aside (harness.judge.serve parks it, its workers
        frozen, while another version's verdict goes first). Only there: later rungs hold bench-sized inputs on the
        device, which evaluations set aside by the handful must not pile up. The seconds it spends set aside are not
        the evaluation's; nor are the options of the requests judged meanwhile (it takes its own back)."""
        options = self.options
        path = path.resolve()
        problem = load_problem(path.parent)
        data = read_version(path, self.options.max_version_bytes)  # once: what is hashed is what is judged
        text = data.decode(errors="replace")
        ev = Evaluation(
            problem=problem.name,
            version=path.stem,
            path=str(path),
            hash=hashlib.sha256(data).hexdigest(),
            device=self.context.device_info,
            started=datetime.now(UTC).isoformat(timespec="seconds"),
            problem_hash=problem.hash,
        )
        run = VersionRun(problem=problem, path=path, ev=ev, dsls=source.dsls(text), source=data, text=text)
        start, aside, escaped, verdict_out = time.perf_counter(), 0.0, 0, False
        try:
            for rung in self.rungs_for(problem):
                if rung.name in AFTER_VERDICT and not verdict_out:
                    # what escaped its workers so far is this version's: set aside, its processes are stopped
                    # while another version runs, and the next sweep's escapees are that one's
                    verdict_out, escaped = True, escaped + self.pool.sweep()
                    set_aside = time.perf_counter()
                    yield run
                    aside += time.perf_counter() - set_aside
                    self.context.options = options
                    if self.context.cuda and "dumps" in options.rungs:  # disassembled while the benchmark times
                        run.sass_ahead = artifacts.listings_ahead(run.kernels, self.context.tools)
                elif verdict_out:
                    self.context.between(run)
                result = self._climb(run, rung)
                ev.rungs.append(result)
                if on_rung:
                    on_rung(result)
        finally:
            released = time.perf_counter()
            for worker in run.workers.values():
                self.pool.release(worker)
            run.discard_private()
            escaped += self.pool.sweep()
            trace_judge("release", time.perf_counter() - released)
            if escaped:
                ev.flags.append(
                    Flag("escaped-process", f"{escaped} process(es) it started left its worker (daemons): killed")
                )
        run.observed.tampered.update(run.timed.tampered)
        ev.flags += run.observed.flags(run.problem, _dumped_names(ev)) + run.timed.flags()
        ev.seconds = time.perf_counter() - start - aside - run.between_s
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

    def _climb(self, run: VersionRun, rung: Rung) -> RungResult:
        blocked = self._blocked(run, rung)
        if blocked is not None:
            return RungResult.skip(rung.name, blocked)
        start, between = time.perf_counter(), run.between_s
        try:
            result: RungResult = rung.run(self.context, run)
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
        result.seconds = round(time.perf_counter() - start - (run.between_s - between), 3)
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
    if prior.ok is None and (prior.skipped or "").startswith(NOT_VERIFIED):
        return prior.skipped  # it needs what this box lacks: nothing after it can run either
    return None


def spawn_for(options: Options) -> Spawn:
    """How a pool starts workers for these options."""
    from harness.containment.watch import Limits

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

    for folder in Path(tempfile.gettempdir()).glob("kerneltui-*-*"):
        try:
            if time.time() - folder.stat().st_mtime > 24 * 3600:
                shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            continue
