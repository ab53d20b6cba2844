"""The judge: runs the rungs on one version and decides its verdict.

It draws inputs with fresh secret seeds, sends them to the version's worker, and only after the
outputs come back computes the reference and compares; the worker never holds an expected answer.
Rungs: load, compile, correctness, benchmark, roofline, dumps. A failed rung skips those that need it.
"""

from __future__ import annotations

import functools
import hashlib
import math
import secrets
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from harness import confirm, source, wire
from harness import device as devices
from harness import dumps as dumps_mod
from harness.aot import parse_arch
from harness.metrics import compare
from harness.options import Options
from harness.problem import Problem, ProblemError, case_label, load_problem
from harness.results import RUNG_ORDER, Evaluation, Flag, RungResult
from harness.sandbox import make_undumpable
from harness.source import read_version
from harness.text import printable, printable_tree
from harness.trust import Observed
from harness.workers import Spawn, WorkerFailure, WorkerPool, WorkerProcess

if TYPE_CHECKING:
    from harness import timing

NEEDS = {
    "compile": "load",
    "correctness": "compile",
    "benchmark": "correctness",
    "roofline": "benchmark",
    "dumps": "compile",
}
# Honest kernels reach a little over the measured copy (a 2:1 read:write mix beats a 1:1 copy);
# a time this far past the ceiling is not a kernel doing the work.
IMPLAUSIBLE_ROOFLINE_PCT = 125.0
# Time until the whole device is idle (less a synchronize's latency) may exceed the time on the caller's
# stream by this much before the version is taken to leave work on a stream nobody waits for.
UNAWAITED_RATIO, UNAWAITED_US = 1.05, 5.0


@dataclass
class VersionRun:
    """Everything one evaluation accumulates while it climbs."""

    problem: Problem
    path: Path
    ev: Evaluation
    dsls: list[str]
    source: bytes = b""
    workers: dict[str, WorkerProcess] = field(default_factory=dict)
    observed: Observed = field(default_factory=Observed)
    kernels: list[dumps_mod.Kernel] = field(default_factory=list)
    warmup_error: str | None = None
    timings: list[dict[str, Any]] = field(default_factory=list)
    # The judge's own folder for copies of what the workers compiled; workers cannot write there.
    private: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="kerneltui-judge-")))


