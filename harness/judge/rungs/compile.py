"""Compile: on a GPU the first call (on the first correctness case) JIT-compiles what it launches; with no GPU a
compile-only worker calls the version on the first bench case (shapes only) and every correctness case, and
launches become compiles.
Registers, spills and shared memory come from each kernel's cubin."""

from __future__ import annotations

import base64
import contextlib
import secrets
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import torch

from harness.contract.messages import (
    CallReply,
    CallRequest,
    CompileReply,
    CompileRequest,
    Failure,
    PrecompileRequest,
    Request,
)
from harness.contract.options import Options
from harness.contract.results import RungResult
from harness.contract.text import printable
from harness.gpu import precompile
from harness.judge import artifacts as dumps_mod
from harness.problem.load import Problem, case_label
from harness.problem.rung import rung
from harness.problem.shapes_only import on_meta
from harness.wire import frames as wire
from harness.workers.process import WorkerFailure, WorkerProcess

if TYPE_CHECKING:
    from harness.judge.context import JudgeContext, VersionRun

# Compiling ahead is only a head start: a version still at it after this long (a hang on outputs its kernels
# never wrote, say) loses its worker to a fresh one, and its calls compile as they go.
PRECOMPILE_BUDGET_S = 30.0
MAX_RECORDED = 256  # launches read from one call's record (harness.judge.trust caps them alike)


@rung("compile", after=("load",))
def compile_version(judge: JudgeContext, run: VersionRun) -> RungResult:
    ask: type[CallRequest | CompileRequest]
    if judge.cuda:
        # The first correctness case, not the (large) bench case: the correctness verdict never waits for
        # benchmark-sized inputs; the bench case's own specialisations compile ahead by its shapes (inputs_ahead).
        worker = run.workers["run"]
        plan = [((run.problem.cases or run.problem.bench_cases)[0], judge.device)]
        mode, arch, ask = "jit", judge.device_info.get("arch", "?"), CallRequest
    else:
        worker = judge.worker(run, "compile")
        loaded = judge.load_into(worker, run)
        if isinstance(loaded, Failure):
            return RungResult(name="compile", ok=False, err=loaded.err, log=loaded.trace)
        # Shapes only for the (large) bench case; CuTeDSL's from_dlpack needs real memory.
        shapes_only = bool(run.problem.bench_cases) and "cutedsl" not in run.dsls
        plan = [((run.problem.bench_cases or run.problem.cases)[0], torch.device("meta"))] * shapes_only
        plan += [(case, torch.device("cpu")) for case in run.problem.cases]
        mode, arch, ask = "aot", judge.aot_arch, CompileRequest
    metrics: dict[str, Any] = {"mode": mode, "arch": arch}
    if mode == "aot":
        metrics["note"] = f"compiled ahead of time for {arch}: no GPU here"
    planned = [(case, where, _make_inputs(run.problem, case, where)) for case, where in plan]
    labels = _precompile(judge, run, worker, planned, metrics)
    if worker is not run.workers[worker.mode]:  # it died or hung compiling ahead: a fresh one took its place
        worker = run.workers[worker.mode]
        reloaded = metrics["precompile"].pop("reloaded")
        if isinstance(reloaded, Failure):
            err = f"it did not load again in a fresh worker: {reloaded.err}"
            return RungResult(name="compile", ok=False, err=err, metrics=metrics, log=reloaded.trace)
    failures: list[dict[str, Any]] = []
    for case, where, inputs in planned:
        if inputs is None:
            continue  # make_inputs cannot build this case on the meta device: the CPU cases still compile
        tensors: list[torch.Tensor] = []
        tree = wire.encode_tree(list(inputs), tensors)
        what = "in the first call (JIT compile)" if mode == "jit" else "while compiling ahead of time"
        reply = _compile_call(judge, worker, ask(tree), tensors, what)
        if isinstance(reply, CompileReply):
            run.observed.add(reply.recorded, "compile", case_label(case))
        # on a GPU the kernels compiled ahead for the other cases are listed by the case that launched them
        ahead = set(labels) if mode == "jit" else set()
        record = None if isinstance(reply, Failure) else reply.recorded
        collect_kernels(run, worker, caps_for(judge.options), case_label(case), labels, record, ahead)
        if not isinstance(reply, Failure):
            continue
        if reply.kind == "compile":
            metrics["kernels"] = [k.summary() for k in run.kernels]
            return RungResult(name="compile", ok=False, err=reply.err, metrics=metrics, log=reply.trace)
        hint = " (given shape-only inputs)" if where.type == "meta" else ""
        failures.append({"case": case_label(case) + hint, "err": reply.err, "trace": reply.trace})
        if mode == "jit" or reply.kind == "worker":
            break
    metrics["kernels"] = [k.summary() for k in run.kernels]
    return _verdict(run, metrics, failures, mode, arch)


