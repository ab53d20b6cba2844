"""Correctness: every case × seeds_per_case fresh secret seeds. The inputs go to the version's worker; only
after its outputs come back does the judge compute the reference and compare (the tolerance, the problem's
own check, or both); its inputs must be unchanged, but for the output buffers the problem names."""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Any

import torch

from harness import wire
from harness.metrics import compare
from harness.problem import Problem, ProblemError, case_label, check_answer, leaf_at
from harness.results import RungResult
from harness.rungs import rung
from harness.workers import WorkerFailure, WorkerProcess

if TYPE_CHECKING:
    from harness.ladder import Ladder, VersionRun


@rung("correctness", after=("compile",))
def correctness(ladder: Ladder, run: VersionRun) -> RungResult:
    if not ladder.cuda and "cutedsl" in run.dsls:
        return RungResult.skip("correctness", "CuTeDSL kernels run only on a GPU; no GPU here (compiled only)")
    if not ladder.cuda and "tilelang" in run.dsls:
        return RungResult.skip("correctness", "TileLang kernels need a GPU to run; no GPU here (compiled only)")
    mode = "cuda" if ladder.cuda else "triton-interpreter"
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
        for _ in range(ladder.options.seeds_per_case):
            seed = secrets.randbelow(2**31)
            run.ev.seeds.append(seed)
            outcome, _, _ = check_case(ladder, run, worker, case, seed)
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
        "n_seeds": ladder.options.seeds_per_case,
    }
    if run.observed.cuda_kernels:  # what CUPTI saw launched past torch's ops: the version's own kernels
        metrics["cuda_kernels"] = dict(run.observed.cuda_kernels.most_common(8))
    return RungResult(name="correctness", ok=first_error is None, err=first_error, metrics=metrics)


def check_case(
    ladder: Ladder, run: VersionRun, worker: WorkerProcess, case: dict[str, Any], seed: int
) -> tuple[dict[str, Any], tuple[Any, ...], Any]:
    """Calls the version on one case in `worker` and holds its outputs to the reference. Returns the outcome,
    the judge's pristine copy of the inputs, and the version's outputs as the reference returns them (one
    tensor or a tuple; None where the call failed)."""
    outcome: dict[str, Any] = {"case": case_label(case), "seed": seed, "ok": False, "err": None}
    inputs = run.problem.inputs_for(case, seed, ladder.device)
    pristine = tuple(clone_inputs(t) for t in inputs)
    buffers_of(run.problem, pristine)  # output_buffers must name tensors of these inputs
    tensors: list[torch.Tensor] = []
    tree = wire.encode_tree(list(inputs), tensors)
    budget = 8 * sum(t.numel() * t.element_size() for t in tensors) + (1 << 30)
    try:
        reply, got = worker.request(
            {"op": "call", "inputs": tree}, tensors, ladder.options.timeout, "", max_payload=budget
        )
    except WorkerFailure as exc:
        outcome.update(err=str(exc).split("\n")[0], fatal=True, log=str(exc))
        return outcome, pristine, None
    if not reply.get("ok"):
        outcome.update(err=reply.get("err"), log=reply.get("trace"), fatal=reply.get("kind") in ("cuda",))
        return outcome, pristine, None
    outcome["call_s"] = round(float(reply.get("seconds", 0.0)), 4)
    run.observed.add(reply.get("recorded"), "run", f"case {case_label(case)}", profiled=worker.profiles_calls)
    try:
        outputs = wire.decode_tree(reply["outputs"], got)
        after = wire.decode_tree(reply["inputs_after"], got)
    except KeyError as exc:
        outcome.update(err=f"malformed reply from the kernel's process (no {exc}): was it forged?", fatal=True)
        return outcome, pristine, None
    except wire.ChannelError as exc:
        outcome.update(err=f"malformed reply from the kernel's process: {exc}", fatal=True)
        return outcome, pristine, None
    if not outputs and run.problem.output_buffers:  # returned None: what it wrote into the buffers is its output
        outputs = buffers_of(run.problem, after)
    # The reference runs only now, after the kernel's outputs are in hand.
    expected = run.problem.reference(*[clone_inputs(t) for t in pristine])
    devices_seen = [spec.get("device") for spec in reply.get("tensors", [])]
    err, metrics = judge_outputs(run, outputs, expected, devices_seen, inputs=pristine)
    mutated = mutated_inputs(list(pristine), after, skip=run.problem.output_buffers)
    if mutated and not err:  # written: allowed where the reference's answer does not read it (an output buffer)
        free = unread_inputs(run.problem, pristine, expected)
        err = mutated_inputs(list(pristine), after, skip=run.problem.output_buffers + free)
    outcome.update(ok=err is None, err=err, **metrics)
    single = not isinstance(expected, (tuple, list)) and isinstance(outputs, (tuple, list)) and len(outputs) == 1
    return outcome, pristine, outputs[0] if single else outputs  # the worker sends a tuple either way