class Ladder:
    def __init__(self, options: Options, pool: WorkerPool | None = None) -> None:
        make_undumpable()
        self.options = options
        self.cuda = torch.cuda.is_available()
        self.device = torch.device("cuda" if self.cuda else "cpu")
        capability, _ = parse_arch(options.arch)
        self.aot_arch = f"sm_{capability}"
        self.pool = pool or WorkerPool(spawn_for(options))
        self.pool.prestart()
        self.device_info = devices.describe()
        self.flush: torch.Tensor | None = None  # the judge's own L2 flush buffer, for timing references

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
        run = VersionRun(problem=problem, path=path, ev=ev, dsls=source.dsls(text), source=data)
        start = time.perf_counter()
        try:
            for name in RUNG_ORDER:
                if name not in self.options.rungs and name != "load":  # every rung needs the version loaded
                    continue
                result = self._climb(run, name, text)
                ev.rungs.append(result)
                if on_rung:
                    on_rung(result)
        finally:
            for worker in run.workers.values():
                self.pool.release(worker)
            shutil.rmtree(run.private, ignore_errors=True)
            escaped = self.pool.sweep()
            if escaped:
                ev.flags.append(
                    Flag("escaped-process", f"{escaped} process(es) it started left its worker (daemons): killed")
                )
        ev.flags += run.observed.flags(run.problem, _dumped_names(ev))
        ev.seconds = time.perf_counter() - start
        ev.finish()
        return ev

    def _climb(self, run: VersionRun, name: str, text: str) -> RungResult:
        needed = NEEDS.get(name)
        if needed == "compile" and needed not in self.options.rungs:
            needed = "load"  # correctness and dumps run without the compile rung, never without a loaded version
        prior = run.ev.rung(needed) if needed else None
        if prior is not None and prior.ok is False:
            return RungResult.skip(name, f"{needed} failed")
        if prior is not None and prior.ok is None and (prior.skipped or "").endswith(" failed"):
            return RungResult.skip(name, prior.skipped or "")  # compile skipped because load failed: so is this
        if needed == "benchmark" and (prior is None or prior.ok is None):
            return RungResult.skip(name, (prior.skipped if prior else None) or "needs benchmark")
        if needed == "correctness" and (prior is None or prior.ok is not True):
            return RungResult.skip(name, "correctness did not pass" if prior else "needs correctness")
        start = time.perf_counter()
        rung = getattr(self, f"rung_{name}")
        try:
            result: RungResult = rung(run, text) if name == "load" else rung(run)
        except WorkerFailure as exc:
            result = RungResult(name=name, ok=False, err=str(exc).split("\n")[0], log=str(exc))
        except ProblemError:
            raise
        except Exception as exc:  # a bug here must not lose the evaluation
            if _problem_line(exc, run.problem.path) is not None and not _device_trouble(exc):
                # make_inputs, reference or cost raised: the problem is broken, whatever the version did
                raise ProblemError(_judge_error(exc, run.problem.path)) from exc
            result = RungResult(
                name=name,
                ok=False,
                err=_judge_error(exc, run.problem.path),
                log="".join(traceback.format_exception(exc)),
            )
        result.seconds = round(time.perf_counter() - start, 3)
        return _shown_safely(result)

    # --- load ---------------------------------------------------------------------------------

    def rung_load(self, run: VersionRun, text: str) -> RungResult:
        metrics: dict[str, Any] = {
            "entry": "custom_kernel",
            "dsls": run.dsls or ["torch"],
            "notes": source.notes(text),
            "warnings": source.static_checks(text),
        }
        worker = self._worker(run, "run")
        reply = self.load_into(worker, run)
        run.ev.sandbox = worker.containment
        metrics["sandbox"] = run.ev.sandbox
        if self.cuda and not (worker.ready or {}).get("cuda"):
            err = (
                f"the GPU cannot be used inside the worker's sandbox ({run.ev.sandbox}): "
                "`kerneltui doctor` says what this box offers; --no-sandbox runs workers unconfined"
            )
            return RungResult(name="load", ok=False, err=err, metrics=metrics)
        if not reply.get("ok"):
            return RungResult(name="load", ok=False, err=reply.get("err"), metrics=metrics, log=reply.get("trace"))
        return RungResult(name="load", ok=True, metrics=metrics)

    def _worker(self, run: VersionRun, mode: str) -> WorkerProcess:
        if mode not in run.workers:
            run.workers[mode] = self.pool.take(mode)
        return run.workers[mode]

    def load_into(self, worker: WorkerProcess, run: VersionRun) -> dict[str, Any]:
        worker.wait_ready()
        header = {
            "op": "load",
            "path": str(worker.copy_in(run.source, run.path.name)),
            "max_file_bytes": int(self.options.max_file_mb * (1 << 20)),
            "dsls": run.dsls,
        }
        reply, _ = worker.request(header, None, self.options.timeout, "while importing the version")
        if reply.get("ok"):
            run.observed.add_sources(worker.mode, reply.get("kernels"))
        return reply

    # --- compile ------------------------------------------------------------------------------

    def rung_compile(self, run: VersionRun) -> RungResult:
        """GPU: a warm-up call JIT-compiles what it launches. No GPU: a compile-only worker calls the
        version on the first bench case (shapes only) and every correctness case; launches become compiles."""
        first = (run.problem.bench_cases or run.problem.cases)[0]
        if self.cuda:
            worker = run.workers["run"]
            plan = [(first, self.device)]
            mode, arch, op = "jit", self.device_info.get("arch", "?"), "call"
        else:
            worker = self._worker(run, "compile")
            loaded = self.load_into(worker, run)
            if not loaded.get("ok"):
                return RungResult(name="compile", ok=False, err=loaded.get("err"), log=loaded.get("trace"))
            # Shapes only for the (large) bench case; CuTeDSL's from_dlpack needs real memory.
            shapes_only = bool(run.problem.bench_cases) and "cutedsl" not in run.dsls
            plan = [(first, torch.device("meta"))] * shapes_only
            plan += [(case, torch.device("cpu")) for case in run.problem.cases]
            mode, arch, op = "aot", self.aot_arch, "compile"
        metrics: dict[str, Any] = {"mode": mode, "arch": arch}
        if mode == "aot":
            metrics["note"] = f"compiled ahead of time for {arch}: no GPU here"
        failures: list[dict[str, Any]] = []
        for case, where in plan:
            inputs = _make_inputs(run.problem, case, where)
            if inputs is None:
                continue  # make_inputs cannot build this case on the meta device: the CPU cases still compile
            tensors: list[torch.Tensor] = []
            tree = wire.encode_tree(list(inputs), tensors)
            what = "in the first call (JIT compile)" if mode == "jit" else "while compiling ahead of time"
            reply = self._compile_call(worker, {"op": op, "inputs": tree}, tensors, what)
            self._collect_kernels(run, worker, case_label(case))
            if reply.get("ok"):
                if op == "compile":
                    run.observed.add(reply.get("recorded"), "compile", case_label(case))
                continue
            if reply.get("kind") == "compile":
                metrics["kernels"] = [k.summary() for k in run.kernels]
                return RungResult(
                    name="compile", ok=False, err=reply.get("err"), metrics=metrics, log=reply.get("trace")
                )
            hint = " (given shape-only inputs)" if where.type == "meta" else ""
            failures.append({"case": case_label(case) + hint, "err": reply.get("err"), "trace": reply.get("trace")})
            if mode == "jit" or reply.get("kind") == "worker":
                break
        metrics["kernels"] = [k.summary() for k in run.kernels]
        return self._compile_verdict(run, metrics, failures, mode, arch)

    def _compile_call(
        self, worker: WorkerProcess, header: dict[str, Any], tensors: list[torch.Tensor], what: str
    ) -> dict[str, Any]:
        """A hang or crash here is the call's doing, not the compiler's: it is reported as such."""
        try:
            reply, _ = worker.request(header, tensors, self.options.timeout, what)
        except WorkerFailure as exc:
            return {"ok": False, "err": str(exc).split("\n")[0], "kind": "worker", "trace": str(exc)}
        return reply

    def _collect_kernels(self, run: VersionRun, worker: WorkerProcess, label: str) -> None:
        """Adds kernels compiled since the last look, each labelled with the case that compiled it."""
        known = {k.files["cubin"] for k in run.kernels}
        into = run.private / worker.mode
        found = dumps_mod.collect_triton(worker.scratch, into) + dumps_mod.collect_cutedsl(worker.scratch, into)
        for kernel in found:
            if kernel.files["cubin"] not in known:
                kernel.case = label
                dumps_mod.read_resources(kernel)
                run.kernels.append(kernel)

    def _compile_verdict(
        self, run: VersionRun, metrics: dict[str, Any], failures: list[dict[str, Any]], mode: str, arch: str
    ) -> RungResult:
        if failures:
            first = failures[0]
            text = f"{first['case']}: {first['err']}"
            if mode == "jit":
                run.warmup_error = first["err"]
            if not run.kernels:
                how = "ahead of time" if mode == "aot" else "on the GPU"
                return RungResult(
                    name="compile",
                    metrics=metrics,
                    log=first.get("trace"),
                    skipped=f"nothing compiled {how}: custom_kernel failed before launching a kernel: {text}",
                )
            metrics["note"] = f"compiled {len(run.kernels)} kernel(s); a call failed: {text}"
        too_big = self._smem_overflow(run.kernels, arch)
        if too_big:
            return RungResult(name="compile", ok=False, err=too_big, metrics=metrics)
        return RungResult(name="compile", ok=True, metrics=metrics)

    @staticmethod
    def _smem_overflow(kernels: list[dumps_mod.Kernel], arch: str) -> str | None:
        limit = dumps_mod.smem_limit(arch)
        for kernel in kernels:
            needed = kernel.meta.get("shared") or kernel.resources.get("smem_bytes") or 0
            if limit and needed > limit:
                return f"kernel {kernel.name} needs {needed} B of shared memory; {arch} allows {limit} B per block"
        return None

    # --- correctness --------------------------------------------------------------------------

    def rung_correctness(self, run: VersionRun) -> RungResult:
        if not self.cuda and "cutedsl" in run.dsls:
            return RungResult.skip("correctness", "CuTeDSL kernels run only on a GPU; no GPU here (compiled only)")
        mode = "cuda" if self.cuda else "triton-interpreter"
        if run.warmup_error:
            return RungResult(
                name="correctness",
                ok=False,
                err=f"the first call failed: {run.warmup_error}",
                metrics={"mode": mode},
            )
        worker = run.workers["run"]
        results = []
        first_error: str | None = None
        for case in run.problem.cases:
            for _ in range(self.options.seeds_per_case):
                seed = secrets.randbelow(2**31)
                run.ev.seeds.append(seed)
                outcome = self._check_case(run, worker, case, seed)
                results.append(outcome)
                if outcome["err"] and first_error is None:
                    first_error = f"case {case_label(case)} (seed {seed}): {outcome['err']}"
                if outcome.get("fatal"):
                    break
            if results and results[-1].get("fatal"):
                break
        metrics = {
            "mode": mode,
            "cases": results,
            **_worst(results),
            "n_cases": len(run.problem.cases),
            "n_seeds": self.options.seeds_per_case,
        }
        if run.observed.cuda_kernels:  # what CUPTI saw launched past torch's ops: the version's own kernels
            metrics["cuda_kernels"] = dict(run.observed.cuda_kernels.most_common(8))
        return RungResult(name="correctness", ok=first_error is None, err=first_error, metrics=metrics)

    def _check_case(self, run: VersionRun, worker: WorkerProcess, case: dict[str, Any], seed: int) -> dict[str, Any]:
        outcome: dict[str, Any] = {"case": case_label(case), "seed": seed, "ok": False, "err": None}
        inputs = tuple(run.problem.make_inputs(dict(case), seed, self.device))
        pristine = [_clone_inputs(t) for t in inputs]
        tensors: list[torch.Tensor] = []
        tree = wire.encode_tree(list(inputs), tensors)
        budget = 8 * sum(t.numel() * t.element_size() for t in tensors) + (1 << 30)
        try:
            reply, got = worker.request(
                {"op": "call", "inputs": tree}, tensors, self.options.timeout, "", max_payload=budget
            )
        except WorkerFailure as exc:
            outcome.update(err=str(exc).split("\n")[0], fatal=True, log=str(exc))
            return outcome
        if not reply.get("ok"):
            outcome.update(err=reply.get("err"), log=reply.get("trace"), fatal=reply.get("kind") in ("cuda",))
            return outcome
        outcome["call_s"] = round(float(reply.get("seconds", 0.0)), 4)
        run.observed.add(reply.get("recorded"), "run", f"case {case_label(case)}")
        try:
            outputs = wire.decode_tree(reply["outputs"], got)
            after = wire.decode_tree(reply["inputs_after"], got)
        except KeyError as exc:
            outcome.update(err=f"malformed reply from the kernel's process (no {exc}): was it forged?", fatal=True)
            return outcome
        except wire.ChannelError as exc:
            outcome.update(err=f"malformed reply from the kernel's process: {exc}", fatal=True)
            return outcome
        # The reference runs only now, after the kernel's outputs are in hand.
        expected = run.problem.reference(*[_clone_inputs(t) for t in pristine])
        devices_seen = [spec.get("device") for spec in reply.get("tensors", [])]
        err, metrics = self.judge_outputs(run, outputs, expected, devices_seen)
        mutated = _mutated_inputs(pristine, after)
        if mutated and not err:
            err = mutated
        outcome.update(ok=err is None, err=err, **metrics)
        return outcome

    def judge_outputs(
        self, run: VersionRun, outputs: Any, expected: Any, devices_seen: list[Any]
    ) -> tuple[str | None, dict[str, Any]]:
        want = expected if isinstance(expected, (tuple, list)) else (expected,)
        wrong = next((type(w).__name__ for w in want if not isinstance(w, torch.Tensor)), None)
        if wrong:
            problem = run.problem.path.parent.name
            raise ProblemError(f"{problem}: reference returned a {wrong}; it must return torch tensors (or a tuple)")
        have = tuple(outputs) if isinstance(outputs, (tuple, list)) else (outputs,)
        if len(have) != len(want):
            return f"returned {len(have)} output(s); the reference returns {len(want)}", {}
        merged: dict[str, Any] = {}
        for i, (out, ref) in enumerate(zip(have, want, strict=True)):
            label = f"output {i}" if len(want) > 1 else "output"
            if tuple(out.shape) != tuple(ref.shape):
                return f"{label} has shape {tuple(out.shape)}; the reference's is {tuple(ref.shape)}", merged
            if out.dtype != ref.dtype:
                return f"{label} has dtype {out.dtype}; the reference's is {ref.dtype}", merged
            claimed = devices_seen[i] if i < len(devices_seen) else None
            if claimed and claimed != ref.device.type:
                return f"{label} is on {claimed}; the reference's is on {ref.device.type}", merged
            result = compare(out.to(ref.device), ref, run.problem.tolerance_for(wire.dtype_name(ref.dtype)))
            merged = _merge_metrics(merged, result.metrics)
            if not result.ok:
                return f"{label}: {result.err}", merged
        return None, merged

    # --- benchmark ----------------------------------------------------------------------------

    def rung_benchmark(self, run: VersionRun) -> RungResult:
        if not self.cuda:
            return RungResult.skip(
                "benchmark", "no GPU: kernel timings need CUDA; interpreter timings are not kernel timings"
            )
        if not run.problem.bench_cases:
            return RungResult.skip("benchmark", "the problem has no bench_cases")
        worker = run.workers["run"]
        cases: list[dict[str, Any]] = []
        for case in run.problem.bench_cases:
            entry, err = self._bench_case(run, worker, case)
            if err is not None:
                return RungResult(name="benchmark", ok=False, err=err, metrics={"cases": cases})
            cases.append(entry)
        bound = confirm.outside_bound_us(worker, self.options.timeout)  # on the last case's inputs
        flag = confirm.outside_flag(cases[-1]["median_us"], bound, cases[-1]["case"])
        run.ev.flags += [flag] if flag else []
        speedups = [c["speedup"] for c in cases if c["speedup"]]
        metrics = {
            "cases": cases,
            "median_us": cases[0]["median_us"],
            "speedup": _geomean(speedups),
            "ref_median_us": cases[0]["ref_median_us"],
            "outside_bound_us": bound,
        }
        best = self.options.best_for(str(self.device_info.get("name")))
        if self.options.confirm and (best is None or cases[0]["median_us"] < best):
            checked = confirm.confirm(self, run, cases[0]["median_us"])
            if checked.err:
                return RungResult(name="benchmark", ok=False, err=checked.err, metrics=metrics)
            run.ev.flags += checked.flags
            metrics["confirmed"] = checked.metrics
        return RungResult(name="benchmark", ok=True, metrics=metrics)

    def _bench_case(
        self, run: VersionRun, worker: WorkerProcess, case: dict[str, Any], reference: bool = True
    ) -> tuple[dict[str, Any], str | None]:
        """Times one bench case in `worker` (fresh seed), checks the timed calls' output, times the reference
        (unless `reference` is False: a case timed again needs only the version's median)."""
        from harness import timing

        seed = secrets.randbelow(2**31)
        inputs = tuple(run.problem.make_inputs(dict(case), seed, self.device))
        tensors: list[torch.Tensor] = []
        tree = wire.encode_tree(list(inputs), tensors)
        timeout = self.options.timeout + 4 * self.options.bench_budget_s
        label = case_label(case)
        reply, got = worker.request(
            {"op": "bench", "inputs": tree, "budget_s": self.options.bench_budget_s},
            tensors,
            timeout,
            f"benchmarking {label}",
        )
        if not reply.get("ok"):
            return {}, f"{label}: {reply.get('err')}"
        expected = run.problem.reference(*inputs)
        devices_seen = [s.get("device") for s in reply.get("tensors", [])]
        err, _ = self.judge_outputs(run, wire.decode_tree(reply["outputs"], got), expected, devices_seen)
        if err:
            return {}, f"{label}: the timed calls' output is wrong: {err}"
        run.observed.add(reply.get("recorded"), "run", f"bench case {label}")
        kernel = timing.summarize(_checked_samples(reply.get("samples_ms")))
        settled_us, unawaited = _unawaited_work(kernel, reply)
        if unawaited:
            return {}, f"{label}: {unawaited}"
        if not reference:
            return {"case": label, **kernel.to_json()}, None
        if self.flush is None:
            self.flush = timing.flush_buffer(self.device)
        call = functools.partial(run.problem.reference, *inputs)
        ref_timing = timing.summarize(timing.time_calls(call, self.flush, budget_s=self.options.bench_budget_s))
        entry = {
            "case": label,
            **kernel.to_json(),
            "settled_us": settled_us,
            "ref_median_us": ref_timing.median_us,
            "speedup": ref_timing.median_us / kernel.median_us if kernel.median_us > 0 else None,
        }
        run.timings.append({**entry, "case": case, "low_precision": _low_precision(run.problem, case, inputs)})
        return entry, None

    def time_case(self, run: VersionRun, worker: WorkerProcess, case: dict[str, Any]) -> float:
        """The median (µs) of one bench case timed again in another worker."""
        entry, err = self._bench_case(run, worker, case, reference=False)
        if err is not None:
            raise WorkerFailure(f"timed again in a fresh worker: {err}")
        return float(entry["median_us"])

    # --- roofline -----------------------------------------------------------------------------

    def rung_roofline(self, run: VersionRun) -> RungResult:
        peaks = devices.peaks(self.device_info, self.options.state_dir)
        rows = []
        for timing_entry in run.timings:
            case = timing_entry["case"]
            cost = run.problem.cost_of(case)
            seconds = timing_entry["median_us"] * 1e-6
            flops_peak = peaks["bf16_tflops"] if timing_entry["low_precision"] else peaks["fp32_tflops"]
            floor_s = max(cost["bytes"] / (peaks["copy_gbps"] * 1e9), cost["flops"] / (flops_peak * 1e12))
            rows.append(
                {
                    "case": case_label(case),
                    "bytes": cost["bytes"],
                    "flops": cost["flops"],
                    "gbps": cost["bytes"] / seconds / 1e9,
                    "tflops": cost["flops"] / seconds / 1e12,
                    "floor_us": floor_s * 1e6,
                    "pct": 100.0 * floor_s / seconds,
                    "bound": "memory"
                    if cost["bytes"] / (peaks["copy_gbps"] * 1e9) >= cost["flops"] / (flops_peak * 1e12)
                    else "compute",
                    "flops_peak_tflops": flops_peak,
                }
            )
        metrics = {
            "cases": rows,
            "pct": rows[0]["pct"],
            "gbps": rows[0]["gbps"],
            "tflops": rows[0]["tflops"],
            "peaks": peaks,
        }
        impossible = [r for r in rows if r["pct"] > IMPLAUSIBLE_ROOFLINE_PCT]
        if impossible:
            r = impossible[0]
            return RungResult(
                name="roofline",
                ok=False,
                metrics=metrics,
                err=(
                    f"{r['case']}: {r['pct']:.0f}% of the roofline is faster than the device can go: "
                    "the timing is not credible (cached or skipped work?) or cost() undercounts"
                ),
            )
        return RungResult(name="roofline", ok=True, metrics=metrics)

    # --- dumps --------------------------------------------------------------------------------

    def rung_dumps(self, run: VersionRun) -> RungResult:
        for worker in run.workers.values():
            self._collect_kernels(run, worker, "later calls")
        if not run.kernels:
            return RungResult(
                name="dumps", ok=True, metrics={"files": [], "note": "no Triton or CuTeDSL kernels compiled"}
            )
        root = self.options.state_dir or run.path.parent.parent / ".kerneltui"
        dest = root / "dumps" / run.problem.name / run.path.stem / run.ev.hash[:12]
        try:
            files = dumps_mod.write_dumps(run.kernels, dest)
        except OSError as exc:
            return RungResult(name="dumps", ok=False, err=f"cannot write dumps to {dest}: {exc.strerror or exc}")
        kinds = sorted({f["kind"] for f in files})
        return RungResult(name="dumps", ok=True, metrics={"dir": str(dest), "files": files, "kinds": kinds})


