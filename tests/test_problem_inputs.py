"""What a native problem's make_inputs may return and what its outputs may be, judged through the real harness:
inputs that are dicts and nested tuples (sent to the worker and back, held unchanged), a make_inputs that
returns a bare tensor or what cannot be sent (the problem's error, named, not the version's failure), one that
needs a GPU on a machine without one, outputs that are right in more than one way (ties of an argsort) judged
by the problem's check alone, and several outputs of different dtypes."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from harness.problem.load import ProblemError, load_problem
from tests.conftest import HAS_CUDA, judge_many, rung

RUNGS = ["load", "correctness"]

PROBLEM_TAIL = """
bench_cases = []

def cost(case):
    return {"flops": 0, "bytes": 4}
"""

NESTED = '''
"""x * n + a - b, from a dict holding a pair."""
import torch

def reference(d, n):
    a, b = d["pair"]
    return d["x"] * n + a - b

def make_inputs(case, seed, device):
    gen = torch.Generator().manual_seed(seed)
    t = lambda: torch.randn(case["m"], generator=gen).to(device)
    return ({"x": t(), "pair": (t(), t()), "note": "kept"}, 3)

cases = [{"m": 8}, {"m": 100}]
tolerance = {"atol": 1e-5, "rtol": 1e-5}
'''

NESTED_VERSIONS = {
    "honest": """
        def custom_kernel(d, n):
            a, b = d["pair"]
            return d["x"] * n + a - b
    """,
    "zeroes_pair": """
        def custom_kernel(d, n):
            a, b = d["pair"]
            out = d["x"] * n + a - b
            b.zero_()  # after its output is made: only the check of its inputs can tell
            return out
    """,
    "scales_x": """
        def custom_kernel(d, n):
            a, b = d["pair"]
            x = d["x"].mul_(n)
            return x + a - b
    """,
}

# argsort of small integers: ties may come in any order, so the check is the verdict (no tolerance)
ARGSORT = '''
"""argsort of integers in [0, 4): any order of ties is right."""
import torch

def reference(x):
    return torch.argsort(x, stable=True)

def make_inputs(case, seed, device):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randint(0, 4, (case["n"],), generator=gen).to(device),)

def check(inputs, output):
    (x,) = inputs
    if not torch.equal(torch.sort(output).values, torch.arange(x.numel(), device=output.device)):
        return "not a permutation of the indices"
    if bool((x[output][1:] < x[output][:-1]).any()):
        return "does not sort the input"
    return None

cases = [{"n": 1}, {"n": 50}, {"n": 257}]
'''

ARGSORT_VERSIONS = {
    "ties_reversed": """
        import torch

        def custom_kernel(x):
            n = x.numel()
            key = x.to(torch.int64) * (n + 1) + (n - torch.arange(n, device=x.device))
            return torch.argsort(key)
    """,
    "descending": """
        import torch

        def custom_kernel(x):
            return torch.argsort(x, descending=True, stable=True)
    """,
}

TOPK = '''
"""Top-k values (bf16, within a tolerance) and their indices (int64, exact)."""
import torch

def reference(x, k):
    values, indices = torch.topk(x.float(), k, dim=-1)
    return values.to(x.dtype), indices

def make_inputs(case, seed, device):
    gen = torch.Generator().manual_seed(seed)
    rows, cols = case["rows"], case["cols"]
    x = torch.randperm(rows * cols, generator=gen).reshape(rows, cols).float() / 7  # no ties
    return (x.to(device, torch.bfloat16), case["k"])

cases = [{"rows": 3, "cols": 40, "k": 4}]
tolerance = {"bfloat16": {"atol": 1e-2, "rtol": 1e-2}}
'''

TOPK_VERSIONS = {
    "topk": """
        import torch

        def custom_kernel(x, k):
            return torch.topk(x, k, dim=-1)
    """,
    "values_off_a_little": """
        import torch

        def custom_kernel(x, k):
            values, indices = torch.topk(x, k, dim=-1)
            return values * 1.001, indices
    """,
    "indices_off_by_one": """
        import torch

        def custom_kernel(x, k):
            values, indices = torch.topk(x, k, dim=-1)
            return values, (indices + 1) % x.shape[-1]
    """,
    "values_only": """
        import torch

        def custom_kernel(x, k):
            return torch.topk(x, k, dim=-1).values
    """,
    "int32_indices": """
        import torch

        def custom_kernel(x, k):
            values, indices = torch.topk(x, k, dim=-1)
            return values, indices.to(torch.int32)
    """,
}

DOUBLE = '''
"""Doubles x."""
import torch

def reference(x):
    return x * 2

def make_inputs(case, seed, device):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(case["n"], generator=gen).to(device),)

cases = [{"n": 8}]
tolerance = {"atol": 1e-6, "rtol": 1e-6}
'''

DOUBLE_VERSION = """
    def custom_kernel(x):
        return x * 2