def buffers_of(problem: Problem, inputs_after: Any) -> tuple[Any, ...]:
    """The output buffers as the version left them: its outputs when it returned None."""
    found = tuple(leaf_at(inputs_after, where, problem.name) for where in problem.output_buffers)
    for where, leaf in zip(problem.output_buffers, found, strict=True):
        if not isinstance(leaf, torch.Tensor):
            raise ProblemError(
                f"{problem.name}: output_buffers in problem.py names {list(where)}, a {type(leaf).__name__}, "
                "not a tensor"
            )
    return found


def judge_outputs(
    run: VersionRun, outputs: Any, expected: Any, devices_seen: list[Any], inputs: tuple[Any, ...] | None = None
) -> tuple[str | None, dict[str, Any]]:
    """The version's outputs held to the reference's count, shape, dtype, device and tolerance, and to the
    problem's check where it has one (given `inputs`, the judge's pristine copy; the check gets a clone). With
    no tolerance the check alone decides, the errors against the reference reported beside it."""
    err, metrics = _against_reference(run, outputs, expected, devices_seen)
    check = run.problem.check
    if check is None or inputs is None:
        return err, metrics
    if run.problem.has_tolerance:
        return err or _checked(run.problem, check, inputs, outputs, expected), metrics
    if err is None:  # the check is the verdict; the errors against the reference stay as figures
        return _checked(run.problem, check, inputs, outputs, expected), metrics
    try:
        return _checked(run.problem, check, inputs, outputs, expected), metrics
    except Exception:  # a check that cannot take an output of the wrong count, shape or dtype: that is the error
        return err, metrics


def _checked(problem: Problem, check: Any, inputs: tuple[Any, ...], outputs: Any, expected: Any) -> str | None:
    """The problem's check on the judge's own copy of the inputs and the version's outputs (on the reference's
    device, one tensor or a tuple as the reference returns them)."""
    want = expected if isinstance(expected, (tuple, list)) else (expected,)
    have = tuple(outputs) if isinstance(outputs, (tuple, list)) else (outputs,)
    device = want[0].device if want and isinstance(want[0], torch.Tensor) else None
    moved = [t.to(device) if device is not None and isinstance(t, torch.Tensor) else t for t in have]
    given: Any = moved[0] if len(moved) == 1 and not isinstance(expected, (tuple, list)) else tuple(moved)
    answer = check(clone_inputs(tuple(inputs)), given)
    message = check_answer(answer, problem.name)
    return None if message is None else f"the problem's check: {message}"


def _against_reference(
    run: VersionRun, outputs: Any, expected: Any, devices_seen: list[Any]
) -> tuple[str | None, dict[str, Any]]:
    want = expected if isinstance(expected, (tuple, list)) else (expected,)
    wrong = next((type(w).__name__ for w in want if not isinstance(w, torch.Tensor)), None)
    if wrong:
        problem = run.problem.path.parent.name
        raise ProblemError(f"{problem}: reference returned a {wrong}; it must return torch tensors (or a tuple)")
    have = tuple(outputs) if isinstance(outputs, (tuple, list)) else (outputs,)
    if not have and want:
        return "returned None; return the output tensor(s)", {}
    if len(have) != len(want):
        return _count_error(len(have), want, isinstance(expected, (tuple, list))), {}
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


def _count_error(count: int, want: tuple[Any, ...] | list[Any], several: bool) -> str:
    """The wrong number of outputs, and what the reference returns: its outputs' dtypes and shapes."""
    listed = ", ".join(f"{str(w.dtype).removeprefix('torch.')} of shape {tuple(w.shape)}" for w in want)
    returns = f"a tuple of {len(want)}: {listed}" if several else f"one tensor, {listed}"
    return f"returned {count} output{'' if count == 1 else 's'}; the reference returns {returns}"


