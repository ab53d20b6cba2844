"""Which folder a command means when no --workspace is given."""

from __future__ import annotations

from pathlib import Path

import pytest

from kerneltui.core.workspace import Workspace, WorkspaceError, resolve


def make_problem(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "problem.py").write_text("def reference(x):\n    return x\n")
    return folder


def test_a_project_whose_package_has_a_problem_module_means_its_kernels(tmp_path: Path) -> None:
    # A checkout like this repository: harness/problem.py is code, kernels/<problem>/ are problems.
    (tmp_path / "harness").mkdir()
    (tmp_path / "harness" / "__init__.py").write_text("")
    (tmp_path / "harness" / "problem.py").write_text("def load(): ...\n")
    make_problem(tmp_path / "kernels" / "softmax")
    workspace = resolve(None, cwd=tmp_path)
    assert workspace.root == (tmp_path / "kernels").resolve()
    assert [p.name for p in workspace.problems()] == ["softmax"]
    assert not (tmp_path / ".kerneltui").exists()


def test_a_folder_of_problems_is_its_own_workspace(tmp_path: Path) -> None:
    make_problem(tmp_path / "vadd")
    assert resolve(None, cwd=tmp_path).root == tmp_path.resolve()


def test_a_package_is_never_listed_as_a_problem(tmp_path: Path) -> None:
    make_problem(tmp_path / "vadd")
    package = make_problem(tmp_path / "tools")
    (package / "__init__.py").write_text("")
    assert [p.name for p in Workspace(tmp_path).problems()] == ["vadd"]


def test_no_problems_and_no_kernels_folder_says_what_to_pass(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="--workspace"):
        resolve(None, cwd=tmp_path)
