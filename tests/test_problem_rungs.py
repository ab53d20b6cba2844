"""Rungs a problem.py defines with @rung: run after correctness, in the judge, on outputs the version's worker
computed; recorded like any rung. The unitrows fixture's unit_length rung holds rows to unit length."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import add_version, judge_many, kerneltui, make_workspace, rung

pytestmark = pytest.mark.slow  # every test here judges versions or runs the app end to end

RUNGS = ["load", "correctness", "benchmark"]


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    folder = make_workspace(tmp_path_factory.mktemp("unitrows") / "ws", "unitrows")
    paths = [add_version(folder, name) for name in ("unit_rows", "unit_rows_long", "wrong_shape")]
    return judge_many(paths, timeout=30, rungs=RUNGS, max_file_mb=16)


def test_a_problem_rung_runs_right_after_correctness(judged: dict[str, dict]) -> None:
    names = [r["name"] for r in judged["unit_rows"]["rungs"]]
    assert names == ["load", "correctness", "unit_length", "benchmark"]


def test_outputs_that_pass_the_problem_rung_pass_with_its_figures(judged: dict[str, dict]) -> None:
    good = judged["unit_rows"]
    assert good["ok"] is True and good["status"] == "pass", good
    unit = rung(good, "unit_length")
    assert unit["ok"] is True and unit["err"] is None
    assert [c["case"] for c in unit["metrics"]["cases"]] == ["rows=1 cols=7", "rows=33 cols=100"]
    assert all(c["ok"] and c["max_length_err"] < 1e-5 for c in unit["metrics"]["cases"])


def test_outputs_within_tolerance_can_still_fail_the_problem_rung(judged: dict[str, dict]) -> None:
    long = judged["unit_rows_long"]
    assert rung(long, "correctness")["ok"] is True  # 0.2% too long is inside the element-wise tolerance
    unit = rung(long, "unit_length")
    assert unit["ok"] is False and unit["err"].startswith("case rows=1 cols=7 (seed ")
    assert "a row's length is off 1 by 2.0e-03" in unit["err"]
    assert long["status"] == "fail" and long["failed_rung"] == "unit_length"


def test_a_problem_rung_is_skipped_when_correctness_fails(judged: dict[str, dict]) -> None:
    wrong = judged["wrong_shape"]
    assert rung(wrong, "correctness")["ok"] is False
    assert rung(wrong, "unit_length")["skipped"] == "correctness failed"


def test_a_problem_rung_that_raises_is_the_problem_s_error(tmp_path: Path) -> None:
    folder = make_workspace(tmp_path / "ws", "unitrows")
    problem = folder / "problem.py"
    broken = problem.read_text().replace("    off = (", "    raise RuntimeError('unit_length broke')\n    off = (")
    problem.write_text(broken)
    version = add_version(folder, "unit_rows")
    refused = judge_many([version], rungs=["load", "correctness"])["unit_rows"]
    assert "unitrows/problem.py:" in refused["error"] and "RuntimeError: unit_length broke" in refused["error"]


def test_a_problem_rung_named_like_a_built_in_one_is_refused(tmp_path: Path) -> None:
    """As `kerneltui eval` says a bad problem: exit 2, the reason on stderr."""
    folder = make_workspace(tmp_path / "ws", "unitrows")
    problem = folder / "problem.py"
    problem.write_text(problem.read_text().replace('@rung("unit_length")', '@rung("benchmark")'))
    done = kerneltui("eval", str(add_version(folder, "unit_rows")), "--json", "--rungs", "load")
    assert done.returncode == 2 and "rung 'benchmark' in problem.py has a built-in rung's name" in done.stderr


def test_without_correctness_a_problem_rung_is_not_run(tmp_path: Path) -> None:
    folder = make_workspace(tmp_path / "ws", "unitrows")
    judged = judge_many([add_version(folder, "unit_rows")], rungs=["load"])["unit_rows"]
    assert [r["name"] for r in judged["rungs"]] == ["load"]
