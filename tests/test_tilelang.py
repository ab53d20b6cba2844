"""TileLang versions: found by their import, refused with the install command where TileLang is missing,
compiled ahead of time with no GPU (its IR, CUDA source, PTX, cubin and SASS dumped), and their kernels
known by the CUDA names TileLang gave them."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from harness.contract import source
from harness.problem.load import load_problem
from tests.conftest import FIXTURES, REPO, add_version, judge_many, make_workspace, run, rung

VECADD = REPO / "kernels" / "vecadd" / "v004.py"
needs_tilelang = pytest.mark.skipif(
    importlib.util.find_spec("tilelang") is None, reason="TileLang is not installed (the `tilelang` extra)"
)


def test_a_version_importing_tilelang_is_a_tilelang_version() -> None:
    assert source.dsls("import tilelang\nimport tilelang.language as T\n") == ["tilelang"]
    assert source.dsls("from tilelang import language as T\nimport triton\n") == ["triton", "tilelang"]
    assert source.dsls("import tilelangx\n") == []


def test_the_judge_never_imports_tilelang() -> None:
    """Only the worker of a TileLang version imports it: the ladder stays light for every other version."""
    code = (
        "import sys, harness.judge.ladder, harness.worker.recorder, harness.judge.trust, harness.worker.tilelang_hooks;"
        "import harness.judge.rungs.builtin;"
        "print(sorted(m for m in ('tilelang', 'tvm', 'tvm_ffi', 'z3') if m in sys.modules))"
    )
    done = run(["-c", code])
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr


@pytest.mark.slow
def test_without_tilelang_the_load_rung_names_the_extra_to_install(tmp_path: Path) -> None:
    """A Python without TileLang (here: one that hides it) fails the version at load, saying what to install;
    it is the version's failure to load, not a crash of its worker."""
    hidden = tmp_path / "hide" / "tilelang"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'tilelang'\", name='tilelang')\n")
    results = judge_many(
        [VECADD], rungs=["load", "compile"], state_dir=str(tmp_path / "state"), env={"PYTHONPATH": str(hidden.parent)}
    )
    evaluation = results[str(VECADD)]
    load = rung(evaluation, "load")
    assert load["ok"] is False and "pip install 'kerneltui[tilelang]'" in load["err"], load["err"]
    assert evaluation["status"] == "fail" and "crash" not in load["err"]
    assert rung(evaluation, "compile")["ok"] is None


@pytest.mark.slow
@needs_tilelang
def test_tilelang_output_allocated_by_the_kernel_compiles_ahead_of_time(tmp_path: Path) -> None:
    """out_idx: TileLang allocates and returns the output. With no GPU the kernel is lowered and compiled for
    sm_90a, and its call returns a placeholder; the dumps hold each stage of what it lowers to."""
    version = add_version(make_workspace(tmp_path / "ws"), "tilelang_out_idx", "v001.py")
    evaluation = judge_many([version], rungs=["load", "compile", "dumps"], state_dir=str(tmp_path / "state"))[
        str(version)
    ]
    assert evaluation["ok"], [(r["name"], r["err"]) for r in evaluation["rungs"]]
    assert rung(evaluation, "load")["metrics"]["dsls"] == ["tilelang"]
    compiled = rung(evaluation, "compile")["metrics"]
    assert compiled["mode"] == "aot" and [k["dsl"] for k in compiled["kernels"]] == ["tilelang"]
    assert compiled["kernels"][0]["name"] == "vadd_kernel"
    files = {f["kind"]: Path(f["path"]) for f in rung(evaluation, "dumps")["metrics"]["files"]}
    assert {"tl", "tir", "cu"} <= files.keys()
    assert "T.Parallel" in files["tl"].read_text() or "T.parallel" in files["tl"].read_text()
    assert "vadd_kernel" in files["cu"].read_text()
    if shutil.which("nvcc"):  # PTX and cubin come from nvcc; SASS from the cubin
        assert {"ptx", "cubin", "sass"} <= files.keys()
        assert ".target sm_90a" in files["ptx"].read_text()
        assert compiled["kernels"][0]["registers"] > 0


