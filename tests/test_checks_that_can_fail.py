"""Checks that can fail: the stand-ins a problem's check lets through, a passing version that barely matches, and
a reference that differs from itself, decided in the judge with no worker."""

from __future__ import annotations

from pathlib import Path

import torch

from harness.contract.results import Evaluation
from harness.judge.context import VersionRun
from harness.judge.vacuous import differs_from_itself, passing_stand_ins, stand_in_warning, weak_match
from harness.problem.load import load_problem

PROBLEM = """
import torch

cases = [{{"n": 64}}]
bench_cases = []
tolerance = {tolerance}


def make_inputs(case, seed, device):
    g = torch.Generator().manual_seed(seed)
    return ({inputs},)


def reference(x):
    return {reference}


def cost(case):
    return {{"flops": case["n"], "bytes": 8 * case["n"]}}
"""


def run_of(tmp_path: Path, reference: str, tolerance: str = "{'atol': 1e-5, 'rtol': 1e-5}",
           inputs: str = "torch.randn(case['n'], generator=g).to(device)") -> VersionRun:  # fmt: skip
    folder = tmp_path / "p"
    folder.mkdir(parents=True)
    (folder / "problem.py").write_text(PROBLEM.format(tolerance=tolerance, inputs=inputs, reference=reference))
    problem = load_problem(folder)
    ev = Evaluation(problem="p", version="v001", path=str(folder / "v001.py"), hash="0" * 64)
    return VersionRun(problem=problem, path=folder / "v001.py", ev=ev, dsls=[])


def stand_ins(run: VersionRun) -> list[str]:
    inputs = run.problem.inputs_for(run.problem.cases[0], 7, torch.device("cpu"))
    return passing_stand_ins(run, inputs, run.problem.reference(*inputs))


def test_a_tolerance_wider_than_the_outputs_passes_all_zeros(tmp_path: Path) -> None:
    """KernelBench's softmax at its own size: atol above every output, so zeros passed with cosine 0.0."""
    run = run_of(tmp_path, "torch.softmax(x, dim=0)", tolerance="{'atol': 0.5, 'rtol': 0.05}")
    assert stand_ins(run) == ["zeros"]
    warning = stand_in_warning({"zeros": ["n=64"], "echo": []})
    assert warning is not None and warning.startswith("an all-zeros output passes case n=64")


def test_inputs_that_are_never_negative_pass_the_input_handed_back_as_a_relu(tmp_path: Path) -> None:
    run = run_of(tmp_path, "torch.relu(x)", inputs="torch.rand(case['n'], generator=g).to(device)")
    assert stand_ins(run) == ["echo"]


def test_a_check_that_can_fail_passes_no_stand_in(tmp_path: Path) -> None:
    run = run_of(tmp_path, "torch.relu(x) * 2 + 1")
    assert stand_ins(run) == []
    assert stand_in_warning({"zeros": [], "echo": []}) is None


def test_a_pass_whose_outputs_barely_match_is_flagged() -> None:
    flag = weak_match([{"case": "n=64", "ok": True, "cosine": 0.0}, {"case": "n=8", "ok": True, "cosine": 1.0}])
    assert flag is not None and flag.name == "weak-match" and "n=64" in flag.reason
    assert weak_match([{"case": "n=64", "ok": True, "cosine": 0.99995}]) is None


def test_a_reference_drawing_random_numbers_is_said_and_seeded(tmp_path: Path) -> None:
    """Dropout in training mode: the reference differs from itself; seeded before each call, it no longer does."""
    run = run_of(tmp_path, "torch.nn.functional.dropout(x, p=0.5, training=True)")
    inputs = run.problem.inputs_for(run.problem.cases[0], 7, torch.device("cpu"))
    said = differs_from_itself(run, inputs)
    assert said is not None and "another random seed" in said
    assert torch.equal(run.problem.reference(*inputs), run.problem.reference(*inputs))
    steady = run_of(tmp_path / "steady", "x * 2")
    assert differs_from_itself(steady, inputs) is None


def test_inputs_beyond_the_problems_own_distribution() -> None:
    from harness.judge.narrow import variants

    nonnegative, weight, index = torch.rand(64), torch.ones(8), torch.arange(4)
    model_input = {"init_inputs": [8], "state_dict": {"ln.weight": torch.ones(8), "ln.bias": torch.zeros(8)}}
    moved = ({"n": 48}, (torch.rand(48),))
    found = {v.name: v for v in variants((nonnegative, weight, index, model_input), {"n": 64}, 3, lambda: moved)}
    assert list(found) == ["signed", "scaled", "affine", "size"]
    signed = found["signed"].inputs[0]
    assert bool((signed < 0).any()) and torch.equal(signed.abs(), nonnegative)
    assert torch.equal(found["scaled"].inputs[0], nonnegative * 4) and torch.equal(found["scaled"].inputs[2], index)
    affine = found["affine"].inputs
    assert not torch.equal(affine[1], weight) and not torch.equal(affine[3]["state_dict"]["ln.weight"], weight)
    assert not torch.equal(affine[3]["state_dict"]["ln.bias"], torch.zeros(8))  # the bias drawn too
    assert found["size"].case == {"n": 48}
    unchanged = list(variants((torch.randn(64),), {"n": 64}, 3, lambda: ({"n": 64}, ())))
    assert [v.name for v in unchanged] == ["scaled"]  # signed already, no constant tensor, no size to move


