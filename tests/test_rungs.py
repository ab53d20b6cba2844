"""Rung logic that needs no GPU to exercise: roofline arithmetic and its credibility check,
timing statistics, the shared-memory limit, and what the benchmark says without a GPU."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from harness.contract.options import Options
from harness.contract.results import Evaluation
from harness.gpu import timing
from harness.judge import device
from harness.judge.artifacts import Kernel, smem_limit
from harness.judge.context import JudgeContext, VersionRun
from harness.judge.rungs.benchmark import benchmark
from harness.judge.rungs.compile import in_case_order, smem_overflow
from harness.judge.rungs.correctness import mutated_inputs
from harness.judge.rungs.roofline import roofline
from harness.problem.load import load_problem
from tests.conftest import add_version, judge_many, make_workspace, run, rung
from tests.judge_context import context_without_workers


@pytest.fixture
def ladder(tmp_path: Path) -> JudgeContext:
    """What the roofline and benchmark rungs read of the judge (its options, this device), with no worker."""
    return context_without_workers(Options(state_dir=tmp_path / "state"), device.describe())


def fake_run(tmp_path: Path, median_us: float) -> VersionRun:
    folder = make_workspace(tmp_path / "ws")
    problem = load_problem(folder)
    ev = Evaluation(problem="vadd", version="v001", path=str(folder / "v001.py"), hash="0" * 64)
    run = VersionRun(problem=problem, path=folder / "v001.py", ev=ev, dsls=["triton"])
    run.timings.append({"case": {"n": 1 << 24}, "precision": "fp32", "median_us": median_us})
    return run


def seed_peaks(ladder: Any, state: Path, copy_gbps: float, **more: float) -> None:
    state.mkdir(parents=True, exist_ok=True)
    peaks = {"copy_gbps": copy_gbps, "bf16_tflops": 800.0, "fp32_tflops": 50.0, "measured": "test", **more}
    (state / "device-peaks.json").write_text(json.dumps({device.peaks_key(ladder.device_info): peaks}))


def test_a_two_reads_one_write_kernel_is_held_to_the_stream_ceiling(ladder: Any, tmp_path: Path) -> None:
    """vecadd v002 read 102% of roofline on the H200: 4335 GB/s against a 4249 GB/s copy (1 read : 1 write),
    a mix it beats; the stream ceiling (2 reads : 1 write) is the one it can reach."""
    from harness.contract.report import rung_line

    seed_peaks(ladder, tmp_path / "state", copy_gbps=4249.0, stream_gbps=4400.0, read_gbps=4380.0)
    (state := tmp_path / "state" / "device-peaks.json").write_text(
        state.read_text().replace('"measured"', '"stream_by": "triton 8192", "measured"')
    )
    bytes_moved = 12 * (1 << 24)
    result = roofline(ladder, fake_run(tmp_path, median_us=bytes_moved / 4335e9 * 1e6))
    row = result.metrics["cases"][0]
    assert result.ok is True and row["ceiling"] == "stream" and row["pct"] == pytest.approx(98.5, abs=0.1)
    assert "of measured stream (4400 GB/s by triton 8192)" in rung_line(result)  # which kernel set it


def test_past_the_measured_ceiling_is_said_past_the_datasheet_fails(ladder: Any, tmp_path: Path) -> None:
    from harness.contract.report import rung_line

    ladder.device_info["name"] = "NVIDIA H200"  # datasheet 4800 GB/s
    seed_peaks(ladder, tmp_path / "state", copy_gbps=4000.0)
    bytes_moved = 12 * (1 << 24)
    above = roofline(ladder, fake_run(tmp_path / "a", median_us=bytes_moved / 4400e9 * 1e6))
    assert above.ok is True and "above the measured ceiling" in rung_line(above)
    assert "92% of datasheet (4800 GB/s)" in rung_line(above)
    past = roofline(ladder, fake_run(tmp_path / "b", median_us=bytes_moved / 5200e9 * 1e6))
    assert past.ok is False and "108% of the datasheet's 4800" in past.err


def test_an_fp32_problem_may_use_tf32_matrix_units() -> None:
    """Triton's tl.dot computes fp32 inputs with TF32 by default: an honest fp32 matmul passes the fp32 rate."""
    peaks = {"fp32_tflops": 50.0, "tf32_tflops": 400.0, "bf16_tflops": 800.0, "fp16_tflops": 790.0}
    assert device.matmul_ceiling(peaks, "fp32") == ("tf32", 400.0)
    assert device.matmul_ceiling(peaks, "fp8") == ("bf16", 800.0)  # no fp8 measured: the best it may fall to
    assert device.matmul_ceiling({"fp32_tflops": 50.0}, "bf16") == ("fp32", 50.0)  # an old cache