def collect_kernels(
    run: VersionRun,
    worker: WorkerProcess,
    caps: dumps_mod.Caps,
    label: str,
    labels: dict[str, str] | None = None,
    record: Any = None,
    ahead: set[str] | frozenset[str] = frozenset(),
) -> None:
    """Adds kernels compiled since the last look, each labelled with the case that compiled it: `labels`'s by
    Triton cache group where it names one (kernels compiled ahead for every case), else `label`. Within `caps`
    for the whole version; what the judge refused (harness.judge.artifacts.Collected) flags it. Only the Triton kernels
    launched (launched_groups, with `record`: a call's record not yet among the observed) or in `ahead`."""
    known = {_identity(k) for k in run.kernels}
    into = run.private / worker.mode
    seen_groups = {k.group for k in run.kernels if k.group}  # not copied out again at every look
    collected = collected_so_far(run, caps)
    skip = worker.compiled_before_version | seen_groups
    launched = launched_groups(run, record)
    only = None if launched is None else launched | ahead
    found = dumps_mod.collect_triton(worker.scratch, into, skip=skip, collected=collected, only=only)
    found += dumps_mod.collect_cutedsl(worker.scratch, into, collected=collected)
    found += dumps_mod.collect_tilelang(worker.scratch, into, collected=collected)
    run.observed.refused.update(collected.refused)
    fresh = [kernel for kernel in found if _identity(kernel) not in known]
    if fresh:
        with ThreadPoolExecutor(min(precompile.threads(), len(fresh))) as pool:  # ptxas for spills: at once
            clock = dumps_mod.ToolClock()
            list(pool.map(lambda kernel: dumps_mod.read_resources(kernel, clock), fresh))
    for kernel in fresh:
        kernel.case = (labels or {}).get(kernel.group, label)
    run.kernels += in_case_order(fresh, list((labels or {}).values()))


def launched_groups(run: VersionRun, record: Any = None) -> set[str] | None:
    """The Triton cache groups of the specialisations launched, from the compiled kernels' hashes the launches
    recorded: listings name these, not whatever the worker's cache holds under a kernel's name (an entry planted
    there, dated back to be listed first). None where no launch recorded a hash (a Triton that returns none)."""
    launches = [launch for found in run.observed.launches.values() for launch in found]
    more = record.get("launches") if isinstance(record, dict) else None
    launches += more[:MAX_RECORDED] if isinstance(more, list) else []
    hashes = {str(launch["hash"]) for launch in launches if isinstance(launch, dict) and launch.get("hash")}
    return {group for digest in hashes for group in _cache_groups(digest)} or None


def _cache_groups(digest: str) -> set[str]:
    """The folder names Triton gives the cache group of a kernel compiled with this hash: the hash itself, or
    in base32 (harness.gpu.precompile.cache_group)."""
    try:
        return {digest, base64.b32encode(bytes.fromhex(digest)).decode().rstrip("=")}
    except ValueError:
        return {digest}


def prune_unlaunched(run: VersionRun) -> None:
    """Drops the Triton kernels no recorded launch ran (listed ahead by the case that would launch them)."""
    launched = launched_groups(run)
    if launched is not None:
        run.kernels = [k for k in run.kernels if k.dsl != "triton" or k.group in launched]


def caps_for(options: Options) -> dumps_mod.Caps:
    return dumps_mod.Caps(
        kernels=options.max_kernels,
        file_bytes=int(options.max_dump_file_mb * (1 << 20)),
        version_bytes=int(options.max_dumps_mb * (1 << 20)),
    )


def collected_so_far(run: VersionRun, caps: dumps_mod.Caps) -> dumps_mod.Collected:
    """The version's collection as its kernels stand: the caps hold for all its looks together."""
    held = sum(path.stat().st_size for kernel in run.kernels for path in kernel.files.values() if path.exists())
    return dumps_mod.Collected(caps=caps, kernels=len(run.kernels), held_bytes=held)


def in_case_order(kernels: list[dumps_mod.Kernel], cases: list[str]) -> list[dumps_mod.Kernel]:
    """Each kernel's specialisations in the order of the cases that compiled them (`cases`, as planned), not of
    when their compiles ended: compiled ahead at once on threads, a large case's may end first."""
    rank = {case: i for i, case in reversed(list(enumerate(cases)))}
    return sorted(kernels, key=lambda k: (k.name, rank.get(k.case or "", len(rank))))