def mutated_inputs(pristine: list[Any], after: Any, skip: tuple[tuple[Any, ...], ...] = ()) -> str | None:
    """What the version changed in its inputs, nested ones included (a list of tensors, an options dict); the
    leaves at `skip` (the problem's output buffers) may be written, but not reshaped."""
    after = list(after) if isinstance(after, (list, tuple)) else [after]
    for i, (before, now) in enumerate(zip(pristine, after, strict=False)):
        changed = _changed(before, now, f"input {i}", (i,), skip)
        if changed:
            return changed
    return None


def _changed(before: Any, now: Any, where: str, path: tuple[Any, ...] = (), skip: tuple[Any, ...] = ()) -> str | None:
    if isinstance(before, torch.Tensor) and path in skip:
        if not isinstance(now, torch.Tensor) or now.shape != before.shape or now.dtype != before.dtype:
            return f"custom_kernel changed {where}'s shape or dtype (an output buffer)"
        return None
    if isinstance(before, torch.Tensor):
        if not isinstance(now, torch.Tensor) or now.shape != before.shape or now.dtype != before.dtype:
            return f"custom_kernel changed {where}'s shape or dtype"
        b = now.detach().contiguous().view(-1).view(torch.uint8)  # on the device the reply left it on
        a = before.detach().to(b.device).contiguous().view(-1).view(torch.uint8)
        if torch.equal(a, b):
            return None
        size = before.element_size()  # elements compared as their bytes: fp4 and fp8 have no != of their own
        count = int((a.view(-1, size) != b.view(-1, size)).any(dim=1).sum()) if size else 0
        return f"custom_kernel modified its {where} in place ({count} of {before.numel()} elements changed)"
    if isinstance(before, (list, tuple)):  # the wire hands tuples back as lists
        if not isinstance(now, (list, tuple)) or len(now) != len(before):
            return f"custom_kernel changed {where} (a {type(before).__name__} of {len(before)})"
        for j, (b, n) in enumerate(zip(before, now, strict=True)):
            changed = _changed(b, n, f"{where}[{j}]", (*path, j), skip)
            if changed:
                return changed
        return None
    if isinstance(before, dict):
        if not isinstance(now, dict) or now.keys() != before.keys():
            return f"custom_kernel changed {where}'s keys"
        for key in before:
            changed = _changed(before[key], now[key], f"{where}[{key!r}]", (*path, key), skip)
            if changed:
                return changed
        return None
    if before == now or (before != before and now != now):  # NaN stays NaN
        return None
    return f"custom_kernel changed {where} from {before!r} to {now!r}"


def unread_inputs(problem: Problem, pristine: tuple[Any, ...], expected: Any) -> tuple[tuple[Any, ...], ...]:
    """The tensor inputs whose contents the reference's answer does not depend on: each in turn has its bytes
    inverted and the reference run again; where its answer stays the same to the byte, that input is space for
    the output (GPU MODE hands `torch.empty` output tensors in `data`), not an input, and may be written."""
    free = []
    for path in _tensor_paths(pristine, ()):
        if path in problem.output_buffers:
            continue
        inputs = clone_inputs(pristine)
        _invert(leaf_at(inputs, path, problem.name))
        try:
            again = problem.reference(*inputs)
        except Exception:  # it read the garbage: an input it is
            continue
        if _same_bytes(again, expected):
            free.append(path)
    return tuple(free)


def _tensor_paths(value: Any, path: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    if isinstance(value, torch.Tensor):
        return [path] if value.numel() else []
    if isinstance(value, (list, tuple)):
        return [p for i, item in enumerate(value) for p in _tensor_paths(item, (*path, i))]
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in _tensor_paths(item, (*path, key))]
    return []


def _invert(tensor: torch.Tensor) -> None:
    if tensor.dtype == torch.bool:
        tensor.logical_not_()
        return
    flipped = tensor.detach().clone().contiguous()
    flipped.reshape(-1).view(torch.uint8).bitwise_not_()
    tensor.copy_(flipped)


def _same_bytes(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        return torch.equal(
            a.detach().contiguous().reshape(-1).view(torch.uint8), b.detach().contiguous().reshape(-1).view(torch.uint8)
        )
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_bytes(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def clone_inputs(value: Any) -> Any:
    """A deep copy of the tensors, nested ones too: the reference runs on one, the other stays pristine."""
    if isinstance(value, torch.Tensor):
        return value.clone()
    if type(value) in (list, tuple):  # a namedtuple is passed as it is
        return type(value)(clone_inputs(v) for v in value)
    if isinstance(value, dict):
        return {k: clone_inputs(v) for k, v in value.items()}
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
