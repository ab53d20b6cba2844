"""The profile rung: asked for, never in the default ladder; Nsight Compute's report read into figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from harness.contract.report import rung_line
from harness.contract.results import RungResult
from harness.judge.nsight.report import in_our_unit, read_report, report_module_dir
from harness.judge.rungs.profile import METRICS, summarize
from tests.conftest import add_version
from tests.nsight_standin import fake_nsight_compute as standin

FIGURES = {
    "gpu__time_duration.sum": (45_300.0, "ns"),  # the units Nsight Compute 2025.3 reports these in
    "dram__bytes.sum": (201.3e6, "byte"),
    "dram__bytes.sum.per_second": (4.44e12, "byte/s"),
    "launch__shared_mem_per_block": (1024.0, "byte/block"),
    "sm__warps_active.avg.pct_of_peak_sustained_active": (87.5, "%"),
}


def fake_nsight_compute(root: Path) -> str:
    """Two launches of add_kernel with fixed figures."""
    return standin(root, FIGURES, kernels=2)


def test_metrics_come_back_in_our_units(tmp_path: Path) -> None:
    kernels = read_report(tmp_path / "profile.ncu-rep", fake_nsight_compute(tmp_path), METRICS)
    assert [k["name"] for k in kernels] == ["add_kernel", "add_kernel"]
    first = kernels[0]
    assert first["time_us"] == pytest.approx(45.3)
    assert first["dram_bytes"] == pytest.approx(201.3e6)
    assert first["dram_gbps"] == pytest.approx(4440.0)
    assert first["occupancy_pct"] == 87.5
    assert first["smem_bytes"] == 1024.0
    assert first["registers"] is None  # not collected: None, not 0


def test_other_units_convert_and_unknown_ones_give_no_figure() -> None:
    assert in_our_unit([4.44, "Tbyte/second"], "GB/s") == pytest.approx(4440.0)
    assert in_our_unit([201.3, "Mbyte"], "byte") == pytest.approx(201.3e6)
    assert in_our_unit([45.3, "usecond"], "us") == pytest.approx(45.3)
    assert in_our_unit([1.0, "cycle"], "us") is None and in_our_unit([1.0, "byte/cycle"], "GB/s") is None


def test_the_sm_clock_under_nsight_compute_comes_in_mhz_weighted_by_kernel_time() -> None:
    """With clocks left free, the SM clock during ncu's replay tells whether its time is longer by a slower GPU."""
    from harness.judge.nsight.timing import per_call

    assert in_our_unit([1.755, "cycle/nsecond"], "MHz") == pytest.approx(1755.0)
    assert in_our_unit([1.98e9, "cycle/second"], "MHz") == pytest.approx(1980.0)
    assert in_our_unit([1.5, "GHz"], "MHz") == pytest.approx(1500.0)
    assert in_our_unit([1.98, "Ghz"], "MHz") == pytest.approx(1980.0)  # as ncu's console writes it
    assert in_our_unit([1.0, "byte/second"], "MHz") is None and in_our_unit([1.0, "cycle"], "MHz") is None
    kernels = [{"name": "a", "time_us": 30.0, "clock_mhz": 1900.0}, {"name": "b", "time_us": 10.0, "clock_mhz": 1500.0}]
    outside = per_call([*kernels, {"name": "c", "time_us": 20.0, "clock_mhz": None}], calls=2)
    assert outside.per_call_us == pytest.approx(30.0) and outside.to_json()["nsight_clock_mhz"] == pytest.approx(1800.0)


def test_a_report_reader_that_crashes_takes_only_its_own_process(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="ncu_report failed"):
        read_report(tmp_path / "crash.ncu-rep", fake_nsight_compute(tmp_path), METRICS)


