"""The same inputs twice must give the same bytes: a version computes its first correctness case a second time, into
memory poisoned with other bytes, and the two outputs are compared bit for bit (within the tolerance where the
problem declares `nondeterministic = True`, for atomics). A race between programs passes the interpreter, which
runs programs in order, and an uninitialised read that happens to hold the answer passes once (a public fused kernel
read shared memory it never wrote and claimed 104x; running it twice caught it): the second call is what shows them.
"""

from __future__ import annotations

from typing import Any

import torch

from harness.judge.metrics import compare
from harness.problem.load import Problem

SECOND_POISON = 0x00  # the first call's memory is filled with 0xFF (NaN in every float)


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
