"""problem.py: what a broken one says, and the tolerance forms."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.problem.load import ProblemError, load_problem
from tests.conftest import FIXTURES


def write_problem(tmp_path: Path, name: str, text: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "problem.py").write_text(text)
    return folder


GOOD = (FIXTURES / "vadd" / "problem.py").read_text()


def test_fixture_problem_loads(tmp_path: Path) -> None:
    folder = tmp_path / "vadd"
    shutil.copytree(FIXTURES / "vadd", folder)
    problem = load_problem(folder)
    assert problem.name == "vadd" and len(problem.cases) == 4 and problem.bench_cases
    assert problem.tolerance_for("float32").atol == 1e-6
    assert problem.cost_of({"n": 10}) == {"flops": 10.0, "bytes": 120.0}
    assert problem.description.startswith("fp32 vector add")


def test_missing_names_are_listed(tmp_path: Path) -> None:
    folder = write_problem(tmp_path, "halfdone", "def reference(x):\n    return x\ncases = [{'n': 1}]\n")
    with pytest.raises(ProblemError) as err:
        load_problem(folder)
    message = str(err.value)
    assert message.startswith("halfdone:")
    for name in ("make_inputs", "bench_cases", "tolerance", "cost"):
        assert name in message


def test_wrong_signature_is_named(tmp_path: Path) -> None:
    text = GOOD.replace("def make_inputs(case: dict, seed: int, device) -> tuple:", "def make_inputs(case, seed):")
    folder = write_problem(tmp_path, "sig", text)
    with pytest.raises(
        ProblemError, match=r"sig: make_inputs must take \(case, seed, device\); .* takes \(case, seed\)"
    ):
        load_problem(folder)


def test_syntax_error_gives_file_and_line(tmp_path: Path) -> None:
    folder = write_problem(tmp_path, "broken", "def reference(x)\n    return x\n")
    with pytest.raises(ProblemError, match=r"broken: .*problem.py:1:\d+: SyntaxError"):
        load_problem(folder)


def test_import_error_gives_line(tmp_path: Path) -> None:
    folder = write_problem(tmp_path, "imports", "import torch\nimport not_a_module\n")
    with pytest.raises(ProblemError, match=r"problem.py:2: ModuleNotFoundError"):
        load_problem(folder)


def test_empty_cases_are_refused(tmp_path: Path) -> None:
    folder = write_problem(
        tmp_path,
        "empty",
        GOOD.replace('cases = [{"n": 1}, {"n": 1000}, {"n": 4096}, {"n": 4097}]', "cases = []"),
    )
    with pytest.raises(ProblemError, match=r"cases in problem\.py is empty"):
        load_problem(folder)


def test_tolerance_needs_atol_and_rtol(tmp_path: Path) -> None:
    folder = write_problem(
        tmp_path,
        "tol",
        GOOD.replace('tolerance = {"atol": 1e-6, "rtol": 1e-6}', 'tolerance = {"atol": 1e-6}'),
    )
    with pytest.raises(ProblemError, match="tolerance is missing rtol"):
        load_problem(folder)


def test_tolerance_per_dtype_and_floors(tmp_path: Path) -> None:
    text = GOOD.replace(
        'tolerance = {"atol": 1e-6, "rtol": 1e-6}',
        'tolerance = {"bfloat16": {"atol": 1e-2, "rtol": 1e-2, "min_cosine": 0.999},'
        ' "float32": {"atol": 1e-5, "rtol": 1e-5}}',
    )
    problem = load_problem(write_problem(tmp_path, "perdtype", text))
    assert problem.tolerance_for("bfloat16").min_cosine == 0.999
    assert problem.tolerance_for("float32").atol == 1e-5
    assert problem.tolerance_for("float16").atol == 1e-5  # unknown dtypes take the strictest


def test_integer_outputs_are_exact_unless_their_dtype_is_named(tmp_path: Path) -> None:
    flat = load_problem(write_problem(tmp_path, "flat", GOOD))
    assert flat.tolerance_for("float32").rtol == 1e-6
    assert (flat.tolerance_for("int64").atol, flat.tolerance_for("bool").rtol) == (0.0, 0.0)
    text = GOOD.replace(
        'tolerance = {"atol": 1e-6, "rtol": 1e-6}',
        'tolerance = {"float32": {"atol": 1e-6, "rtol": 1e-6}, "int64": {"atol": 1, "rtol": 0}}',
    )
    named = load_problem(write_problem(tmp_path, "named", text))
    assert named.tolerance_for("int64").atol == 1 and named.tolerance_for("int32").atol == 0


def test_no_problem_file(tmp_path: Path) -> None:
    (tmp_path / "nothing").mkdir()
    with pytest.raises(ProblemError, match=r"no problem\.py"):
        load_problem(tmp_path / "nothing")
