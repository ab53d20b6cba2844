"""The version's outputs held to the reference: count, shape, dtype, device, tolerance and the problem's own check;
the inputs unchanged but for the output buffers the problem names. Used by the correctness rung and by every timed
request that also checks what it computed (bench calls, the confirmation, the race)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from harness.contract.messages import BenchReply, CallReply
from harness.judge.metrics import compare
from harness.problem.load import Problem, ProblemError, check_answer, leaf_at
from harness.wire import frames as wire
from harness.workers.process import WorkerFailure

if TYPE_CHECKING:
    from harness.judge.context import VersionRun


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


def returned(
    problem: Problem, reply: CallReply | BenchReply, tensors: list[torch.Tensor], sent: tuple[Any, ...]
) -> tuple[tuple[Any, ...], Any]:
    """A call's outputs as its reply gives them (the output buffers as it left them where it returned None), and
    its inputs as it left them (None: not sent back). `sent`: the inputs the judge sent, which must hold the output
    buffers (else problem.py is at fault); inputs sent back without them are the worker's failure."""
    outputs = tuple(tensors[i] for i in reply.outputs)
    after = decoded(reply.inputs_after, tensors) if reply.inputs_after is not None else None
    if not outputs and problem.output_buffers and after is not None:
        buffers_of(problem, sent)
        try:
            outputs = buffers_of(problem, after)
        except ProblemError:
            raise WorkerFailure(
                "malformed reply from the kernel's process: the inputs it sent back do not hold the output buffers"
            ) from None
    return outputs, after


def decoded(tree: Any, tensors: list[torch.Tensor]) -> Any:
    """A reply's encoded tree as values (checked as its message was read: only a dtype this torch lacks is left to
    fail, the worker's failure)."""
    try:
        return wire.decode_tree(tree, tensors)
    except wire.ChannelError as exc:
        raise WorkerFailure(f"malformed reply from the kernel's process: {exc}") from None


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
        merged = merge_metrics(merged, result.metrics)
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


def merge_metrics(into: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    if not into:
        return dict(new)
    merged = dict(into)
    for key in ("max_abs", "max_rel", "mse", "rmse"):
        merged[key] = max(into.get(key, 0.0), new.get(key, 0.0))
    merged["cosine"] = min(into.get("cosine", 1.0), new.get("cosine", 1.0))
    psnrs = [p for p in (into.get("psnr"), new.get("psnr")) if p is not None]
    merged["psnr"] = min(psnrs) if psnrs else None
    return merged