def spawn_for(options: Options) -> Spawn:
    """How a pool starts workers for these options."""
    from harness.containment import Limits

    _, cute_arch = parse_arch(options.arch)
    return Spawn(
        arch=options.arch,
        cute_arch=cute_arch,
        confine=options.confine,
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


def _make_inputs(problem: Problem, case: dict[str, Any], where: torch.device) -> tuple[Any, ...] | None:
    """A case's inputs; None when shape-only (meta) inputs are what make_inputs cannot build."""
    try:
        return tuple(problem.make_inputs(dict(case), secrets.randbelow(2**31), where))
    except Exception:
        if where.type == "meta":
            return None
        raise


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


def _unawaited_work(kernel: timing.Timing, reply: dict[str, Any]) -> tuple[float, str | None]:
    """Time until the device is idle, less the synchronize's latency (µs), and the error when it is far above
    the time on the caller's stream. Minima: that latency only ever adds, and varies by microseconds."""
    settled_ms = min(_checked_samples(reply.get("settled_ms"))) - min(_checked_samples(reply.get("idle_ms")))
    settled_us = 1000 * settled_ms
    if settled_us <= kernel.min_us * UNAWAITED_RATIO + UNAWAITED_US:
        return settled_us, None
    return settled_us, (
        f"its work outlasts the call on the caller's stream: {settled_us:.1f} µs until the device is idle against "
        f"{kernel.min_us:.1f} µs timed on the stream (work on a stream the caller's stream never waits for)"
    )


def _checked_samples(samples: Any) -> list[float]:
    if not isinstance(samples, list) or not samples or not all(isinstance(s, (int, float)) and s > 0 for s in samples):
        raise WorkerFailure("the kernel's process sent no usable timings")
    return [float(s) for s in samples]


def _mutated_inputs(pristine: list[Any], after: Any) -> str | None:
    """What the version changed in its inputs, nested ones included (a list of tensors, an options dict)."""
    after = list(after) if isinstance(after, (list, tuple)) else [after]
    for i, (before, now) in enumerate(zip(pristine, after, strict=False)):
        changed = _changed(before, now, f"input {i}")
        if changed:
            return changed
    return None


def _changed(before: Any, now: Any, where: str) -> str | None:
    if isinstance(before, torch.Tensor):
        if not isinstance(now, torch.Tensor) or now.shape != before.shape or now.dtype != before.dtype:
            return f"custom_kernel changed {where}'s shape or dtype"
        a = before.detach().cpu().contiguous().view(-1).view(torch.uint8)
        b = now.detach().cpu().contiguous().view(-1).view(torch.uint8)
        if torch.equal(a, b):
            return None
        count = int((before.cpu().reshape(-1) != now.cpu().reshape(-1)).sum())
        return f"custom_kernel modified its {where} in place ({count} of {before.numel()} elements changed)"
    if isinstance(before, (list, tuple)):  # the wire hands tuples back as lists
        if not isinstance(now, (list, tuple)) or len(now) != len(before):
            return f"custom_kernel changed {where} (a {type(before).__name__} of {len(before)})"
        for j, (b, n) in enumerate(zip(before, now, strict=True)):
            changed = _changed(b, n, f"{where}[{j}]")
            if changed:
                return changed
        return None
    if isinstance(before, dict):
        if not isinstance(now, dict) or now.keys() != before.keys():
            return f"custom_kernel changed {where}'s keys"
        for key in before:
            changed = _changed(before[key], now[key], f"{where}[{key!r}]")
            if changed:
                return changed
        return None
    if before == now or (before != before and now != now):  # NaN stays NaN
        return None
    return f"custom_kernel changed {where} from {before!r} to {now!r}"


def _clone_inputs(value: Any) -> Any:
    """A deep copy of the tensors, nested ones too: the reference runs on one, the other stays pristine."""
    if isinstance(value, torch.Tensor):
        return value.clone()
    if type(value) in (list, tuple):  # a namedtuple is passed as it is
        return type(value)(_clone_inputs(v) for v in value)
    if isinstance(value, dict):
        return {k: _clone_inputs(v) for k, v in value.items()}
    return value


def _merge_metrics(into: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    if not into:
        return dict(new)
    merged = dict(into)
    for key in ("max_abs", "max_rel", "mse", "rmse"):
        merged[key] = max(into.get(key, 0.0), new.get(key, 0.0))
    merged["cosine"] = min(into.get("cosine", 1.0), new.get("cosine", 1.0))
    psnrs = [p for p in (into.get("psnr"), new.get("psnr")) if p is not None]
    merged["psnr"] = min(psnrs) if psnrs else None
    return merged


def _worst(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The headline figures over every case: the largest errors, the smallest PSNR and cosine."""
    judged = [r for r in results if "max_abs" in r]
    if not judged:
        return {}
    psnrs = [r["psnr"] for r in judged if r.get("psnr") is not None]
    return {
        "max_abs": max(r["max_abs"] for r in judged),
        "max_rel": max(r["max_rel"] for r in judged),
        "mse": max(r["mse"] for r in judged),
        "rmse": max(r["rmse"] for r in judged),
        "psnr": min(psnrs) if psnrs else None,
        "cosine": min(r["cosine"] for r in judged),
    }


def _geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def _low_precision(problem: Problem, case: dict[str, Any], inputs: tuple[Any, ...]) -> bool:
    """Whether the matrix-unit ceiling is the bf16/fp16 one: cost may say so, else the inputs' dtypes do."""
    declared = problem.cost(dict(case)).get("dtype")
    if isinstance(declared, str):
        return declared in ("bf16", "fp16", "bfloat16", "float16", "fp8")
    return any(isinstance(t, torch.Tensor) and t.dtype in (torch.bfloat16, torch.float16) for t in inputs)


def clean_stale_scratch() -> None:
    """Scratch folders of workers killed with their judge are left in the temp folder; nothing else is."""
    import tempfile

    for folder in Path(tempfile.gettempdir()).glob("kerneltui-*-*"):
        try:
            if time.time() - folder.stat().st_mtime > 24 * 3600:
                shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            continue
