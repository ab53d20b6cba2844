"""compute-sanitizer's reports read into findings (harness.judge.sanitizer); the tools themselves run only on a GPU
(tests/test_gpu.py), so here their logs are written as the tools print them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.judge import sanitizer
from harness.judge.sanitizer import Sanitized, parse

MEMCHECK = """========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 16 bytes
=========     at add_kernel+0x1b0 in /tmp/kerneltui-w1/inbox/v007.py:12
=========     by thread (96,0,0) in block (0,0,0)
=========     Address 0x7f3a00000410 is out of bounds
=========     and is 16 bytes after the nearest allocation at 0x7f3a00000000 of size 1024 bytes
=========
========= Invalid __global__ read of size 16 bytes
=========     at add_kernel+0x1b0 in /tmp/kerneltui-w1/inbox/v007.py:12
=========     by thread (100,0,0) in block (0,0,0)
=========     Address 0x7f3a00000450 is out of bounds
=========
========= ERROR SUMMARY: 2 errors
"""

RACECHECK_OLD_STYLE = """========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at 0x00000120 in raceGroupBasic.cu:14:sumKernel(int *, int *)
=========     and Read access at 0x00000160 in raceGroupBasic.cu:22:sumKernel(int *, int *) [4 hazards]
=========
========= Warning: Race reported between Read access at sumKernel(int *, int *)+0x200 in raceGroupBasic.cu:30
=========     and Write access at sumKernel(int *, int *)+0x220 in raceGroupBasic.cu:31 [1 hazard]
=========
========= RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)
========= ERROR SUMMARY: 1 error
"""

CLEAN = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"
CAPTURED = Path(__file__).parent / "fixtures" / "sanitizer"  # the tools' logs on an H100 (compute-sanitizer 2025)


def test_memcheck_findings_name_the_kernel_the_line_and_the_address_space() -> None:
    run = parse("memcheck", MEMCHECK)
    assert run.errors == 2 and run.note is None
    [finding] = run.findings  # the same read at the same line: one finding, counted twice
    assert (finding.kernel, finding.where, finding.space, finding.count) == ("add_kernel", "v007.py:12", "global", 2)
    words = Sanitized([run]).failure()
    assert (
        words
        == "compute-sanitizer: memcheck: Invalid __global__ read of size 16 bytes in add_kernel at v007.py:12 (×2)"
    )
    assert run.excerpt and "out of bounds" in run.excerpt


def test_racechecks_errors_fail_and_its_warnings_do_not() -> None:
    run = parse("racecheck", RACECHECK_OLD_STYLE)
    [finding] = run.findings
    assert finding.kernel == "sumKernel(int *, int *)" and finding.where == "raceGroupBasic.cu:14"
    assert finding.space == "shared" and "Write access" in finding.what and "and Read access" in finding.what


def test_a_clean_run_has_no_finding_and_a_cut_short_one_says_so() -> None:
    clean = parse("synccheck", CLEAN)
    assert clean.errors == 0 and clean.findings == [] and Sanitized([clean]).failure() is None
    cut = parse("initcheck", "========= COMPUTE-SANITIZER\n========= Error: Device not supported\n")
    assert cut.errors is None and cut.note is not None and "Device not supported" in cut.note
    assert Sanitized([cut]).failure() is None  # not checked is not a pass, and not the version's failure either
    assert Sanitized([cut]).to_json()["notes"] == [f"initcheck: {cut.note}"]


def test_logs_the_tools_wrote_on_an_h100_read_as_they_should() -> None:
    """A Triton add reading 64 elements past its inputs: memcheck's finding names the kernel and line; racecheck
    over an honest matmul ends with its own summary alone (it was taken for a tool that did not finish)."""
    past = parse("memcheck", (CAPTURED / "memcheck_read_past_the_inputs.txt").read_text())
    assert [(f.what, f.kernel, f.where, f.space) for f in past.findings] == [
        ("Invalid __global__ read of size 4 bytes", "add_kernel", "v001.py:13", "global")
    ]
    unwritten = parse("initcheck", (CAPTURED / "initcheck_read_past_the_inputs.txt").read_text())
    assert unwritten.findings[0].what == "Uninitialized __global__ memory read of size 4 bytes"
    clean = parse("racecheck", (CAPTURED / "racecheck_clean.txt").read_text())
    assert clean.errors == 0 and clean.note is None and clean.findings == []


def test_initcheck_leaves_the_copies_torch_makes_alone() -> None:
    """On an honest Triton matmul, initcheck reported cudaMemcpy reading bytes nobody wrote (torch's and Triton's,
    not the kernel's): its host API checks are off, the kernels' reads still checked."""
    logged = parse("initcheck", (CAPTURED / "initcheck_host_api_copy.txt").read_text())
    assert logged.findings and logged.findings[0].what.startswith("Host API memory access error")
    argv = sanitizer.wrapper("/usr/local/cuda/bin/compute-sanitizer", "initcheck").argv
    assert argv[argv.index("--check-api-memory-access") + 1] == "no"


def test_a_hostile_log_is_bounded() -> None:
    """The version's own output cannot reach the tool's log (a judge-owned folder), but the tool reports what the
    kernels did: a million distinct errors give at most MAX_FINDINGS findings and a bounded excerpt."""
    lines = [
        f"========= Invalid __global__ write of size 4 bytes\n=========     at k{i}+0x10 in x.py:{i}"
        for i in range(5000)
    ]
    run = parse("memcheck", "\n".join(lines) + "\n========= ERROR SUMMARY: 5000 errors\n")
    assert len(run.findings) == sanitizer.MAX_FINDINGS and len(run.excerpt or "") <= sanitizer.EXCERPT_CHARS


def test_the_tool_runs_inside_the_sandbox_with_torchs_cache_off() -> None:
    made = sanitizer.wrapper("/usr/local/cuda/bin/compute-sanitizer", "racecheck")
    assert made.argv[1:3] == ("--tool", "racecheck") and "{out}/sanitizer.txt" in made.argv
    assert ("PYTORCH_NO_CUDA_MEMORY_CACHING", "1") in made.env


def test_sanitizer_path_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELTUI_SANITIZER", "none")
    assert sanitizer.sanitizer_path() is None
    monkeypatch.setenv("KERNELTUI_SANITIZER", "/opt/x/compute-sanitizer")
    assert sanitizer.sanitizer_path() == "/opt/x/compute-sanitizer"


def test_kerneltui_sanitize_judges_the_version_again_and_says_why_it_cannot_here(workspace: Path) -> None:
    """With no GPU the sanitize rung is a skip that says why; the evaluation is recorded as the version's."""
    from tests.conftest import add_version

    version = add_version(workspace, "good", "v001.py")
    done = subprocess.run(
        [sys.executable, "-m", "kerneltui", "sanitize", str(version), "--json"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    evaluation = json.loads(done.stdout)
    rungs = {r["name"]: r for r in evaluation["rungs"]}
    assert rungs["correctness"]["ok"] is True
    assert rungs["sanitize"]["skipped"] == "no GPU: compute-sanitizer checks kernels as they run on one"


def test_a_would_be_bests_benchmark_line_says_whether_the_sanitizer_looked() -> None:
    from harness.contract.report import rung_detail
    from harness.contract.results import RungResult

    case = {"median_us": 64.0, "p20_us": 63.0, "p80_us": 65.0, "noise_pct": 0.5, "n": 100, "ref_median_us": 64.0}
    clean = {"tools": {"memcheck": {"errors": 0}}, "findings": 0, "notes": []}
    missing = {"tools": {}, "findings": 0, "notes": ["compute-sanitizer not found: install the CUDA toolkit"]}
    for checked, words in ((clean, "sanitizer ✓"), (missing, "sanitizer: not all run (compute-sanitizer not found")):
        bench = RungResult("benchmark", ok=True, metrics={"cases": [case], "confirmed": {"sanitizer": checked}})
        assert words in rung_detail(bench)
