"""Checks that can fail: what a problem's own check lets through, said rather than passed over.

On public KernelBench problems imported as they are, an all-zeros output passed softmax at KernelBench's size (the
tolerance is wider than the outputs), a ReLU computing |x| passed (torch.rand inputs are never negative). So, for
each correctness case, the judge tries two stand-ins against the same reference and tolerance: an all-zeros output
and the inputs handed back (the first input with the output's shape and dtype). One that passes is said with the
case. A version that passes while its outputs barely point the reference's way (cosine similarity under
WEAK_COSINE) is flagged `weak-match`. A reference that gives other outputs on the same inputs under another seed
(random numbers in forward: dropout in training mode) is said; the judge seeds it before each call
(harness.problem.precision), as KernelBench does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from harness.contract.results import Flag
from harness.judge.determinism import same_values
from harness.judge.outputs import clone_inputs, judge_outputs
from harness.problem.precision import cuda_devices

if TYPE_CHECKING:
    from harness.judge.context import VersionRun

WEAK_COSINE = 0.9  # "barely points the same way": honest rounding noise stays far above it
STAND_INS = ("zeros", "echo")


def passing_stand_ins(run: VersionRun, pristine: tuple[Any, ...], expected: Any) -> list[str]:
    """Which stand-ins for an answer the check passes on this case: "zeros", "echo" (none: the check can fail)."""
    passed = []
    for name in STAND_INS:
        candidate = _stand_in(name, pristine, expected)
        if candidate is None:
            continue
        try:
            err, _ = judge_outputs(run, candidate, expected, [], inputs=clone_inputs(pristine))
        except Exception:  # the problem's check could not take it: it is no answer that passes
            continue
        if err is None:
            passed.append(name)
    return passed


def _stand_in(name: str, pristine: tuple[Any, ...], expected: Any) -> tuple[torch.Tensor, ...] | None:
    wanted = expected if isinstance(expected, (tuple, list)) else (expected,)
    if not all(isinstance(w, torch.Tensor) for w in wanted):
        return None
    if name == "zeros":
        return tuple(torch.zeros_like(w) for w in wanted)
    if len(wanted) != 1:
        return None
    want = wanted[0]
    same = (t for t in pristine if isinstance(t, torch.Tensor) and t.shape == want.shape and t.dtype == want.dtype)
    echoed = next(same, None)
    return None if echoed is None else (echoed.to(want.device).clone(),)


def stand_in_warning(passed: dict[str, list[str]]) -> str | None:
    """passed: stand-in -> the cases it passed. One line for the rung, or None."""
    words = {"zeros": "an all-zeros output", "echo": "the input handed back"}
    said = [f"{words[name]} passes {_cases(cases)}" for name, cases in passed.items() if cases]
    if not said:
        return None
    return (
        "; ".join(said)
        + ": the check cannot tell these cases from a wrong answer (widen the inputs or narrow the tolerance)"
    )


def weak_match(results: list[dict[str, Any]]) -> Flag | None:
    """`weak-match` for a passing version whose outputs' cosine similarity to the reference is low on some case."""
    judged = [r for r in results if r.get("ok") and r.get("cosine") is not None]
    worst = min(judged, key=lambda r: r["cosine"], default=None)
    if worst is None or worst["cosine"] >= WEAK_COSINE:
        return None
    return Flag(
        "weak-match",
        f"it passes the tolerance, but on case {worst['case']} its outputs' cosine similarity to the reference is "
        f"{worst['cosine']:.3f} (under {WEAK_COSINE}): the tolerance is wide for outputs this small",
    )


def differs_from_itself(run: VersionRun, pristine: tuple[Any, ...]) -> str | None:
    """Why the reference cannot be compared against as it is: it gave other outputs on the same inputs under two
    seeds (random numbers in its forward); None when it did not."""
    unseeded = run.problem.module.reference
    answers = []
    for seed in (1, 2):
        with torch.random.fork_rng(devices=cuda_devices(pristine)):
            torch.manual_seed(seed)
            answers.append(unseeded(*clone_inputs(pristine)))
    if _same(answers[0], answers[1]):
        return None
    return (
        "the reference gives other outputs on the same inputs under another random seed (random numbers in forward: "
        "dropout in training mode, a random initial state?); the judge seeds it before each call"
    )


def _same(a: Any, b: Any) -> bool:
    """Equal, bit for bit (a NaN where the other has one counts as equal)."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        same_kind = a.shape == b.shape and a.dtype == b.dtype
        return same_kind and bool(same_values(a.detach().cpu(), b.detach().cpu()).all())
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _cases(cases: list[str]) -> str:
    shown = ", ".join(cases[:3]) + (f" and {len(cases) - 3} more" if len(cases) > 3 else "")
    return f"case{'s' if len(cases) > 1 else ''} {shown}"
