"""The reference is computed at full precision: TF32 off in cuBLAS and cuDNN while it runs (torch's default lets
cuDNN round fp32 convolutions to TF32: an honest fp32 kernel failed 14% of a convolution's outputs against it on an
H200), unless the problem asks for TF32; what outputs are held to says which."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from harness.problem.load import ProblemError, load_problem
from tests.conftest import FIXTURES, add_version, judge_many, make_workspace, rung

# a reference that answers with the TF32 settings it ran under
SEES_SETTINGS = """
import torch

def reference(x):
    return torch.tensor([float(torch.backends.cudnn.allow_tf32), float(torch.backends.cuda.matmul.allow_tf32),
                         float(torch.get_float32_matmul_precision() == "highest")])
"""


def problem_with(tmp_path: Path, extra: str) -> Path:
    folder = tmp_path / "seen"
    folder.mkdir()
    base = (FIXTURES / "vadd" / "problem.py").read_text()
    (folder / "problem.py").write_text(base + "\n" + SEES_SETTINGS + extra)
    return folder


@pytest.fixture
def torch_defaults() -> object:
    """TF32 on in cuDNN, as torch ships it, and put back after the test whatever it did."""
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    before = cudnn.allow_tf32, matmul.allow_tf32, torch.get_float32_matmul_precision()
    cudnn.allow_tf32 = True
    yield
    cudnn.allow_tf32, matmul.allow_tf32 = before[0], before[1]
    torch.set_float32_matmul_precision(before[2])


def test_the_reference_runs_with_tf32_off_and_the_settings_come_back(tmp_path: Path, torch_defaults: object) -> None:
    problem = load_problem(problem_with(tmp_path, ""))
    assert problem.reference(torch.zeros(1)).tolist() == [0.0, 0.0, 1.0]
    assert torch.backends.cudnn.allow_tf32 is True  # the process's own setting, back after the call
    assert "fp32 reference, TF32 off" in problem.held_to() and "atol" in problem.held_to()


def test_a_problem_may_ask_for_a_tf32_reference(tmp_path: Path, torch_defaults: object) -> None:
    problem = load_problem(problem_with(tmp_path, 'reference_precision = "tf32"\n'))
    assert problem.reference(torch.zeros(1)).tolist() == [1.0, 1.0, 0.0]
    assert "TF32 (as problem.py asks)" in problem.held_to()


def test_an_unknown_precision_is_a_problem_error(tmp_path: Path) -> None:
    with pytest.raises(ProblemError, match=r"reference_precision in problem\.py is 'bf16'"):
        load_problem(problem_with(tmp_path, 'reference_precision = "bf16"\n'))


def test_the_evaluation_records_what_outputs_were_held_to(tmp_path: Path) -> None:
    folder = make_workspace(tmp_path / "ws")
    path = add_version(folder, "good", "v001.py")
    evaluation = judge_many([path], rungs=["load", "correctness"])[str(path)]
    metrics = rung(evaluation, "correctness")["metrics"]
    assert metrics["reference_precision"] == "highest"
    assert metrics["held_to"] == "atol 1e-06, rtol 1e-06 · fp32 reference, TF32 off"


def test_a_failing_version_that_ran_a_cudnn_convolution_is_told_of_tf32() -> None:
    """GPU MODE's own conv2d solution (F.conv2d under torch's default) failed against the fp32 reference on an H200
    with 1777 outputs off and nothing saying why."""
    from harness.problem.precision import tf32_hint

    ops = ["aten::add", "aten::cudnn_convolution"]
    hint = tf32_hint(ops, "highest", on_gpu=True)
    assert "aten::cudnn_convolution through cuDNN" in hint and 'reference_precision = "tf32"' in hint
    assert tf32_hint(ops, "tf32", on_gpu=True) == ""  # held to TF32 already
    assert tf32_hint(ops, "highest", on_gpu=False) == ""  # no cuDNN on the CPU
    assert tf32_hint(["aten::mm"], "highest", on_gpu=True) == ""  # cuBLAS: TF32 off by torch's default