RELU_PROBLEM = """
import torch

cases = [{"n": 1000}, {"n": 4097}]
bench_cases = [{"n": 1 << 20}]
tolerance = {"atol": 1e-6, "rtol": 1e-6}


def make_inputs(case, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(case["n"], generator=g).to(device),)  # never negative, as KernelBench's torch.rand


def reference(x):
    return torch.relu(x)


def cost(case):
    return {"flops": case["n"], "bytes": 8 * case["n"]}
"""

UNARY_VERSION = """
import torch
import triton
import triton.language as tl


@triton.jit
def unary_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, {expression}, mask=mask)


def custom_kernel(x):
    out = torch.empty_like(x)
    n = x.numel()
    unary_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
    return out
"""


def test_a_check_too_narrow_to_fail_is_said_and_a_version_exploiting_it_flagged(tmp_path: Path) -> None:
    """A ReLU computing |x| passed on torch.rand inputs: the correctness rung now says the input handed back would
    pass, and flags the |x| version narrow-inputs (signed inputs); an honest ReLU earns no flag."""
    from tests.conftest import judge_many, rung

    folder = tmp_path / "ws" / "relu"
    folder.mkdir(parents=True)
    (folder / "problem.py").write_text(RELU_PROBLEM)
    (folder / "v001.py").write_text(UNARY_VERSION.format(expression="tl.abs(x)"))
    (folder / "v002.py").write_text(UNARY_VERSION.format(expression="tl.maximum(x, 0.0)"))
    judged = judge_many([folder / "v001.py", folder / "v002.py"], rungs=["load", "correctness"])
    cheat, honest = judged["v001"], judged["v002"]
    for evaluation in (cheat, honest):
        assert evaluation["status"] == "pass", evaluation
        warnings = rung(evaluation, "correctness")["metrics"]["warnings"]
        assert warnings[0].startswith("the input handed back passes cases n=1000, n=4097"), warnings
    flags = {f["name"]: f["reason"] for f in cheat["flags"]}
    assert "signed inputs of case n=1000" in flags.get("narrow-inputs", ""), cheat["flags"]
    assert not [f for f in honest["flags"] if f["name"] in ("narrow-inputs", "weak-match")], honest["flags"]


SUM_PROBLEM = """
import torch

cases = [{"n": 4097}]
bench_cases = [{"n": 1 << 20}]
tolerance = {"atol": 1e-3, "rtol": 1e-4}


def make_inputs(case, seed, device):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(case["n"], generator=g).to(device),)


def reference(x):
    return x.sum().reshape(1)


def cost(case):
    return {"flops": case["n"], "bytes": 4 * case["n"]}
"""

# Partial sums added atomically, in blocks of a size that changes from call to call, onto a start that drifts by
# less than the tolerance: the low bits of the total differ between calls, as with atomics on a GPU.
ORDER_DEPENDENT_SUM = """
import torch
import triton
import triton.language as tl

calls = [0]


@triton.jit
def sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(out_ptr, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0))


def custom_kernel(x):
    calls[0] += 1
    block = 64 if calls[0] % 2 else 1024
    out = torch.full((1,), 1e-4 * (calls[0] % 2), device=x.device, dtype=x.dtype)  # a drift within the tolerance
    sum_kernel[(triton.cdiv(x.numel(), block),)](x, out, x.numel(), BLOCK=block)
    return out
"""


def test_two_calls_on_the_same_inputs_must_give_the_same_bytes(tmp_path: Path) -> None:
    """A race or an uninitialised read passes a single call; the judge calls the first case twice on the same
    inputs (into memory poisoned with other bytes) and fails outputs that differ, unless the problem declares
    nondeterministic = True (atomics), when they need only agree within the tolerance."""
    from tests.conftest import judge_many, rung

    strict, loose = tmp_path / "ws" / "rowsum", tmp_path / "ws" / "atomics"
    for folder, extra in ((strict, ""), (loose, "nondeterministic = True\n")):
        folder.mkdir(parents=True)
        (folder / "problem.py").write_text(SUM_PROBLEM + extra)
        (folder / "v001.py").write_text(ORDER_DEPENDENT_SUM)
    judged = judge_many([strict / "v001.py", loose / "v001.py"], rungs=["load", "correctness"])
    failed = rung(judged[str(strict / "v001.py")], "correctness")
    assert failed["ok"] is False and "two calls on the same inputs gave other outputs" in failed["err"], failed
    assert judged[str(loose / "v001.py")]["status"] == "pass", judged[str(loose / "v001.py")]