def test_roofline_percent_of_measured_copy(ladder: Any, tmp_path: Path) -> None:
    seed_peaks(ladder, tmp_path / "state", copy_gbps=4000.0)
    bytes_moved = 12 * (1 << 24)
    floor_us = bytes_moved / 4000e9 * 1e6
    result = roofline(ladder, fake_run(tmp_path, median_us=floor_us / 0.8))
    assert result.ok is True
    row = result.metrics["cases"][0]
    assert row["bound"] == "memory" and row["pct"] == pytest.approx(80.0)
    assert row["gbps"] == pytest.approx(0.8 * 4000.0)


def test_roofline_refuses_a_time_faster_than_the_device(ladder: Any, tmp_path: Path) -> None:
    seed_peaks(ladder, tmp_path / "state", copy_gbps=4000.0)
    floor_us = 12 * (1 << 24) / 4000e9 * 1e6
    result = roofline(ladder, fake_run(tmp_path, median_us=floor_us / 3))
    assert result.ok is False and "faster than the device can go" in result.err


def test_benchmark_without_gpu_is_skipped_with_reason(ladder: Any, tmp_path: Path) -> None:
    if ladder.cuda:
        pytest.skip("this machine has a GPU: the benchmark runs (tests/test_gpu.py)")
    result = benchmark(ladder, fake_run(tmp_path, 1.0))
    assert result.ok is None and "no GPU" in result.skipped
    assert "outputs at the bench sizes are not checked" in result.skipped  # a "pass" here says what it covers


def test_median_confidence_interval_shrinks_with_samples() -> None:
    few = [1.0, 1.1, 0.9, 1.05, 0.95]
    many = few * 40
    assert timing.median_ci_halfwidth(many) < timing.median_ci_halfwidth(few)
    assert timing.median_ci_halfwidth([1.0, 2.0]) == float("inf")


def test_summary_percentiles() -> None:
    samples_ms = [i / 1000 for i in range(1, 101)]  # 1..100 µs
    summary = timing.summarize(samples_ms)
    assert summary.median_us == pytest.approx(50.5) and summary.p20_us == pytest.approx(21.0)
    assert summary.p80_us == pytest.approx(80.0) and summary.n == 100 and summary.min_us == pytest.approx(1.0)


def test_shared_memory_over_the_limit_fails_compile() -> None:
    kernel = Kernel(name="big_tile", dsl="triton", meta={"shared": 300_000})
    message = smem_overflow([kernel], "sm_90")
    assert message and "big_tile needs 300000 B" in message and str(smem_limit("sm_90")) in message
    assert smem_overflow([Kernel(name="ok", dsl="triton", meta={"shared": 1024})], "sm_90") is None


def test_datasheet_lookup() -> None:
    assert device.datasheet("NVIDIA H200")["bandwidth_gbps"] == 4800
    assert device.datasheet("Mystery GPU") is None


def test_rung_lines_survive_partial_metrics() -> None:
    from harness.contract.report import rung_line
    from harness.contract.results import RUNG_ORDER, RungResult

    for name in RUNG_ORDER:
        for metrics in ({}, {"cases": []}, {"kernels": [{}]}, {"cases": [{}], "peaks": {}}):
            assert name in rung_line(RungResult(name, ok=True, metrics=metrics))