@pytest.mark.slow
@needs_tilelang
def test_tilelang_shared_memory_past_the_arch_limit_fails_the_compile_rung(tmp_path: Path) -> None:
    """TileLang's tiles live in dynamic shared memory, which the cubin does not list: the amount the kernel
    asks for at launch is held to the arch's limit per block."""
    version = add_version(make_workspace(tmp_path / "ws"), "tilelang_too_much_smem", "v001.py")
    evaluation = judge_many([version], rungs=["load", "compile"], state_dir=str(tmp_path / "state"))[str(version)]
    compiled = rung(evaluation, "compile")
    assert compiled["ok"] is False
    assert compiled["err"] == "kernel staged_kernel needs 327680 B of shared memory; sm_90 allows 232448 B per block"


def test_a_tilelang_kernel_is_known_by_the_cuda_name_tilelang_gave_it() -> None:
    """TileLang names the CUDA kernel `<function>_kernel`: listed at the launch, that name is the version's own,
    and a library kernel listed beside it is still a stranger."""
    from harness.judge.trust import Observed

    problem = load_problem(FIXTURES / "vadd")
    launch = {"dsl": "tilelang", "name": "vecadd", "kernels": ["vecadd_kernel"]}
    record = {"launches": [launch], "ops": {}, "origins": [["kernel:vecadd"]], "tampered": []}
    seen = Observed()
    seen.add({**record, "profiled": {"ops": {}, "kernels": {"vecadd_kernel": 1}}}, "run", "n=1")
    assert seen.flags(problem, None) == []
    forged = {**launch, "kernels": ["vecadd_kernel", "sm90_xmma_gemm_f32f32_tf32"]}
    seen = Observed()
    library = {"ops": {}, "kernels": {"sm90_xmma_gemm_f32f32_tf32": 1}}
    seen.add({**record, "launches": [forged], "profiled": library}, "run", "n=1")
    assert "kernel-mismatch" in {f.name for f in seen.flags(problem, None)}


def test_the_asm_pane_steps_through_tilelang_listings_only_where_a_version_has_them() -> None:
    from kerneltui.ui.widgets.asm import KINDS, kinds_of

    triton = [{"kernel": "k", "kind": kind} for kind in ("sass", "ptx", "ttgir", "llir", "ttir", "cubin")]
    tilelang = [{"kernel": "k", "kind": kind} for kind in ("sass", "ptx", "cubin", "cu", "tir", "tl")]
    assert kinds_of(triton) == KINDS
    assert kinds_of(tilelang) == (*KINDS, "cu", "tir", "tl")


@needs_tilelang
def test_the_recorder_notes_a_tilelang_launch_and_the_output_it_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The example compiled ahead of time in this process: its call is a TileLang launch of `vecadd_kernel`,
    and the output it was passed is the kernel's (so an honest version is not flagged no-kernel)."""
    import torch

    from harness.worker import tilelang_hooks
    from harness.worker.recorder import Recorder

    monkeypatch.setenv("HOME", str(tmp_path))  # the worker's scratch folder, where the kernels are written
    tilelang_hooks.install("sm_90a")
    recorder = Recorder()
    recorder.install_tilelang()
    spec = importlib.util.spec_from_file_location("tilelang_vecadd", VECADD)
    assert spec is not None and spec.loader is not None
    version = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(version)
    a, b = torch.ones(4097), torch.ones(4097)
    with recorder.recording((a, b)):
        out = version.custom_kernel(a, b)
    report = recorder.report((out,))
    assert report["launches"] == [{"dsl": "tilelang", "name": "vecadd", "kernels": ["vecadd_kernel"]}]
    assert report["origins"] == [["kernel:vecadd"]] and report["tampered"] == []
    assert {p.suffix for p in (tmp_path / "tilelang").iterdir()} >= {".tl", ".tir", ".cu", ".json"}
