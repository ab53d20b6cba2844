"""Correctness: every case × seeds_per_case fresh secret seeds. The inputs go to the version's worker; only
after its outputs come back does the judge compute the reference and compare (the tolerance, the problem's
own check, or both); its inputs must be unchanged, but for the output buffers the problem names."""

from __future__ import annotations

import contextlib
import secrets
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import torch

from harness.contract.messages import CallReply, CallRequest, Failure, ProfiledRequest
from harness.contract.results import Flag, RungResult
from harness.judge import determinism, narrow, vacuous
from harness.judge.confirm import vary
from harness.judge.lacks import lacking
from harness.judge.outputs import buffers_of, clone_inputs, judge_outputs, mutated_inputs, returned, unread_inputs
from harness.problem import precision
from harness.problem.load import case_label
from harness.problem.rung import rung
from harness.wire import frames as wire
from harness.workers.process import WorkerFailure, WorkerProcess

if TYPE_CHECKING:
    from harness.judge.context import JudgeContext, VersionRun


@rung("correctness", after=("compile",))
def correctness(judge: JudgeContext, run: VersionRun) -> RungResult:
    if not judge.cuda and "cutedsl" in run.dsls:
        return RungResult.skip("correctness", "CuTeDSL kernels run only on a GPU; no GPU here (compiled only)")
    if not judge.cuda and "tilelang" in run.dsls:
        return RungResult.skip("correctness", "TileLang kernels need a GPU to run; no GPU here (compiled only)")
    mode = "cuda" if judge.cuda else "triton-interpreter"
    if lacking(run.warmup_error):
        return RungResult.skip("correctness", lacking(run.warmup_error) or "")
    if run.warmup_error:
        return RungResult(
            name="correctness",
            ok=False,
            err=f"the first call failed: {run.warmup_error}",
            metrics={"mode": mode},
        )
    worker = run.workers["run"]
    results, first_error = _every_case(judge, run, worker)
    if lacking(first_error):
        return RungResult.skip("correctness", lacking(first_error) or "")
    metrics = {
        "mode": mode,
        "cases": results,
        **_worst(results),
        "n_cases": len(run.problem.cases),
        "n_seeds": judge.options.seeds_per_case,
        "held_to": run.problem.held_to(),  # the tolerance, and the precision the reference was computed at
        "reference_precision": run.problem.reference_precision,
    }
    if first_error is None and results:
        first_error = _twice(judge, run, worker)
    collect_shared_profiles(judge, run, worker)
    warnings = _problem_warnings(judge, run, results)
    if first_error is None and results:
        run.ev.flags += _narrow_flags(judge, run, worker, results)
        collect_shared_profiles(judge, run, worker)
    if warnings:
        metrics["warnings"] = warnings
    if run.observed.cuda_kernels:  # what CUPTI saw launched past torch's ops: the version's own kernels
        metrics["cuda_kernels"] = dict(run.observed.cuda_kernels.most_common(8))
    return RungResult(name="correctness", ok=first_error is None, err=first_error, metrics=metrics)


def _every_case(judge: JudgeContext, run: VersionRun, worker: WorkerProcess) -> tuple[list[dict[str, Any]], str | None]:
    """Every case × seeds_per_case fresh seeds (the first seed of each also tries the stand-ins); stops at a
    fatal failure. The outcomes, and the first error."""
    results: list[dict[str, Any]] = []
    first_error: str | None = None
    for case in run.problem.cases:
        for index in range(judge.options.seeds_per_case):
            seed = secrets.randbelow(2**31)
            run.ev.seeds.append(seed)
            outcome, _, _ = check_case(judge, run, worker, case, seed, probe=index == 0, shared_profile=True)
            results.append(outcome)
            if outcome["err"] and first_error is None:
                first_error = f"case {case_label(case)} (seed {seed}): {outcome['err']}"
            if outcome.get("fatal"):
                return results, first_error
    return results, first_error