def test_changes_to_nested_inputs_are_named() -> None:
    pristine = [torch.ones(3), [torch.zeros(2), torch.zeros(2)], {"scale": 0.5, "dims": (1, 2)}]
    assert mutated_inputs(pristine, [torch.ones(3), [torch.zeros(2)] * 2, {"scale": 0.5, "dims": [1, 2]}]) is None
    in_list = [torch.ones(3), [torch.zeros(2), torch.tensor([0.0, 7.0])], {"scale": 0.5, "dims": [1, 2]}]
    assert (
        mutated_inputs(pristine, in_list) == "custom_kernel modified its input 1[1] in place (1 of 2 elements changed)"
    )
    in_dict = [torch.ones(3), [torch.zeros(2)] * 2, {"scale": 0.0, "dims": [1, 2]}]
    assert mutated_inputs(pristine, in_dict) == "custom_kernel changed input 2['scale'] from 0.5 to 0.0"


@pytest.mark.slow
def test_rungs_asked_without_load_still_load_the_version_first(tmp_path: Path) -> None:
    """`--rungs correctness,dumps` ran correctness with no loaded version (the judge failed: KeyError) and
    dumps showed ✓ for a version that does not even parse."""
    folder = make_workspace(tmp_path / "ws")
    (folder / "v001.py").write_text("import torch\ndef custom_kernel(a, b):\n    return a +\n")
    ev = judge_many([folder / "v001.py"], rungs=["correctness", "dumps"])["v001"]
    rungs = {r["name"]: r for r in ev["rungs"]}
    assert list(rungs) == ["load", "correctness", "dumps"]
    assert rungs["load"]["ok"] is False and "SyntaxError" in (rungs["load"]["err"] or "") + (rungs["load"]["log"] or "")
    assert rungs["correctness"]["skipped"] == rungs["dumps"]["skipped"] == "load failed"
    assert ev["status"] == "fail"


def test_every_advertised_rung_is_registered_in_order() -> None:
    from harness.contract.options import parse_rungs
    from harness.contract.results import DEFAULT_RUNGS, RUNG_ORDER
    from harness.judge.rungs.builtin import BUILTIN

    assert tuple(BUILTIN) == RUNG_ORDER  # --rungs lists RUNG_ORDER; the ladder climbs it through the registry
    assert set(DEFAULT_RUNGS) <= set(BUILTIN) and parse_rungs(None) == DEFAULT_RUNGS
    assert all(BUILTIN[name].name == name for name in RUNG_ORDER)


def test_an_unknown_rung_is_a_usage_error_naming_the_known_ones(workspace: Path) -> None:
    version = add_version(workspace, "good", "v001.py")
    done = run(["-m", "harness", str(version), "--rungs", "load,flamegraph"])
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    known = "load, compile, correctness, benchmark, roofline, dumps, sanitize, profile"
    assert done.stderr.strip() == f"error: rungs: unknown rung(s) flamegraph; rungs are {known}"


def test_noise_covers_a_timing_that_drifts_during_the_run() -> None:
    """The median's confidence interval alone said ±0% for a run whose calls slowed from 100 to 120 µs (clocks
    dropping under load): the drift between the run's thirds is part of the noise."""
    drifting = [0.100] * 30 + [0.110] * 30 + [0.120] * 30
    assert timing.median_ci_halfwidth(drifting) < 0.001
    assert timing.summarize(drifting).noise_pct == pytest.approx(100 * 0.010 / 0.110)
    steady = [0.100, 0.101, 0.099] * 30
    assert timing.summarize(steady).noise_pct < 1.0


