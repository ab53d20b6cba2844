"""The profile rung: asked for, never in the default ladder; Nsight Compute's report read into figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from harness.report import rung_line
from harness.results import RungResult
from harness.rungs.profile import _metric, summarize
from tests.conftest import add_version, run


class Metric:
    """Stands in for ncu_report's metric object (the module ships only with Nsight Compute)."""

    def __init__(self, value: float, unit: str) -> None:
        self.value, self.unit_name = value, unit

    def as_double(self) -> float:
        return self.value

    def unit(self) -> str:
        return self.unit_name


class Action:
    def __init__(self, metrics: dict[str, Metric]) -> None:
        self.metrics = metrics

    def metric_by_name(self, name: str) -> Metric | None:
        return self.metrics.get(name)


def test_metrics_come_back_in_our_units() -> None:
    action = Action(
        {
            "gpu__time_duration.sum": Metric(45_300.0, "nsecond"),
            "dram__bytes.sum": Metric(201.3, "Mbyte"),
            "dram__bytes.sum.per_second": Metric(4.44, "Tbyte/second"),
            "sm__warps_active.avg.pct_of_peak_sustained_active": Metric(87.5, "%"),
        }
    )
    assert _metric(action, "gpu__time_duration.sum", "us") == pytest.approx(45.3)
    assert _metric(action, "dram__bytes.sum", "byte") == pytest.approx(201.3e6)
    assert _metric(action, "dram__bytes.sum.per_second", "GB/s") == pytest.approx(4440.0)
    assert _metric(action, "sm__warps_active.avg.pct_of_peak_sustained_active", "%") == 87.5
    assert _metric(action, "launch__registers_per_thread", "") is None  # not collected: None, not 0


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


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: tests/test_gpu.py profiles")
def test_profile_is_asked_for_and_says_why_it_cannot_run_here(workspace: Path) -> None:
    version = add_version(workspace, "good", "v001.py")
    done = run(["-m", "harness", str(version), "--json", "--rungs", "load,compile,correctness,profile"])
    rungs = {r["name"]: r for r in json.loads(done.stdout)["rungs"]}
    assert rungs["profile"]["ok"] is None and "no GPU" in rungs["profile"]["skipped"]
    default = run(["-m", "harness", str(version), "--json", "--rungs", "load"])
    assert "profile" not in {r["name"] for r in json.loads(default.stdout)["rungs"]}


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
    from harness.results import Evaluation
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


def test_a_profile_asked_of_the_session_is_judged_with_the_profile_rungs(tmp_path: Path) -> None:
    """The dashboard's `p`: the Session queues a profile; the scheduler's judge runs load, compile, correctness
    and profile on it (skipped here: no GPU), recorded as a profile beside the version's evaluation."""
    import queue

    from kerneltui.core.config import Config
    from kerneltui.core.scheduler import SchedulerEvent
    from kerneltui.core.session import Session
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
        session.profile(path)
        second = finished()
        assert second.kind == "finished" and second.evaluation_id != first.evaluation_id
        store = Store(session.workspace.db_path, create=False)
        names = [r.name for r in store.rungs(second.evaluation_id)]
        assert names == ["load", "compile", "correctness", "profile"], names
        assert store.version_rows("vadd")[0]["evaluation_id"] == first.evaluation_id
        assert store.latest_profile(store.version_rows("vadd")[0]["version_id"]) is not None
        store.close()
    finally:
        session.close()