def test_the_call_is_summed_and_the_longest_kernel_leads(tmp_path: Path) -> None:
    kernels = [
        {"name": "fill", "time_us": 5.0, "dram_bytes": 1e6, "sm_pct": 10.0, "occupancy_pct": 90.0, "registers": 16},
        {"name": "add_kernel", "time_us": 45.0, "dram_bytes": 200e6, "sm_pct": 12.0, "memory_pct": 92.0,
         "occupancy_pct": 85.0, "registers": 32},
    ]  # fmt: skip
    metrics = summarize(kernels, tmp_path / "profile.ncu-rep", {"n": 1 << 24})
    whole = metrics["whole"]
    assert whole["time_us"] == 50.0 and whole["dram_bytes"] == 201e6 and whole["main_kernel"] == "add_kernel"
    assert whole["dram_gbps"] == pytest.approx(4020.0) and whole["registers"] == 32
    line = rung_line(RungResult(name="profile", ok=True, metrics=metrics))
    assert "2 kernel(s)" in line and "DRAM 201.0 MB at 4020 GB/s" in line and "occupancy 85%" in line


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: tests/test_gpu.py profiles")
def test_profile_is_asked_for_and_says_why_it_cannot_run_here(workspace: Path) -> None:
    from tests.conftest import judge_many

    version = add_version(workspace, "good", "v001.py")
    asked = judge_many([version], rungs=["load", "compile", "correctness", "profile"])["v001"]
    rungs = {r["name"]: r for r in asked["rungs"]}
    assert rungs["profile"]["ok"] is None and "no GPU" in rungs["profile"]["skipped"]
    default = judge_many([version], rungs=["load"])["v001"]
    assert "profile" not in {r["name"] for r in default["rungs"]}


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: tests/test_gpu.py profiles")
def test_kerneltui_profile_records_the_rung_and_says_why_it_was_skipped(workspace: Path) -> None:
    from tests.conftest import kerneltui

    version = add_version(workspace, "good", "v001.py")
    done = kerneltui("profile", str(version), "--json")
    assert done.returncode == 0, done.stderr
    names = [r["name"] for r in json.loads(done.stdout)["rungs"]]
    assert names == ["load", "compile", "correctness", "profile"]
    text = kerneltui("profile", str(version))
    assert "profile" in text.stdout and "no GPU" in text.stdout


def test_a_profile_sits_beside_the_versions_evaluation(tmp_path: Path) -> None:
    """`kerneltui profile` records an evaluation of its own (load, compile, correctness, profile): as the newest
    it would have replaced the version's row, its median and roofline gone; it is shown beside them instead."""
    from harness.contract.results import Evaluation
    from kerneltui.core.config import Config
    from kerneltui.core.session import Session
    from kerneltui.history.store import Store
    from tests import dashboard_fixtures

    workspace = dashboard_fixtures.build(tmp_path / "ws")
    store = Store(workspace.db_path, create=False)
    row = next(r for r in store.version_rows("vadd") if r["name"] == "v002")
    profiled = store.start_evaluation(row["version_id"], "vadd", "v002", row["file_hash"], {"kind": "profile"})
    metrics = summarize([{"name": "add_kernel", "time_us": 45.0, "dram_bytes": 2e8}], tmp_path / "p.ncu-rep", {})
    ev = Evaluation(problem="vadd", version="v002", path=str(row["path"]), hash=row["file_hash"])
    ev.rungs.append(RungResult(name="profile", ok=True, metrics=metrics))
    ev.finish()
    store.finish_evaluation(profiled, ev)
    again = next(r for r in store.version_rows("vadd") if r["name"] == "v002")
    assert again["evaluation_id"] == row["evaluation_id"] and again["median_us"] == 52.0
    session = Session(workspace, Config(), lambda event: None, run_scheduler=False)
    rows = store.version_rows("vadd")
    detail = session.read_detail(store, again, "vadd", rows)
    assert [r.name for r in detail.rungs][-2:] == ["dumps", "profile"]
    store.close()