def _twice(judge: JudgeContext, run: VersionRun, worker: WorkerProcess) -> str | None:
    """Why the version fails for giving other outputs on the same inputs (harness.judge.determinism), or None."""
    case, seed = run.problem.cases[0], secrets.randbelow(2**31)
    inputs = run.problem.inputs_for(case, seed, judge.device)
    outputs = []
    for poison in (0xFF, determinism.SECOND_POISON):
        again = clone_inputs(inputs)
        outcome, _, out = check_case(judge, run, worker, case, seed, inputs=again, poison=poison, shared_profile=True)
        if outcome["err"]:
            return f"case {case_label(case)} (seed {seed}), called again on the same inputs: {outcome['err']}"
        outputs.append(out)
    where = determinism.differs(run.problem, outputs[0], outputs[1])
    return None if where is None else determinism.failure(case_label(case), seed, where)


def _problem_warnings(judge: JudgeContext, run: VersionRun, results: list[dict[str, Any]]) -> list[str]:
    """What the problem's own check lets through, and a reference that differs from itself (harness.judge.vacuous)."""
    passed = {name: [r["case"] for r in results if name in r.get("stand_ins", ())] for name in vacuous.STAND_INS}
    warnings = [w for w in [vacuous.stand_in_warning(passed)] if w]
    first = run.problem.cases[0]
    differs = vacuous.differs_from_itself(run, run.problem.inputs_for(first, 0, judge.device))
    return warnings + ([differs] if differs else [])


def _narrow_flags(
    judge: JudgeContext, run: VersionRun, worker: WorkerProcess, results: list[dict[str, Any]]
) -> list[Flag]:
    """weak-match for a pass that barely points the reference's way; narrow-inputs where the version differs from
    the reference on the first case's inputs drawn beyond the problem's distribution (harness.judge.narrow)."""
    flags = [f for f in [vacuous.weak_match(results)] if f]
    case, seed = run.problem.cases[0], secrets.randbelow(2**31)
    inputs = run.problem.inputs_for(case, seed, judge.device)

    def moved() -> tuple[dict[str, Any], tuple[Any, ...]]:
        other = vary(run.problem, case, seed)
        return other, run.problem.inputs_for(other, seed, judge.device) if other != case else ()

    differ = []
    for variant in narrow.variants(inputs, case, seed, moved):
        try:
            given = variant.inputs
            outcome, _, _ = check_case(judge, run, worker, variant.case, seed, inputs=given, shared_profile=True)
        except Exception:  # the reference (or the problem's check) cannot take these inputs: nothing to hold it to
            continue
        if outcome["err"]:
            differ.append(f"{variant.name} inputs of case {outcome['case']}: {outcome['err']}"[:300])
        if outcome.get("fatal"):  # its process died on them: the rungs after this one get a fresh one
            judge.replace_worker(run, worker)
            break
    if differ:
        flags.append(Flag("narrow-inputs", "passes the problem's inputs but not " + "; ".join(differ[:3])))
    return flags


