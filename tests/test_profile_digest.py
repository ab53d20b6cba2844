"""The profile digest: Nsight Compute's report made into what matters in ~25 lines, and what changed from the best.

The report is read by a stand-in for NVIDIA's ncu_report (tests/nsight_standin.py) serving a kernel's metrics,
stall reasons and rule results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from textual.widgets import TabbedContent

from harness.contract.profile_digest import MAX_LINES, digest_lines
from harness.contract.report import profile_text
from harness.contract.results import Evaluation, RungResult
from harness.judge.nsight.findings import findings, plain
from harness.judge.nsight.report import read_report
from harness.judge.rungs.profile import FAMILIES, METRICS, digested, summarize
from kerneltui.history.store import Store
from kerneltui.ui.app import KernelTUI
from kerneltui.ui.widgets.profile import ProfilePane
from tests import dashboard_fixtures
from tests.nsight_standin import fake_nsight_compute

STALL = "smsp__average_warps_issue_stalled_"
FIGURES = {
    "gpu__time_duration.sum": (81_200.0, "ns"),
    "dram__bytes.sum": (268.4e6, "byte"),
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": (23.4, "%"),
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": (91.8, "%"),
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed": (91.8, "%"),
    "sm__warps_active.avg.pct_of_peak_sustained_active": (61.0, "%"),
    "sm__maximum_warps_per_active_cycle_pct": (75.0, "%"),
    "launch__registers_per_thread": (40.0, "register/thread"),
    "launch__block_size": (256.0, ""),
    "launch__grid_size": (8192.0, ""),
    "launch__waves_per_multiprocessor": (7.76, ""),
    "launch__occupancy_limit_registers": (6.0, "block"),
    "launch__occupancy_limit_warps": (8.0, "block"),
    "launch__occupancy_limit_shared_mem": (32.0, "block"),
    "launch__occupancy_limit_blocks": (32.0, "block"),
    STALL + "long_scoreboard_per_issue_active.ratio": (14.2, ""),
    STALL + "long_scoreboard_not_issued_per_issue_active.ratio": (9.0, ""),  # another count: not a reason
    STALL + "selected_per_issue_active.ratio": (1.0, ""),  # issuing, not stalled
    STALL + "wait_per_issue_active.ratio": (1.9, ""),
    STALL + "barrier_per_issue_active.ratio": (0.4, ""),
    STALL + "long_scoreboard": (3.0, ""),  # no suffix: not the per-issue ratio
}
RULES = [
    {
        "rule_identifier": "SOLBottleneck", "name": "Bottleneck", "section_identifier": "SpeedOfLight",
        "rule_message": {"title": "Memory bound", "message": "DRAM is at 92% of its peak.", "type": 3},
    },
    {
        "rule_identifier": "CPIStall", "name": "Long Scoreboard Stalls", "section_identifier": "WarpStateStats",
        "rule_message": {"title": "Long Scoreboard Stalls", "type": 2, "message": (
            "On average, each warp spends 14.2 cycles stalled waiting for a L1TEX operation: see the"
            " @section:MemoryWorkloadAnalysis:Memory Workload Analysis@ section and the"
            " @url:Hardware Model:https://docs.nvidia.com/nsight-compute/ProfilingGuide/index.html#metrics-hw-model@."
        )},
        "speedup_estimation": {"type": 7, "speedup": 45.3},  # ints, named by the module's own constants
    },
    {
        "rule_identifier": "AchievedOccupancy", "section_identifier": "Occupancy",
        "rule_message": {"title": "Achieved Occupancy", "message": "61% of a theoretical 75%.", "type": 2},
        "speedup_estimation": {"type": 5, "speedup": 18.7},
    },
    {"rule_identifier": "LaunchConfiguration", "rule_message": {"title": "ok", "message": "", "type": 1}},
]  # fmt: skip


def profiled(tmp_path: Path) -> dict[str, Any]:
    """The profile rung's figures, as it makes them from the stand-in's report."""
    ncu = fake_nsight_compute(tmp_path, FIGURES, RULES, name="softmax_kernel")
    read = read_report(tmp_path / "p.ncu-rep", ncu, METRICS, FAMILIES, rules=True)
    return summarize([digested(k) for k in read], tmp_path / "p.ncu-rep", {"rows": 4096, "cols": 8192})


def test_a_kernels_stall_reasons_and_rule_findings_are_read_and_ranked(tmp_path: Path) -> None:
    kernel = profiled(tmp_path)["kernels"][0]
    assert kernel["stalls"] == {"long_scoreboard": 14.2, "wait": 1.9, "barrier": 0.4}
    assert kernel["waves"] == 7.76 and kernel["limit_registers"] == 6.0
    assert [f["rule"] for f in kernel["findings"]] == ["CPIStall", "AchievedOccupancy", "SOLBottleneck"]
    first = kernel["findings"][0]
    assert first["speedup_pct"] == 45.3 and first["speedup_kind"] == "global" and first["severity"] == "opt"
    assert "a L1TEX operation: see the Memory Workload Analysis section and the Hardware Model." in first["text"]
    assert json.loads(json.dumps(kernel)) == kernel  # kept in the history as JSON


def test_the_digest_says_what_bounds_the_kernel_in_at_most_25_lines(tmp_path: Path) -> None:
    lines = digest_lines(profiled(tmp_path))
    text = "\n".join(lines)
    assert len(lines) <= MAX_LINES
    assert "1 kernel(s), 81.2 µs on rows=4096 cols=8192; longest softmax_kernel" in text
    assert "compute (SM) 23% · memory 92% (DRAM 92%) → memory-bound" in text
    assert "achieved 61% of a theoretical 75%; limited by registers (6 blocks/SM)" in text
    assert "grid 8192 × block 256 · 7.76 waves/SM · 40 regs/thread" in text
    assert "cycles per issued instruction: long scoreboard (global/local memory) 14.2 · fixed-latency wait 1.9" in text
    findings_at = next(i for i, line in enumerate(lines) if line.startswith("findings"))
    assert lines[findings_at + 1].split()[:3] == ["est.", "45%", "global"]
    assert "Long Scoreboard Stalls: On average" in lines[findings_at + 1]
    assert lines[findings_at + 2].split()[:3] == ["est.", "19%", "local"]
    assert lines[findings_at + 3].split()[0] == "warn"  # no estimate: after those with one


def test_against_the_best_each_figure_moves_and_findings_come_and_go(tmp_path: Path) -> None:
    now = profiled(tmp_path)
    best = json.loads(json.dumps(now))
    kernel = best["kernels"][0]
    best["whole"]["time_us"], kernel["registers"], kernel["occupancy_pct"] = 62.0, 32.0, 74.0
    kernel["findings"] = [f for f in kernel["findings"] if f["rule"] != "AchievedOccupancy"]
    kernel["findings"][0] = {**kernel["findings"][0], "speedup_pct": 20.0}
    kernel["findings"].append({**kernel["findings"][0], "rule": "UncoalescedGlobalAccess", "speedup_pct": 8.0})
    lines = digest_lines(now, best, "v002 (the best)")
    text = "\n".join(lines)
    assert len(lines) <= MAX_LINES
    assert "against v002 (the best): time 62 µs → 81.2 µs (+31%)" in text
    assert "occupancy 74% → 61% · regs 32 → 40" in text
    assert "new findings: AchievedOccupancy (est. 19%)" in text
    assert "gone: UncoalescedGlobalAccess (est. 8%)" in text
    assert "moved: CPIStall est. 20% → est. 45%" in text


def test_rule_results_of_another_shape_or_garbage_still_give_findings() -> None:
    kept = findings(
        [
            {"rule_name": "Old", "message_for_display": "old shape", "estimated_speedup_pct": 12.5},
            {"rule_identifier": "Str", "rule_message": "a bare string", "speedup_estimation": {"speedup": "x"}},
            {"rule_identifier": "Inf", "rule_message": {"message": "m"}, "speedup_estimation": {"speedup": 1e400}},
            {"rule_identifier": "Blank", "rule_message": {"title": "", "message": ""}},
        ]
    )
    assert [(f["rule"], f["speedup_pct"]) for f in kept] == [("Old", 12.5), ("Str", None), ("Inf", None)]
    assert plain("see @section:SourceCounters: and\n\n @metric:a.b_c:") == "see SourceCounters and a.b_c"
    assert plain("@url:Guide:https://x.y/z#a@, @section:SourceCounters:Source Counters@") == "Guide, Source Counters"


def test_an_agent_reads_the_digest_and_where_the_best_has_no_profile(tmp_path: Path) -> None:
    rung = RungResult(name="profile", ok=True, metrics=profiled(tmp_path))
    text = profile_text(rung, ("v002", None))
    assert "findings (Nsight Compute's rules" in text and "est. 45% global" in text
    assert "against v002 (the best): not profiled; profile it to see what changed" in text
    assert "against" in profile_text(rung, ("v002", rung))


def record_profile(store: Store, row: dict[str, Any], metrics: dict[str, Any]) -> None:
    evaluation = store.start_evaluation(row["version_id"], "vadd", row["name"], row["file_hash"], {"kind": "profile"})
    ev = Evaluation(problem="vadd", version=row["name"], path=str(row["path"]), hash=row["file_hash"])
    ev.rungs.append(RungResult(name="profile", ok=True, metrics=metrics))
    ev.finish()
    store.finish_evaluation(evaluation, ev)


async def test_the_profile_pane_shows_the_digest_against_the_bests_profile(tmp_path: Path) -> None:
    from tests.test_dashboard import table, wait_for

    workspace = dashboard_fixtures.build(tmp_path / "ws")  # v002 is the best
    store = Store(workspace.db_path, create=False)
    rows = {r["name"]: r for r in store.version_rows("vadd")}
    mine = profiled(tmp_path)
    best = json.loads(json.dumps(mine))
    best["whole"]["time_us"] = 52.0
    record_profile(store, rows["v002"], best)
    record_profile(store, rows["v001"], mine)
    store.close()
    app = KernelTUI(workspace, run_scheduler=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(lambda: len(table(app).order) == 4, pilot)
        table(app).move_cursor(row=table(app).order.index("v001"))
        await wait_for(lambda: app.detail is not None and app.detail.version["name"] == "v001", pilot)
        await pilot.press("6")
        await wait_for(lambda: app.query_one("#detail", TabbedContent).active == "profile", pilot)
        pane = app.query_one("#profile-view", ProfilePane)
        await wait_for(lambda: "against v002" in pane.plain, pilot)  # type: ignore[attr-defined]
        text = pane.plain  # type: ignore[attr-defined]
        assert "→ memory-bound" in text and "limited by registers" in text, text
        assert "est. 45% global" in text and "time 52 µs → 81.2 µs (+56%)" in text, text