def _precompile(
    judge: JudgeContext,
    run: VersionRun,
    worker: WorkerProcess,
    planned: list[tuple[dict[str, Any], torch.device, tuple[Any, ...] | None]],
    metrics: dict[str, Any],
) -> dict[str, str]:
    """A Triton version's kernels compiled for every case of the plan, and every correctness case, at once
    (harness.gpu.precompile), before the calls that would compile them one by one. Notes what it did in `metrics`;
    returns each compiled group's case. Should the worker die or hang at it, a fresh one takes its place."""
    if "triton" not in run.dsls or {"cutedsl", "tilelang"} & set(run.dsls):
        return {}
    ahead = inputs_ahead(run.problem, planned)
    tensors: list[torch.Tensor] = []
    trees = [wire.encode_tree(list(inputs), tensors) for _, inputs in ahead]
    timeout = min(judge.options.timeout, PRECOMPILE_BUDGET_S)
    try:
        reply, _ = worker.ask(PrecompileRequest(tuple(trees)), tensors, timeout, "while compiling ahead")
    except WorkerFailure as exc:
        metrics["precompile"] = {"ok": False, "why": str(exc).split("\n")[0]}
        metrics["precompile"]["reloaded"] = judge.replace_worker(run, worker)
        return {}
    if isinstance(reply, Failure) or len(reply.keys_by_case) != len(ahead):
        why = reply.err if isinstance(reply, Failure) else "malformed reply"
        metrics["precompile"] = {"ok": False, "why": printable(why or "malformed reply")[:200]}
        return {}
    metrics["precompile"] = {
        "seconds": reply.seconds,
        "kernels": reply.kernels,
        "threads": reply.threads,
        "failed_calls": reply.failed_calls,
        "launchers": reply.launchers,
    }
    found_by_case = zip([case for case, _ in ahead], reply.keys_by_case, strict=True)
    return {k: case_label(case) for case, found in found_by_case for k in found[:256]}


def inputs_ahead(
    problem: Problem, planned: list[tuple[dict[str, Any], torch.device, tuple[Any, ...] | None]]
) -> list[tuple[dict[str, Any], tuple[Any, ...]]]:
    """What the version is called on to compile ahead: the plan's inputs, every correctness case's (on the CPU)
    and the bench cases' by shape alone (on the meta device, where that costs no data). On a GPU the worker turns
    those into CPU tensors it never writes (harness.worker.main.compile_cases): its bench-case kernels are then
    compiled beside the others, not in the benchmark's first call (measured on an H100: the recorded call 0.125 s,
    and their SASS listed after the benchmark, not while it timed)."""
    ahead = [(case, inputs) for case, _, inputs in planned if inputs is not None]
    for case in problem.cases:
        if all(case is not seen for seen, _, _ in planned):
            with contextlib.suppress(Exception):  # inputs that need the GPU: that case compiles in its call
                ahead.append((case, problem.inputs_for(case, secrets.randbelow(2**31), torch.device("cpu"))))
    for case in problem.bench_cases:
        if all(case is not seen for seen, _, _ in planned):
            shapes = _shapes_only(problem, case, 0, data_first=False)
            if shapes is not None:
                ahead.append((case, shapes))
    return ahead


def _identity(kernel: dumps_mod.Kernel) -> dumps_mod.Path | None:
    """Its cubin; a TileLang kernel compiled where no nvcc was found has only its CUDA source."""
    return kernel.files.get("cubin") or kernel.files.get("cu")


def smem_overflow(kernels: list[dumps_mod.Kernel], arch: str) -> str | None:
    limit = dumps_mod.smem_limit(arch)
    for kernel in kernels:
        needed = kernel.meta.get("shared") or kernel.resources.get("smem_bytes") or 0
        if limit and needed > limit:
            return f"kernel {kernel.name} needs {needed} B of shared memory; {arch} allows {limit} B per block"
    return None


def _compile_call(
    judge: JudgeContext,
    worker: WorkerProcess,
    request: Request[CallReply | CompileReply],
    tensors: list[torch.Tensor],
    what: str,
) -> CallReply | CompileReply | Failure:
    """A hang or crash here is the call's doing, not the compiler's: it is reported as such."""
    try:
        reply, _ = worker.ask(request, tensors, judge.options.timeout, what)
    except WorkerFailure as exc:
        return Failure(str(exc).split("\n")[0], kind="worker", trace=str(exc))
    return reply


def _verdict(
    run: VersionRun, metrics: dict[str, Any], failures: list[dict[str, Any]], mode: str, arch: str
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
    too_big = smem_overflow(run.kernels, arch)
    if too_big:
        return RungResult(name="compile", ok=False, err=too_big, metrics=metrics)
    return RungResult(name="compile", ok=True, metrics=metrics)


def _make_inputs(problem: Problem, case: dict[str, Any], where: torch.device) -> tuple[Any, ...] | None:
    """A case's inputs; None when shape-only (meta) inputs are what make_inputs cannot build."""
    seed = secrets.randbelow(2**31)
    if where.type == "meta":
        return _shapes_only(problem, case, seed)
    return problem.inputs_for(case, seed, where)


def _shapes_only(problem: Problem, case: dict[str, Any], seed: int, data_first: bool = True) -> tuple[Any, ...] | None:
    """A case's inputs as meta tensors. make_inputs runs under torch's meta device, so that its factory calls
    make shapes without data (a bench-sized case would take a second of the CPU's time, and the verdict waits);
    where it cannot (inputs that depend on their values), it makes them on the CPU and moves them to meta, if
    `data_first`. None where neither works."""
    meta = torch.device("meta")
    try:
        with on_meta():
            return problem.inputs_for(case, seed, meta)
    except Exception:
        pass
    try:
        return problem.inputs_for(case, seed, meta) if data_first else None
    except Exception:
        return None
