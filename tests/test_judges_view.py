"""Each judge's load: in the top line with more than one judge, and in the judges view (w)."""

from __future__ import annotations

import html
import os
import re
from pathlib import Path

import pytest

from kerneltui.core.config import Config, LadderConfig
from kerneltui.core.judging.scheduler import JudgeLock
from kerneltui.core.workspace import Workspace
from kerneltui.ui.app import KernelTUI
from kerneltui.ui.screens.gpus import JudgesScreen
from kerneltui.ui.widgets.status import judge_label, status_text
from tests.conftest import add_version, make_workspace
from tests.test_dashboard import SIZE, wait_for

LINE = re.compile(r'<text [^>]*clip-path="url\(#[\w-]+-line-(\d+)\)">([^<]*)</text>')


def screen_lines(app: KernelTUI) -> list[str]:
    """The screen as drawn (Textual's SVG screenshot), one string a terminal row."""
    rows: dict[int, str] = {}
    for row, text in LINE.findall(app.export_screenshot()):
        rows[int(row)] = rows.get(int(row), "") + html.unescape(text).replace("\xa0", " ")
    return [rows[r] for r in sorted(rows)]


def judge_rows(app: KernelTUI) -> list[list[str]]:
    """The judges view's table rows: [judge, where, device, state, judged]."""
    found = []
    for line in screen_lines(app):
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if len(cells) == 5 and cells[0].isdigit():
            found.append(cells)
    return found


def state(judge: int, busy: str | None = None, ready: bool = True) -> dict[str, object]:
    return {"judge": judge, "where": f"GPU {judge}", "device": "NVIDIA H200", "ready": ready, "busy": busy, "judged": 0}


def test_the_top_line_shows_each_judges_load_and_compacts_when_narrow() -> None:
    device = {"name": "NVIDIA H200", "arch": "sm_90"}
    two = [state(0, busy="vadd/v002"), state(1)]
    wide = status_text("/ws", device, 1, 0, "", None, two, width=160).plain
    assert "GPU0 ● GPU1 ○" in wide and "queue 1 running" in wide
    narrow = status_text("/ws", device, 1, 0, "", None, two, width=len(wide) - 1).plain
    assert "judges 1/2 busy" in narrow and "GPU0" not in narrow
    long_root = status_text("/a/long/path/to/ws", device, 1, 0, "", None, two, width=60).plain
    assert long_root.startswith(" kerneltui   …") and "judges 1/2 busy" in long_root[:60], long_root
    one = status_text("/ws", device, 1, 0, "", None, two[:1], width=160).plain
    assert one == status_text("/ws", device, 1, 0, "").plain  # one judge: the line as it always was
    starting = status_text("/ws", None, 0, 0, "judge starting…", None, [state(0, ready=False), state(1)], 160)
    assert "GPU0 ◌ GPU1 ○" in starting.plain
    far = [
        {**state(0), "where": "ssh box GPU 1"},
        {**state(1), "where": "ssh box"},
        {**state(2), "where": "ray actor 2"},
    ]
    assert [judge_label(s) for s in far] == ["box:GPU1", "box", "J2"]


@pytest.mark.slow
async def test_the_judges_view_lists_two_judges_and_counts_what_each_judged(tmp_path: Path) -> None:
    folder = make_workspace(tmp_path / "ws")
    config = Config(ladder=LadderConfig(judges=2, debounce=0.2))
    app = KernelTUI(Workspace(folder.parent), config)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("w")
        assert isinstance(app.screen, JudgesScreen)
        await wait_for(lambda: [r[1] for r in judge_rows(app)] == ["this machine"] * 2, pilot, timeout=30)
        await wait_for(lambda: all(r[3] == "○ idle" for r in judge_rows(app)), pilot, timeout=30)
        add_version(folder, "good", "v001.py")
        # refreshed each second while open: the count comes without a key pressed
        await wait_for(lambda: sorted(r[4] for r in judge_rows(app)) == ["0", "1"], pilot, timeout=60)
        await pilot.press("w")
        assert not isinstance(app.screen, JudgesScreen)
        await wait_for(lambda: "J0 ○ J1 ○" in screen_lines(app)[0], pilot, timeout=10)
        await pilot.resize_terminal(80, 24)
        await wait_for(lambda: "judges 0/2 busy" in screen_lines(app)[0], pilot, timeout=10)


@pytest.mark.slow
async def test_the_judges_view_says_when_judging_is_off_or_done_by_another_kerneltui(tmp_path: Path) -> None:
    folder = make_workspace(tmp_path / "ws")
    async with KernelTUI(Workspace(folder.parent), run_scheduler=False).run_test(size=SIZE) as pilot:
        await pilot.press("w")
        await wait_for(lambda: "judging is off" in "\n".join(screen_lines(pilot.app)), pilot, timeout=10)
    lock = JudgeLock(Workspace(folder.parent).state / "judge.lock")  # another kerneltui judges it (this process)
    assert lock.acquire()
    try:
        app = KernelTUI(Workspace(folder.parent), Config(ladder=LadderConfig(judges=2)))
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("w")
            said = f"kerneltui pid {os.getpid()} judges this workspace"
            await wait_for(lambda: said in "\n".join(screen_lines(app)), pilot, timeout=20)
            await pilot.press("escape")
            assert not isinstance(app.screen, JudgesScreen)
            assert "J0" not in screen_lines(app)[0]  # none of this dashboard's own
    finally:
        lock.release()
