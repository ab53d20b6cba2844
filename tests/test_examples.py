"""Every example version in kernels/ compiles for sm_90 and is correct; CuTeDSL and TileLang ones compile here
(TileLang's only where it is installed: the `tilelang` extra)."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest
import torch

from tests.conftest import REPO, judge_many, rung

pytestmark = pytest.mark.slow  # every test here judges versions or runs the app end to end

EXAMPLES = sorted((REPO / "kernels").glob("*/v*.py"))


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    state = tmp_path_factory.mktemp("state")
    # one seed a case: the interpreter is slow, and the examples' correctness does not hang on a second draw
    rungs = ["load", "compile", "correctness", "dumps"]
    results = judge_many(EXAMPLES, rungs=rungs, state_dir=str(state), seeds=1)
    return {k: v for k, v in results.items() if "/" in k}


def test_every_problem_has_a_naive_and_a_faster_version() -> None:
    problems = {p.parent.name for p in EXAMPLES}
    assert {"vecadd", "softmax", "rmsnorm", "matmul"} <= problems
    for problem in problems:
        assert (REPO / "kernels" / problem / "v001.py").is_file() and (REPO / "kernels" / problem / "v002.py").is_file()


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_example_is_correct_and_compiles(judged: dict[str, dict], path: Path) -> None:
    evaluation = next(ev for ev in judged.values() if ev.get("path") == str(path))
    dsls = rung(evaluation, "load")["metrics"]["dsls"]
    if "tilelang" in dsls and importlib.util.find_spec("tilelang") is None:
        assert "pip install 'kerneltui[tilelang]'" in rung(evaluation, "load")["err"]
        pytest.skip("TileLang is not installed here (the `tilelang` extra)")
    assert evaluation["ok"], [(r["name"], r["err"]) for r in evaluation["rungs"] if r["ok"] is False]
    assert evaluation["flags"] == [], evaluation["flags"]  # honest kernels: nothing for a reviewer to doubt
    kernels = rung(evaluation, "compile")["metrics"]["kernels"]
    kinds = set(rung(evaluation, "dumps")["metrics"]["kinds"])
    if "tilelang" in dsls:
        assert {"tl", "tir", "cu"} <= kinds  # TileLang lowers to CUDA source with no GPU and no nvcc
        if "cubin" not in kinds:  # its PTX and cubin need nvcc
            assert shutil.which("nvcc") is None, "nvcc is here, yet TileLang's kernels were not compiled"
            return
    assert kernels and all(k["registers"] > 0 and k["spill_bytes"] == 0 for k in kernels)
    correctness = rung(evaluation, "correctness")
    if {"cutedsl", "tilelang"} & set(dsls) and not torch.cuda.is_available():
        assert correctness["ok"] is None and "GPU" in correctness["skipped"]
        assert evaluation["status"] == "unverified"
        assert {"ptx", "cubin", "sass"} <= kinds
    else:
        assert correctness["ok"] is True and evaluation["status"] == "pass"


def test_matmul_v002_uses_hopper_tensor_cores(judged: dict[str, dict]) -> None:
    evaluation = next(ev for ev in judged.values() if ev.get("path", "").endswith("matmul/v002.py"))
    ptx = next(f for f in rung(evaluation, "dumps")["metrics"]["files"] if f["kind"] == "ptx")
    assert "wgmma.mma_async" in Path(ptx["path"]).read_text()