@pytest.mark.slow
def test_a_profile_asked_of_the_session_is_judged_with_the_profile_rungs(tmp_path: Path) -> None:
    """The dashboard's `p`: the Session queues a profile; the scheduler's judge runs load, compile, correctness
    and profile on it (skipped here: no GPU), recorded as a profile beside the version's evaluation."""
    import queue
    import threading

    from agents.tools import Toolbox
    from kerneltui.core.agents.host import StoreHost, problem_info
    from kerneltui.core.config import Config
    from kerneltui.core.judging.scheduler import SchedulerEvent
    from kerneltui.core.session import Session, SessionJudging
    from kerneltui.core.workspace import Workspace
    from kerneltui.history.store import Store
    from tests.conftest import make_workspace

    folder = make_workspace(tmp_path / "ws")
    path = add_version(folder, "good", "v001.py")
    events: queue.Queue[object] = queue.Queue()
    config = Config()
    config.ladder.options = config.ladder.options.updated({"rungs": "load,compile,correctness", "timeout": 30})
    session = Session(Workspace(folder.parent), config, events.put)

    def finished() -> SchedulerEvent:
        while True:
            event = events.get(timeout=300)
            if isinstance(event, SchedulerEvent) and event.kind in ("finished", "failed"):
                return event

    try:
        session.start_scheduler(wait_s=120)
        first = finished()
        session.ask(path, "profile")
        second = finished()
        assert second.kind == "finished" and second.evaluation_id != first.evaluation_id
        store = Store(session.workspace.db_path, create=False)
        names = [r.name for r in store.rungs(second.evaluation_id)]
        assert names == ["load", "compile", "correctness", "profile"], names
        assert store.version_rows("vadd")[0]["evaluation_id"] == first.evaluation_id
        assert store.latest_profile(store.version_rows("vadd")[0]["version_id"]) is not None
        # an agent's `profile` tool goes the same way, waits for it, and reads the figures or why there are none
        host = StoreHost(session.workspace, problem_info(session.workspace, "vadd", None), store, 0,
                         SessionJudging(session), threading.Event())  # fmt: skip
        output, ok = Toolbox(host, author="test").call("profile", {"version": "v001"})
        assert ok and output.startswith("not profiled: no GPU"), output
        assert store.latest_profile_id(store.version_rows("vadd")[0]["version_id"]) > second.evaluation_id
        output, ok = Toolbox(host, author="test").call("profile", {"version": "v999"})
        assert not ok and "no version 'v999'; versions: v001" in output
        store.close()
    finally:
        session.close()


def _install(root: Path) -> Path:
    extras = root / "extras" / "python"
    extras.mkdir(parents=True)
    (extras / "ncu_report.py").write_text("")
    return extras


def test_the_report_module_is_found_where_cudas_ncu_script_points(tmp_path: Path) -> None:
    # CUDA's bin/ncu is a script that runs the newest install beside it or under /opt/nvidia/nsight-compute
    cuda = tmp_path / "cuda-13.0"
    (cuda / "bin").mkdir(parents=True)
    (cuda / "bin" / "ncu").write_text("#!/bin/sh\n")
    opt = tmp_path / "opt"
    _install(cuda / "nsight-compute-2025.2.1")
    newest = _install(opt / "2025.3.1")
    assert report_module_dir(str(cuda / "bin" / "ncu"), opt) == newest
    beside_cuda = cuda / "nsight-compute-2025.2.1" / "extras" / "python"
    assert report_module_dir(str(cuda / "bin" / "ncu"), tmp_path / "none") == beside_cuda


def test_the_report_module_beside_a_real_ncu_comes_first(tmp_path: Path) -> None:
    install = tmp_path / "nsight-compute" / "2025.3.1"
    beside = _install(install)
    (install / "ncu").write_text("")
    assert report_module_dir(str(install / "ncu"), tmp_path / "none") == beside
    assert report_module_dir(str(tmp_path / "elsewhere" / "ncu"), tmp_path / "none") is None


# proton's tree, as its instrumentation writes it (one root; kernels below; regions nested as in the source)
PROTON_TREE = [
    {
        "frame": {"name": "ROOT", "type": "function"},
        "metrics": {},
        "children": [
            {
                "frame": {"name": "matmul_kernel", "type": "function"},
                "metrics": {"time (ns)": 41_000},
                "children": [
                    {
                        "frame": {"name": "mainloop", "type": "function"},
                        "metrics": {"cycles": 52_000, "normalized_cycles": 0.81},
                        "children": [{"frame": {"name": "wgmma"}, "metrics": {"cycles": 30_500}, "children": []}],
                    },
                    {"frame": {"name": "epilogue"}, "metrics": {"cycles": 6_100.0}, "children": []},
                ],
            }
        ],
    }
]


