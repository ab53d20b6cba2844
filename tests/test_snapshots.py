"""SVG snapshots of the main screens over a fixed history (update with --snapshot-update)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Input

from kerneltui.history import agents, evaluations, writes
from kerneltui.ui.app import KernelTUI
from kerneltui.ui.widgets.versions import VersionTable
from tests import dashboard_fixtures

ROOT = Path("/tmp/kerneltui-snapshots/ws")  # a fixed path: it shows on screen
SIZE = (160, 48)


@pytest.fixture
def app(monkeypatch: pytest.MonkeyPatch) -> KernelTUI:
    for module in (agents, evaluations, writes):  # every part of the history that stamps what it writes
        monkeypatch.setattr(module, "now", lambda: "2026-12-02T11:42:07.000+00:00")
    workspace = dashboard_fixtures.build(ROOT)
    return KernelTUI(workspace, run_scheduler=False)


def settle(*keys: str, row: str = "v002") -> Callable[[Pilot[None]], Awaitable[None]]:
    async def run_before(pilot: Pilot[None]) -> None:
        app = pilot.app
        for box in app.query(Input):
            box.cursor_blink = False
        table = app.query_one("#versions", VersionTable)
        while len(table.order) < 4:
            await pilot.pause(0.05)
        table.move_cursor(row=table.order.index(row))
        await pilot.pause(0.3)
        for key in keys:
            await pilot.press(key)
            await pilot.pause(0.2)
        for box in app.screen.query(Input):  # a dialog's box: it did not exist before the keys
            box.cursor_blink = False
        await pilot.pause(0.3)

    return run_before


def test_main_screen(snap_compare, app: KernelTUI) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app, terminal_size=SIZE, run_before=settle())


@pytest.mark.parametrize("size", [(80, 24), (120, 36), (200, 50)])
def test_main_screen_at_every_size(snap_compare, app: KernelTUI, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    """Columns give way by priority (status, failed at, median, vs ref, roofline, verdict before the rest)."""
    assert snap_compare(app, terminal_size=size, run_before=settle())


def test_failed_version(snap_compare, app: KernelTUI) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app, terminal_size=SIZE, run_before=settle(row="v003"))


def test_diff_pane(snap_compare, app: KernelTUI) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app, terminal_size=SIZE, run_before=settle("d"))


def test_asm_pane(snap_compare, app: KernelTUI) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app, terminal_size=SIZE, run_before=settle("4"))


def test_help_screen(snap_compare, app: KernelTUI) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app, terminal_size=SIZE, run_before=settle("question_mark"))


def test_reject_dialog(snap_compare, app: KernelTUI) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app, terminal_size=SIZE, run_before=settle("r", row="v003"))


def test_trends_pane(snap_compare, app: KernelTUI) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app, terminal_size=SIZE, run_before=settle("3"))


def test_agent_pane(snap_compare, app: KernelTUI) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(app, terminal_size=SIZE, run_before=settle("5"))
