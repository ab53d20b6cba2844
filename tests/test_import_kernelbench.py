"""KernelBench problems imported (`kerneltui import kernelbench`), judged with ModelNew and custom_kernel versions
by the real harness, and versions exported back as KernelBench submissions."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from harness.problem.load import load_problem
from tests.conftest import FIXTURES, judge_many, kerneltui, make_workspace, rung

KB = FIXTURES / "kernelbench"


def flags(evaluation: dict[str, Any]) -> dict[str, str]:
    return {f["name"]: f["reason"] for f in evaluation.get("flags", [])}


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace with leaky_relu (no weights) and linear_relu (nn.Linear's weights), imported by the CLI."""
    ws = tmp_path_factory.mktemp("kb") / "ws"
    done = kerneltui("import", "kernelbench", str(KB / "leaky_relu.py"), "--into", str(ws), "--set", "dim=1000")
    assert done.returncode == 0, done.stderr
    done = kerneltui("import", "kernelbench", str(KB / "linear_relu.py"), "--into", str(ws), "--set", "batch_size=5")
    assert done.returncode == 0, done.stderr
    return ws


@pytest.fixture(scope="module")
def judged(imported: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """One judge over every version: the imported problems' correct, wrong and torch-computing versions, a
    custom_kernel version exported as a KernelBench submission, and a ModelNew on a native problem."""
    leaky, linear = imported / "leaky_relu", imported / "linear_relu"
    paths = []
    for folder, names in (
        (leaky, ["leaky_modelnew", "leaky_modelnew_wrong"]),
        (linear, ["linear_modelnew", "linear_custom_kernel", "linear_modelnew_torch", "linear_modelnew_renamed"]),
    ):
        for i, name in enumerate(names, start=1):
            paths.append(folder / f"v{i:03d}.py")
            shutil.copy(KB / f"{name}.py", paths[-1])
    exported = kerneltui(
        "export", "linear_relu", "--format", "kernelbench", "--version", "v002", "--workspace", str(imported)
    )
    assert exported.returncode == 0, exported.stderr
    (linear / "v005.py").write_text(exported.stdout)
    native = make_workspace(tmp_path_factory.mktemp("native"))
    shutil.copy(KB / "leaky_modelnew.py", native / "v001.py")
    paths += [linear / "v005.py", native / "v001.py"]
    results = judge_many(paths, rungs=["load", "correctness"])
    return {f"{p.parent.name}/{p.stem}": results[str(p)] for p in paths}  # native: vadd/v001


@pytest.mark.slow
def test_import_writes_a_native_problem_beside_the_file(imported: Path) -> None:
    folder = imported / "linear_relu"
    assert (folder / "linear_relu.py").read_text() == (KB / "linear_relu.py").read_text()
    problem = load_problem(folder)
    assert problem.cases == [{"batch_size": 5, "in_features": 64, "out_features": 32}]  # --set
    assert problem.bench_cases == [{"batch_size": 16, "in_features": 64, "out_features": 32}]  # the file's sizes
    assert problem.tolerance_for("float32").atol == problem.tolerance_for("float32").rtol == 1e-4
    assert problem.tolerance_for("bfloat16").atol == 1e-2
    assert "A linear layer followed by ReLU" in problem.description
    assert load_problem(imported / "leaky_relu").cases == [{"batch_size": 8, "dim": 1000}]


@pytest.mark.slow
def test_weights_are_made_once_per_seed_and_reach_the_reference(imported: Path) -> None:
    problem = load_problem(imported / "linear_relu")
    source = problem.module.source
    built: list[Any] = []
    build = source.build
    source.build = lambda init: built.append(init) or build(init)
    case = problem.cases[0]
    x, model = problem.make_inputs(dict(case), 7, torch.device("cpu"))
    assert x.shape == (5, 64) and model["init_inputs"] == [64, 32] and len(built) == 1
    assert set(model["state_dict"]) == {"linear.weight", "linear.bias"}
    again = problem.make_inputs(dict(case), 7, torch.device("cpu"))[1]["state_dict"]
    other = problem.make_inputs(dict(case), 8, torch.device("cpu"))[1]["state_dict"]
    assert torch.equal(again["linear.weight"], model["state_dict"]["linear.weight"])  # the seed fixes them
    assert not torch.equal(other["linear.weight"], model["state_dict"]["linear.weight"])  # fresh per seed
    built.clear()
    first = problem.reference(x, model)
    second = problem.reference(x, model)  # timed again: the reference Model is not built again
    assert len(built) == 1 and torch.equal(first, second)
    w, b = model["state_dict"]["linear.weight"], model["state_dict"]["linear.bias"]
    torch.testing.assert_close(first, torch.relu(x @ w.T + b))  # the reference uses the weights it is sent


@pytest.mark.slow
def test_cost_counts_bytes_and_matmul_flops(imported: Path) -> None:
    problem = load_problem(imported / "linear_relu")
    cost = problem.cost_of(problem.bench_cases[0])
    assert cost["flops"] == 2 * 16 * 64 * 32
    assert cost["bytes"] == 4 * (16 * 64 + 32 * 64 + 32 + 16 * 32)  # x, weight, bias, output
    source, built = problem.module.source, []
    build = source.build_on_meta
    source.build_on_meta = lambda init: built.append(init) or build(init)
    assert problem.cost_of(problem.bench_cases[0]) == cost
    assert built == []  # counted once per case: an RNN's steps take seconds to count
    assert problem.make_inputs(dict(problem.bench_cases[0]), 1, torch.device("meta"))[0].device.type == "meta"


@pytest.mark.slow
def test_modelnew_and_custom_kernel_versions_are_judged(judged: dict[str, dict]) -> None:
    good = judged["linear_relu/v001"]
    assert good["status"] == "pass", good
    assert rung(good, "load")["metrics"]["entry"] == "ModelNew"
    # building ModelNew and loading the reference's weights into it is not the version's torch compute
    assert "uses-library" not in flags(good) and "no-kernel" not in flags(good)
    assert judged["linear_relu/v002"]["status"] == "pass"  # custom_kernel(x, model)
    assert rung(judged["linear_relu/v002"], "load")["metrics"]["entry"] == "custom_kernel"
    assert judged["leaky_relu/v001"]["status"] == "pass"


@pytest.mark.slow
def test_wrong_and_torch_computing_versions_are_caught(judged: dict[str, dict]) -> None:
    wrong = rung(judged["leaky_relu/v002"], "correctness")
    assert not wrong["ok"] and "batch_size=8 dim=1000" in wrong["err"] and "outside atol 0.0001" in wrong["err"]
    torch_only = judged["linear_relu/v003"]
    assert "aten::addmm" in flags(torch_only)["uses-library"]
    renamed = rung(judged["linear_relu/v004"], "correctness")
    assert not renamed["ok"] and "ModelNew has no linear.weight, linear.bias" in renamed["err"]
    native = rung(judged["vadd/v001"], "correctness")
    assert not native["ok"] and "ModelNew needs a KernelBench problem's inputs" in native["err"]


@pytest.mark.slow
def test_export_round_trip(judged: dict[str, dict], imported: Path) -> None:
    """v002 (custom_kernel) exported as a KernelBench submission, then judged as a version: its ModelNew."""
    exported = judged["linear_relu/v005"]
    assert exported["status"] == "pass", exported
    assert rung(exported, "load")["metrics"]["entry"] == "ModelNew"
    assert "uses-library" not in flags(exported)
    text = (imported / "linear_relu" / "v005.py").read_text()
    assert "class ModelNew(_KernelBenchModel)" in text and "def custom_kernel" in text


@pytest.mark.slow
def test_export_of_a_modelnew_version_is_the_file_itself(imported: Path) -> None:
    path = imported / "leaky_relu" / "v001.py"
    if not path.exists():
        shutil.copy(KB / "leaky_modelnew.py", path)
    done = kerneltui("export", "leaky_relu", "--format", "kernelbench", "--version", "1", "--workspace", str(imported))
    assert done.returncode == 0, done.stderr
    assert done.stdout == (KB / "leaky_modelnew.py").read_text()


def test_export_needs_a_kernelbench_problem_for_custom_kernel(tmp_path: Path) -> None:
    folder = make_workspace(tmp_path / "ws")
    shutil.copy(FIXTURES / "versions" / "good.py", folder / "v001.py")
    done = kerneltui(
        "export", "vadd", "--format", "kernelbench", "--version", "v001", "--workspace", str(folder.parent)
    )
    assert done.returncode == 2 and "was not imported from KernelBench" in done.stderr


def test_set_names_a_module_constant(tmp_path: Path) -> None:
    done = kerneltui("import", "kernelbench", str(KB / "leaky_relu.py"), "--into", str(tmp_path), "--set", "rows=4")
    assert done.returncode == 2 and "--set rows: no such module constant" in done.stderr
    done = kerneltui("import", "kernelbench", str(KB / "leaky_relu.py"), "--into", str(tmp_path), "--set", "dim")
    assert done.returncode == 2 and "expected NAME=VALUE" in done.stderr
    assert not (tmp_path / "leaky_relu").exists()


@pytest.mark.slow
def test_broken_files_are_problem_errors(tmp_path: Path) -> None:
    done = kerneltui("import", "kernelbench", str(KB / "broken_no_model.py"), "--into", str(tmp_path))
    assert done.returncode == 2 and "broken_no_model.py defines no Model" in done.stderr
    done = kerneltui("import", "kernelbench", str(KB / "broken_inputs.py"), "--into", str(tmp_path))
    assert done.returncode == 2
    assert "get_inputs() raised RuntimeError: no data for this size" in done.stderr
    assert not (tmp_path / "broken_no_model").exists() and not (tmp_path / "broken_inputs").exists()


@pytest.mark.slow
def test_a_folder_imports_each_problem_and_says_which_failed(tmp_path: Path) -> None:
    done = kerneltui("import", "kernelbench", str(KB), "--into", str(tmp_path), "--set", "batch_size=2")
    assert done.returncode == 2  # broken_inputs.py
    assert "broken_inputs" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["leaky_relu", "linear_relu"]
    assert load_problem(tmp_path / "linear_relu").cases[0]["batch_size"] == 2
    again = kerneltui("import", "kernelbench", str(KB / "leaky_relu.py"), "--into", str(tmp_path))
    assert again.returncode == 2 and "--force" in again.stderr


def test_the_watcher_takes_a_modelnew_file_as_a_version(tmp_path: Path) -> None:
    from kerneltui.core.judging.watcher import looks_complete

    path = tmp_path / "v001.py"
    shutil.copy(KB / "linear_modelnew.py", path)
    assert looks_complete(path)
    path.write_text("import torch\n\nclass Model(torch.nn.Module):\n    pass\n")
    assert not looks_complete(path)


@pytest.mark.slow
def test_a_model_that_needs_values_to_be_built_still_imports(tmp_path: Path) -> None:
    """Shape-only checks build Model on the CPU where its __init__ reads values (SwinMLP's .item())."""
    path = tmp_path / "scaled.py"
    text = (KB / "leaky_relu.py").read_text()
    text = text.replace(
        "super(Model, self).__init__()", "super(Model, self).__init__()\n        self.s = torch.ones(1).item()"
    )
    path.write_text(text)
    done = kerneltui("import", "kernelbench", str(path), "--into", str(tmp_path / "ws"))
    assert done.returncode == 0, done.stderr
    problem = load_problem(tmp_path / "ws" / "scaled")
    assert problem.cost_of(problem.bench_cases[0])["bytes"] == 2 * 4 * 8 * 4096


@pytest.mark.slow
def test_the_agents_prompt_offers_modelnew_on_a_kernelbench_problem(imported: Path) -> None:
    from agents.prompt import task_prompt
    from kerneltui.core.agents.host import problem_info
    from kerneltui.core.workspace import Workspace

    prompt = task_prompt(problem_info(Workspace(imported), "leaky_relu", None))
    assert "`ModelNew`" in prompt
    native = task_prompt(problem_info(Workspace(FIXTURES.parent.parent / "kernels"), "softmax", None))
    assert "ModelNew" not in native


def test_a_correctness_case_too_big_for_the_interpreter_is_warned_of(tmp_path: Path) -> None:
    """KernelBench's own sizes (a 4096 x 393216 ReLU) make a correctness case the Triton interpreter takes hours on:
    an import with no --set says so; with --set, or at small sizes, it says nothing."""
    big = tmp_path / "big_relu.py"
    big.write_text((KB / "leaky_relu.py").read_text().replace("batch_size = 8", "batch_size = 2048"))  # 8M elements
    done = kerneltui("import", "kernelbench", str(big), "--into", str(tmp_path / "ws"))
    assert done.returncode == 0, done.stderr
    assert "8,388,608 input elements" in done.stderr and "--set smaller sizes" in done.stderr, done.stderr
    into = str(tmp_path / "ws")
    done = kerneltui("import", "kernelbench", str(big), "--into", into, "--force", "--set", "batch_size=8")
    assert done.returncode == 0 and "interpreter" not in done.stderr, done.stderr
    small = kerneltui("import", "kernelbench", str(KB / "leaky_relu.py"), "--into", str(tmp_path / "ws2"))
    assert small.returncode == 0 and "interpreter" not in small.stderr, small.stderr