def test_kernels_the_worker_compiled_before_the_version_are_not_listed(tmp_path: Path) -> None:
    """A run worker warms Triton with a kernel of ours before any version: that cache group is not the version's."""
    from harness.judge.artifacts import collect_triton

    scratch = tmp_path / "scratch"
    for group, name in (("AAA", "_kerneltui_warm_up"), ("BBB", "softmax_kernel")):
        folder = scratch / "triton" / group
        folder.mkdir(parents=True)
        (folder / f"{name}.json").write_text(json.dumps({"name": name, "num_warps": 4}))
        (folder / f"{name}.cubin").write_bytes(b"\x7fELF")
    every = [k.name for k in collect_triton(scratch, tmp_path / "all")]
    assert every == ["_kerneltui_warm_up", "softmax_kernel"]
    assert [k.name for k in collect_triton(scratch, tmp_path / "own", skip={"AAA"})] == ["softmax_kernel"]


@pytest.mark.slow
def test_each_dumped_kernel_carries_the_constexprs_it_was_compiled_with(workspace: Path) -> None:
    """The Asm pane's header names a specialisation (BLOCK=1024, 4 warps), not only add_kernel-2."""
    path = add_version(workspace, "good", "v001.py")
    evaluation = judge_many([path], rungs=["load", "compile", "correctness", "dumps"])["v001"]
    kernels = rung(evaluation, "dumps")["metrics"]["kernels"]
    assert kernels and all(k["kernel"].startswith("add_kernel") for k in kernels), kernels
    assert {k["constexprs"]["BLOCK"] for k in kernels} == {1024} and {k["num_warps"] for k in kernels} == {4}


def test_a_compiler_diagnostic_reads_without_colour_codes_and_its_first_line_says_what_is_wrong() -> None:
    """CuTeDSL colours its diagnostics with ANSI codes whatever the output and starts them on a new line: the
    error shown in a rung's line, the history and the dashboard is the plain text, headed by the diagnosis."""
    from harness.worker.main import describe_exception

    class DSLUserCodeError(Exception):
        pass

    DSLUserCodeError.__module__ = "cutlass.base_dsl.common"
    coloured = (
        "\n\x1b[91m\x1b[1merror[ARG_NON_CONSTANT]:\x1b[0m `range_constexpr()` requires all arguments to be Python"
        " integers known at code-read time.\n  \x1b[94m-->\x1b[0m v001.py:32:14"
    )
    try:
        raise DSLUserCodeError(coloured)
    except DSLUserCodeError as exc:
        described = describe_exception(exc, None, "call")
    assert described.kind == "compile"
    assert "\x1b" not in described.err and "\x1b" not in (described.trace or "")
    first = described.err.splitlines()[0]
    assert first.startswith("DSLUserCodeError: error[ARG_NON_CONSTANT]: `range_constexpr()` requires"), first
    assert described.err.endswith("--> v001.py:32:14")


def test_cutedsl_specialisations_whose_long_names_differ_only_at_the_end_are_all_collected(tmp_path: Path) -> None:
    """CuTeDSL names a compiled function by its argument types, then its Constexpr values: past the judge's name
    limit, the specialisations of one kernel (rmsnorm v003 compiles one per width class) kept the first one's
    dumps and dropped the rest, so the Asm pane and the registers showed one class for all."""
    from harness.judge.artifacts import collect_cutedsl

    cute_dir = tmp_path / "scratch" / "cute"
    cute_dir.mkdir(parents=True)
    types = "_".join(["FakeTensorBFloat16div1881"] * 3)
    for tail in ("8_32_4_True", "8_128_4_True"):
        stem = f"cutlass_rmsnorm_{types}____FakeStream_{tail}.sm_90a"
        entry = f"kernel_cutlass_rmsnorm_kernel_{types}___{tail}_0"
        (cute_dir / f"{stem}.cubin").write_bytes(tail.encode())
        (cute_dir / f"{stem}.ptx").write_text(f".visible .entry {entry}(\n)\n")
    kernels = collect_cutedsl(tmp_path / "scratch", tmp_path / "into")
    assert len(kernels) == 2
    assert sorted(k.files["cubin"].read_bytes() for k in kernels) == [b"8_128_4_True", b"8_32_4_True"]
    assert len({k.files["cubin"] for k in kernels}) == 2


