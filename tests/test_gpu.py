"""What only a GPU can show: timings, roofline, and kernels that break the device. Runs where CUDA is."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.conftest import add_version, judge_many, make_workspace, rung

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

EXPECTED = {
    "gpu_illegal_address": ("correctness", "illegal memory access"),
    "gpu_oom": ("correctness", "OutOfMemoryError"),
    "gpu_spin": ("correctness", "timed out after 10 s"),
    "bench_only_wrong": ("benchmark", "the timed calls' output is wrong"),
    "side_stream": ("benchmark", "outlasts the call on the caller's stream"),
    "fakes_timing_deep": ("roofline", "faster than the device can go"),
    "differs_at_bench_size": ("benchmark", "two calls on the same inputs gave other outputs"),
}


# Versions that cheat around the timed calls, and the flag each must earn.
AROUND_THE_TIMING = {
    "library_when_timed": ("timed-not-recorded", "none of the recorded call's kernels ran in the timed calls"),
    "loads_gpu_between_calls": ("outside-call", "outside its own timed calls"),
    "rewarms_l2": ("outside-call", "outside its own timed calls"),
    # its precomputed answer is ready by the recorded call or only by the timed ones, as its thread races the judge
    "precomputes_during_rest": ({"timed-not-recorded", "no-kernel"}, "copy_kernel"),
    "launders_through_device_copy": ("no-kernel", ""),
    "host_writes_device_memory": ("no-kernel", "was never written by a kernel"),
}


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    folder = make_workspace(tmp_path_factory.mktemp("gpu") / "ws")
    paths = [add_version(folder, "good")]
    paths += [add_version(folder, name) for name in EXPECTED]
    paths.append(add_version(folder, "patches_timing"))
    paths.append(add_version(folder, "patches_timer_code"))
    paths.append(add_version(folder, "pure_torch"))
    paths.append(add_version(folder, "launches_past_hooks"))
    paths.append(add_version(folder, "fakes_timing_slow_kernel"))
    paths.append(add_version(folder, "slow_launch"))
    paths.append(add_version(folder, "waits_inside"))
    paths.append(add_version(folder, "memoize"))
    paths += [add_version(folder, name) for name in AROUND_THE_TIMING]
    paths.append(add_version(folder, "good", "good_again.py"))
    return judge_many(paths, timeout=10, sanitize_best=False)  # compute-sanitizer has its own tests below


# CUDA C versions (NVRTC through torch) whose bugs leave their outputs right: the finding each must fail with.
CUDA_C_BUGS = {
    "writes_past_its_output": "memcheck: Invalid __global__ write",
    "races_in_shared_memory": "racecheck:",
    "misses_a_barrier": "racecheck:",
}


def nvrtc_missing() -> str | None:
    """Why torch cannot compile CUDA C here (its NVRTC library), None where it can."""
    try:
        from torch.cuda._utils import _get_nvrtc_library

        _get_nvrtc_library()
    except Exception as exc:  # an ImportError, an OSError from the loader: said either way
        return f"{type(exc).__name__}: {exc}"[:200]
    return None


@pytest.fixture(scope="module")
def sanitized(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """An honest version and two with bugs a single correct call hides, judged as a would-be best (the sanitizer
    runs before it may become the best) and, one of them, with the sanitize rung asked for."""
    folder = make_workspace(tmp_path_factory.mktemp("sanitized") / "ws")
    good, past = add_version(folder, "good"), add_version(folder, "reads_past_its_inputs")
    never = add_version(folder, "reads_memory_never_written")
    racing = add_version(folder, "adds_in_racing_order")
    judged = judge_many([good, past, racing], timeout=10)
    asked = [never] + [add_version(folder, name) for name in CUDA_C_BUGS if nvrtc_missing() is None]
    judged.update(judge_many(asked, timeout=10, rungs="load,compile,correctness,sanitize"))
    return judged


def test_honest_version_passes_every_rung_with_figures(judged: dict[str, dict]) -> None:
    good = judged["good"]
    assert good["status"] == "pass", [(r["name"], r["ok"], r["err"], r["skipped"]) for r in good["rungs"]]
    assert all(r["ok"] is True for r in good["rungs"])
    bench = rung(good, "benchmark")["metrics"]
    assert bench["median_us"] > 0 and bench["ref_median_us"] > 0 and bench["speedup"] > 0
    case = bench["cases"][0]
    assert case["p20_us"] <= case["median_us"] <= case["p80_us"] and case["n"] >= 10
    assert case["settled_us"] > 0.5 * case["min_us"], case  # the device-wide timing saw the kernel run
    roof = rung(good, "roofline")["metrics"]
    assert 1 < roof["pct"] <= 125 and roof["peaks"]["copy_gbps"] > 100
    assert rung(good, "compile")["metrics"]["mode"] == "jit"


@pytest.mark.parametrize("fixture", sorted(EXPECTED))
def test_gpu_failures_are_named(judged: dict[str, dict], fixture: str) -> None:
    evaluation = judged[fixture]
    failed_rung, words = EXPECTED[fixture]
    assert evaluation["failed_rung"] == failed_rung, [(r["name"], r["ok"], r["err"]) for r in evaluation["rungs"]]
    assert words in rung(evaluation, failed_rung)["err"]


@pytest.mark.parametrize("cheat", ["patches_timing", "patches_timer_code"])
def test_patching_the_timers_does_not_make_a_version_faster(judged: dict[str, dict], cheat: str) -> None:
    evaluation = judged[cheat]
    assert evaluation["status"] == "pass", [(r["name"], r["ok"], r["err"]) for r in evaluation["rungs"]]
    # It runs the reference's own code, which the judge times in its own process: no faster than that.
    bench = rung(evaluation, "benchmark")["metrics"]
    ratio = bench["median_us"] / bench["ref_median_us"]
    assert ratio > 0.9, f"the patched timers were believed: {ratio:.2f}x the reference's median"
    assert "uses-library" in {f["name"] for f in evaluation["flags"]}  # and torch computed it


def test_a_version_that_hands_back_its_last_answer_gains_nothing(judged: dict[str, dict]) -> None:
    """The timed calls rotate over copies of the inputs in other places, so a version that returns its last
    output when called again with the same tensors never finds them: it is timed as the add it then computes, or,
    where it found them, caught as faster than the device can go."""
    evaluation = judged["memoize"]
    if evaluation["failed_rung"] is not None:
        assert evaluation["failed_rung"] == "roofline", [(r["name"], r["ok"], r["err"]) for r in evaluation["rungs"]]
        assert "faster than the device can go" in rung(evaluation, "roofline")["err"]
        return
    honest = rung(judged["good"], "benchmark")["metrics"]["median_us"]
    assert rung(evaluation, "benchmark")["metrics"]["median_us"] > 0.8 * honest


def test_waiting_on_the_device_inside_the_call_is_not_work_left_behind(judged: dict[str, dict]) -> None:
    # GPU MODE's grayscale and histogram reference solutions (a pageable copy, bincount's .item()) were failed as
    # leaving work on another stream: their time until the device was idle held host time the stream's did not
    evaluation = judged["waits_inside"]
    assert evaluation["status"] == "pass", [(r["name"], r["ok"], r["err"]) for r in evaluation["rungs"]]


def test_honest_version_has_no_flag_and_is_confirmed(judged: dict[str, dict]) -> None:
    good = judged["good"]
    assert good["flags"] == [], good["flags"]
    bench = rung(good, "benchmark")["metrics"]
    assert bench["confirmed"]["variations"] and bench["confirmed"]["fresh_median_us"] > 0
    assert bench["outside_bound_us"] is not None


def test_device_time_from_cupti_sits_beside_the_event_time(judged: dict[str, dict]) -> None:
    good = rung(judged["good"], "benchmark")["metrics"]["cases"][0]
    assert good.get("device_median_us"), good  # CUPTI's kernel records were read
    assert 0.5 * good["min_us"] < good["device_median_us"] <= 1.02 * good["median_us"], good
    # 0.3 ms of host work before each launch: never in the device time (the event time hides it too where the
    # host works while the device evicts L2 between calls), which stays the kernel's
    slow = rung(judged["slow_launch"], "benchmark")["metrics"]["cases"][0]
    assert 0 < slow["device_median_us"] <= 1.02 * slow["median_us"], slow
    assert 0.8 < slow["device_median_us"] / good["device_median_us"] < 1.25, (slow, good)


def test_the_timed_calls_rotate_over_copies_of_the_inputs_elsewhere_in_memory(judged: dict[str, dict]) -> None:
    good = rung(judged["good"], "benchmark")["metrics"]["cases"][0]
    assert good["placements"] >= 2 and good["noise_pct"] >= good["placement_pct"] >= 0, good


def test_clocks_are_sampled_while_timed(judged: dict[str, dict]) -> None:
    clocks = rung(judged["good"], "benchmark")["metrics"]["cases"][0]["clocks"]
    assert clocks.get("n", 0) > 0 and 100 < clocks["sm_mhz"][0] <= clocks["sm_mhz"][2], clocks


def test_the_first_call_compiles_on_the_first_correctness_case(judged: dict[str, dict]) -> None:
    kernels = rung(judged["good"], "compile")["metrics"]["kernels"]
    assert kernels and kernels[0]["case"] == "n=1", kernels


def test_a_slow_host_launch_path_is_not_taken_for_unawaited_work(judged: dict[str, dict]) -> None:
    slow = judged["slow_launch"]  # 0.3 ms of host work per call, as CuTeDSL's launcher has
    assert slow["status"] == "pass", [(r["name"], r["ok"], r["err"]) for r in slow["rungs"]]
    assert slow["flags"] == [], slow["flags"]


def test_torch_on_the_gpu_is_flagged(judged: dict[str, dict]) -> None:
    flags = {f["name"]: f["reason"] for f in judged["pure_torch"]["flags"]}
    assert "uses-library" in flags and "aten::add" in flags["uses-library"] and "no-kernel" in flags


def test_a_kernel_launched_past_the_recorder_is_seen_by_cupti(judged: dict[str, dict]) -> None:
    evaluation = judged["launches_past_hooks"]
    flags = {f["name"]: f["reason"] for f in evaluation["flags"]}
    assert "CUDA kernel hidden_kernel ran under test" in flags.get("kernel-mismatch", ""), evaluation["flags"]


def test_timings_faked_within_the_judges_slack_are_caught_from_outside(judged: dict[str, dict]) -> None:
    evaluation = judged["fakes_timing_slow_kernel"]
    bench = rung(evaluation, "benchmark")["metrics"]
    confirmed = bench.get("confirmed") or {}
    if confirmed.get("nsight_us") is None:
        pytest.skip(f"Nsight Compute gave no figure here: {confirmed.get('nsight_note')}")
    flags = {f["name"]: f["reason"] for f in evaluation["flags"]}
    assert "Nsight Compute timed its kernels" in flags.get("timing-mismatch", ""), evaluation["flags"]
    good = rung(judged["good"], "benchmark")["metrics"]["confirmed"]
    assert good["nsight_us"] and good["nsight_kernels"] == {"add_kernel": 1.0}, good


def test_a_version_torch_compile_traces_is_judged(tmp_path: Path) -> None:
    # the recorder's digest of a device buffer, reached by the trace, failed GPU MODE's sort solution
    path = add_version(make_workspace(tmp_path / "ws"), "compiled_by_torch")
    compiled = judge_many([path], timeout=120, rungs="load,compile,correctness")["compiled_by_torch"]
    assert compiled["status"] == "pass", [(r["name"], r["ok"], r["err"]) for r in compiled["rungs"]]


def test_device_recovers_for_the_next_version(judged: dict[str, dict]) -> None:
    assert judged["good_again"]["status"] == "pass"


def test_kernel_dumps_from_the_jit(judged: dict[str, dict]) -> None:
    files = rung(judged["good"], "dumps")["metrics"]["files"]
    assert {"ttir", "ttgir", "llir", "ptx", "cubin", "sass"} <= {f["kind"] for f in files}
    assert all(Path(f["path"]).is_file() for f in files)


def profile_of(tmp_path: Path, fixture: str) -> dict:
    """The profile rung of one fixture version, judged up to it; it must have figures."""
    path = add_version(make_workspace(tmp_path / "ws"), fixture, "v001.py")
    evaluation = judge_many([path], timeout=10, rungs=["load", "compile", "correctness", "profile"])["v001"]
    profile = rung(evaluation, "profile")
    assert profile["ok"] is True, profile
    return profile


def test_profile_reads_nsight_computes_report(tmp_path: Path) -> None:
    profile = profile_of(tmp_path, "good")
    whole = profile["metrics"]["whole"]
    # 16M floats: 201 MB moved in some tens of µs, at a rate an H100/H200-class part can reach (units checked)
    assert 100e6 < whole["dram_bytes"] < 400e6 and 100 < whole["dram_gbps"] < 6000 and 5 < whole["time_us"] < 5000
    assert whole["occupancy_pct"] > 0 and whole["registers"] > 0 and whole["memory_pct"] > 0
    assert Path(profile["metrics"]["report"]).is_file()


def test_profile_times_the_regions_a_version_marks_in_its_kernel(tmp_path: Path) -> None:
    profile = profile_of(tmp_path, "marks_regions")
    regions = {r["region"]: r["figures"] for r in profile["metrics"].get("regions", [])}
    assert {"load", "store"} <= set(regions), profile["metrics"].get("regions_note")
    assert all(max(figures.values()) > 0 for figures in regions.values()), regions


def test_a_version_is_raced_against_the_best_back_to_back(tmp_path: Path) -> None:
    import hashlib

    folder = make_workspace(tmp_path / "ws")
    best = add_version(folder, "good", "v001.py")
    twice = add_version(folder, "good_twice", "v002.py")
    again = folder / "v003.py"
    again.write_text(best.read_text() + "\n# the same kernel, another file\n")
    target = {"path": str(best), "hash": hashlib.sha256(best.read_bytes()).hexdigest(), "version": "v001"}
    rungs = ["load", "compile", "correctness", "benchmark"]
    judged = judge_many(
        [twice, again], timeout=10, race_with={torch.cuda.get_device_name(): target}, rungs=rungs, confirm=False
    )
    slower = rung(judged["v002"], "benchmark")["metrics"]["race"]
    assert slower["label"] == "slower" and slower["ratio"] > 1.5 and slower["against"] == "v001", slower
    assert [r["who"] for r in slower["rounds"]] == ["new", "best", "best", "new"]
    same = rung(judged["v003"], "benchmark")["metrics"]["race"]
    assert same["label"] in ("same", "ambiguous") and 0.95 < same["ratio"] < 1.05, same
    # and the other way round: the slower one as the best, the good one is faster
    target = {"path": str(twice), "hash": hashlib.sha256(twice.read_bytes()).hexdigest(), "version": "v002"}
    faster = judge_many(
        [again], timeout=10, race_with={torch.cuda.get_device_name(): target}, rungs=rungs, confirm=False
    )["v003"]
    assert rung(faster, "benchmark")["metrics"]["race"]["label"] == "faster"


# Its answers are keyed by the inputs' addresses, which the judge's allocator hands out again: seen on an H100, its
# thread's answer for one correctness case came back for the next, and it failed correctness instead. Caught either way.
LOSES_ITS_RACE_TO_A_FAILURE = {"precomputes_during_rest"}


@pytest.mark.parametrize("version", sorted(AROUND_THE_TIMING))
def test_what_runs_around_the_timed_calls_is_flagged(judged: dict[str, dict], version: str) -> None:
    if version in LOSES_ITS_RACE_TO_A_FAILURE and judged[version]["failed_rung"] == "correctness":
        return
    names, words = AROUND_THE_TIMING[version]
    flags = {f["name"]: f["reason"] for f in judged[version]["flags"]}
    said = [flags[n] for n in ({names} if isinstance(names, str) else names) if n in flags]
    assert any(words in reason for reason in said), judged[version]["flags"]


def test_honest_timed_calls_earn_no_flag_of_their_own(judged: dict[str, dict]) -> None:
    for version in ("good", "good_again", "slow_launch", "waits_inside"):
        names = {f["name"] for f in judged[version]["flags"]}
        assert not names & {"timed-not-recorded", "outside-call", "tampered"}, (version, judged[version]["flags"])


def test_an_honest_would_be_best_passes_every_sanitizer_tool(sanitized: dict[str, dict]) -> None:
    good = sanitized["good"]
    assert good["status"] == "pass", [(r["name"], r["ok"], r["err"]) for r in good["rungs"]]
    checked = rung(good, "benchmark")["metrics"]["confirmed"]["sanitizer"]
    assert checked["findings"] == 0 and checked["notes"] == [], checked
    assert set(checked["tools"]) == {"memcheck", "racecheck", "initcheck", "synccheck"}
    assert all(run["errors"] == 0 for run in checked["tools"].values()), checked


def test_a_read_past_the_inputs_fails_before_it_becomes_the_best(sanitized: dict[str, dict]) -> None:
    """Right outputs and a clean correctness rung; memcheck, run over a would-be best, fails it naming the kernel,
    the tool, the address space and the source line."""
    past = sanitized["reads_past_its_inputs"]
    assert rung(past, "correctness")["ok"] is True
    assert past["failed_rung"] == "benchmark", [(r["name"], r["ok"], r["err"]) for r in past["rungs"]]
    err = rung(past, "benchmark")["err"]
    if "an illegal memory access" in err:  # at the bench size the read past may reach unmapped memory (an H200)
        assert err.startswith("n=16777216") and "reads_past_its_inputs.py:" in err, err
        return
    assert "memcheck: Invalid __global__ read" in err and "add_kernel" in err, err
    assert "reads_past_its_inputs.py:" in err, err


def test_a_read_of_memory_never_written_fails_the_sanitize_rung(sanitized: dict[str, dict]) -> None:
    never = sanitized["reads_memory_never_written"]
    assert rung(never, "correctness")["ok"] is True
    assert never["failed_rung"] == "sanitize", [(r["name"], r["ok"], r["err"]) for r in never["rungs"]]
    err = rung(never, "sanitize")["err"]
    assert "initcheck: Uninitialized __global__ memory read" in err and "add_kernel" in err, err


@pytest.mark.parametrize("version", sorted(CUDA_C_BUGS))
@pytest.mark.skipif(nvrtc_missing() is not None, reason="torch here has no NVRTC to compile the CUDA C versions")
def test_a_bug_that_leaves_the_outputs_right_fails_with_the_sanitizers_finding(
    sanitized: dict[str, dict], version: str
) -> None:
    evaluation = sanitized[version]
    correctness = rung(evaluation, "correctness")
    assert correctness["ok"] is True, correctness["err"]
    assert evaluation["failed_rung"] == "sanitize", [(r["name"], r["ok"], r["err"]) for r in evaluation["rungs"]]
    err = rung(evaluation, "sanitize")["err"]
    assert CUDA_C_BUGS[version] in err and "add_kernel" in err and ".cu:" in err, err


def test_a_kernel_whose_bytes_vary_between_runs_fails_determinism(sanitized: dict[str, dict]) -> None:
    racing = sanitized["adds_in_racing_order"]
    assert rung(racing, "correctness")["ok"] is True
    assert racing["failed_rung"] == "benchmark", [(r["name"], r["ok"], r["err"]) for r in racing["rungs"]]
    assert "two calls on the same inputs gave other outputs" in rung(racing, "benchmark")["err"]