"""


# GPU MODE's fp8 (AMD's e4m3fnuz) and nvfp4 problems: inputs of 1-byte formats that travel as their bytes
LOW_PRECISION = '''
"""fp8 e4m3fnuz values times an fp32 scale, plus packed fp4 codes as bytes."""
import torch

def reference(x, scale, codes):
    return x.float() * scale + codes.view(torch.uint8).float()

def make_inputs(case, seed, device):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(case["n"], generator=gen).clamp(-8, 8).to(torch.float8_e4m3fnuz)
    codes = torch.randint(0, 256, (case["n"],), generator=gen, dtype=torch.uint8).view(torch.float4_e2m1fn_x2)
    return (x.to(device), torch.tensor(0.5).to(device), codes.to(device))

cases = [{"n": 7}, {"n": 1000}]
tolerance = {"atol": 1e-6, "rtol": 1e-6}
'''

LOW_PRECISION_VERSIONS = {
    "fp8_honest": """
        import torch

        def custom_kernel(x, scale, codes):
            return x.float() * scale + codes.view(torch.uint8).float()
    """,
    "fp4_scribbles": """
        import torch

        def custom_kernel(x, scale, codes):
            out = x.float() * scale + codes.view(torch.uint8).float()
            codes.view(torch.uint8)[::2] ^= 1
            return out
    """,
}


# GPU MODE's way: an empty output tensor handed in with the inputs, undeclared; the reference returns a new one
OUTPUT_SPACE = '''
"""Cumulative sum of x; data also holds an empty tensor for the output, which the reference never reads."""
import torch

def reference(data):
    x, out = data
    return torch.cumsum(x, dim=0)

def make_inputs(case, seed, device):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(case["n"], generator=gen, dtype=torch.float64).to(device)
    return ((x, torch.empty_like(x)),)

cases = [{"n": 1}, {"n": 300}]
tolerance = {"atol": 1e-9, "rtol": 1e-9}
'''

OUTPUT_SPACE_VERSIONS = {
    "writes_the_space": """
        import torch

        def custom_kernel(data):
            x, out = data
            torch.cumsum(x, dim=0, out=out)
            return out
    """,
    "writes_x": """
        import torch

        def custom_kernel(data):
            x, out = data
            return torch.cumsum(x, dim=0, out=x)
    """,
}


def write_problem(root: Path, name: str, text: str, versions: dict[str, str]) -> list[Path]:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "problem.py").write_text(textwrap.dedent(text) + PROBLEM_TAIL)
    paths = []
    for stem, source in versions.items():
        (folder / f"{stem}.py").write_text(textwrap.dedent(source))
        paths.append(folder / f"{stem}.py")
    return paths


def returning(make_inputs_body: str) -> str:
    """The doubling problem with another make_inputs."""
    start = DOUBLE.index("def make_inputs")
    end = DOUBLE.index("cases = ")
    return DOUBLE[:start] + textwrap.dedent(make_inputs_body) + "\n" + DOUBLE[end:]


BARE_TENSOR = returning("""
    def make_inputs(case, seed, device):
        return torch.randn(case["n"]).to(device)
""")

GPU_INPUTS = returning("""
    def make_inputs(case, seed, device):
        return (torch.randn(case["n"], device="cuda"),)
