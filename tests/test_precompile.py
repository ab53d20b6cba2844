"""A Triton version's kernels compiled for every case at once before its first call (harness.gpu.precompile), and
versions that behave otherwise while they are: the verdict still comes from their real calls."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import add_version, judge_many, rung

pytestmark = pytest.mark.slow  # every test here judges versions or runs the app end to end

RUNGS = ["load", "compile", "correctness", "dumps"]


def test_every_case_compiles_ahead_and_each_kernel_names_the_case_that_launched_it(workspace: Path) -> None:
    """raises_when_compiled_ahead launches BLOCK=1 for n=1 and BLOCK=1024 for the larger cases; each kernel is
    listed under the first case that launched its specialisation, not all under the case compiled first."""
    path = add_version(workspace, "raises_when_compiled_ahead", "v001.py")
    evaluation = judge_many([path], rungs=RUNGS)["v001"]
    compiled = rung(evaluation, "compile")
    ahead = compiled["metrics"]["precompile"]
    assert compiled["ok"] and ahead["kernels"] >= 2 and ahead["failed_calls"] >= 1, compiled
    by_block = {k["constexprs"]["BLOCK"]: k["case"] for k in rung(evaluation, "dumps")["metrics"]["kernels"]}
    assert by_block[1] == "n=1" and by_block[1024] in ("n=1000", "n=16777216"), by_block  # GPU; CPU: bench first
    assert rung(evaluation, "correctness")["ok"] and evaluation["status"] != "failed", evaluation


def test_a_version_that_hangs_only_while_compiled_ahead_is_judged_by_its_calls(workspace: Path) -> None:
    """The worker that hung is replaced; the version's real calls compile and pass."""
    path = add_version(workspace, "hangs_when_compiled_ahead", "v001.py")
    evaluation = judge_many([path], rungs=RUNGS, timeout=5)["v001"]
    compiled = rung(evaluation, "compile")
    assert compiled["ok"] and compiled["metrics"]["precompile"]["ok"] is False, compiled
    assert "timed out" in compiled["metrics"]["precompile"]["why"], compiled
    assert compiled["metrics"]["kernels"], compiled
    assert rung(evaluation, "correctness")["ok"], evaluation


def test_a_bench_case_too_large_for_this_machine_still_compiles_by_its_shape(workspace: Path) -> None:
    """Shape-only inputs are made under torch's meta device: a bench case of 2^40 floats (4 TiB) costs no memory
    and no time, and its kernels compile ahead of time like the others (made on the CPU first, it could not)."""
    problem = workspace / "problem.py"
    problem.write_text(problem.read_text().replace('bench_cases = [{"n": 1 << 24}]', 'bench_cases = [{"n": 1 << 40}]'))
    path = add_version(workspace, "raises_when_compiled_ahead", "v001.py")
    compiled = rung(judge_many([path], rungs=["load", "compile"])["v001"], "compile")
    assert compiled["ok"], compiled
    assert "n=1099511627776" in {k["case"] for k in compiled["metrics"]["kernels"]}, compiled
