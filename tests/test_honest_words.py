"""What a verdict says of itself: a sibling module not copied beside versions, a need this box cannot meet, a process
the out-of-memory killer ended, and what the interpreter cannot see."""

from __future__ import annotations

from pathlib import Path

from harness.containment.watch import killed_for_memory, oom_kills
from harness.contract.report import rung_detail
from harness.contract.results import RungResult
from harness.contract.units import TIME_MEANS, TIME_NAME
from tests.conftest import judge_many, make_workspace, rung

IMPORTS_SIBLING = """
import helper


def custom_kernel(a, b):
    return helper.add(a, b)
"""

NEEDS_THE_TOOLKIT = """
raise OSError("CUDA_HOME environment variable is not set. Please set it to your CUDA install root.")
"""

BUILT_FOR_ANOTHER_GPU = """
def custom_kernel(a, b):
    raise RuntimeError("CUDA error: no kernel image is available for execution on the device")
"""


def test_what_a_version_needs_and_does_not_get_is_said(tmp_path: Path) -> None:
    folder = make_workspace(tmp_path / "ws")
    (folder / "helper.py").write_text("def add(a, b):\n    return a + b\n")
    paths = []
    for name, text in (("v001", IMPORTS_SIBLING), ("v002", NEEDS_THE_TOOLKIT), ("v003", BUILT_FOR_ANOTHER_GPU)):
        (folder / f"{name}.py").write_text(text)
        paths.append(folder / f"{name}.py")
    judged = judge_many(paths, rungs="load,compile,correctness")
    sibling = rung(judged["v001"], "load")
    assert sibling["ok"] is False and "helper is in the problem folder" in sibling["err"], sibling
    assert 'version_files = ["helper.py"]' in sibling["err"]
    # Not wrong, not verified: no rung failed, so the agent is not told to fix what this box lacks
    toolkit = judged["v002"]
    assert toolkit["status"] == "unverified", [(r["name"], r["ok"], r["err"], r["skipped"]) for r in toolkit["rungs"]]
    assert "it needs the CUDA toolkit (nvcc)" in rung(toolkit, "load")["skipped"]
    assert rung(toolkit, "correctness")["skipped"] == rung(toolkit, "load")["skipped"]
    other_gpu = judged["v003"]
    assert other_gpu["status"] == "unverified", [(r["name"], r["ok"], r["err"]) for r in other_gpu["rungs"]]
    assert "a GPU of the architecture its kernels were built for" in rung(other_gpu, "correctness")["skipped"]


def test_a_sigkill_is_the_memory_killers_only_when_its_count_rose() -> None:
    now = oom_kills()
    if now is None:  # a kernel that does not count them: nothing can be told apart
        assert not killed_for_memory(-9, 0)
        return
    assert killed_for_memory(-9, now - 1) and killed_for_memory(137, now - 1)  # 137: bubblewrap's 128 + 9
    assert not killed_for_memory(-9, now)  # someone else's SIGKILL (the judge's own, a timeout)
    assert not killed_for_memory(-11, now - 1) and not killed_for_memory(1, now - 1)


def test_an_interpreted_pass_says_what_the_interpreter_cannot_see() -> None:
    passed = RungResult("correctness", ok=True, metrics={"mode": "triton-interpreter", "n_cases": 2, "n_seeds": 2})
    assert "races between programs and bench-size outputs unseen" in rung_detail(passed)
    on_gpu = RungResult("correctness", ok=True, metrics={"mode": "cuda", "n_cases": 2, "n_seeds": 2})
    assert "unseen" not in rung_detail(on_gpu)


def test_a_figure_taken_over_placements_says_so_beside_its_noise() -> None:
    case = {"median_us": 124.0, "p20_us": 117.0, "p80_us": 136.0, "noise_pct": 5.1, "n": 800, "ref_median_us": 90.0}
    one = rung_detail(RungResult("benchmark", ok=True, metrics={"cases": [{**case, "placements": 1}]}))
    assert "placements" not in one
    placed = {**case, "placements": 8, "placement_pct": 5.1}
    text = rung_detail(RungResult("benchmark", ok=True, metrics={"cases": [placed]}))
    assert "±5.1% · n=800 · the mean of 8 placements' medians, ±5.1% with others" in text, text


def test_the_figure_that_decides_is_named_alike_wherever_it_is_shown() -> None:
    """The table's column, the rung's text, the feedback file's line and an agent's verdict call the deciding
    figure by one name, and the verdict (and `--json`) say what it is."""
    from agents.verdict import Judged
    from kerneltui.core.agents.feedback import version_line
    from kerneltui.ui.widgets.versions import COLUMNS

    case = {"median_us": 86.7, "p20_us": 86.0, "p80_us": 87.5, "noise_pct": 0.4, "n": 400, "ref_median_us": 90.0}
    benchmark = RungResult("benchmark", ok=True, metrics={"cases": [case]})
    assert rung_detail(benchmark).startswith(f"{TIME_NAME} 86.7")
    assert dict((key, label) for key, label, _ in COLUMNS)["median"] == TIME_NAME
    assert f"{TIME_NAME} 86.7" in version_line({"name": "v002", "status": "pass", "median_us": 86.7})
    verdict = Judged("vadd", "v002", "pass", "", median_us=86.7, rungs=[benchmark]).to_json()
    assert verdict["median_us_is"] == TIME_MEANS and TIME_NAME in TIME_MEANS