def test_proton_regions_are_read_from_its_tree_with_their_kernel_and_path() -> None:
    from harness.worker.regions import regions_in

    assert regions_in(PROTON_TREE) == [
        {"kernel": "matmul_kernel", "region": "mainloop", "figures": {"cycles": 52_000.0, "normalized_cycles": 0.81}},
        {"kernel": "matmul_kernel", "region": "mainloop/wgmma", "figures": {"cycles": 30_500.0}},
        {"kernel": "matmul_kernel", "region": "epilogue", "figures": {"cycles": 6_100.0}},
    ]


def test_regions_a_worker_claims_are_kept_only_where_well_formed() -> None:
    from harness.worker.regions import MAX_REGIONS, regions_from

    good = {"kernel": "k", "region": "load", "figures": {"cycles": 10}}
    claimed = [
        good,
        {"kernel": "k\x1b[2J", "region": "x" * 500, "figures": {"cycles": 5, "bad": float("nan"), "flag": True}},
        {"kernel": "k", "region": "none", "figures": {"cycles": "many"}},
        "not a region",
        {"kernel": "k", "region": "no figures"},
    ] + [good] * (2 * MAX_REGIONS)
    kept = regions_from(claimed)
    assert len(kept) == MAX_REGIONS and kept[0] == {"kernel": "k", "region": "load", "figures": {"cycles": 10.0}}
    assert kept[1]["kernel"] == "k\\x1b[2J" and len(kept[1]["region"]) == 120 and kept[1]["figures"] == {"cycles": 5.0}
    assert regions_from({"not": "a list"}) == [] and regions_from(None) == []


def test_a_version_marks_regions_when_it_uses_protons_scopes() -> None:
    from harness.worker.regions import marks_regions

    marked = (Path(__file__).parent / "fixtures" / "versions" / "marks_regions.py").read_text()
    assert marks_regions(marked)
    assert not marks_regions((Path(__file__).parent / "fixtures" / "versions" / "good.py").read_text())
    assert not marks_regions("with torch.profiler.record_function('x'):\n    pass\n")


def test_the_profile_shows_in_kernel_regions_with_or_without_nsight_compute() -> None:
    from harness.contract.report import profile_text
    from harness.worker.regions import regions_in
    from kerneltui.ui.widgets.profile import profile_lines

    regions = regions_in(PROTON_TREE)
    alone = RungResult(
        name="profile", ok=True, metrics={"case": "n=4096", "ncu_note": "ncu not found", "regions": regions}
    )
    text = profile_text(alone)
    assert "no Nsight Compute figures (ncu not found); 3 in-kernel region(s)" in text
    assert "matmul_kernel / mainloop/wgmma: cycles 30,500" in text
    shown = "\n".join(line.plain for line in profile_lines({"name": "v001"}, [alone][0]))
    assert "ncu not found" in shown and "matmul_kernel / epilogue: cycles 6,100" in shown
    assert "normalized_cycles 0.81" in shown
    noted = RungResult(name="profile", ok=True, metrics={"case": "n", "ncu_note": "x", "regions_note": "proton: boom"})
    assert "in-kernel regions: proton: boom" in profile_text(noted)


@pytest.mark.slow
def test_a_version_that_marks_regions_still_runs_with_no_gpu(tmp_path: Path) -> None:
    """The interpreter cannot run proton's region marks (ValueError: `_semantic` argument must be provided): a
    version that marks regions for the GPU's profile failed its correctness on every machine with no GPU."""
    from tests.conftest import judge_many, make_workspace
    from tests.conftest import rung as rung_of

    folder = make_workspace(tmp_path / "ws")
    path = add_version(folder, "marks_regions")
    evaluation = judge_many([path], rungs=["load", "compile", "correctness"])["marks_regions"]
    assert evaluation["status"] == "pass", rung_of(evaluation, "correctness")
    assert [k["name"] for k in rung_of(evaluation, "compile")["metrics"]["kernels"]][:1] == ["add_kernel"]