def check_case(
    judge: JudgeContext,
    run: VersionRun,
    worker: WorkerProcess,
    case: dict[str, Any],
    seed: int,
    inputs: tuple[Any, ...] | None = None,
    probe: bool = False,
    poison: int = 0xFF,
    shared_profile: bool = False,
) -> tuple[dict[str, Any], tuple[Any, ...], Any]:
    """Calls the version on one case in `worker` (on `inputs`, else the case's for this seed) and holds its
    outputs to the reference. Returns the outcome, the judge's pristine copy of the inputs, and the version's
    outputs as the reference returns them (one tensor or a tuple; None where the call failed). `probe`: the
    outcome also says which stand-ins for an answer the check would pass (harness.judge.vacuous).
    `shared_profile`: the call's profile comes later, with collect_shared_profiles."""
    outcome: dict[str, Any] = {"case": case_label(case), "seed": seed, "ok": False, "err": None}
    inputs = run.problem.inputs_for(case, seed, judge.device) if inputs is None else inputs
    pristine = tuple(clone_inputs(t) for t in inputs)
    buffers_of(run.problem, pristine)  # output_buffers must name tensors of these inputs
    tensors: list[torch.Tensor] = []
    tree = wire.encode_tree(list(inputs), tensors)
    budget = 8 * sum(t.numel() * t.element_size() for t in tensors) + (1 << 30)
    # the reference computes on copies of its own while the worker computes the version's outputs
    reference = judge.beside.submit(run.problem.reference, *[clone_inputs(t) for t in pristine])
    try:
        request = CallRequest(tree, poison, shared_profile)
        called = _call(run, worker, request, tensors, judge.options.timeout, budget, outcome, pristine)
    except BaseException:
        _settle(reference)
        raise
    if called is None:
        _settle(reference)
        return outcome, pristine, None
    reply, outputs, after = called
    expected = reference.result()
    err, metrics = judge_outputs(run, outputs, expected, list(reply.devices), inputs=pristine)
    mutated = mutated_inputs(list(pristine), after, skip=run.problem.output_buffers)
    if mutated and not err:  # written: allowed where the reference's answer does not read it (an output buffer)
        free = unread_inputs(run.problem, pristine, expected)
        err = mutated_inputs(list(pristine), after, skip=run.problem.output_buffers + free)
    if err:
        on_gpu = judge.device.type == "cuda"
        ops = run.observed.ops | run.observed.profiled_ops  # as the judge read them from this and earlier calls
        err += precision.tf32_hint(list(ops), run.problem.reference_precision, on_gpu)
    outcome.update(ok=err is None, err=err, **metrics)
    if probe:
        outcome["stand_ins"] = vacuous.passing_stand_ins(run, pristine, expected)
    single = not isinstance(expected, (tuple, list)) and isinstance(outputs, (tuple, list)) and len(outputs) == 1
    return outcome, pristine, outputs[0] if single else outputs  # the worker sends a tuple either way


def _call(
    run: VersionRun,
    worker: WorkerProcess,
    request: CallRequest,
    tensors: list[torch.Tensor],
    timeout: float,
    budget: int,
    outcome: dict[str, Any],
    pristine: tuple[Any, ...],
) -> tuple[CallReply, Any, Any] | None:
    """The version called in `worker`: its reply, outputs and inputs as it left them; None where it failed (why
    is in `outcome`)."""
    try:
        reply, got = worker.ask(request, tensors, timeout, "", max_payload=budget)
        if isinstance(reply, Failure):
            outcome.update(err=reply.err, log=reply.trace, fatal=reply.kind in ("cuda",))
            return None
        outcome["call_s"] = round(reply.seconds, 4)
        label = outcome["case"]
        run.observed.add(reply.recorded, "run", f"case {label}", profiled=worker.profiles_calls)
        # returned None: what it wrote into the buffers is its output
        outputs, after = returned(run.problem, reply, got, pristine)
    except WorkerFailure as exc:
        outcome.update(err=str(exc).split("\n")[0], fatal=True, log=str(exc))
        return None
    return reply, outputs, after


def collect_shared_profiles(judge: JudgeContext, run: VersionRun, worker: WorkerProcess) -> None:
    """What torch's profiler saw of the calls that shared its session in `worker`, added to the version's record.
    One session over a rung's calls, not one each: stopping a session and reading its events cost most of a small
    call. A worker that died since took them with it: the call that killed it already failed or flagged the version."""
    if not run.observed.pending:
        return
    if run.workers.get(worker.mode) is not worker:  # replaced: its process died with them
        run.observed.add_shared_profiles(None, lost_with_worker=True)
        return
    try:
        reply, _ = worker.ask(ProfiledRequest(), [], judge.options.timeout, "collecting the calls' profiles")
    except WorkerFailure:
        run.observed.add_shared_profiles(None, lost_with_worker=True)
        return
    run.observed.add_shared_profiles(None if isinstance(reply, Failure) else reply.records)


def _settle(reference: Future[Any]) -> None:
    """A reference no one will read, cancelled or waited for: the next case's inputs are not made while it runs
    (a reference may seed torch's global generator)."""
    if not reference.cancel():
        with contextlib.suppress(Exception):
            reference.result()


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
