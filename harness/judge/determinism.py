"""The same inputs twice must give the same bytes: a version computes its first correctness case a second time (and,
before it may become the best, its first bench case: harness.judge.confirm), into memory poisoned with other bytes,
and the two outputs are compared bit for bit (within the tolerance where the
problem declares `nondeterministic = True`, for atomics). A race between programs passes the interpreter, which
runs programs in order, and an uninitialised read that happens to hold the answer passes once (a public fused kernel
read shared memory it never wrote and claimed 104x; running it twice caught it): the second call is what shows them.
"""

from __future__ import annotations

from typing import Any

import torch

from harness.contract.messages import CallRequest, Failure
from harness.judge.metrics import compare
from harness.judge.outputs import clone_inputs, returned
from harness.problem.load import Problem, case_label
from harness.wire import frames as wire
from harness.workers.process import WorkerProcess

SECOND_POISON = 0x00  # the first call's memory is filled with 0xFF (NaN in every float)


def twice(
    problem: Problem, worker: WorkerProcess, case: dict[str, Any], seed: int, device: Any, timeout: float
) -> str | None:
    """Calls the version twice on the case's inputs for `seed`, its memory poisoned 0xFF then 0x00: why it fails
    (the outputs differ, or a call failed), or None. Only the two calls are compared, not the reference."""
    inputs = problem.inputs_for(case, seed, device)
    outputs = []
    for poison in (0xFF, SECOND_POISON):
        sent = clone_inputs(inputs)
        tensors: list[torch.Tensor] = []
        tree = wire.encode_tree(list(sent), tensors)
        budget = 8 * sum(t.numel() * t.element_size() for t in tensors) + (1 << 30)
        reply, got = worker.ask(CallRequest(tree, poison), tensors, timeout, "called twice", max_payload=budget)
        if isinstance(reply, Failure):
            return f"case {case_label(case)} (seed {seed}), called again on the same inputs: {reply.err}"
        outputs.append(returned(problem, reply, got, sent)[0])
    where = differs(problem, outputs[0], outputs[1])
    return None if where is None else failure(case_label(case), seed, where)


def failure(label: str, seed: int, where: str) -> str:
    return (
        f"case {label} (seed {seed}): two calls on the same inputs gave other outputs: {where} (a race between "
        "programs, a read of memory it never wrote?; a problem whose outputs may differ, such as with atomics, "
        "says nondeterministic = True)"
    )


def differs(problem: Problem, first: Any, second: Any) -> str | None:
    """Where two calls' outputs on the same inputs differ (None: they agree as the problem asks)."""
    a = first if isinstance(first, (tuple, list)) else (first,)
    b = second if isinstance(second, (tuple, list)) else (second,)
    if len(a) != len(b):
        return f"the second call returned {len(b)} outputs, the first {len(a)}"
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        label = f"output {i}" if len(a) > 1 else "output"
        if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)) or x.shape != y.shape:
            return f"{label}: the two calls returned different things"
        where = _first_difference(problem, x.detach().cpu(), y.detach().cpu())
        if where is not None:
            return f"{label} {where}"
    return None


def _first_difference(problem: Problem, x: torch.Tensor, y: torch.Tensor) -> str | None:
    if problem.nondeterministic and x.is_floating_point():
        result = compare(y, x, problem.tolerance_for(str(x.dtype).removeprefix("torch.")))
        return None if result.ok else f"differs beyond the tolerance between the calls: {result.err}"
    same = same_values(x, y)
    if bool(same.all()):
        return None
    index = int((~same).reshape(-1).nonzero()[0])
    flat_x, flat_y = x.reshape(-1), y.reshape(-1)
    count = int((~same).sum())
    values = f"{flat_x[index].item()!r} then {flat_y[index].item()!r}"
    return f"differs at {count} of {same.numel()} elements, first at flat index {index}: {values}"


def same_values(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Elementwise bit-for-bit sameness (a NaN beside a NaN is the same)."""
    if x.is_floating_point() or x.is_complex():
        return (x == y) | (x.isnan() & y.isnan())
    return x == y