def test_the_next_bench_cases_inputs_are_made_while_one_is_timed() -> None:
    """Each bench case's inputs took ~0.5 s to make on an H200's box (a CPU generator for 67M values) while the
    verdict waited; the next case's are now made while the one before is timed."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from harness.judge.bench_calls import bench_inputs

    made = {i: threading.Event() for i in range(3)}

    def inputs_for(case: dict, seed: int, device: object) -> tuple:
        made[case["i"]].set()
        return (torch.full((4,), float(case["i"])),)

    problem = SimpleNamespace(bench_cases=[{"i": 0}, {"i": 1}, {"i": 2}], inputs_for=inputs_for)
    ladder = SimpleNamespace(device=torch.device("cpu"))
    with ThreadPoolExecutor(max_workers=1) as maker:
        for bench in bench_inputs(ladder, problem, maker):  # type: ignore[arg-type]
            i = bench.case["i"]
            assert float(bench.values[0][0]) == i
            if i < 2:  # the next case's inputs come while this one is in hand, not after
                assert made[i + 1].wait(timeout=60)


def test_a_cubin_disassembled_before_is_not_disassembled_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """nvdisasm costs ~0.3 s a cubin: the same bytes (a version rewritten but for its notes, a version judged
    again) reuse the listing; other bytes, or another disassembler, do not."""
    from harness.judge import artifacts as dumps

    calls: list[list[str]] = []  # the tool runs confined: it can write nowhere the test could read
    run_tool = dumps._run_tool

    def counted(args: list[str], reads: list[Path], clock: dumps.ToolClock | None = None) -> tuple[int, str]:
        calls.append(args)
        return run_tool(args, reads, clock)

    monkeypatch.setattr(dumps, "_run_tool", counted)
    tool = tmp_path / "nvdisasm"
    tool.write_text('#!/bin/sh\necho "SASS of $(cat "$3")"\n')
    tool.chmod(0o755)
    monkeypatch.setenv("KERNELTUI_NVDISASM", str(tool))
    monkeypatch.setattr(dumps, "LISTINGS", dumps.Listings())
    first, same, other = (tmp_path / name for name in ("a.cubin", "b.cubin", "c.cubin"))
    first.write_bytes(b"kernel one")
    same.write_bytes(b"kernel one")
    other.write_bytes(b"kernel two")
    assert [dumps.disassemble(p) for p in (first, same, other)] == [
        "SASS of kernel one\n",
        "SASS of kernel one\n",
        "SASS of kernel two\n",
    ]
    assert len(calls) == 2
    moved = tmp_path / "other-nvdisasm"
    tool.rename(moved)
    monkeypatch.setenv("KERNELTUI_NVDISASM", str(moved))
    assert dumps.disassemble(first) == "SASS of kernel one\n" and len(calls) == 3
    small = dumps.Listings(max_chars=30)
    small.put("a", "x" * 20)
    small.put("b", "y" * 20)
    assert small.get("a") is None and small.get("b") == "y" * 20


def test_kernels_compiled_ahead_are_listed_in_the_order_of_their_cases_not_of_when_their_compiles_ended() -> None:
    """On a GPU every case's specialisations compile at once on threads: the bench case's (n=4096) ended first
    on an H100, and the compile rung listed it first, as if the first call had compiled it."""
    ended_first = [Kernel("add_kernel", "triton", case="n=4096"), Kernel("add_kernel", "triton", case="n=1000")]
    ended_first += [Kernel("add_kernel", "triton", case="n=1"), Kernel("mul_kernel", "triton", case="n=1")]
    ordered = in_case_order(ended_first, ["n=1", "n=1000", "n=1000", "n=4096"])
    assert [(k.name, k.case) for k in ordered] == [
        ("add_kernel", "n=1"),
        ("add_kernel", "n=1000"),
        ("add_kernel", "n=4096"),
        ("mul_kernel", "n=1"),
    ]