""")


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    root = tmp_path_factory.mktemp("inputs") / "ws"
    paths = write_problem(root, "nested", NESTED, NESTED_VERSIONS)
    paths += write_problem(root, "argsort", ARGSORT, ARGSORT_VERSIONS)
    paths += write_problem(root, "topk", TOPK, TOPK_VERSIONS)
    paths += write_problem(root, "bare", BARE_TENSOR, {"doubles": DOUBLE_VERSION})
    paths += write_problem(root, "space", OUTPUT_SPACE, OUTPUT_SPACE_VERSIONS)
    if hasattr(torch, "float4_e2m1fn_x2") and hasattr(torch, "float8_e4m3fnuz"):
        paths += write_problem(root, "lowp", LOW_PRECISION, LOW_PRECISION_VERSIONS)
    return judge_many(paths, timeout=30, rungs=RUNGS, max_file_mb=16)


def correctness_err(evaluation: dict) -> str | None:
    return rung(evaluation, "correctness")["err"]


@pytest.mark.slow
def test_dict_and_nested_tuple_inputs_reach_the_version_as_made(judged: dict[str, dict]) -> None:
    honest = judged["honest"]
    assert honest["status"] == "pass", correctness_err(honest)
    assert rung(honest, "correctness")["metrics"]["max_abs"] == 0.0


@pytest.mark.slow
def test_a_tensor_changed_inside_a_dict_s_tuple_is_caught(judged: dict[str, dict]) -> None:
    err = correctness_err(judged["zeroes_pair"])
    assert judged["zeroes_pair"]["status"] == "fail"
    assert err is not None and "custom_kernel modified its input 0['pair'][1] in place" in err, err


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(torch, "float4_e2m1fn_x2"), reason="this torch has no fp4")
def test_an_input_the_reference_never_reads_may_be_written(judged: dict[str, dict]) -> None:
    # GPU MODE's matmul and prefix-sum solutions write the empty output tensor in data: failed as modifying an input
    assert judged["writes_the_space"]["status"] == "pass", correctness_err(judged["writes_the_space"])
    err = correctness_err(judged["writes_x"])
    assert err is not None and "modified its input 0[0] in place" in err


@pytest.mark.slow
def test_fp8_and_fp4_inputs_cross_to_the_worker_as_their_bytes(judged: dict[str, dict]) -> None:
    assert judged["fp8_honest"]["status"] == "pass", correctness_err(judged["fp8_honest"])
    err = correctness_err(judged["fp4_scribbles"])
    assert err is not None and "modified its input 2 in place (" in err and "elements changed" in err, err


@pytest.mark.slow
def test_a_tensor_changed_inside_a_dict_is_caught(judged: dict[str, dict]) -> None:
    err = correctness_err(judged["scales_x"])
    assert err is not None and "custom_kernel modified its input 0['x'] in place" in err, err


@pytest.mark.slow
def test_a_check_without_tolerance_passes_ties_in_another_order(judged: dict[str, dict]) -> None:
    """The reference's argsort is stable; the version's puts ties the other way round: right, and not equal."""
    ties = judged["ties_reversed"]
    assert ties["status"] == "pass", correctness_err(ties)
    assert rung(ties, "correctness")["metrics"]["max_abs"] > 0  # the errors against the reference, reported beside


@pytest.mark.slow
def test_a_check_without_tolerance_fails_a_wrong_order(judged: dict[str, dict]) -> None:
    err = correctness_err(judged["descending"])
    assert judged["descending"]["status"] == "fail"
    assert err is not None and err.endswith("the problem's check: does not sort the input"), err


@pytest.mark.slow
def test_several_outputs_of_different_dtypes_each_have_their_tolerance(judged: dict[str, dict]) -> None:
    assert judged["topk"]["status"] == "pass", correctness_err(judged["topk"])
    assert judged["values_off_a_little"]["status"] == "pass", correctness_err(judged["values_off_a_little"])
    err = correctness_err(judged["indices_off_by_one"])
    assert err is not None and "output 1: 12 of 12 elements (100%) differ (compared exactly)" in err, err


@pytest.mark.slow
def test_the_wrong_number_or_dtype_of_outputs_is_said(judged: dict[str, dict]) -> None:
    err = correctness_err(judged["values_only"])
    said = "returned 1 output; the reference returns a tuple of 2: bfloat16 of shape (3, 4), int64 of shape (3, 4)"
    assert err is not None and said in err, err
    err = correctness_err(judged["int32_indices"])
    assert err is not None and "output 1 has dtype torch.int32; the reference's is torch.int64" in err, err


@pytest.mark.slow
def test_make_inputs_returning_a_bare_tensor_is_the_problem_s_error(judged: dict[str, dict]) -> None:
    refused = judged["doubles"]
    assert "error" in refused, refused
    assert "bare: make_inputs in problem.py returned a Tensor" in refused["error"]
    assert "return (x,)" in refused["error"]


@pytest.mark.slow
def test_a_bare_tensor_is_the_problem_s_error_with_the_fix_named_whichever_rungs_run(tmp_path: Path) -> None:
    (version,) = write_problem(tmp_path / "ws", "bare", BARE_TENSOR, {"v001": DOUBLE_VERSION})
    refused = judge_many([version], rungs=["load", "compile", "correctness"])["v001"]
    assert "make_inputs in problem.py returned a Tensor; return a tuple of inputs" in refused.get("error", ""), refused


@pytest.mark.parametrize(
    ("made", "words"),
    [
        ("torch.zeros(3)", "returned a Tensor; return a tuple of inputs: `return (x,)`"),
        ("{'x': torch.zeros(3)}", "returned a dict; return a tuple of inputs: `return (d,)`"),
        ("None", "returned None; return a tuple of inputs"),
        ("(torch.zeros(3), torch.nn.Linear(3, 3))", "returned `Linear` as input 1, which cannot be sent"),
        ("({'w': [torch.zeros(3), object()]},)", "returned `object` as input 0['w'][1]"),
        ("({0: torch.zeros(3)},)", "returned a dict with the key 0 (of type int) as input 0; keys must be strings"),
    ],
)
def test_what_make_inputs_returns_is_checked(tmp_path: Path, made: str, words: str) -> None:
    text = returning(f"def make_inputs(case, seed, device):\n    return {made}\n")
    folder = tmp_path / "made"
    folder.mkdir()
    (folder / "problem.py").write_text(text + PROBLEM_TAIL)
    problem = load_problem(folder)
    with pytest.raises(ProblemError) as err:
        problem.inputs_for({"n": 3}, 1, torch.device("cpu"))
    assert str(err.value).startswith("made: make_inputs in problem.py "), err.value
    assert words in str(err.value), err.value


def test_inputs_that_can_be_sent_pass_as_a_tuple(tmp_path: Path) -> None:
    folder = tmp_path / "fine"
    folder.mkdir()
    (folder / "problem.py").write_text(textwrap.dedent(NESTED) + PROBLEM_TAIL)
    inputs = load_problem(folder).inputs_for({"m": 4}, 7, torch.device("cpu"))
    assert isinstance(inputs, tuple) and inputs[1] == 3 and inputs[0]["note"] == "kept"
    again = load_problem(folder).inputs_for({"m": 4}, 7, torch.device("cpu"))
    assert torch.equal(inputs[0]["pair"][1], again[0]["pair"][1])  # the same seed makes the same inputs


@pytest.mark.slow
@pytest.mark.skipif(HAS_CUDA, reason="says what a machine without a GPU does")
def test_inputs_made_on_a_gpu_are_said_to_need_one_on_a_machine_without(tmp_path: Path) -> None:
    (version,) = write_problem(tmp_path / "ws", "ongpu", GPU_INPUTS, {"v001": DOUBLE_VERSION})
    said = judge_many([version], rungs=["load", "compile", "correctness"])["v001"].get("error", "")
    assert "ongpu: make_inputs in problem.py needs a GPU to make its inputs (ongpu/problem.py:10" in said, said
    assert "this machine has none" in said
